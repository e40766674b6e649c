package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// openAI is OpenAI chat completions (POST /v1/chat/completions, streamed).
type openAI struct{}

func (openAI) name() string { return "openai" }

type openAIRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	Messages json.RawMessage `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string `json:"name"`
			Parameters struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

type openAIMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

func (openAI) parse(body []byte) (*Conversation, error) {
	var req openAIRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("request body is not a chat completions request: %v", err)
	}
	var msgs []openAIMessage
	if err := json.Unmarshal(req.Messages, &msgs); err != nil || len(msgs) == 0 {
		return nil, fmt.Errorf("messages: want a non-empty array of messages")
	}
	c := &Conversation{Model: req.Model, stream: req.Stream}
	var system, all []string
	for i, m := range msgs {
		text, err := openAIText(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %v", i, err)
		}
		switch m.Role {
		case "system", "developer":
			system = append(system, text)
		case "user":
			c.Messages = append(c.Messages, Message{Role: "user", Text: text})
			all = append(all, text)
		case "assistant":
			msg := Message{Role: "assistant", Text: text}
			for _, tc := range m.ToolCalls {
				msg.Calls = append(msg.Calls, Call{ID: tc.ID, Tool: tc.Function.Name, Input: json.RawMessage(tc.Function.Arguments)})
			}
			c.Messages = append(c.Messages, msg)
		case "tool":
			r := Result{CallID: m.ToolCallID, Content: text}
			// Consecutive tool messages answer one assistant turn.
			if n := len(c.Messages); n > 0 && c.Messages[n-1].Role == "user" && len(c.Messages[n-1].Results) > 0 && c.Messages[n-1].Text == "" {
				c.Messages[n-1].Results = append(c.Messages[n-1].Results, r)
			} else {
				c.Messages = append(c.Messages, Message{Role: "user", Results: []Result{r}})
			}
		default:
			return nil, fmt.Errorf("messages[%d].role: unknown role %q", i, m.Role)
		}
	}
	c.System = strings.Join(system, "\n")
	c.text = strings.Join(all, "\n")
	c.promptSize = len(req.Messages)
	for _, t := range req.Tools {
		props := map[string]bool{}
		for p := range t.Function.Parameters.Properties {
			props[p] = true
		}
		c.Tools = append(c.Tools, Tool{Name: t.Function.Name, Props: props})
	}
	return c, nil
}

// openAIText reads a content: a string, null, or an array of parts.
func openAIText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("want a string or an array of content parts")
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

func (openAI) fail(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, errorBody(typ, msg))
}

// failure answers in OpenAI's error format: {"error": {message, type,
// param, code}}.
func (openAI) failure(w http.ResponseWriter, f Failure) {
	var code any
	if f.Code != "" {
		code = f.Code
	}
	writeJSON(w, f.Status, map[string]any{"error": map[string]any{"message": f.Message, "type": f.Type, "param": nil, "code": code}})
}

func (openAI) write(w http.ResponseWriter, c *Conversation, t Turn, u Usage, hang <-chan struct{}) {
	id := fmt.Sprintf("chatcmpl-fake-%d", messageSeq.Add(1))
	finish := "stop"
	if len(t.Calls) > 0 {
		finish = "tool_calls"
	}
	prompt := u.Input + u.CacheRead + u.CacheWrite
	usage := map[string]any{"prompt_tokens": prompt, "completion_tokens": u.Output,
		"total_tokens": prompt + u.Output, "prompt_tokens_details": map[string]any{"cached_tokens": u.CacheRead}}
	if !c.stream {
		msg := map[string]any{"role": "assistant", "content": nil}
		if t.Text != "" {
			msg["content"] = t.Text
		}
		var calls []any
		for _, call := range t.Calls {
			calls = append(calls, map[string]any{"id": call.ID, "type": "function",
				"function": map[string]any{"name": call.Tool, "arguments": string(call.Input)}})
		}
		if calls != nil {
			msg["tool_calls"] = calls
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": 1735689600,
			"model": c.Model, "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(data any) {
		b, err := json.Marshal(data)
		if err != nil {
			panic(fmt.Sprintf("fakemodel: chunk: %v", err)) // built here from plain values
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
		_ = rc.Flush()
	}
	delta := func(d map[string]any, finish any) {
		send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1735689600, "model": c.Model,
			"choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish}}})
	}
	delta(map[string]any{"role": "assistant", "content": ""}, nil)
	if t.Fail != nil { // in the stream
		send(errorBody(t.Fail.Type, t.Fail.Message))
		return
	}
	if t.Hang == HangMidStream {
		delta(map[string]any{"content": "Working on it"}, nil)
		<-hang
		return
	}
	for _, part := range pieces(t.Text) {
		delta(map[string]any{"content": part}, nil)
	}
	for i, call := range t.Calls {
		delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": call.ID, "type": "function",
			"function": map[string]any{"name": call.Tool, "arguments": ""}}}}, nil)
		for _, part := range pieces(string(call.Input)) {
			delta(map[string]any{"tool_calls": []any{map[string]any{"index": i,
				"function": map[string]any{"arguments": part}}}}, nil)
		}
	}
	delta(map[string]any{}, finish)
	send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1735689600, "model": c.Model,
		"choices": []any{}, "usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}
