package fakemodel_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/fakemodel"
	"github.com/ballet/ballet/internal/testkit/hang"
)

// These tests speak to the server over HTTP the way the CLIs do (their
// requests reduced to what matters); cli_test.go runs the real CLIs.

func newServer(t *testing.T) (*fakemodel.Server, string) {
	fm := fakemodel.New()
	srv := httptest.NewServer(fm)
	t.Cleanup(func() { fm.Close(); srv.Close() })
	return fm, srv.URL
}

// sse is one server-sent event.
type sse struct {
	Event string
	Data  map[string]any
	Raw   string
}

func post(t *testing.T, url, session string, body any) (*http.Response, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	must(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("X-Claude-Code-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp, out
}

func parseSSE(t *testing.T, body []byte) []sse {
	t.Helper()
	var out []sse
	for _, chunk := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		var ev sse
		for _, line := range strings.Split(chunk, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Raw = strings.TrimPrefix(line, "data: ")
				if ev.Raw != "[DONE]" {
					if err := json.Unmarshal([]byte(ev.Raw), &ev.Data); err != nil {
						t.Fatalf("event data is not JSON: %q", ev.Raw)
					}
				}
			}
		}
		out = append(out, ev)
	}
	return out
}

// anthropicTurn is an assistant turn read back from a Messages stream.
type anthropicTurn struct {
	Events []string
	Text   string
	Calls  []fakemodel.Call
	Stop   string
	Usage  fakemodel.Usage
}

func readAnthropic(t *testing.T, body []byte) anthropicTurn {
	t.Helper()
	var turn anthropicTurn
	inputs := map[float64]*strings.Builder{}
	for _, ev := range parseSSE(t, body) {
		turn.Events = append(turn.Events, ev.Event)
		d := ev.Data
		switch ev.Event {
		case "message_start":
			u := d["message"].(map[string]any)["usage"].(map[string]any)
			turn.Usage.Input = int64(u["input_tokens"].(float64))
			turn.Usage.CacheRead = int64(u["cache_read_input_tokens"].(float64))
			turn.Usage.CacheWrite = int64(u["cache_creation_input_tokens"].(float64))
		case "content_block_start":
			if cb := d["content_block"].(map[string]any); cb["type"] == "tool_use" {
				turn.Calls = append(turn.Calls, fakemodel.Call{ID: cb["id"].(string), Tool: cb["name"].(string)})
				inputs[d["index"].(float64)] = &strings.Builder{}
			}
		case "content_block_delta":
			delta := d["delta"].(map[string]any)
			switch delta["type"] {
			case "text_delta":
				turn.Text += delta["text"].(string)
			case "input_json_delta":
				inputs[d["index"].(float64)].WriteString(delta["partial_json"].(string))
			}
		case "message_delta":
			turn.Stop = d["delta"].(map[string]any)["stop_reason"].(string)
			turn.Usage.Output = int64(d["usage"].(map[string]any)["output_tokens"].(float64))
		}
	}
	i := 0
	for idx := 0.0; i < len(turn.Calls); idx++ {
		if b, ok := inputs[idx]; ok {
			turn.Calls[i].Input = json.RawMessage(b.String())
			i++
		}
	}
	return turn
}

// claudeTools is the tool list of a claude-code request: the built-in
// tools with their input properties (and ToolSearch when withSearch).
func claudeTools(withSearch bool, extra ...map[string]any) []map[string]any {
	tool := func(name string, props ...string) map[string]any {
		p := map[string]any{}
		for _, n := range props {
			p[n] = map[string]any{"type": "string"}
		}
		return map[string]any{"name": name, "description": name, "input_schema": map[string]any{"type": "object", "properties": p}}
	}
	tools := []map[string]any{tool("Bash", "command", "description"), tool("Write", "file_path", "content"), tool("Read", "file_path")}
	if withSearch {
		tools = append(tools, tool("ToolSearch", "query"))
	}
	return append(tools, extra...)
}

func mcpTool(name string) map[string]any {
	return map[string]any{"name": name, "description": "ballet", "input_schema": map[string]any{"type": "object",
		"properties": map[string]any{"outcome": map[string]any{"type": "string"}, "summary": map[string]any{"type": "string"}}}}
}

