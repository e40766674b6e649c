package transcript

import (
	"encoding/json"
	"strings"

	"github.com/ballet/ballet/internal/runproto"
)

// opencode's --format json lines: step_start, text, tool_use (a finished
// tool call, with its input and output), step_finish (the step's tokens
// and cost) and error, each with its timestamp in Unix milliseconds.
type opencodeLine struct {
	Type      string `json:"type"`
	Timestamp int64  `json:"timestamp"`
	Part      struct {
		Text   string `json:"text"`
		Tool   string `json:"tool"`
		CallID string `json:"callID"`
		State  struct {
			Status string          `json:"status"`
			Input  json.RawMessage `json:"input"`
			Output string          `json:"output"`
			Error  string          `json:"error"`
		} `json:"state"`
		Tokens struct {
			Input     int64 `json:"input"`
			Output    int64 `json:"output"`
			Reasoning int64 `json:"reasoning"`
			Cache     struct {
				Read  int64 `json:"read"`
				Write int64 `json:"write"`
			} `json:"cache"`
		} `json:"tokens"`
		Cost float64 `json:"cost"`
	} `json:"part"`
	Error *struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
	} `json:"error"`
}

func (p *Parser) opencode(b []byte) {
	var l opencodeLine
	if json.Unmarshal(b, &l) != nil {
		return
	}
	at := millis(l.Timestamp)
	switch l.Type {
	case "text":
		if strings.TrimSpace(l.Part.Text) != "" {
			p.add(TranscriptEntry{Kind: KindText, Time: at, Text: l.Part.Text})
		}
	case "tool_use":
		st := l.Part.State
		p.add(call(at, l.Part.CallID, l.Part.Tool, st.Input, openReport, openQuestion))
		switch st.Status {
		case "completed":
			p.add(TranscriptEntry{Kind: KindToolResult, Time: at, ID: l.Part.CallID, Tool: l.Part.Tool, Text: st.Output})
		case "error":
			p.add(TranscriptEntry{Kind: KindToolResult, Time: at, ID: l.Part.CallID, Tool: l.Part.Tool, Text: st.Error, IsError: true})
		}
	case "step_finish":
		t := l.Part.Tokens
		p.add(TranscriptEntry{Kind: KindUsage, Time: at, Usage: &runproto.Usage{InputTokens: t.Input, OutputTokens: t.Output + t.Reasoning,
			CacheReadTokens: t.Cache.Read, CacheWriteTokens: t.Cache.Write, CostUSD: l.Part.Cost}})
	case "error":
		msg := "an error event without detail"
		if e := l.Error; e != nil {
			msg = strings.TrimSpace(e.Name + ": " + e.Data.Message)
		}
		p.add(TranscriptEntry{Kind: KindText, Time: at, Text: msg, IsError: true})
	}
}
