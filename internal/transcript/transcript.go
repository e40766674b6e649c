// Package transcript reads an agent session's log — the NDJSON its CLI
// printed, as the runner uploaded it — into a conversation a person can
// read: what the agent said, the tools it called and what they answered,
// the questions it asked, the report it submitted and what it consumed.
// It knows the output of each adapter (claude-code's stream-json,
// opencode's --format json) and nothing else of Ballet: Core parses a
// run's stored log with it (GET /api/v1/runs/{run}/transcript), so that
// no browser has to.
//
// A log is agent output, untrusted: every line may be malformed, huge or
// of a type never seen. Lines that are no JSON object, cut, or of unknown
// types are skipped; every field taken is cut to a limit (Max…), and a
// transcript holds at most MaxEntries entries and MaxBytes bytes of text,
// marked Truncated when the log held more.
package transcript

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/runproto"
)

// Entry kinds.
const (
	KindText       = "text"        // the agent's words (Text); an error the CLI printed (IsError)
	KindToolCall   = "tool_call"   // a tool call: Tool, ID, Input
	KindToolResult = "tool_result" // what a tool call answered: ID, Tool, Text (a summary), IsError
	KindQuestion   = "question"    // an ask_question call: Text, Blocking
	KindReport     = "report"      // a submit_report call: Outcome, Text (the summary)
	KindUsage      = "usage"       // what a step (opencode) or the session (claude-code) consumed: Usage, Model
)

// Limits of a transcript: what a GET answers stays bounded whatever the
// log holds.
const (
	MaxEntries = 2000     // entries of one transcript
	MaxBytes   = 2 << 20  // bytes of text (Text and Input) of one transcript
	MaxText    = 16 << 10 // bytes of one entry's text (the agent's words, a report, a question)
	MaxInput   = 2 << 10  // bytes of a tool call's input (its JSON)
	MaxResult  = 1 << 10  // bytes of a tool result's summary
	MaxName    = 200      // bytes of a tool's or a model's name, of a call id, of an outcome
)

// TranscriptEntry is one step of a session.
type TranscriptEntry struct {
	Kind string `json:"kind"`
	// Time is when the CLI printed it: the line's own time, else the
	// latest time an earlier line told (claude-code's result line tells
	// none); null before any.
	Time *time.Time `json:"time"`
	// Text: the agent's words, a tool result's summary, a question, a
	// report's summary, an error.
	Text string `json:"text,omitempty"`
	// Tool is the tool's name as the CLI calls it (tool_call, tool_result).
	Tool string `json:"tool,omitempty"`
	// ID ties a tool_call to its tool_result (the CLI's call id).
	ID string `json:"id,omitempty"`
	// Input is the tool call's input as JSON text, cut at MaxInput.
	Input string `json:"input,omitempty"`
	// IsError: the tool call failed, or the CLI reported an error.
	IsError bool `json:"is_error,omitempty"`
	// Outcome is a report's outcome (done, failed, blocked).
	Outcome string `json:"outcome,omitempty"`
	// Blocking: the question blocks the stage.
	Blocking bool `json:"blocking,omitempty"`
	// Model is the model that served (usage, when the CLI names it).
	Model string `json:"model,omitempty"`
	// Usage is what was consumed (usage).
	Usage *runproto.Usage `json:"usage,omitempty"`
	// Cut: one of the entry's texts was cut at its limit.
	Cut bool `json:"cut,omitempty"`
}

// Transcript is a session's log read as entries, oldest first.
type Transcript struct {
	Entries []TranscriptEntry `json:"entries"`
	// Truncated: the log held more than MaxEntries entries or MaxBytes
	// bytes of text; what followed is left out.
	Truncated bool `json:"truncated"`
}

// Parser reads one session's log, a line at a time.
type Parser struct {
	adapter string
	t       Transcript
	bytes   int
	tools   map[string]string // tool names by call id (claude-code's results name only the id)
	last    *time.Time        // the latest time a line told (for a line that tells none)
}

// NewParser returns a parser of the log of adapter (runproto.ClaudeCode or
// runproto.OpenCode; any other reads as nothing).
func NewParser(adapter string) *Parser {
	return &Parser{adapter: adapter, t: Transcript{Entries: []TranscriptEntry{}}, tools: map[string]string{}}
}