func userText(texts ...string) map[string]any {
	var blocks []any
	for _, t := range texts {
		blocks = append(blocks, map[string]any{"type": "text", "text": t})
	}
	return map[string]any{"role": "user", "content": blocks}
}

// replay turns an answer into the assistant message and tool results the
// client sends next.
func replay(turn anthropicTurn, results ...string) []map[string]any {
	var content, res []any
	if turn.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": turn.Text})
	}
	for i, c := range turn.Calls {
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Tool, "input": c.Input})
		res = append(res, map[string]any{"type": "tool_result", "tool_use_id": c.ID, "content": results[i]})
	}
	msgs := []map[string]any{{"role": "assistant", "content": content}}
	if len(res) > 0 {
		msgs = append(msgs, map[string]any{"role": "user", "content": res})
	}
	return msgs
}

func decode(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	must(t, json.Unmarshal(raw, &m))
	return m
}

// A whole report-done session over the Messages API: the write tool with
// the working directory's path, then submit_report, then text; every turn
// streamed with the events the CLI expects, and the usage counted exactly.
func TestAnthropicSession(t *testing.T) {
	fm, url := newServer(t)
	const system = "You are a coding agent."
	req := map[string]any{"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 1000,
		"system": []any{map[string]any{"type": "text", "text": system}},
		"tools":  claudeTools(false, mcpTool("mcp__ballet__submit_report"))}
	msgs := []map[string]any{userText("<system-reminder>\n - Primary working directory: /work/ws\n</system-reminder>",
		"Do ACME-1. "+fakemodel.Marker("report-done", "file=docs/a.md", "content=hi"))}

	var turns []anthropicTurn
	var want fakemodel.Usage
	for i, results := range [][]string{{"File created"}, {"Report recorded."}, nil} {
		req["messages"] = msgs
		resp, body := post(t, url+"/v1/messages?beta=true", "s1", req)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("turn %d: %d %s %s", i, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		turn := readAnthropic(t, body)
		turns = append(turns, turn)
		// The usage is the documented count of this request.
		mb, _ := json.Marshal(msgs)
		prompt, sys := int64((len(mb)+len(system)+3)/4), int64((len(system)+3)/4)
		u := fakemodel.Usage{Input: prompt - sys}
		if i == 0 {
			u.CacheWrite = sys
		} else {
			u.CacheRead = sys
		}
		out := len(turn.Text)
		for _, c := range turn.Calls {
			out += len(c.Input)
		}
		u.Output = int64(max((out+3)/4, 1))
		if turn.Usage != u {
			t.Errorf("turn %d: usage %+v, want %+v", i, turn.Usage, u)
		}
		want.Input += u.Input
		want.Output += u.Output
		want.CacheRead += u.CacheRead
		want.CacheWrite += u.CacheWrite
		msgs = append(msgs, replay(turn, results...)...)
	}

	wantEvents := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !slicesEqual(turns[0].Events, wantEvents) {
		t.Errorf("events %q, want %q", turns[0].Events, wantEvents)
	}
	if c := turns[0].Calls; len(c) != 1 || c[0].Tool != "Write" || turns[0].Stop != "tool_use" ||
		!reflect.DeepEqual(decode(t, c[0].Input), map[string]any{"file_path": "/work/ws/docs/a.md", "content": "hi\n"}) {
		t.Errorf("turn 1: %+v", turns[0])
	}
	if c := turns[1].Calls; len(c) != 1 || c[0].Tool != "mcp__ballet__submit_report" ||
		!reflect.DeepEqual(decode(t, c[0].Input), map[string]any{"outcome": "done", "summary": "Wrote the file."}) {
		t.Errorf("turn 2: %+v", turns[1])
	}
	if turns[2].Text != "Done." || len(turns[2].Calls) != 0 || turns[2].Stop != "end_turn" {
		t.Errorf("turn 3: %+v", turns[2])
	}

	s, ok := fm.Session("s1")
	if !ok || s.Scenario != "report-done" || s.API != "anthropic" || s.Turns != 3 || s.Usage != want ||
		len(s.Calls) != 2 || len(s.Results) != 2 || s.Results[0].Tool != "Write" || s.Results[1].Content != "Report recorded." {
		t.Errorf("session: %+v (ok %v), want usage %+v", s, ok, want)
	}
}

func slicesEqual(a, b []string) bool { return reflect.DeepEqual(a, b) }

// claude-code's default model gets system messages among the others: they
// count as system text (the working directory is found there).
func TestSystemMessages(t *testing.T) {
	_, url := newServer(t)
	_, body := post(t, url+"/v1/messages", "", map[string]any{"model": "claude-opus-5-5", "stream": true, "tools": claudeTools(false),
		"messages": []any{userText("Try " + fakemodel.Marker("no-report")),
			map[string]any{"role": "system", "content": []any{map[string]any{"type": "text", "text": "# Environment\n - Primary working directory: /home/me/ws"}}}}})
	turn := readAnthropic(t, body)
	if len(turn.Calls) != 1 || decode(t, turn.Calls[0].Input)["file_path"] != "/home/me/ws/hello.txt" {
		t.Errorf("answer %+v, want a Write of /home/me/ws/hello.txt", turn)
	}
}

// claude-code announces MCP tools as deferred; the model loads them with
// ToolSearch before the call, and a call id is never used twice.
func TestToolSearch(t *testing.T) {
	_, url := newServer(t)
	deferred := "<system-reminder>\nThe following deferred tools are now available via ToolSearch. Their schemas are NOT loaded:\nWebFetch\nmcp__ballet__submit_report\n</system-reminder>"
	req := map[string]any{"model": "m", "stream": true, "tools": claudeTools(true)}
	msgs := []map[string]any{userText(deferred, fakemodel.Marker("report-failed"))}
	req["messages"] = msgs
	_, body := post(t, url+"/v1/messages", "", req)
	search := readAnthropic(t, body)
	if len(search.Calls) != 1 || search.Calls[0].Tool != "ToolSearch" ||
		!reflect.DeepEqual(decode(t, search.Calls[0].Input), map[string]any{"query": "select:mcp__ballet__submit_report", "max_results": 1.0}) {
		t.Fatalf("first turn: %+v, want a ToolSearch", search)
	}
	// The search's result references the tool; the client lists it now.
	msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use",
		"id": search.Calls[0].ID, "name": "ToolSearch", "input": search.Calls[0].Input}}})
	msgs = append(msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result",
		"tool_use_id": search.Calls[0].ID, "content": []any{map[string]any{"type": "tool_reference", "tool_name": "mcp__ballet__submit_report"}}}}})
	req["messages"] = msgs
	req["tools"] = claudeTools(true, mcpTool("mcp__ballet__submit_report"))
	_, body = post(t, url+"/v1/messages", "", req)
	call := readAnthropic(t, body)
	if len(call.Calls) != 1 || call.Calls[0].Tool != "mcp__ballet__submit_report" || call.Calls[0].ID == search.Calls[0].ID ||
		decode(t, call.Calls[0].Input)["outcome"] != "failed" {
		t.Errorf("second turn: %+v, want the report (a new call id)", call)
	}
	// A tool listed with defer_loading is not callable before the search either.
	lazy := mcpTool("mcp__ballet__submit_report")
	lazy["defer_loading"] = true
	req["messages"] = msgs[:1]
	req["tools"] = claudeTools(true, lazy)
	_, body = post(t, url+"/v1/messages", "", req)
	if again := readAnthropic(t, body); len(again.Calls) != 1 || again.Calls[0].Tool != "ToolSearch" {
		t.Errorf("with defer_loading: %+v, want a ToolSearch", again)
	}
}

