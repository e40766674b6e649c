package pipeline

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
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
	CodeInvalidText        = "invalid_text"         // a string that is not valid UTF-8 or holds control characters
	CodeUnknownTarget      = "unknown_target"       // next leads to neither a stage nor $done, $failed, $question
	CodeUnreachableStage   = "unreachable_stage"    // no path from the first stage leads here
	CodeNoPathToDone       = "no_path_to_done"      // $done can never be reached (from the first stage, or from this stage)
)

// Problem is one thing wrong with a definition.
type Problem struct {
	Code string `json:"code"`
	// Path names the offending value: "max_iterations", "stages[2].next.done";
	// "" is the whole document.
	Path    string `json:"path"`
	Message string `json:"message"`
	// Line and Column locate the value in the parsed YAML (1-based; 0 when
	// unknown, e.g. for JSON or a missing field of an unlocated mapping).
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

// fieldRank orders the known keys as the canonical YAML does; unknown keys
// come after them.
var fieldRank = map[string]int{
	"max_iterations": 0, "stages": 1,
	"id": 0, "kind": 1, "name": 2, "adapter": 3, "model": 4, "skills": 5,
	"instructions": 6, "action": 7, "timeout_minutes": 8, "next": 9,
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
// document, max_iterations, then stage by stage, each field in key order.
func pathLess(a, b string) bool {
	sa, sb := segments(a), segments(b)
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

// sortProblems orders problems by path (see pathLess), then position, code
// and message, so that output is deterministic.
func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.Path != b.Path {
			return pathLess(a.Path, b.Path)
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		return a.Message < b.Message
	})
}

// under reports whether path is base or lies inside it.
func under(path, base string) bool {
	if base == "" || path == base {
		return true
	}
	return strings.HasPrefix(path, base) && (path[len(base)] == '.' || path[len(base)] == '[')
}

func stagePath(i int) string { return "stages[" + strconv.Itoa(i) + "]" }

func itoa(i int) string { return strconv.Itoa(i) }

func quote(s string) string { return strconv.Quote(s) }
