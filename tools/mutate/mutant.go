package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"sort"
	"strings"
)

// Mutant is one planted change: the bytes [start, end) of File replaced by
// To.
type Mutant struct {
	File      string // absolute path of the mutated file
	Line, Col int    // where the change starts
	Class     string // the mutator, e.g. "cond-negate"
	From, To  string // the original text and its replacement
	start     int    // byte offsets in the file
	end       int

	Status Status
}

// Apply returns src with the mutation applied.
func (m *Mutant) Apply(src []byte) []byte {
	out := make([]byte, 0, len(src)+len(m.To))
	out = append(out, src[:m.start]...)
	out = append(out, m.To...)
	return append(out, src[m.end:]...)
}

// Mutators, with what each plants:
//
//	cond-negate    == ↔ !=, < ↔ >=, > ↔ <=
//	cond-boundary  < → <=, <= → <, > → >=, >= → >
//	logical        && ↔ ||
//	not            !x → x
//	if-negate      if c → if !(c), for a condition without an operator above
//	arith          + ↔ -, * ↔ /, % → * (not on string concatenation)
//	incdec         x++ ↔ x--, += ↔ -=
//	bool-return    return true ↔ return false
//	elem-drop      one element left out of an append or a slice literal of several
//	call-remove    a call statement deleted (not logging nor locking)
//	assign-remove  an assignment (=) deleted
//	sql-cond       a condition of a WHERE, ON or AND/OR in SQL made true: (c OR 1)
//	sql-boundary   < ↔ <=, > ↔ >= inside SQL conditions
//	sql-incr       SET x = x + 1 → SET x = x
var classes = []string{
	"cond-negate", "cond-boundary", "logical", "not", "if-negate", "arith", "incdec", "bool-return",
	"elem-drop", "call-remove", "assign-remove", "sql-cond", "sql-boundary", "sql-incr",
}

var (
	negate   = map[token.Token]string{token.EQL: "!=", token.NEQ: "==", token.LSS: ">=", token.GEQ: "<", token.GTR: "<=", token.LEQ: ">"}
	boundary = map[token.Token]string{token.LSS: "<=", token.LEQ: "<", token.GTR: ">=", token.GEQ: ">"}
	logical  = map[token.Token]string{token.LAND: "||", token.LOR: "&&"}
	arith    = map[token.Token]string{token.ADD: "-", token.SUB: "+", token.MUL: "/", token.QUO: "*", token.REM: "*"}
	opAssign = map[token.Token]string{token.ADD_ASSIGN: "-=", token.SUB_ASSIGN: "+="}
	// Calls whose removal says nothing about the tests: logging (no test
	// reads it) and locking (the mutant hangs or races, it is not a bug a
	// test of behaviour should be asked to catch).
	ignoredCalls = map[string]bool{
		"Debug": true, "Info": true, "Warn": true, "Error": true, "Log": true, "LogAttrs": true,
		"DebugContext": true, "InfoContext": true, "WarnContext": true, "ErrorContext": true,
		"Lock": true, "Unlock": true, "RLock": true, "RUnlock": true,
	}
)

// Mutants returns every mutant of the Go file at path with source src,
// ordered by position.
func Mutants(path string, src []byte) ([]*Mutant, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []*Mutant
	add := func(class string, start, end token.Pos, to string) {
		s, e := fset.Position(start), fset.Position(end)
		out = append(out, &Mutant{File: path, Line: s.Line, Col: s.Column, Class: class,
			From: string(src[s.Offset:e.Offset]), To: to, start: s.Offset, end: e.Offset})
	}
	op := func(class string, pos token.Pos, tok token.Token, to string) {
		add(class, pos, pos+token.Pos(len(tok.String())), to)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if to, ok := negate[n.Op]; ok {
				op("cond-negate", n.OpPos, n.Op, to)
			}
			if to, ok := boundary[n.Op]; ok {
				op("cond-boundary", n.OpPos, n.Op, to)
			}
			if to, ok := logical[n.Op]; ok {
				op("logical", n.OpPos, n.Op, to)
			}
			if to, ok := arith[n.Op]; ok && !(n.Op == token.ADD && concatenation(n)) {
				op("arith", n.OpPos, n.Op, to)
			}
		case *ast.UnaryExpr:
			if n.Op == token.NOT {
				add("not", n.Pos(), n.End(), text(fset, src, n.X))
			}
		case *ast.IfStmt:
			switch n.Cond.(type) {
			case *ast.CallExpr, *ast.Ident, *ast.SelectorExpr, *ast.IndexExpr:
				add("if-negate", n.Cond.Pos(), n.Cond.End(), "!("+text(fset, src, n.Cond)+")")
			}
		case *ast.IncDecStmt:
			to := "--"
			if n.Tok == token.DEC {
				to = "++"
			}
			op("incdec", n.TokPos, n.Tok, to)
		case *ast.AssignStmt:
			if to, ok := opAssign[n.Tok]; ok {
				op("incdec", n.TokPos, n.Tok, to)
			}
			if n.Tok == token.ASSIGN && !blank(n.Lhs) {
				add("assign-remove", n.Pos(), n.End(), "")
			}
		case *ast.ReturnStmt:
			for _, r := range n.Results {
				if id, ok := r.(*ast.Ident); ok && (id.Name == "true" || id.Name == "false") {
					to := "true"
					if id.Name == "true" {
						to = "false"
					}
					add("bool-return", id.Pos(), id.End(), to)
				}
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "append" && !n.Ellipsis.IsValid() && len(n.Args) >= 3 {
				dropEach(n.Args[1:], add)
			}
		case *ast.CompositeLit:
			if _, ok := n.Type.(*ast.ArrayType); ok && len(n.Elts) >= 2 && !keyed(n.Elts) {
				dropEach(n.Elts, add)
			}
		case *ast.ExprStmt:
			if call, ok := n.X.(*ast.CallExpr); ok && !ignoredCall(call) {
				add("call-remove", n.Pos(), n.End(), "")
			}
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				for _, sm := range sqlMutants(text(fset, src, n)) {
					add(sm.class, n.Pos()+token.Pos(sm.start), n.Pos()+token.Pos(sm.end), sm.to)
				}
			}
		}
		return true
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out, nil
}