// opencode over OpenAI chat completions: tool calls in delta.tool_calls, a
// finish reason, a usage chunk with the cached part, [DONE]; the title
// call (no tools) is answered with text and counted apart.
func TestOpenAISession(t *testing.T) {
	fm, url := newServer(t)
	tools := []any{}
	for _, tl := range []struct {
		name  string
		props []string
	}{{"bash", []string{"command", "description"}}, {"write", []string{"filePath", "content"}}, {"ballet_submit_report", []string{"outcome", "summary"}}} {
		props := map[string]any{}
		for _, p := range tl.props {
			props[p] = map[string]any{"type": "string"}
		}
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": tl.name,
			"parameters": map[string]any{"type": "object", "properties": props}}})
	}
	openai := func(session string, body map[string]any) []sse {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(b))
		req.Header.Set("X-Session-Id", session)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		return parseSSE(t, out)
	}
	const system = "You are opencode. Working directory: /srv/ws"
	user := "Do it " + fakemodel.Marker("report-done")
	title := openai("ses_1", map[string]any{"model": "m", "stream": true, "messages": []any{
		map[string]any{"role": "system", "content": "You are a title generator."},
		map[string]any{"role": "user", "content": "Generate a title for: " + user}}})
	if title[1].Data["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)["content"] != "Ballet fake session" {
		t.Errorf("title answer: %+v", title)
	}

	msgs := []any{map[string]any{"role": "system", "content": system}, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": user}}}}
	var usages []map[string]any
	for i := 0; i < 3; i++ {
		evs := openai("ses_1", map[string]any{"model": "m", "stream": true, "messages": msgs, "tools": tools})
		if evs[len(evs)-1].Raw != "[DONE]" {
			t.Fatalf("turn %d does not end with [DONE]: %+v", i, evs)
		}
		usages = append(usages, evs[len(evs)-2].Data["usage"].(map[string]any))
		var name, args, finish, text string
		var id string
		for _, ev := range evs[:len(evs)-2] {
			ch := ev.Data["choices"].([]any)[0].(map[string]any)
			if f, ok := ch["finish_reason"].(string); ok {
				finish = f
			}
			d := ch["delta"].(map[string]any)
			if c, ok := d["content"].(string); ok {
				text += c
			}
			for _, tc := range asSlice(d["tool_calls"]) {
				tcm := tc.(map[string]any)
				if v, ok := tcm["id"].(string); ok {
					id = v
				}
				fn := tcm["function"].(map[string]any)
				if n, ok := fn["name"].(string); ok {
					name = n
				}
				args += fn["arguments"].(string)
			}
		}
		switch i {
		case 0:
			if name != "write" || finish != "tool_calls" || !reflect.DeepEqual(decode(t, json.RawMessage(args)), map[string]any{"filePath": "/srv/ws/hello.txt", "content": "hello from the fake model\n"}) {
				t.Errorf("turn 1: %s %s %s", name, args, finish)
			}
		case 1:
			if name != "ballet_submit_report" || finish != "tool_calls" {
				t.Errorf("turn 2: %s %s %s", name, args, finish)
			}
		case 2:
			if text != "Done." || finish != "stop" {
				t.Errorf("turn 3: %q %s", text, finish)
			}
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": text, "tool_calls": []any{map[string]any{"id": id, "type": "function",
			"function": map[string]any{"name": name, "arguments": args}}}})
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": id, "content": "ok"})
	}
	sysTokens := float64((len(system) + 3) / 4)
	if usages[0]["prompt_tokens_details"].(map[string]any)["cached_tokens"] != 0.0 ||
		usages[1]["prompt_tokens_details"].(map[string]any)["cached_tokens"] != sysTokens {
		t.Errorf("cached tokens: %v, want 0 then %v", usages, sysTokens)
	}
	s, _ := fm.Session("ses_1")
	var sum fakemodel.Usage
	for _, u := range usages {
		cached := int64(u["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64))
		sum.Input += int64(u["prompt_tokens"].(float64)) - cached
		sum.CacheRead += cached
		sum.Output += int64(u["completion_tokens"].(float64))
	}
	if s.API != "openai" || s.Turns != 3 || s.AuxTurns != 1 || s.Usage != sum || s.AuxUsage.Input == 0 {
		t.Errorf("session %+v, want 3 turns of %+v and one title call", s, sum)
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// A long answer arrives in several deltas, over both APIs, whole.
func TestLongAnswer(t *testing.T) {
	_, url := newServer(t)
	_, body := post(t, url+"/v1/messages", "", map[string]any{"model": "m", "stream": true, "tools": claudeTools(false, mcpTool("mcp__b__submit_report")),
		"messages": append([]map[string]any{userText(fakemodel.Marker("huge-line", "size=40000"))},
			replay(anthropicTurn{Calls: []fakemodel.Call{{ID: "c1", Tool: "mcp__b__submit_report", Input: json.RawMessage(`{}`)}}}, "ok")...)})
	turn := readAnthropic(t, body)
	deltas := 0
	for _, e := range turn.Events {
		if e == "content_block_delta" {
			deltas++
		}
	}
	if turn.Text != strings.Repeat("x", 40000) || deltas != 3 {
		t.Errorf("anthropic: %d bytes in %d deltas, want 40000 in 3", len(turn.Text), deltas)
	}
	_, body = post(t, url+"/v1/chat/completions", "", map[string]any{"model": "m", "stream": true,
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "b_submit_report"}}},
		"messages": []any{map[string]any{"role": "user", "content": fakemodel.Marker("huge-line", "size=40000")},
			map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "b_submit_report", "arguments": "{}"}}}},
			map[string]any{"role": "tool", "tool_call_id": "c1", "content": "ok"}}})
	text, chunks := "", 0
	for _, ev := range parseSSE(t, body) {
		for _, ch := range asSlice(ev.Data["choices"]) {
			if c, ok := ch.(map[string]any)["delta"].(map[string]any)["content"].(string); ok && c != "" {
				text += c
				chunks++
			}
		}
	}
	if text != strings.Repeat("x", 40000) || chunks != 3 {
		t.Errorf("openai: %d bytes in %d chunks, want 40000 in 3", len(text), chunks)
	}
}

