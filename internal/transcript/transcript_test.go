package transcript_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/transcript"
)

// recorded reads an output the real CLIs printed against the fake model
// (internal/runner/agent/testdata, recorded by the agent package's tests).
func recorded(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "runner", "agent", "testdata", name+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// step is what a test expects of an entry: its kind and a few fields.
type step struct {
	kind, tool, text, outcome string
	blocking, isError         bool
}

func steps(tr transcript.Transcript) []step {
	var out []step
	for _, e := range tr.Entries {
		out = append(out, step{kind: e.Kind, tool: e.Tool, text: e.Text, outcome: e.Outcome, blocking: e.Blocking, isError: e.IsError})
	}
	return out
}

func TestRecordedSessions(t *testing.T) {
	for _, c := range []struct {
		name, adapter string
		want          []step
	}{
		{"claude-done", runproto.ClaudeCode, []step{
			{kind: "text", text: "I will write the file."},
			{kind: "tool_call", tool: "Write"},
			{kind: "tool_result", tool: "Write", text: "File created successfully at: *"},
			{kind: "report", tool: "mcp__ballet__submit_report", outcome: "done", text: "Wrote the file."},
			{kind: "tool_result", tool: "mcp__ballet__submit_report", text: "Report recorded."},
			{kind: "text", text: "Done."},
			{kind: "usage"},
		}},
		{"claude-ask", runproto.ClaudeCode, []step{
			{kind: "question", tool: "mcp__ballet__ask_question", text: "Which colour?", blocking: true},
			{kind: "tool_result", tool: "mcp__ballet__ask_question", text: "Question recorded."},
			{kind: "text", text: "I asked a question and wait for the answer."},
			{kind: "usage"},
		}},
		{"claude-api-error", runproto.ClaudeCode, []step{
			{kind: "text", text: "API Error: 529 *", isError: true},
			{kind: "usage"},
			{kind: "text", text: "API Error: 529 *", isError: true},
		}},
		{"claude-killed", runproto.ClaudeCode, []step{
			{kind: "tool_call", tool: "Bash"}, {kind: "tool_result", tool: "Bash", text: "(Bash completed with no output)"},
			{kind: "tool_call", tool: "Bash"}, {kind: "tool_result", tool: "Bash", text: "(Bash completed with no output)"},
			{kind: "tool_call", tool: "Bash"}, {kind: "tool_result", tool: "Bash", text: "Exit code 137", isError: true},
		}},
		{"opencode-done", runproto.OpenCode, []step{
			{kind: "text", text: "I will write the file."},
			{kind: "tool_call", tool: "write"},
			{kind: "tool_result", tool: "write", text: "Wrote file successfully."},
			{kind: "usage"},
			{kind: "report", tool: "ballet_submit_report", outcome: "done", text: "Wrote the file."},
			{kind: "tool_result", tool: "ballet_submit_report", text: "Report recorded."},
			{kind: "usage"},
			{kind: "text", text: "Done."},
			{kind: "usage"},
		}},
		{"opencode-ask", runproto.OpenCode, []step{
			{kind: "question", tool: "ballet_ask_question", text: "Which colour?", blocking: true},
			{kind: "tool_result", tool: "ballet_ask_question", text: "Question recorded."},
			{kind: "usage"},
			{kind: "text", text: "I asked a question and wait for the answer."},
			{kind: "usage"},
		}},
		{"opencode-api-error", runproto.OpenCode, []step{
			{kind: "text", text: "APIError: fake model: scripted overloaded_error", isError: true},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := transcript.Parse(c.adapter, recorded(t, c.name))
			got := steps(tr)
			if len(got) != len(c.want) {
				t.Fatalf("%d entries, want %d:\n%+v", len(got), len(c.want), got)
			}
			for i, w := range c.want {
				g := got[i]
				if prefix, ok := strings.CutSuffix(w.text, "*"); ok && strings.HasPrefix(g.text, prefix) {
					g.text = w.text
				}
				if g != w {
					t.Errorf("entry %d = %+v, want %+v", i, g, w)
				}
			}
			if tr.Truncated {
				t.Error("truncated")
			}
			for i, e := range tr.Entries {
				if e.Time == nil && i > 0 {
					t.Errorf("entry %d (%s) has no time", i, e.Kind)
				}
			}
		})
	}
}

func TestUsageAndInput(t *testing.T) {
	tr := transcript.Parse(runproto.ClaudeCode, recorded(t, "claude-done"))
	u := tr.Entries[len(tr.Entries)-1]
	want := runproto.Usage{InputTokens: 8215, OutputTokens: 56, CacheReadTokens: 14058, CacheWriteTokens: 7029, CostUSD: 0.05606115}
	if u.Usage == nil || *u.Usage != want || u.Model != "claude-sonnet-4-5" {
		t.Errorf("usage entry = %+v (usage %+v), want %+v of claude-sonnet-4-5", u, u.Usage, want)
	}
	if u.Time == nil || !u.Time.Equal(*tr.Entries[len(tr.Entries)-2].Time) {
		t.Errorf("the result line's entry has time %v, want the latest line's", u.Time)
	}
	var in struct {
		FilePath string `json:"file_path"`
		Content  string `json:"content"`
	}
	if err := json.Unmarshal([]byte(tr.Entries[1].Input), &in); err != nil || in.Content != "health-check\n" || !strings.HasSuffix(in.FilePath, "/hello.txt") {
		t.Errorf("Write's input = %q (%v)", tr.Entries[1].Input, err)
	}
	if tr.Entries[1].ID == "" || tr.Entries[1].ID != tr.Entries[2].ID {
		t.Errorf("the call's id %q does not tie it to its result's %q", tr.Entries[1].ID, tr.Entries[2].ID)
	}
	oc := transcript.Parse(runproto.OpenCode, recorded(t, "opencode-done"))
	if u := oc.Entries[3].Usage; u == nil || *u != (runproto.Usage{InputTokens: 2737, OutputTokens: 42, CostUSD: 0.008841}) {
		t.Errorf("opencode's first step usage = %+v", u)
	}
}

// TestLimits: a log of huge texts and inputs, and of more entries than a
// transcript holds, reads bounded and marked.
func TestLimits(t *testing.T) {
	big := strings.Repeat("é", transcript.MaxText) // two bytes each: cut within a character
	line := func(content any) string {
		b, _ := json.Marshal(map[string]any{"type": "assistant", "timestamp": "2026-12-01T15:41:14.359Z",
			"message": map[string]any{"model": "m", "content": content}})
		return string(b)
	}
	log := line([]map[string]any{{"type": "text", "text": big}}) + "\n" +
		line([]map[string]any{{"type": "tool_use", "id": "a", "name": "Bash", "input": map[string]string{"command": big}}}) + "\n"
	tr := transcript.Parse(runproto.ClaudeCode, []byte(log))
	if len(tr.Entries) != 2 {
		t.Fatalf("%d entries, want 2", len(tr.Entries))
	}
	text, call := tr.Entries[0], tr.Entries[1]
	if len(text.Text) > transcript.MaxText || !text.Cut || !strings.HasSuffix(text.Text, "é…") {
		t.Errorf("text of %d bytes, cut %v, ends %q", len(text.Text), text.Cut, text.Text[len(text.Text)-8:])
	}
	if len(call.Input) > transcript.MaxInput || !call.Cut {
		t.Errorf("input of %d bytes, cut %v", len(call.Input), call.Cut)
	}

	var many strings.Builder
	for range transcript.MaxEntries + 5 {
		many.WriteString(line([]map[string]any{{"type": "text", "text": "x"}}) + "\n")
	}
	tr = transcript.Parse(runproto.ClaudeCode, []byte(many.String()))
	if len(tr.Entries) != transcript.MaxEntries || !tr.Truncated {
		t.Errorf("%d entries (truncated %v), want %d and truncated", len(tr.Entries), tr.Truncated, transcript.MaxEntries)
	}

	var heavy strings.Builder
	for range transcript.MaxBytes/transcript.MaxText + 2 {
		heavy.WriteString(line([]map[string]any{{"type": "text", "text": strings.Repeat("y", transcript.MaxText)}}) + "\n")
	}
	tr = transcript.Parse(runproto.ClaudeCode, []byte(heavy.String()))
	total := 0
	for _, e := range tr.Entries {
		total += len(e.Text) + len(e.Input)
	}
	if total > transcript.MaxBytes || !tr.Truncated {
		t.Errorf("%d bytes of text (truncated %v), want at most %d and truncated", total, tr.Truncated, transcript.MaxBytes)
	}
}

// TestNoise: lines that are no JSON, cut, of unknown types or of another
// shape are skipped; an unknown adapter reads as nothing.
func TestNoise(t *testing.T) {
	log := "not json\n{\"type\":\"assistant\",\"message\":{\"content\":\"a plain string\"}}\n{\"type\":\"assistant\",\"mess\n" +
		"{\"type\":\"mystery\"}\n[1,2]\n{\"type\":\"user\",\"message\":{\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"z\",\"content\":[{\"type\":\"image\"}]}]}}\n"
	tr := transcript.Parse(runproto.ClaudeCode, []byte(log))
	if len(tr.Entries) != 1 || tr.Entries[0].Kind != "tool_result" || tr.Entries[0].Text != "[image]" || tr.Entries[0].Time != nil {
		t.Errorf("entries = %+v, want only the image result without a time", tr.Entries)
	}
	if tr := transcript.Parse("aider", recorded(t, "claude-done")); len(tr.Entries) != 0 {
		t.Errorf("an unknown adapter's log read as %d entries", len(tr.Entries))
	}
}

// FuzzParse: whatever the log, parsing neither panics nor breaks a limit,
// and every text is valid UTF-8 (it is served as JSON).
func FuzzParse(f *testing.F) {
	for _, name := range []string{"claude-done", "claude-ask", "claude-api-error", "opencode-done", "opencode-ask", "opencode-api-error"} {
		f.Add(strings.HasPrefix(name, "opencode"), recorded(f, name))
	}
	f.Add(false, []byte("{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"\\udc00\\xff\"}]}}"))
	f.Fuzz(func(t *testing.T, opencode bool, log []byte) {
		adapter := runproto.ClaudeCode
		if opencode {
			adapter = runproto.OpenCode
		}
		tr := transcript.Parse(adapter, log)
		if len(tr.Entries) > transcript.MaxEntries {
			t.Fatalf("%d entries", len(tr.Entries))
		}
		total := 0
		for _, e := range tr.Entries {
			total += len(e.Text) + len(e.Input)
			if len(e.Text) > transcript.MaxText || len(e.Input) > transcript.MaxInput || len(e.Tool) > transcript.MaxName {
				t.Fatalf("entry over its limits: %d text, %d input, %d tool", len(e.Text), len(e.Input), len(e.Tool))
			}
			for _, s := range []string{e.Text, e.Input, e.Tool, e.ID, e.Outcome, e.Model} {
				if !utf8.ValidString(s) {
					t.Fatalf("invalid UTF-8 in %q", s)
				}
			}
		}
		if total > transcript.MaxBytes {
			t.Fatalf("%d bytes of text", total)
		}
	})
}
