package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Parse reads a definition from YAML and validates it. Unknown fields,
// repeated keys and values of the wrong type are problems too. Every problem
// is reported at once, ordered by path, with the line and column of the value
// it concerns; problems that merely follow from one already reported (a kind
// written as a list is not also "missing") are left out.
//
// The Definition returned is what could be read (best effort); it is only
// meaningful when there are no problems. A list of more than MaxStages
// stages (or MaxSkills skills, MaxKnowledge knowledge entries) is reported and
// not read. At most
// MaxProblems problems are returned, then one saying how many more there
// are. Parse takes time linear in the size of data. Anchors, aliases and merge keys
// (<<) are resolved; comments are not kept. An empty document is an empty
// pipeline.
func Parse(data []byte) (Definition, []Problem) {
	root, syntax := parseYAML(data)
	if syntax != nil {
		return Definition{}, []Problem{*syntax}
	}
	return newReader(false, len(data)).decode(root)
}

// DecodeJSON reads a definition from JSON — the REST API's "definition",
// with the keys of the YAML (max_iterations, stages, id, …) — and validates
// it, exactly like Parse: unknown fields, repeated keys and wrong types are
// problems, every problem is reported at once (up to MaxProblems), and it
// takes time linear in the size of data.
func DecodeJSON(data []byte) (Definition, []Problem) {
	root, syntax := parseJSON(data)
	if syntax != nil {
		return Definition{}, []Problem{*syntax}
	}
	return newReader(true, len(data)).decode(root)
}

// tooMuchAliasing stops a walk that visits far more values than the input
// holds: anchors referenced over and over (a "billion laughs").
type tooMuchAliasing struct{}

// newReader returns a reader of input of size bytes.
func newReader(isJSON bool, size int) *reader {
	// Without aliases every value visited is at least one byte of input.
	return &reader{json: isJSON, pos: map[string]*yaml.Node{}, unread: map[string]bool{}, budget: 2*size + 10000}
}

// decode reads the definition under root and validates it.
func (r *reader) decode(root *yaml.Node) (d Definition, ps []Problem) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(tooMuchAliasing); !ok {
				panic(v)
			}
			d, ps = Definition{}, []Problem{{Code: CodeExcessiveAliasing, Message: "the YAML repeats its anchors so often (through aliases and merge keys) that it expands to far more values than it holds; write the values out"}}
		}
	}()
	d = r.definition(root)
	ps = r.problems
	for _, v := range validate(d) {
		if !r.follows(v.Path) {
			ps = append(ps, r.locate(v))
		}
	}
	return d, limitProblems(ps)
}

var yamlErrRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// parseYAML parses one YAML document into its root node; nil for an empty
// document.
func parseYAML(data []byte) (root *yaml.Node, problem *Problem) {
	defer func() {
		// The YAML library panics on a few malformed inputs; such input is
		// a syntax problem, not a crash.
		if v := recover(); v != nil {
			root, problem = nil, &Problem{Code: CodeYAMLSyntax, Message: fmt.Sprintf("the YAML could not be parsed (%v)", v)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, yamlSyntax(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, yamlSyntax(err)
	default:
		return nil, &Problem{Code: CodeYAMLSyntax, Message: "the YAML holds more than one document; a pipeline is a single document", Line: extra.Line, Column: extra.Column}
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, nil
		}
		return doc.Content[0], nil
	}
	return &doc, nil
}

func yamlSyntax(err error) *Problem {
	p := &Problem{Code: CodeYAMLSyntax, Message: "the YAML does not parse: " + err.Error()}
	if m := yamlErrRE.FindStringSubmatch(err.Error()); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		p.Message = "the YAML does not parse: " + m[2]
	}
	return p
}

// maxJSONDepth bounds the nesting of JSON input; a definition needs 4.
const maxJSONDepth = 64

// parseJSON reads JSON into the node tree the YAML reader walks, keeping the
// order of keys, repeated keys and positions.
func parseJSON(data []byte) (root *yaml.Node, problem *Problem) {
	j := newJSONReader(data)
	root, err := j.value(0)
	if err == nil {
		if _, err2 := j.dec.Token(); !errors.Is(err2, io.EOF) {
			line, col := lineCol(data, j.start())
			return nil, &Problem{Code: CodeJSONSyntax, Message: "the JSON holds more than one value; a definition is a single object", Line: line, Column: col}
		}
		return root, nil
	}
	p := &Problem{Code: CodeJSONSyntax, Message: "the JSON does not parse: " + strings.TrimPrefix(err.Error(), "json: ")}
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		p.Line, p.Column = lineCol(data, int(se.Offset))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		if len(bytes.TrimSpace(data)) == 0 {
			p.Message = "the JSON is empty; a definition is an object with stages"
		} else {
			p.Message = "the JSON ends unexpectedly"
		}
	}
	return nil, p
}

