package pipeline

import (
	"container/heap"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Problem codes: stable, machine-readable; the UI and API clients match on
// them.
const (
	CodeYAMLSyntax         = "yaml_syntax"          // the YAML itself does not parse
	CodeJSONSyntax         = "json_syntax"          // the JSON itself does not parse
	CodeExcessiveAliasing  = "excessive_aliasing"   // YAML aliases expand to far more values than the input holds
	CodeInvalidType        = "invalid_type"         // e.g. a list where a string belongs
	CodeUnknownField       = "unknown_field"        // a key the definition does not have
	CodeDuplicateField     = "duplicate_field"      // a key written twice in one mapping
	CodeMissingField       = "missing_field"        // id, kind, or a platform stage's action
	CodeEmptyPipeline      = "empty_pipeline"       // no stages
	CodeMaxIterationsRange = "max_iterations_range" // max_iterations outside 1–20
	CodeInvalidID          = "invalid_id"           // id not [a-z][a-z0-9_-]{0,31}
	CodeDuplicateID        = "duplicate_id"         // two stages with one id
	CodeUnknownKind        = "unknown_kind"         // kind not agent, human or platform
	CodeUnknownAdapter     = "unknown_adapter"      // adapter not claude-code or opencode
	CodeUnknownAction      = "unknown_action"       // action not merge
	CodeFieldNotAllowed    = "field_not_allowed"    // a field that does not belong to the stage's kind
	CodeInvalidTimeout     = "invalid_timeout"      // timeout_minutes negative or above a week
	CodeInvalidSkill       = "invalid_skill"        // an empty skill name
	CodeDuplicateSkill     = "duplicate_skill"      // a skill listed twice
	CodeInvalidKnowledge   = "invalid_knowledge"    // a knowledge entry that is not [space:]slug
	CodeDuplicateKnowledge = "duplicate_knowledge"  // a knowledge entry listed twice
	CodeTooManyKnowledge   = "too_many_knowledge"   // a stage names more than MaxKnowledge entries
	CodeInvalidText        = "invalid_text"         // a string that is not valid UTF-8 or holds control characters
	CodeUnknownTarget      = "unknown_target"       // next leads to neither a stage nor $done, $failed, $question
	CodeUnreachableStage   = "unreachable_stage"    // no path from the first stage leads here
	CodeNoPathToDone       = "no_path_to_done"      // $done can never be reached (from the first stage, or from this stage)
	CodeTooManyStages      = "too_many_stages"      // more than MaxStages stages
	CodeTooManySkills      = "too_many_skills"      // a stage lists more than MaxSkills skills
	CodeTextTooLong        = "text_too_long"        // a name, model, skill or instructions beyond its limit
	CodeTooManyProblems    = "too_many_problems"    // the last problem: how many more were left out (MaxProblems)
)

// Problem is one thing wrong with a definition.
type Problem struct {
	Code string `json:"code"`
	// Path names the offending value: "max_iterations", "stages[2].next.done";
	// "" is the whole document.
	Path    string `json:"path"`
	Message string `json:"message"`
	// Line and Column locate the value in the parsed YAML or JSON (1-based,
	// in bytes; 0 when unknown, e.g. for a definition built in Go or the
	// last problem of a list cut at MaxProblems).
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

// String formats the problem as "LINE:COL: path: message [code]", leaving
// out the parts that are unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "%d:", p.Line)
		if p.Column > 0 {
			fmt.Fprintf(&b, "%d:", p.Column)
		}
		b.WriteString(" ")
	}
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	fmt.Fprintf(&b, "%s [%s]", p.Message, p.Code)
	return b.String()
}

func problemf(code, path, format string, args ...any) Problem {
	return Problem{Code: code, Path: path, Message: fmt.Sprintf(format, args...)}
}

// Lossy reports whether p means that the Definition read from the input
// lacks something the input holds: a value that could not be read (a wrong
// type, an unknown or repeated field, a syntax error, a list beyond its
// limit), or — for the last problem of a long list — maybe one of the
// problems left out. Rendering such a definition would silently drop what
// was written.
func (p Problem) Lossy() bool {
	switch p.Code {
	case CodeYAMLSyntax, CodeJSONSyntax, CodeExcessiveAliasing, CodeInvalidType, CodeUnknownField, CodeDuplicateField,
		CodeTooManyStages, CodeTooManySkills, CodeTooManyKnowledge, CodeTooManyProblems:
		return true
	}
	return false
}

// short quotes a value written by the user for a message (see cut).
func short(s string) string { return strconv.Quote(cut(s)) }