func text(fset *token.FileSet, src []byte, n ast.Node) string {
	return string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
}

// concatenation reports whether an addition has a string literal among its
// operands (so it joins strings: subtracting them would not compile).
func concatenation(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Kind == token.STRING
	case *ast.BinaryExpr:
		return e.Op == token.ADD && (concatenation(e.X) || concatenation(e.Y))
	case *ast.ParenExpr:
		return concatenation(e.X)
	}
	return false
}

// dropEach adds a mutant per element of list that leaves it out, with the
// comma that separates it from its neighbour.
func dropEach(list []ast.Expr, add func(class string, start, end token.Pos, to string)) {
	for i, e := range list {
		if i < len(list)-1 {
			add("elem-drop", e.Pos(), list[i+1].Pos(), "")
		} else {
			add("elem-drop", list[i-1].End(), e.End(), "")
		}
	}
}

func keyed(elts []ast.Expr) bool {
	for _, e := range elts {
		if _, ok := e.(*ast.KeyValueExpr); ok {
			return true
		}
	}
	return false
}

func blank(lhs []ast.Expr) bool {
	for _, e := range lhs {
		if id, ok := e.(*ast.Ident); !ok || id.Name != "_" {
			return false
		}
	}
	return true
}

func ignoredCall(c *ast.CallExpr) bool {
	switch fn := c.Fun.(type) {
	case *ast.SelectorExpr:
		return ignoredCalls[fn.Sel.Name]
	case *ast.Ident:
		return fn.Name == "panic"
	}
	return false
}

// sqlMutant is a mutation inside a string literal, at byte offsets of the
// literal's source text (quotes included).
type sqlMutant struct {
	class      string
	start, end int
	to         string
}

var (
	sqlWord = regexp.MustCompile(`\b(SELECT|INSERT|UPDATE|DELETE|WHERE|AND|OR)\b`)
	// A condition: operand, comparison, operand; or IS [NOT] NULL; or
	// [NOT] IN (a list without nested parentheses).
	sqlCond = regexp.MustCompile(`[A-Za-z_][\w.]*(?:\(\))?\s*(?:(<=|>=|<>|!=|==|=|<|>)\s*(?:\?|'[^']*'|-?\d+|[A-Za-z_][\w.]*(?:\(\))?)|\s+IS\s+(?:NOT\s+)?NULL\b|\s+(?:NOT\s+)?IN\s*\([^()]*\))`)
	// What a condition follows: a keyword that starts one, an opening
	// parenthesis, or the start of the literal (a fragment such as
	// "AND x = ?" or a condition constant).
	sqlBefore = regexp.MustCompile(`(?:\b(?:WHERE|AND|OR|ON|NOT)|\()\s*$`)
	sqlIncr   = regexp.MustCompile(`\b([A-Za-z_]\w*)\s*=\s*([A-Za-z_]\w*)\s*\+\s*1\b`)
	flipBound = map[string]string{"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
)

// sqlMutants returns the SQL mutants of a Go string literal's source text;
// none if it does not look like SQL.
func sqlMutants(lit string) []sqlMutant {
	if !sqlWord.MatchString(lit) {
		return nil
	}
	var out []sqlMutant
	for _, m := range sqlCond.FindAllStringSubmatchIndex(lit, -1) {
		before := strings.TrimLeft(lit[:m[0]], "`\" \t\n")
		if before != "" && !sqlBefore.MatchString(lit[:m[0]]) {
			continue // e.g. SET x = ?: an assignment, not a condition
		}
		cond := lit[m[0]:m[1]]
		out = append(out, sqlMutant{"sql-cond", m[0], m[1], "(" + cond + " OR 1)"})
		if m[2] >= 0 {
			if to, ok := flipBound[lit[m[2]:m[3]]]; ok {
				out = append(out, sqlMutant{"sql-boundary", m[2], m[3], to})
			}
		}
	}
	for _, m := range sqlIncr.FindAllStringSubmatchIndex(lit, -1) {
		if lit[m[2]:m[3]] == lit[m[4]:m[5]] {
			out = append(out, sqlMutant{"sql-incr", m[0], m[1], lit[m[2]:m[3]] + " = " + lit[m[4]:m[5]]})
		}
	}
	return out
}