type jsonReader struct {
	data []byte
	dec  *json.Decoder
	pos  cursor // the position of each value, from its offset
}

func newJSONReader(data []byte) *jsonReader {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return &jsonReader{data: data, dec: dec, pos: cursor{data: data, line: 1}}
}

// start returns the offset where the next token starts.
func (j *jsonReader) start() int {
	off := int(j.dec.InputOffset())
	for off < len(j.data) && strings.IndexByte(" \t\r\n,:", j.data[off]) >= 0 {
		off++
	}
	return off
}

var (
	jsonIntRE = regexp.MustCompile(`^-?[0-9]+$`)
	yamlIntRE = regexp.MustCompile(`^[-+]?[0-9][0-9_]*$`)
)

func (j *jsonReader) value(depth int) (*yaml.Node, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("the JSON is nested more than %d levels deep", maxJSONDepth)
	}
	line, col := j.pos.at(j.start())
	tok, err := j.dec.Token()
	if err != nil {
		return nil, err
	}
	n := &yaml.Node{Kind: yaml.ScalarNode, Line: line, Column: col}
	switch t := tok.(type) {
	case json.Delim:
		end := json.Delim('}')
		n.Kind, n.Tag = yaml.MappingNode, "!!map"
		if t == '[' {
			end = ']'
			n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
		}
		for j.dec.More() {
			if n.Kind == yaml.MappingNode {
				k, err := j.value(depth + 1) // a key: always a string token
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, k)
			}
			v, err := j.value(depth + 1)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		if tok, err := j.dec.Token(); err != nil {
			return nil, err
		} else if tok != end {
			return nil, fmt.Errorf("unexpected %v", tok)
		}
	case string:
		n.Tag, n.Value = "!!str", t
	case json.Number:
		n.Tag, n.Value = "!!float", t.String()
		if jsonIntRE.MatchString(n.Value) {
			n.Tag = "!!int"
		}
	case bool:
		n.Tag, n.Value = "!!bool", strconv.FormatBool(t)
	case nil:
		n.Tag, n.Value = "!!null", "null"
	}
	return n, nil
}

// cursor turns growing byte offsets into lines and columns, looking at each
// byte of the input once (lineCol for every value would look at the input
// before it again and again: time quadratic in its size).
type cursor struct {
	data      []byte
	off       int // the offset reached
	line      int // its line, 1-based
	lineStart int // the offset where that line starts
	scanned   int // bytes looked at, for tests
}

// at returns the 1-based line and column (in bytes) of offset off.
func (c *cursor) at(off int) (int, int) {
	off = min(max(off, 0), len(c.data))
	if off < c.off { // never done by the reader; correct all the same
		c.off, c.line, c.lineStart = 0, 1, 0
	}
	seg := c.data[c.off:off]
	if n := bytes.Count(seg, []byte("\n")); n > 0 {
		c.line += n
		c.lineStart = c.off + bytes.LastIndexByte(seg, '\n') + 1
	}
	c.scanned += off - c.off
	c.off = off
	return c.line, off - c.lineStart + 1
}

