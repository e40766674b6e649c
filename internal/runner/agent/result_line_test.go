package agent

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/runproto"
)

// claudeLines feeds hand-written claude-code lines to a fresh output for
// claude-sonnet-4-5 and returns its result.
func claudeLines(t *testing.T, lines ...string) Result {
	t.Helper()
	out := Claude{}.Output("claude-sonnet-4-5")
	for _, l := range lines {
		out.Line([]byte(l), false)
	}
	return out.Result()
}

// The session id is the first one the stream names: a later line without
// one, or with another, does not change it.
func TestClaudeSessionIDIsTheFirstTold(t *testing.T) {
	r := claudeLines(t,
		`{"type":"system","subtype":"init","session_id":"first","model":"claude-sonnet-4-5","mcp_servers":[{"name":"ballet","status":"connected"}]}`,
		`{"type":"user","message":{"content":"hello"}}`,
		`{"type":"assistant","session_id":"second","message":{"id":"m1","content":"hi"}}`,
	)
	if r.SessionID != "first" {
		t.Errorf("session id %q, want first", r.SessionID)
	}
}

// The result line's total_cost_usd is what the session cost, even when it
// differs from the list prices of its tokens (a discount, another price
// table): the CLI's own figure wins.
func TestClaudeResultCostIsTheCLIs(t *testing.T) {
	r := claudeLines(t,
		`{"type":"result","subtype":"success","is_error":false,"terminal_reason":"completed","total_cost_usd":1.25,"usage":{"input_tokens":10,"output_tokens":5}}`)
	if r.Usage.CostUSD != 1.25 {
		t.Errorf("cost %v, want the CLI's 1.25", r.Usage.CostUSD)
	}
	if want := (runproto.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 1.25}); r.Usage != want {
		t.Errorf("usage %+v, want %+v", r.Usage, want)
	}
}

// The result line's permission denials are counted.
func TestClaudeResultCountsDenials(t *testing.T) {
	r := claudeLines(t,
		`{"type":"result","subtype":"success","is_error":false,"terminal_reason":"completed","total_cost_usd":0.1,"permission_denials":[{"tool_name":"Bash"},{"tool_name":"Write"}]}`)
	if r.Denied != 2 {
		t.Errorf("denied %d, want 2", r.Denied)
	}
}