// Parse reads a whole log.
func Parse(adapter string, log []byte) Transcript {
	p := NewParser(adapter)
	for len(log) > 0 && !p.Full() {
		line, rest, _ := bytes.Cut(log, []byte{'\n'})
		p.Line(line)
		log = rest
	}
	return p.Transcript()
}

// Full reports whether the transcript reached its limits: further lines
// are only counted as left out.
func (p *Parser) Full() bool { return p.t.Truncated }

// Transcript is what was read so far.
func (p *Parser) Transcript() Transcript { return p.t }

// Line reads one line of the log (without its line feed).
func (p *Parser) Line(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' || p.t.Truncated {
		return
	}
	switch p.adapter {
	case runproto.ClaudeCode:
		p.claude(line)
	case runproto.OpenCode:
		p.opencode(line)
	}
}

// add appends e, cutting its texts, unless the transcript is full (then
// it is marked truncated).
func (p *Parser) add(e TranscriptEntry) {
	if p.t.Truncated {
		return
	}
	if e.Time == nil {
		e.Time = p.last
	} else {
		p.last = e.Time
	}
	limit := MaxText
	switch e.Kind {
	case KindToolResult:
		limit = MaxResult
	}
	var c1, c2, c3, c4, c5 bool
	e.Text, c1 = cut(e.Text, limit)
	e.Input, c2 = cut(e.Input, MaxInput)
	e.Tool, c3 = cut(e.Tool, MaxName)
	e.ID, c4 = cut(e.ID, MaxName)
	e.Outcome, c5 = cut(e.Outcome, MaxName)
	e.Model, _ = cut(e.Model, MaxName)
	e.Cut = c1 || c2 || c3 || c4 || c5
	n := len(e.Text) + len(e.Input)
	if len(p.t.Entries) >= MaxEntries || p.bytes+n > MaxBytes {
		p.t.Truncated = true
		return
	}
	p.bytes += n
	p.t.Entries = append(p.t.Entries, e)
}

// cut shortens s to at most n bytes of valid UTF-8, ending in "…" when cut
// (ok reports the cut). Invalid UTF-8 reads as U+FFFD.
func cut(s string, n int) (string, bool) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= n {
		return s, false
	}
	const mark = "…"
	s = s[:n-len(mark)]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + mark, true
}

// compact is raw JSON as compact text ("" for none or null).
func compact(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// The names of Ballet's MCP tools in each CLI.
const (
	claudeReport   = "mcp__ballet__submit_report"
	claudeQuestion = "mcp__ballet__ask_question"
	openReport     = "ballet_submit_report"
	openQuestion   = "ballet_ask_question"
)

// report and question are the inputs of Ballet's submit_report and
// ask_question tools.
type report struct {
	Outcome string `json:"outcome"`
	Summary string `json:"summary"`
}

type question struct {
	Question string `json:"question"`
	Text     string `json:"text"`
	Blocking bool   `json:"blocking"`
}

// call is the entry of a tool call: Ballet's report and question read as
// such, any other tool (or one whose input does not decode) as a tool_call.
func call(at *time.Time, id, tool string, input json.RawMessage, reportTool, questionTool string) TranscriptEntry {
	switch tool {
	case reportTool:
		var r report
		if json.Unmarshal(input, &r) == nil {
			return TranscriptEntry{Kind: KindReport, Time: at, ID: id, Tool: tool, Outcome: r.Outcome, Text: r.Summary}
		}
	case questionTool:
		var q question
		if json.Unmarshal(input, &q) == nil {
			text := q.Question
			if text == "" {
				text = q.Text
			}
			return TranscriptEntry{Kind: KindQuestion, Time: at, ID: id, Tool: tool, Text: text, Blocking: q.Blocking}
		}
	}
	return TranscriptEntry{Kind: KindToolCall, Time: at, ID: id, Tool: tool, Input: compact(input)}
}

// millis is a time in Unix milliseconds (nil for none).
func millis(ms int64) *time.Time {
	if ms <= 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}
