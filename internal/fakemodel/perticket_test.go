package fakemodel_test

import (
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/runner/agent"
)

// TestDefaultWritesPerTicket: the default scenario, played without a
// marker in a Ballet session, writes a file of the ticket's own
// (hello-<KEY>.txt saying the key), so that a second ticket's branch has
// something new; with a marker, or outside a ticket, it writes hello.txt
// as before. The ticket is read from the prompt's opening line, which the
// runner's template must keep.
func TestDefaultWritesPerTicket(t *testing.T) {
	if !strings.HasPrefix(agent.PromptTemplate, "You are a coding agent working for Ballet on ticket {{.Ticket.Key}}:") {
		t.Fatal("the runner's prompt no longer opens with the ticket's key as the fake model reads it")
	}
	_, url := newServer(t)
	for _, c := range []struct{ prompt, file, content string }{
		{"You are a coding agent working for Ballet on ticket ACME-7: Greet", "hello-ACME-7.txt", "hello from the fake model for ACME-7\n"},
		{"You are a coding agent working for Ballet on ticket ACME-8: Greet", "hello-ACME-8.txt", "hello from the fake model for ACME-8\n"},
		{"You are a coding agent working for Ballet on ticket ACME-9: Greet " + fakemodel.Marker("report-done"), "hello.txt", "hello from the fake model\n"},
		{"Write something.", "hello.txt", "hello from the fake model\n"},
	} {
		req := map[string]any{"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 1000,
			"tools":    claudeTools(false, mcpTool("mcp__ballet__submit_report")),
			"messages": []map[string]any{userText("<system-reminder>\n - Primary working directory: /work/ws\n</system-reminder>", c.prompt)}}
		resp, body := post(t, url+"/v1/messages?beta=true", "s-"+c.file, req)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		turn := readAnthropic(t, body)
		if len(turn.Calls) != 1 {
			t.Fatalf("%q: calls %+v", c.prompt, turn.Calls)
		}
		in := string(turn.Calls[0].Input)
		if !strings.Contains(in, "/work/ws/"+c.file) || !strings.Contains(in, strings.ReplaceAll(c.content, "\n", `\n`)) {
			t.Errorf("%q: wrote %s, want %s saying %q", c.prompt, in, c.file, c.content)
		}
	}
}
