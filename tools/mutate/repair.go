package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
)

// unusedError is a compiler error that only says a variable or an import
// is no longer used, e.g. after a mutant removed the element of a batch
// that was a loop variable's one use.
var unusedError = regexp.MustCompile(`(?m)^(?:\./)?(\S+?\.go):(\d+):(\d+): (?:declared and not used: (\w+)|"([^"]+)" imported and not used)$`)

// compileError is any compiler error line.
var compileError = regexp.MustCompile(`(?m)^(?:\./)?\S+?\.go:\d+:\d+: `)

// edit replaces the bytes [start, end) with text.
type edit struct {
	start, end int
	text       string
}

// repair makes a mutated file that fails to compile only because the
// mutant left variables or imports unused compile again, without changing
// what it does: it adds `_ = v` after v's declaration and imports an unused
// package as _. It reports false when output holds any other error, or an
// unused name it cannot place.
func repair(file string, src []byte, output string) ([]byte, bool) {
	matches := unusedError.FindAllStringSubmatch(output, -1)
	if len(matches) == 0 || len(matches) != len(compileError.FindAllString(output, -1)) {
		return nil, false
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, false
	}
	tf := fset.File(f.Pos())
	var edits []edit
	for _, m := range matches {
		if filepath.Base(m[1]) != filepath.Base(file) {
			return nil, false
		}
		line, _ := strconv.Atoi(m[2])
		col, _ := strconv.Atoi(m[3])
		if line < 1 || line > tf.LineCount() {
			return nil, false
		}
		off := tf.Offset(tf.LineStart(line)) + col - 1
		var e edit
		var ok bool
		if m[4] != "" {
			e, ok = useVariable(f, fset, off, m[4])
		} else {
			e, ok = blankImport(f, fset, m[5])
		}
		if !ok {
			return nil, false
		}
		edits = append(edits, e)
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].start > edits[j].start })
	out := append([]byte(nil), src...)
	for _, e := range edits {
		out = append(out[:e.start], append([]byte(e.text), out[e.end:]...)...)
	}
	return out, true
}

// useVariable adds `_ = name` where the variable declared at offset off is
// in scope: after its declaring statement, or at the start of the body of
// the range, for, if or switch that declares it.
func useVariable(f *ast.File, fset *token.FileSet, off int, name string) (edit, bool) {
	var stack, found []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return false
		}
		stack = append(stack, n)
		if id, ok := n.(*ast.Ident); ok && id.Name == name && fset.Position(id.Pos()).Offset == off {
			found = append([]ast.Node(nil), stack...)
		}
		return true
	})
	at := func(pos token.Pos, text string) (edit, bool) {
		o := fset.Position(pos).Offset
		return edit{o, o, text}, true
	}
	for i := len(found) - 2; i >= 0; i-- {
		switch s := found[i].(type) {
		case *ast.RangeStmt:
			return at(s.Body.Lbrace+1, " _ = "+name+";")
		case *ast.AssignStmt, *ast.DeclStmt:
			if i > 0 {
				switch p := found[i-1].(type) {
				case *ast.IfStmt:
					return at(p.Body.Lbrace+1, " _ = "+name+";")
				case *ast.ForStmt:
					return at(p.Body.Lbrace+1, " _ = "+name+";")
				case *ast.SwitchStmt:
					return edit{}, false // no single body to put it in
				case *ast.TypeSwitchStmt:
					return edit{}, false
				}
			}
			return at(s.End(), "; _ = "+name)
		case ast.Stmt:
			return edit{}, false
		}
	}
	return edit{}, false
}

// blankImport imports the package at path as _.
func blankImport(f *ast.File, fset *token.FileSet, path string) (edit, bool) {
	for _, imp := range f.Imports {
		if imp.Path.Value != strconv.Quote(path) {
			continue
		}
		if imp.Name != nil {
			s, e := fset.Position(imp.Name.Pos()).Offset, fset.Position(imp.Name.End()).Offset
			return edit{s, e, "_"}, true
		}
		o := fset.Position(imp.Path.Pos()).Offset
		return edit{o, o, "_ "}, true
	}
	return edit{}, false
}