// cut shortens a value written by the user to about 40 bytes for a
// message: a message names the value, it need not repeat a long one.
func cut(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	n := max - 3
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// fieldRank orders the known keys as the canonical YAML does; unknown keys
// come after them.
var fieldRank = map[string]int{
	"max_iterations": 0, "stages": 1,
	"id": 0, "kind": 1, "name": 2, "adapter": 3, "model": 4, "skills": 5, "knowledge": 6,
	"instructions": 7, "action": 8, "timeout_minutes": 9, "next": 10,
	"done": 0, "failed": 1, "blocked": 2,
}

type segment struct {
	index int // >= 0 for [n]
	rank  int
	name  string
}

func segments(path string) []segment {
	var out []segment
	for path != "" {
		switch {
		case path[0] == '.':
			path = path[1:]
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				out = append(out, segment{index: -1, rank: 1000, name: path})
				return out
			}
			n, err := strconv.Atoi(path[1:end])
			if err != nil {
				out = append(out, segment{index: -1, rank: 1000, name: path[:end+1]})
			} else {
				out = append(out, segment{index: n})
			}
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			name := path[:end]
			rank, ok := fieldRank[name]
			if !ok {
				rank = 100
			}
			out = append(out, segment{index: -1, rank: rank, name: name})
			path = path[end:]
		}
	}
	return out
}

// pathLess orders paths as the values appear in the canonical YAML: the
// document, max_iterations, then stage by stage, each field in key order;
// sa and sb are a and b split by segments.
func pathLess(sa, sb []segment, a, b string) bool {
	for i := 0; i < len(sa) && i < len(sb); i++ {
		x, y := sa[i], sb[i]
		if (x.index >= 0) != (y.index >= 0) {
			return x.index >= 0
		}
		if x.index != y.index {
			return x.index < y.index
		}
		if x.rank != y.rank {
			return x.rank < y.rank
		}
		if x.name != y.name {
			return x.name < y.name
		}
	}
	if len(sa) != len(sb) {
		return len(sa) < len(sb)
	}
	return a < b
}

// sortKey is a problem with its path split once, so that ordering n
// problems splits n paths, not one per comparison.
type sortKey struct {
	p    Problem
	segs []segment
}

func keyOf(p Problem) sortKey { return sortKey{p: p, segs: segments(p.Path)} }

// compareKeys orders problems by path (see pathLess), then position, code
// and message, so that output is deterministic: only identical problems
// compare equal.
func compareKeys(a, b sortKey) int {
	if a.p.Path != b.p.Path {
		if pathLess(a.segs, b.segs, a.p.Path, b.p.Path) {
			return -1
		}
		return 1
	}
	if c := a.p.Line - b.p.Line; c != 0 {
		return c
	}
	if c := a.p.Column - b.p.Column; c != 0 {
		return c
	}
	if c := strings.Compare(a.p.Code, b.p.Code); c != 0 {
		return c
	}
	return strings.Compare(a.p.Message, b.p.Message)
}

// sortProblems orders problems (see compareKeys).
func sortProblems(ps []Problem) {
	keys := make([]sortKey, len(ps))
	for i, p := range ps {
		keys[i] = keyOf(p)
	}
	slices.SortFunc(keys, compareKeys)
	for i, k := range keys {
		ps[i] = k.p
	}
}

// limitProblems orders problems and keeps the first MaxProblems; the rest
// are counted in a last problem (CodeTooManyProblems). Picking the first
// MaxProblems of n takes time linear in n (a heap of MaxProblems), however
// many problems a large input holds.
func limitProblems(ps []Problem) []Problem {
	if len(ps) <= MaxProblems {
		sortProblems(ps)
		return ps
	}
	h := &keyHeap{}
	for _, p := range ps {
		k := keyOf(p)
		if h.Len() < MaxProblems {
			heap.Push(h, k)
		} else if compareKeys(k, (*h)[0]) < 0 {
			(*h)[0] = k
			heap.Fix(h, 0)
		}
	}
	slices.SortFunc(*h, compareKeys)
	out := make([]Problem, 0, MaxProblems+1)
	for _, k := range *h {
		out = append(out, k.p)
	}
	more := len(ps) - MaxProblems
	return append(out, problemf(CodeTooManyProblems, "", "and %d more problem%s: only the first %d are reported; fix these first", more, plural(more), MaxProblems))
}

// keyHeap is a max-heap: its root is the last of the problems kept.
type keyHeap []sortKey

func (h keyHeap) Len() int           { return len(h) }
func (h keyHeap) Less(i, j int) bool { return compareKeys(h[i], h[j]) > 0 }
func (h keyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyHeap) Push(x any)        { *h = append(*h, x.(sortKey)) }
func (h *keyHeap) Pop() any {
	old := *h
	k := old[len(old)-1]
	*h = old[:len(old)-1]
	return k
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func stagePath(i int) string { return "stages[" + strconv.Itoa(i) + "]" }

func itoa(i int) string { return strconv.Itoa(i) }