// lineCol turns a byte offset into a 1-based line and column (in bytes).
func lineCol(data []byte, off int) (int, int) {
	if off > len(data) {
		off = len(data)
	}
	if off < 0 {
		off = 0
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return line, col
}

// reader walks the node tree into a Definition, collecting problems and the
// node of every path it visits (to locate Validate's problems).
type reader struct {
	json     bool
	problems []Problem
	pos      map[string]*yaml.Node
	// unread holds the paths of values that could not be read; what
	// Validate says about them (a kind written as a list is "missing")
	// follows from the problem already reported.
	unread  map[string]bool
	lookups int // of unread paths, for tests
	budget  int // values that may still be visited
}

// step counts a value visited.
func (r *reader) step() {
	r.budget--
	if r.budget < 0 {
		panic(tooMuchAliasing{})
	}
}

func (r *reader) fail(code, path string, n *yaml.Node, format string, args ...any) {
	p := problemf(code, path, format, args...)
	if n != nil {
		p.Line, p.Column = n.Line, n.Column
	}
	r.problems = append(r.problems, p)
}

// drop reports a value that could not be read.
func (r *reader) drop(code, path string, n *yaml.Node, format string, args ...any) {
	r.fail(code, path, n, format, args...)
	r.unread[path] = true
}

// follows reports whether path is, or lies inside, a value that could not
// be read: it looks up path and its parents, not every unread path.
func (r *reader) follows(path string) bool {
	for ; ; path = parent(path) {
		r.lookups++
		if r.unread[path] {
			return true
		}
		if path == "" {
			return false
		}
	}
}

// locate sets the position of a problem found by Validate: that of its
// path, else of the closest enclosing path that was read.
func (r *reader) locate(p Problem) Problem {
	for path := p.Path; ; path = parent(path) {
		if n := r.pos[path]; n != nil {
			p.Line, p.Column = n.Line, n.Column
			return p
		}
		if path == "" {
			return p
		}
	}
}

func parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

func (r *reader) visit(path string, n *yaml.Node) {
	if n != nil && n.Line > 0 {
		r.pos[path] = n
	}
}

// deref follows aliases to the node they stand for.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names a value's type in messages: "a list", "the integer 5".
func (r *reader) describe(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		if r.json {
			return "an object"
		}
		return "a mapping"
	case yaml.SequenceNode:
		if r.json {
			return "an array"
		}
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	v := cut(n.Value)
	switch n.ShortTag() {
	case "!!int":
		return "the integer " + v
	case "!!float":
		return "the number " + v
	case "!!bool":
		return "the boolean " + v
	case "!!null":
		return "null"
	case "!!str":
		return "the string " + strconv.Quote(v)
	case "!!timestamp":
		return "the timestamp " + v
	case "!!binary":
		return "binary data"
	}
	return fmt.Sprintf("a value tagged %s", n.ShortTag())
}

type field struct {
	key  string
	k, v *yaml.Node
}

// fields returns the entries of a mapping with their values dereferenced,
// merging "<<" keys (explicit keys win) and reporting repeated and
// non-string keys.
func (r *reader) fields(n *yaml.Node, path string, depth int) []field {
	if depth > 10 {
		r.fail(CodeInvalidType, path, n, "%s merges mappings nested too deeply", describePath(path))
		return nil
	}
	var out, merged []field
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		r.step()
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k == nil || k.Kind != yaml.ScalarNode {
			r.fail(CodeInvalidType, path, n.Content[i], "%s has a key that is %s; keys must be strings", describePath(path), r.describe(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			for _, m := range r.mergeSources(v, path) {
				merged = append(merged, r.fields(m, path, depth+1)...)
			}
			continue
		}
		if seen[k.Value] {
			r.fail(CodeDuplicateField, joinPath(path, k.Value), k, "%s is written twice%s; remove one", short(k.Value), in(path))
			continue
		}
		seen[k.Value] = true
		out = append(out, field{key: k.Value, k: k, v: v})
	}
	for _, f := range merged {
		r.step()
		if !seen[f.key] {
			seen[f.key] = true
			out = append(out, f)
		}
	}
	return out
}

func (r *reader) mergeSources(v *yaml.Node, path string) []*yaml.Node {
	switch {
	case v != nil && v.Kind == yaml.MappingNode:
		return []*yaml.Node{v}
	case v != nil && v.Kind == yaml.SequenceNode:
		var out []*yaml.Node
		for _, item := range v.Content {
			r.step()
			if m := deref(item); m != nil && m.Kind == yaml.MappingNode {
				out = append(out, m)
			} else {
				r.fail(CodeInvalidType, path, item, "a merge key (<<)%s lists %s; it can only merge mappings", in(path), r.describe(m))
			}
		}
		return out
	}
	r.fail(CodeInvalidType, path, v, "a merge key (<<)%s holds %s; it can only merge a mapping or a list of mappings", in(path), r.describe(v))
	return nil
}

var plainKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func joinPath(path, key string) string {
	if !plainKeyRE.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// in says where a key is, for messages: " in stages[0].next".
func in(path string) string {
	if path == "" {
		return " at the top level"
	}
	return " in " + path
}

func describePath(path string) string {
	if path == "" {
		return "the pipeline"
	}
	return path
}

// unknown reports an unknown key, suggesting a close known one.
func (r *reader) unknown(f field, path string, known []string) {
	msg := fmt.Sprintf("unknown field %s%s; the fields are %s", short(f.key), in(path), strings.Join(known, ", "))
	if s := closest(f.key, known); s != "" {
		msg = fmt.Sprintf("unknown field %s%s; did you mean %s?", short(f.key), in(path), s)
	}
	r.fail(CodeUnknownField, joinPath(path, f.key), f.k, "%s", msg)
}

// closest returns the known name within edit distance 2 of s (1 for
// very short names), if any.
func closest(s string, known []string) string {
	if len(s) > 64 {
		return ""
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(s), k); d < bestD && 2*d <= len(s) {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// str reads a string; null reads as "" (not written).
func (r *reader) str(n *yaml.Node, path string) string {
	r.visit(path, n)
	if isNull(n) {
		return ""
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		return n.Value
	}
	hint := ""
	if n.Kind == yaml.ScalarNode && !r.json {
		hint = fmt.Sprintf(" (quote it: %s)", short(n.Value))
	}
	r.drop(CodeInvalidType, path, n, "%s must be a string, not %s%s", path, r.describe(n), hint)
	return ""
}

// integer reads a whole number; null reads as 0 (not written). A number
// too large for the field is reported with rangeCode.
func (r *reader) integer(n *yaml.Node, path, rangeCode, rangeMsg string) int {
	r.visit(path, n)
	if isNull(n) {
		return 0
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" && yamlIntRE.MatchString(n.Value) {
		// An integer too large for int64 resolves as a float.
		r.drop(rangeCode, path, n, "%s is %s; %s", path, cut(n.Value), rangeMsg)
		return 0
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		var v int64
		if err := n.Decode(&v); err == nil && v >= math.MinInt && v <= math.MaxInt {
			return int(v)
		}
		r.drop(rangeCode, path, n, "%s is %s; %s", path, cut(n.Value), rangeMsg)
		return 0
	}
	r.drop(CodeInvalidType, path, n, "%s must be a whole number, not %s", path, r.describe(n))
	return 0
}

var (
	rootFields  = []string{"max_iterations", "stages"}
	stageFields = []string{"id", "kind", "name", "adapter", "model", "skills", "knowledge", "instructions", "action", "timeout_minutes", "next"}
)

func (r *reader) definition(root *yaml.Node) Definition {
	var d Definition
	root = deref(root)
	r.visit("", root)
	if isNull(root) {
		return d
	}
	if root.Kind != yaml.MappingNode {
		r.drop(CodeInvalidType, "", root, "a pipeline must be %s with max_iterations and stages, not %s", r.describe(&yaml.Node{Kind: yaml.MappingNode}), r.describe(root))
		return d
	}
	for _, f := range r.fields(root, "", 0) {
		switch f.key {
		case "max_iterations":
			d.MaxIterations = r.integer(f.v, "max_iterations", CodeMaxIterationsRange, fmt.Sprintf("it must be between %d and %d", MinMaxIterations, MaxMaxIterations))
			if d.MaxIterations == 0 && !isNull(f.v) && f.v.ShortTag() == "!!int" && !r.reported("max_iterations") {
				// 0 in the struct means "not written"; written, it is out of range.
				r.fail(CodeMaxIterationsRange, "max_iterations", f.v, "max_iterations is 0; it must be between %d and %d (leave it out for the default, %d)", MinMaxIterations, MaxMaxIterations, DefaultMaxIterations)
			}
		case "stages":
			r.visit("stages", f.v)
			switch {
			case isNull(f.v):
			case f.v.Kind != yaml.SequenceNode:
				r.drop(CodeInvalidType, "stages", f.v, "stages must be %s of stages, not %s", r.describe(&yaml.Node{Kind: yaml.SequenceNode}), r.describe(f.v))
			case len(f.v.Content) > MaxStages:
				p := tooManyStages(len(f.v.Content))
				r.drop(p.Code, p.Path, f.v, "%s", p.Message)
			default:
				for i, item := range f.v.Content {
					r.step()
					d.Stages = append(d.Stages, r.stage(deref(item), stagePath(i)))
				}
			}
		default:
			r.unknown(f, "", rootFields)
		}
	}
	return d
}

func (r *reader) reported(path string) bool {
	for _, p := range r.problems {
		if p.Path == path {
			return true
		}
	}
	return false
}

func (r *reader) stage(n *yaml.Node, path string) Stage {
	var s Stage
	r.visit(path, n)
	if n == nil || n.Kind != yaml.MappingNode {
		r.drop(CodeInvalidType, path, n, "%s must be %s with id, kind, …, not %s", path, r.describe(&yaml.Node{Kind: yaml.MappingNode}), r.describe(n))
		return s
	}
	for _, f := range r.fields(n, path, 0) {
		fp := path + "." + f.key
		switch f.key {
		case "id":
			s.ID = r.str(f.v, fp)
		case "kind":
			s.Kind = r.str(f.v, fp)
		case "name":
			s.Name = r.str(f.v, fp)
		case "adapter":
			s.Adapter = r.str(f.v, fp)
		case "model":
			s.Model = r.str(f.v, fp)
		case "instructions":
			s.Instructions = r.str(f.v, fp)
		case "action":
			s.Action = r.str(f.v, fp)
		case "timeout_minutes":
			s.TimeoutMinutes = r.integer(f.v, fp, CodeInvalidTimeout, fmt.Sprintf("it must be between 1 and %d, or 0 for the default", MaxTimeoutMinutes))
		case "skills":
			s.Skills = r.list(f.v, fp, "skill names", MaxSkills, tooManySkills)
		case "knowledge":
			s.Knowledge = r.list(f.v, fp, "knowledge entry slugs", MaxKnowledge, tooManyKnowledge)
		case "next":
			s.Next = r.next(f.v, fp)
		default:
			r.unknown(f, path, stageFields)
		}
	}
	return s
}

// list reads a list of strings (what names them in a message), of at
// most max items (tooMany is the problem beyond).
func (r *reader) list(n *yaml.Node, path, what string, max int, tooMany func(string, int) Problem) []string {
	r.visit(path, n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		r.drop(CodeInvalidType, path, n, "%s must be %s of %s, not %s", path, r.describe(&yaml.Node{Kind: yaml.SequenceNode}), what, r.describe(n))
		return nil
	}
	if len(n.Content) > max {
		p := tooMany(path, len(n.Content))
		r.drop(p.Code, p.Path, n, "%s", p.Message)
		return nil
	}
	var out []string
	for i, item := range n.Content {
		r.step()
		out = append(out, r.str(deref(item), path+"["+itoa(i)+"]"))
	}
	return out
}

func (r *reader) next(n *yaml.Node, path string) Next {
	var next Next
	r.visit(path, n)
	if isNull(n) {
		return next
	}
	if n.Kind != yaml.MappingNode {
		r.drop(CodeInvalidType, path, n, "%s must be %s of outcomes (done, failed, blocked) to targets, not %s", path, r.describe(&yaml.Node{Kind: yaml.MappingNode}), r.describe(n))
		return next
	}
	for _, f := range r.fields(n, path, 0) {
		fp := path + "." + f.key
		switch f.key {
		case OutcomeDone:
			next.Done = r.str(f.v, fp)
		case OutcomeFailed:
			next.Failed = r.str(f.v, fp)
		case OutcomeBlocked:
			next.Blocked = r.str(f.v, fp)
		default:
			msg := fmt.Sprintf("unknown outcome %s%s; the outcomes are done, failed and blocked", short(f.key), in(path))
			if s := closest(f.key, Outcomes()); s != "" {
				msg += "; did you mean " + s + "?"
			}
			r.fail(CodeUnknownField, joinPath(path, f.key), f.k, "%s", msg)
		}
	}
	return next
}