// A result line is a failure when it says is_error, or when its
// terminal_reason is there and is not "completed"; either alone is enough,
// and a success without a terminal_reason (older CLIs) is no failure.
func TestClaudeResultErrorEitherWay(t *testing.T) {
	for _, c := range []struct {
		name, line, want string
	}{
		{"is_error alone", `{"type":"result","subtype":"error_during_execution","is_error":true,"terminal_reason":"completed","result":"it broke"}`,
			"claude-code: it broke"},
		{"is_error without a reason", `{"type":"result","subtype":"error_during_execution","is_error":true}`,
			"claude-code: the session ended in error (error_during_execution)"},
		{"terminal_reason alone", `{"type":"result","subtype":"success","is_error":false,"terminal_reason":"max_turns","result":"stopped"}`,
			"claude-code: stopped (terminal_reason max_turns)"},
		{"success without a terminal_reason", `{"type":"result","subtype":"success","is_error":false,"result":"Done."}`, ""},
		{"success, completed", `{"type":"result","subtype":"success","is_error":false,"terminal_reason":"completed","result":"Done."}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := claudeLines(t, c.line)
			if r.Error != c.want {
				t.Errorf("error %q, want %q", r.Error, c.want)
			}
			if !r.Final {
				t.Error("a result line is final")
			}
		})
	}
}

// A stopped session's usage counts the assistant lines that carry a usage
// and a message id, once per message (its lines repeat the usage so far),
// output tokens included when a line tells them; a line without usage, or
// without an id, adds nothing (and breaks nothing).
func TestClaudeStoppedUsageNeedsUsageAndID(t *testing.T) {
	r := claudeLines(t,
		`{"type":"assistant","message":{"id":"m1","content":[],"usage":{"input_tokens":100,"cache_creation_input_tokens":10,"output_tokens":0}}}`,
		`{"type":"assistant","message":{"id":"m1","content":[],"usage":{"input_tokens":100,"cache_creation_input_tokens":10,"output_tokens":7}}}`,
		`{"type":"assistant","message":{"id":"m2","content":[]}}`,
		`{"type":"assistant","message":{"content":[],"usage":{"input_tokens":5000,"output_tokens":0}}}`,
	)
	u := r.Usage
	u.CostUSD = 0
	if want := (runproto.Usage{InputTokens: 100, OutputTokens: 7, CacheWriteTokens: 10}); u != want {
		t.Errorf("usage %+v, want %+v (m1 once)", u, want)
	}
	if r.Final {
		t.Error("no result line: not final")
	}
}

// opencode's steps: reasoning tokens are billed as output, cache writes
// count, and each step adds to the session's usage; the session id is the
// first one told.
func TestOpenCodeStepsAddReasoningAndCacheWrites(t *testing.T) {
	out := OpenCode{}.Output("anthropic/claude-sonnet-4-5")
	for _, l := range []string{
		`{"type":"step_start","sessionID":"ses_first"}`,
		`{"type":"step_finish","part":{"tokens":{"input":100,"output":10,"reasoning":5,"cache":{"write":40,"read":30}},"cost":0.5}}`,
		`{"type":"step_finish","sessionID":"ses_other","part":{"tokens":{"input":1,"output":2,"reasoning":3,"cache":{"write":4,"read":5}},"cost":0.25}}`,
	} {
		out.Line([]byte(l), false)
	}
	r := out.Result()
	if want := (runproto.Usage{InputTokens: 101, OutputTokens: 20, CacheWriteTokens: 44, CacheReadTokens: 35, CostUSD: 0.75}); !sameUsage(r.Usage, want) {
		t.Errorf("usage %+v, want %+v", r.Usage, want)
	}
	if r.SessionID != "ses_first" {
		t.Errorf("session id %q, want ses_first", r.SessionID)
	}

	// Without opencode's cost, the reasoning tokens are priced as output.
	out = OpenCode{}.Output("anthropic/claude-sonnet-4-5")
	out.Line([]byte(`{"type":"step_finish","part":{"tokens":{"input":0,"output":0,"reasoning":1000000,"cache":{"write":0,"read":0}},"cost":0}}`), false)
	if got := out.Result().Usage.CostUSD; !near(got, sonnet.Output) {
		t.Errorf("a million reasoning tokens cost %v, want sonnet's output price %v", got, sonnet.Output)
	}
}

// A CLI's error is kept whole up to maxError bytes; a longer one is cut
// to maxError bytes of valid UTF-8, marked with "…".
func TestErrorIsBounded(t *testing.T) {
	prefix := "claude-code: "
	whole := strings.Repeat("a", maxError-len(prefix))
	r := claudeLines(t, `{"type":"result","subtype":"error","is_error":true,"result":"`+whole+`"}`)
	if r.Error != prefix+whole {
		t.Errorf("an error of exactly %d bytes was changed to %d bytes", maxError, len(r.Error))
	}
	long := strings.Repeat("é", maxError)
	r = claudeLines(t, `{"type":"result","subtype":"error","is_error":true,"result":"`+long+`"}`)
	if len(r.Error) > maxError || !strings.HasSuffix(r.Error, "…") || !utf8.ValidString(r.Error) || !strings.HasPrefix(r.Error, prefix+"éé") {
		t.Errorf("a long error cut to %d bytes (valid UTF-8 %v), ending %q; want at most %d, marked", len(r.Error), utf8.ValidString(r.Error), r.Error[len(r.Error)-8:], maxError)
	}
}