// Both APIs answer a request that does not ask for a stream with one JSON
// body (claude-code retries a failed stream that way).
func TestNotStreamed(t *testing.T) {
	_, url := newServer(t)
	_, body := post(t, url+"/v1/messages", "", map[string]any{"model": "m", "stream": false,
		"tools": claudeTools(false, mcpTool("mcp__b__submit_report")), "messages": []any{userText(fakemodel.Marker("report-blocked"))}})
	var msg struct {
		Type       string `json:"type"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string         `json:"type"`
			Name  string         `json:"name"`
			Input map[string]any `json:"input"`
		} `json:"content"`
		Usage map[string]int64 `json:"usage"`
	}
	must(t, json.Unmarshal(body, &msg))
	if msg.Type != "message" || msg.StopReason != "tool_use" || len(msg.Content) != 1 || msg.Content[0].Name != "mcp__b__submit_report" ||
		msg.Content[0].Input["outcome"] != "blocked" || msg.Usage["input_tokens"] == 0 || msg.Usage["output_tokens"] == 0 {
		t.Errorf("Messages: %s", body)
	}
	_, body = post(t, url+"/v1/chat/completions", "", map[string]any{"model": "m",
		"messages": []any{map[string]any{"role": "user", "content": fakemodel.Marker("report-done")}},
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash", "parameters": map[string]any{"properties": map[string]any{"command": map[string]any{}}}}},
			map[string]any{"type": "function", "function": map[string]any{"name": "write", "parameters": map[string]any{"properties": map[string]any{"path": map[string]any{}, "content": map[string]any{}}}}}}})
	var cc struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	must(t, json.Unmarshal(body, &cc))
	if cc.Object != "chat.completion" || len(cc.Choices) != 1 || cc.Choices[0].FinishReason != "tool_calls" ||
		cc.Choices[0].Message.ToolCalls[0].Function.Name != "write" || !strings.Contains(cc.Choices[0].Message.ToolCalls[0].Function.Arguments, `"path":"hello.txt"`) {
		t.Errorf("chat completion: %s", body)
	}
}

// The scenarios' scripts, turn by turn, against a claude-code-like client.
func TestScenarios(t *testing.T) {
	tools := claudeTools(false, mcpTool("mcp__ballet__submit_report"), mcpTool("mcp__ballet__ask_question"),
		mcpTool("mcp__ballet__get_ticket"),
		map[string]any{"name": "Skill", "input_schema": map[string]any{"properties": map[string]any{"skill": map[string]any{}}}})
	type step struct {
		tool  string
		input map[string]any
		text  string
	}
	for _, c := range []struct {
		name   string
		prompt string
		result string // every tool result
		want   []step
	}{
		{"report-failed", fakemodel.Marker("report-failed"), "ok", []step{
			{tool: "mcp__ballet__submit_report", input: map[string]any{"outcome": "failed", "summary": "The tests do not pass and I cannot fix them."}},
			{text: "I could not do it."}}},
		{"ask", fakemodel.Marker("ask", "question=Port?", "answer=8080"), "ok", []step{
			{tool: "mcp__ballet__ask_question", input: map[string]any{"question": "Port?", "blocking": true}},
			{text: "I asked a question and wait for the answer."}}},
		{"ask answered", fakemodel.Marker("ask", "question=Port?", "answer=8080") + "\nA: 8080", "ok", []step{
			{tool: "mcp__ballet__submit_report", input: map[string]any{"outcome": "done", "summary": "Done as answered: 8080"}},
			{text: "Done."}}},
		{"read-ticket", fakemodel.Marker("read-ticket"), `{"key":"A-1"}` + "\n<system-reminder>context</system-reminder>", []step{
			{tool: "mcp__ballet__get_ticket", input: map[string]any{}},
			{tool: "mcp__ballet__submit_report", input: map[string]any{"outcome": "done", "summary": `{"key":"A-1"}`}},
			{text: "Done."}}},
		{"no-report", fakemodel.Marker("no-report"), "ok", []step{
			{tool: "Write", input: map[string]any{"file_path": "hello.txt", "content": "hello from the fake model\n"}},
			{text: "All done, no report."}}},
		{"slow-work", fakemodel.Marker("slow-work", "steps=2", "sleep=3"), "ok", []step{
			{tool: "Bash", input: map[string]any{"command": "echo step 1 >> work.txt && sleep 3", "description": "Work step 1 of 2"}},
			{tool: "Bash", input: map[string]any{"command": "echo step 2 >> work.txt && sleep 3", "description": "Work step 2 of 2"}},
			{tool: "mcp__ballet__submit_report", input: map[string]any{"outcome": "done", "summary": "Did 2 steps of work."}},
			{text: "Done."}}},
		{"slow-work", fakemodel.Marker("slow-work", "steps=1", "sleep=0", "file=agent-1.txt"), "ok", []step{
			{tool: "Bash", input: map[string]any{"command": "echo step 1 >> agent-1.txt && sleep 0", "description": "Work step 1 of 1"}},
			{tool: "mcp__ballet__submit_report", input: map[string]any{"outcome": "done", "summary": "Did 1 steps of work."}},
			{text: "Done."}}},
		{"run-script", fakemodel.Marker("run-script", "file=check.sh"), "read: permission denied", []step{
			{tool: "Bash", input: map[string]any{"command": "sh check.sh", "description": "Run the script"}},
			{tool: "mcp__ballet__submit_report", input: map[string]any{"outcome": "done", "summary": "read: permission denied"}},
			{text: "Done."}}},
		{"use-skill", fakemodel.Marker("use-skill", "name=style"), "SKILL BODY", []step{
			{tool: "Skill", input: map[string]any{"skill": "style"}},
			{tool: "mcp__ballet__submit_report", input: map[string]any{"outcome": "done", "summary": "SKILL BODY"}},
			{text: "Done."}}},
		{"huge-line", fakemodel.Marker("huge-line", "size=5"), "ok", []step{
			{tool: "mcp__ballet__submit_report", input: map[string]any{"outcome": "done", "summary": "Reported before a huge answer."}},
			{text: "xxxxx"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, url := newServer(t)
			msgs := []map[string]any{userText(c.prompt)}
			for i, w := range c.want {
				_, body := post(t, url+"/v1/messages", "", map[string]any{"model": "m", "stream": true, "tools": tools, "messages": msgs})
				turn := readAnthropic(t, body)
				if w.tool == "" {
					if turn.Text != w.text || len(turn.Calls) > 0 {
						t.Fatalf("turn %d: %+v, want the text %q", i, turn, w.text)
					}
					continue
				}
				if len(turn.Calls) != 1 || turn.Calls[0].Tool != w.tool || !reflect.DeepEqual(decode(t, turn.Calls[0].Input), w.input) {
					t.Fatalf("turn %d: %+v, want %s %v", i, turn, w.tool, w.input)
				}
				msgs = append(msgs, replay(turn, c.result)...)
			}
		})
	}
}

// What the model cannot play it says as text, and the session records it:
// an unknown scenario, a bad parameter, a tool the client does not offer.
func TestProblems(t *testing.T) {
	fm, url := newServer(t)
	for i, c := range []struct {
		prompt string
		tools  []map[string]any
		want   string
	}{
		{fakemodel.Marker("nope"), claudeTools(false), `unknown scenario "nope"`},
		{fakemodel.Marker("slow-work", "steps=x"), claudeTools(false), `marker parameter steps="x" is not a whole number`},
		{fakemodel.Marker("report-done"), claudeTools(false)[2:], "the request offers no write tool"},
		{fakemodel.Marker("report-failed"), claudeTools(false), "the request offers no MCP tool named submit_report"},
		{fakemodel.Marker("use-skill"), claudeTools(false), "the request offers no skill tool"},
	} {
		session := "p" + string(rune('0'+i))
		_, body := post(t, url+"/v1/messages", session, map[string]any{"model": "m", "stream": true, "tools": c.tools,
			"messages": []any{userText(c.prompt)}})
		turn := readAnthropic(t, body)
		s, _ := fm.Session(session)
		if !strings.Contains(turn.Text, c.want) || len(s.Problems) != 1 || !strings.Contains(s.Problems[0], c.want) {
			t.Errorf("%s: answered %q, problems %q; want %q", c.prompt, turn.Text, s.Problems, c.want)
		}
	}
}

// api-error answers with the status, type and retry-after-ms it is given,
// or (in=stream) with an error event after the stream started.
func TestAPIErrorAnswers(t *testing.T) {
	fm, url := newServer(t)
	msgs := func(m string) []any { return []any{userText(m)} }
	resp, body := post(t, url+"/v1/messages", "e", map[string]any{"model": "m", "stream": true, "tools": claudeTools(false),
		"messages": msgs(fakemodel.Marker("api-error", "status=529", "type=overloaded_error", "retry_after_ms=250"))})
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	must(t, json.Unmarshal(body, &e))
	if resp.StatusCode != 529 || resp.Header.Get("Retry-After-Ms") != "250" || e.Type != "error" ||
		e.Error.Type != "overloaded_error" || e.Error.Message != "fake model: scripted overloaded_error" {
		t.Errorf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, body = post(t, url+"/v1/messages", "e", map[string]any{"model": "m", "stream": true, "tools": claudeTools(false),
		"messages": msgs(fakemodel.Marker("api-error", "in=stream"))})
	evs := parseSSE(t, body)
	if resp.StatusCode != 200 || len(evs) != 2 || evs[0].Event != "message_start" || evs[1].Event != "error" {
		t.Errorf("in stream: %d %+v", resp.StatusCode, evs)
	}
	resp, _ = post(t, url+"/v1/chat/completions", "e", map[string]any{"model": "m", "stream": true,
		"tools":    []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}},
		"messages": []any{map[string]any{"role": "user", "content": fakemodel.Marker("api-error")}}})
	if resp.StatusCode != 500 || resp.Header.Get("Retry-After-Ms") != "10" {
		t.Errorf("openai: %d %v", resp.StatusCode, resp.Header)
	}
	if s, _ := fm.Session("e"); s.Errors != 3 || s.Turns != 0 || s.Usage != (fakemodel.Usage{}) {
		t.Errorf("session: %+v", s)
	}
}

// A hanging request is released when the client gives up or the server
// closes; Wait sees it hang.
func TestHang(t *testing.T) {
	for _, at := range []string{"start", "mid"} {
		t.Run(at, func(t *testing.T) {
			fm := fakemodel.New()
			srv := httptest.NewServer(fm)
			defer srv.Close()
			b, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "tools": claudeTools(false),
				"messages": []any{userText(fakemodel.Marker("hang", "at="+at))}})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/messages", bytes.NewReader(b))
			req.Header.Set("X-Claude-Code-Session-Id", "h")
			type answer struct {
				first string
				err   error
			}
			got := make(chan answer, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					got <- answer{err: err}
					return
				}
				defer resp.Body.Close()
				r := bufio.NewReader(resp.Body)
				first, _ := r.ReadString('\n')
				_, err = io.ReadAll(r)
				got <- answer{first: first, err: err}
			}()
			if _, err := fm.Wait(hang.Context(t), func(all []fakemodel.Session) bool { return len(all) == 1 && all[0].Hangs == 1 }); err != nil {
				t.Fatal(err)
			}
			fm.Close()
			a := hang.Recv(t, got, "the hanging request to be released")
			if at == "mid" && a.first != "event: message_start\n" {
				t.Errorf("mid-stream hang sent %q first, want the stream's start", a.first)
			}
			if at == "start" && a.err == nil && a.first != "" {
				t.Errorf("a hang at the start sent %q", a.first)
			}
		})
	}
	// The client giving up releases it too.
	fm, url := newServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	b, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "tools": claudeTools(false), "messages": []any{userText(fakemodel.Marker("hang"))}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages", bytes.NewReader(b))
	done := make(chan error, 1)
	go func() {
		_, err := http.DefaultClient.Do(req)
		done <- err
	}()
	if _, err := fm.Wait(hang.Context(t), func(all []fakemodel.Session) bool { return len(all) == 1 && all[0].Hangs == 1 }); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := hang.Recv(t, done, "the cancelled request"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled request: %v", err)
	}
}

// Wait ends with its context.
func TestWaitEndsWithItsContext(t *testing.T) {
	fm := fakemodel.New()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := fm.Wait(ctx, func([]fakemodel.Session) bool { return false }); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait: %v", err)
	}
}

// Bad requests get a 4xx naming the problem, in the Anthropic error shape
// (OpenAI clients read its error.message too).
func TestBadRequests(t *testing.T) {
	_, url := newServer(t)
	for _, c := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "/v1/messages", "{", 400, "not a Messages request"},
		{"POST", "/v1/messages", `{"messages":[]}`, 400, "messages: want a non-empty array"},
		{"POST", "/v1/messages", `{"messages":[{"role":"tool","content":"x"}]}`, 400, `messages[0].role: "tool" is not user, assistant or system`},
		{"POST", "/v1/messages", `{"messages":[{"role":"user","content":7}]}`, 400, "messages[0].content: want a string or an array"},
		{"POST", "/v1/chat/completions", `{"messages":"x"}`, 400, "messages: want a non-empty array"},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"robot","content":"x"}]}`, 400, `messages[0].role: unknown role "robot"`},
		{"GET", "/v1/messages", "", 405, "takes POST"},
		{"POST", "/v1/complete", "{}", 404, "no endpoint POST /v1/complete"},
		{"POST", "/v1/models", "{}", 405, "models takes GET"},
		{"POST", "/v1/messages/count_tokens", "[", 400, "not a Messages request"},
	} {
		req, _ := http.NewRequest(c.method, url+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct{ Message string }
		}
		_ = json.Unmarshal(b, &e)
		if resp.StatusCode != c.status || !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("%s %s %s: %d %s, want %d %q", c.method, c.path, c.body, resp.StatusCode, b, c.status, c.want)
		}
	}
}

