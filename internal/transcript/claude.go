package transcript

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/runproto"
)

// claude-code's stream-json lines (docs: the CLI's --output-format
// stream-json --verbose): system, assistant and user lines carrying a
// Messages API message, and the final result line.
type claudeLine struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Message   struct {
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	IsError        bool    `json:"is_error"`
	TerminalReason string  `json:"terminal_reason"`
	Subtype        string  `json:"subtype"`
	Result         string  `json:"result"`
	TotalCostUSD   float64 `json:"total_cost_usd"`
	Usage          struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	} `json:"usage"`
	ModelUsage map[string]modelUsage `json:"modelUsage"`
}

// modelUsage is what one model served of a session (the result line's
// modelUsage, by model).
type modelUsage struct {
	CostUSD float64 `json:"costUSD"`
}

type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// synthetic is the model claude-code names on the messages it makes up
// itself (an API error's text): no model served them.
const synthetic = "<synthetic>"

func (p *Parser) claude(b []byte) {
	var l claudeLine
	if json.Unmarshal(b, &l) != nil {
		return
	}
	at := rfc3339(l.Timestamp)
	switch l.Type {
	case "assistant":
		for _, blk := range claudeBlocks(l.Message.Content) {
			switch blk.Type {
			case "text":
				if strings.TrimSpace(blk.Text) != "" {
					p.add(TranscriptEntry{Kind: KindText, Time: at, Text: blk.Text, IsError: l.Message.Model == synthetic})
				}
			case "tool_use":
				p.tools[blk.ID] = blk.Name
				p.add(call(at, blk.ID, blk.Name, blk.Input, claudeReport, claudeQuestion))
			}
		}
	case "user":
		for _, blk := range claudeBlocks(l.Message.Content) {
			if blk.Type == "tool_result" {
				p.add(TranscriptEntry{Kind: KindToolResult, Time: at, ID: blk.ToolUseID, Tool: p.tools[blk.ToolUseID],
					Text: resultText(blk.Content), IsError: blk.IsError})
			}
		}
	case "result":
		u := l.Usage
		p.add(TranscriptEntry{Kind: KindUsage, Time: at, Model: mainModel(l.ModelUsage), Usage: &runproto.Usage{InputTokens: u.InputTokens,
			OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens,
			CostUSD: l.TotalCostUSD}})
		if l.IsError || (l.TerminalReason != "" && l.TerminalReason != "completed") {
			msg := strings.TrimSpace(l.Result)
			if msg == "" {
				msg = "the session ended in error (" + l.Subtype + ")"
			}
			if l.TerminalReason != "" && l.TerminalReason != "completed" {
				msg += " (terminal_reason " + l.TerminalReason + ")"
			}
			p.add(TranscriptEntry{Kind: KindText, Time: at, Text: msg, IsError: true})
		}
	}
}

// claudeBlocks decodes a message's content: a list of blocks (a plain
// string has none).
func claudeBlocks(raw json.RawMessage) []claudeBlock {
	var bs []claudeBlock
	if json.Unmarshal(raw, &bs) != nil {
		return nil
	}
	return bs
}

// resultText is a tool result's content as text: a string, or the text of
// its text blocks (an image or another block is named by its type).
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []string
	for _, b := range claudeBlocks(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		} else if b.Type != "" {
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// mainModel is the model of modelUsage that cost the most (by name when
// even): the one that served the session ("" for none).
func mainModel(m map[string]modelUsage) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	best := ""
	for _, n := range names {
		if best == "" || m[n].CostUSD > m[best].CostUSD {
			best = n
		}
	}
	return best
}

// rfc3339 is a timestamp the CLI printed (nil for none or a bad one).
func rfc3339(s string) *time.Time {
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	t = t.UTC()
	return &t
}
