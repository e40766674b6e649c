package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// chunk is the largest piece of text or tool input sent in one delta.
const chunk = 16 << 10

var messageSeq atomic.Int64

// anthropic is the Anthropic Messages API (POST /v1/messages, streamed).
type anthropic struct{}

func (anthropic) name() string { return "anthropic" }

type anthropicRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"`
	Messages json.RawMessage `json:"messages"`
	Tools    []struct {
		Name        string `json:"name"`
		InputSchema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"input_schema"`
		DeferLoading bool `json:"defer_loading"`
	} `json:"tools"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (anthropic) parse(body []byte) (*Conversation, error) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("request body is not a Messages request: %v", err)
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(req.Messages, &msgs); err != nil || len(msgs) == 0 {
		return nil, fmt.Errorf("messages: want a non-empty array of messages")
	}
	c := &Conversation{Model: req.Model, stream: req.Stream}
	sys, err := anthropicText(req.System)
	if err != nil {
		return nil, fmt.Errorf("system: %v", err)
	}
	c.System = sys
	c.promptSize = len(req.Messages) + len(sys)
	var all strings.Builder
	for i, m := range msgs {
		blocks, err := anthropicBlocks(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %v", i, err)
		}
		switch m.Role {
		case "user", "assistant":
		case "system": // newer models take system messages among the others (claude-code's default model does)
			for _, b := range blocks {
				c.System += "\n" + b.Text
			}
			continue
		default:
			return nil, fmt.Errorf("messages[%d].role: %q is not user, assistant or system", i, m.Role)
		}
		msg := Message{Role: m.Role}
		var text []string
		for _, b := range blocks {
			switch b.Type {
			case "text":
				text = append(text, b.Text)
			case "tool_use":
				msg.Calls = append(msg.Calls, Call{ID: b.ID, Tool: b.Name, Input: b.Input})
			case "tool_result":
				content, err := anthropicText(b.Content)
				if err != nil {
					return nil, fmt.Errorf("messages[%d] tool_result: %v", i, err)
				}
				content = strings.TrimSpace(reminderRE.ReplaceAllString(content, ""))
				msg.Results = append(msg.Results, Result{CallID: b.ToolUseID, Content: content, IsError: b.IsError})
			}
		}
		msg.Text = strings.Join(text, "\n")
		all.WriteString(msg.Text + "\n")
		c.Messages = append(c.Messages, msg)
	}
	c.text = all.String()
	for _, t := range req.Tools {
		props := map[string]bool{}
		for p := range t.InputSchema.Properties {
			props[p] = true
		}
		c.Tools = append(c.Tools, Tool{Name: t.Name, Props: props, Deferred: t.DeferLoading})
	}
	return c, nil
}

// reminderRE matches the context claude-code adds to tool results
// ("<system-reminder>…</system-reminder>"), which is not the tool's output.
var reminderRE = regexp.MustCompile(`(?s)<system-reminder>.*?</system-reminder>`)

// anthropicBlocks reads a content: a string or an array of blocks.
func anthropicBlocks(raw json.RawMessage) ([]anthropicBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, fmt.Errorf("want a string or an array of content blocks")
	}
	return blocks, nil
}

// anthropicText is a content's text: its text blocks, and the JSON of the
// others (a tool search's tool references), one per line.
func anthropicText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", fmt.Errorf("want a string or an array of content blocks")
	}
	var parts []string
	for _, b := range blocks {
		var tb anthropicBlock
		if err := json.Unmarshal(b, &tb); err != nil {
			return "", fmt.Errorf("want an array of content blocks")
		}
		if tb.Type == "text" {
			parts = append(parts, tb.Text)
		} else {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n"), nil
}

func (anthropic) fail(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, errorBody(typ, msg))
}

func (anthropic) failure(w http.ResponseWriter, f Failure) {
	writeJSON(w, f.Status, errorBody(f.Type, f.Message))
}

func (anthropic) write(w http.ResponseWriter, c *Conversation, t Turn, u Usage, hang <-chan struct{}) {
	stop := "end_turn"
	if len(t.Calls) > 0 {
		stop = "tool_use"
	}
	id := fmt.Sprintf("msg_fake_%d", messageSeq.Add(1))
	if !c.stream {
		content := []any{}
		if t.Text != "" {
			content = append(content, map[string]any{"type": "text", "text": t.Text})
		}
		for _, call := range t.Calls {
			content = append(content, map[string]any{"type": "tool_use", "id": call.ID, "name": call.Tool, "input": call.Input})
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "type": "message", "role": "assistant", "model": c.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": u.Input, "cache_creation_input_tokens": u.CacheWrite,
				"cache_read_input_tokens": u.CacheRead, "output_tokens": u.Output}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(event string, data any) {
		b, err := json.Marshal(data)
		if err != nil {
			panic(fmt.Sprintf("fakemodel: event %s: %v", event, err)) // built here from plain values
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		_ = rc.Flush()
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant",
		"model": c.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.Input, "cache_creation_input_tokens": u.CacheWrite,
			"cache_read_input_tokens": u.CacheRead, "output_tokens": 0},
	}})
	if t.Fail != nil { // in the stream
		send("error", errorBody(t.Fail.Type, t.Fail.Message))
		return
	}
	index := 0
	if t.Text != "" || t.Hang == HangMidStream {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "text", "text": ""}})
		if t.Hang == HangMidStream {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "text_delta", "text": "Working on it"}})
			<-hang
			return
		}
		for _, part := range pieces(t.Text) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "text_delta", "text": part}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for _, call := range t.Calls {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": call.ID, "name": call.Tool, "input": map[string]any{}}})
		for _, part := range pieces(string(call.Input)) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.Output}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// pieces cuts s into chunks of at most chunk bytes, on rune boundaries.
func pieces(s string) []string {
	var out []string
	for len(s) > chunk {
		n := chunk
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