// count_tokens counts like the turns do; models lists model ids.
func TestCountTokensAndModels(t *testing.T) {
	_, url := newServer(t)
	msgs := []any{userText("hello")}
	mb, _ := json.Marshal(msgs)
	_, body := post(t, url+"/v1/messages/count_tokens", "", map[string]any{"model": "m", "system": "sys", "messages": msgs})
	var n struct {
		InputTokens int `json:"input_tokens"`
	}
	must(t, json.Unmarshal(body, &n))
	if want := (len(mb) + 3 + 3) / 4; n.InputTokens != want {
		t.Errorf("count_tokens: %s, want %d", body, want)
	}
	resp, err := http.Get(url + "/v1/models")
	must(t, err)
	defer resp.Body.Close()
	var list struct {
		Data []struct{ ID, Object, Type string }
	}
	must(t, json.NewDecoder(resp.Body).Decode(&list))
	if len(list.Data) == 0 || list.Data[0].Object != "model" || list.Data[0].Type != "model" {
		t.Errorf("models: %+v", list)
	}
}

// Without a marker the server plays its Default; Sessions lists sessions
// in order of their first request.
func TestDefaultScenarioAndSessions(t *testing.T) {
	fm, url := newServer(t)
	fm.Default = "report-blocked"
	for _, id := range []string{"b", "a"} {
		post(t, url+"/v1/messages", id, map[string]any{"model": "m", "stream": true,
			"tools": claudeTools(false, mcpTool("mcp__x__submit_report")), "messages": []any{userText("no marker here")}})
	}
	all := fm.Sessions()
	if len(all) != 2 || all[0].ID != "b" || all[1].ID != "a" || all[0].Scenario != "report-blocked" ||
		decode(t, all[0].Calls[0].Input)["outcome"] != "blocked" {
		t.Errorf("sessions: %+v", all)
	}
	if _, ok := fm.Session("c"); ok {
		t.Error("a session nobody opened exists")
	}
}
