package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/runproto"
)

// Output reads a session's stdout, one NDJSON line at a time, and tells
// what it learnt. Lines that are no JSON, or of unknown types, are
// skipped.
type Output interface {
	// Line takes one line of output (truncated: it was cut, and is only
	// its beginning).
	Line(line []byte, truncated bool) Event
	// Served tells the output what the model API served the session so
	// far, as Ballet's meter counted it (internal/runner/meter): Result's
	// usage is never less, and the tokens the CLI did not tell are priced.
	Served(u runproto.Usage)
	// Result is what the output told so far.
	Result() Result
}

// served is what a meter counted of a session's usage.
type served struct{ u runproto.Usage }

func (s *served) Served(u runproto.Usage) { s.u = u }

// floor is told raised to what the model served, field by field; the
// tokens the CLI did not tell cost what price makes of them.
func (s *served) floor(told runproto.Usage, price func(runproto.Usage) float64) runproto.Usage {
	extra := runproto.Usage{InputTokens: max(0, s.u.InputTokens-told.InputTokens), OutputTokens: max(0, s.u.OutputTokens-told.OutputTokens),
		CacheReadTokens: max(0, s.u.CacheReadTokens-told.CacheReadTokens), CacheWriteTokens: max(0, s.u.CacheWriteTokens-told.CacheWriteTokens)}
	if extra == (runproto.Usage{}) {
		return told
	}
	told.InputTokens += extra.InputTokens
	told.OutputTokens += extra.OutputTokens
	told.CacheReadTokens += extra.CacheReadTokens
	told.CacheWriteTokens += extra.CacheWriteTokens
	told.CostUSD += price(extra)
	return told
}

// Event is what one line means to the runner.
type Event struct {
	// Final: the CLI printed its final line; it should exit now.
	Final bool
	// Abort, when set, says why the session cannot succeed and should be
	// stopped at once (Core's MCP endpoint did not connect).
	Abort string
	// Quiet: the line only feeds the usage (one of claude-code's raw
	// stream events, a few per token): it stays out of the session's log,
	// whose assistant lines tell the same.
	Quiet bool
}

// Result is what a session's output told.
type Result struct {
	Usage runproto.Usage
	// Final: the CLI printed its final line (claude-code's result line;
	// opencode has none).
	Final bool
	// Error is the CLI's own account of a failure ("" for none):
	// claude-code's is_error result or a terminal_reason other than
	// completed, opencode's error events.
	Error string
	// Report is the submit_report call that went through, nil when none
	// did (Core has the report; this is what the session saw).
	Report *Report
	// SessionID is the CLI's session id.
	SessionID string
	// Denied counts tool calls the CLI refused (claude-code's
	// permission_denials).
	Denied int
	// Model is the model that served the session: the one the model API
	// named in its answers (claude-code), else the one the CLI was told
	// or said it uses ("" when none is known).
	Model string
	// Limit, when set, says that the session's error (Error) is the model
	// provider's refusal: a rate limit, an overload or an exhausted quota,
	// with the reset time when the CLI printed one.
	Limit *Limit
}

// Report is a submit_report call.
type Report struct {
	Outcome string `json:"outcome"`
	Summary string `json:"summary"`
}

// maxError bounds Result.Error.
const maxError = 8 << 10

// The names of Ballet's submit_report tool in each CLI.
const (
	claudeReportTool   = "mcp__ballet__submit_report"
	opencodeReportTool = "ballet_submit_report"
)

// claudeOutput reads claude-code's stream-json output.
type claudeOutput struct {
	served
	res     Result
	pending map[string]Report // submit_report calls by id, until their result
	// turns is the usage of each model answer (by message id) as its
	// stream events (message_start, then message_delta with the output
	// tokens, printed before the answer's tool calls run) and its assistant
	// lines (input and cache tokens only) tell, the largest of each figure.
	// Only a session stopped before its result line uses it.
	turns map[string]runproto.Usage
	// model is the model the session was told to use, then the one its
	// init line names: what prices the usage the CLI did not.
	model string
	// served is the model the model API named in its answers (not
	// claude-code's own "<synthetic>" messages).
	servedBy string
	// apiError is the error kind of the last API error claude-code told
	// on an assistant line ("rate_limit", "billing_error" …).
	apiError string
}

type claudeLine struct {
	Type       string `json:"type"`
	Subtype    string `json:"subtype"`
	SessionID  string `json:"session_id"`
	Model      string `json:"model"`
	MCPServers []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"mcp_servers"`
	Message struct {
		ID      string          `json:"id"`
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
		Usage   *claudeUsage    `json:"usage"`
	} `json:"message"`
	IsError           bool              `json:"is_error"`
	TerminalReason    string            `json:"terminal_reason"`
	Result            string            `json:"result"`
	TotalCostUSD      float64           `json:"total_cost_usd"`
	Usage             claudeUsage       `json:"usage"`
	PermissionDenials []json.RawMessage `json:"permission_denials"`
	// An API error: on the assistant line claude-code makes of it (with
	// is_api_error_message and error, such as "rate_limit") and on the
	// result line.
	IsAPIErrorMessage bool   `json:"is_api_error_message"`
	ErrorKind         string `json:"error"`
	APIErrorStatus    int    `json:"api_error_status"`
	APIErrorType      string `json:"api_error_type"`
	// A stream_event line (--include-partial-messages): one event of the
	// model's answer api_message_id, as the Messages API streamed it.
	APIMessageID string `json:"api_message_id"`
	Event        struct {
		Type    string `json:"type"`
		Message struct {
			ID    string       `json:"id"`
			Usage *claudeUsage `json:"usage"`
		} `json:"message"`
		Usage *claudeUsage `json:"usage"`
	} `json:"event"`
}

type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

func (u claudeUsage) usage() runproto.Usage {
	return runproto.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
}

type claudeBlock struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
}

func (o *claudeOutput) Line(b []byte, truncated bool) Event {
	if truncated {
		return Event{}
	}
	var l claudeLine
	if json.Unmarshal(b, &l) != nil {
		return Event{}
	}
	if l.SessionID != "" && o.res.SessionID == "" {
		o.res.SessionID = l.SessionID
	}
	switch l.Type {
	case "system":
		if l.Subtype != "init" {
			return Event{}
		}
		if l.Model != "" {
			o.model = l.Model
		}
		status := "missing"
		for _, s := range l.MCPServers {
			if s.Name == "ballet" {
				status = s.Status
			}
		}
		switch status {
		case "failed", "needs-auth", "missing":
		default:
			return Event{}
		}
		return Event{Abort: fmt.Sprintf("claude-code could not connect to Core's MCP endpoint (ballet: %s): the session would run without Ballet's tools", status)}
	case "stream_event":
		switch l.Event.Type {
		case "message_start":
			o.turn(or(l.Event.Message.ID, l.APIMessageID), l.Event.Message.Usage)
		case "message_delta":
			o.turn(l.APIMessageID, l.Event.Usage)
		}
		return Event{Quiet: true}
	case "assistant":
		if l.IsAPIErrorMessage {
			o.apiError = l.ErrorKind
		}
		o.turn(l.Message.ID, l.Message.Usage)
		if m := l.Message.Model; m != "" && m != "<synthetic>" {
			o.servedBy = m
		}
		for _, blk := range blocks(l.Message.Content) {
			if blk.Type == "tool_use" && blk.Name == claudeReportTool {
				var r Report
				if json.Unmarshal(blk.Input, &r) == nil {
					o.pending[blk.ID] = r
				}
			}
		}
	case "user":
		for _, blk := range blocks(l.Message.Content) {
			if r, ok := o.pending[blk.ToolUseID]; ok && blk.Type == "tool_result" {
				delete(o.pending, blk.ToolUseID)
				if !blk.IsError {
					o.res.Report = &r
				}
			}
		}
	case "result":
		o.res.Final = true
		o.res.Usage = l.Usage.usage()
		o.res.Usage.CostUSD = l.TotalCostUSD
		o.res.Denied = len(l.PermissionDenials)
		if l.IsError || (l.TerminalReason != "" && l.TerminalReason != "completed") {
			msg := strings.TrimSpace(l.Result)
			if msg == "" {
				msg = "the session ended in error (" + or(l.Subtype, "no detail") + ")"
			}
			if l.TerminalReason != "" && l.TerminalReason != "completed" {
				msg += " (terminal_reason " + l.TerminalReason + ")"
			}
			o.res.Error = cut("claude-code: "+msg, maxError)
			if l.TerminalReason == "api_error" || l.APIErrorStatus != 0 {
				o.res.Limit = claudeLimit(o.apiError, l.APIErrorStatus, l.APIErrorType)
			}
		}
		return Event{Final: true}
	}
	return Event{}
}

// turn records what a line told of the usage of model answer id: each
// figure is the answer's running total, so the largest counts.
func (o *claudeOutput) turn(id string, u *claudeUsage) {
	if u == nil || id == "" {
		return
	}
	t, v := o.turns[id], u.usage()
	o.turns[id] = runproto.Usage{InputTokens: max(t.InputTokens, v.InputTokens), OutputTokens: max(t.OutputTokens, v.OutputTokens),
		CacheReadTokens: max(t.CacheReadTokens, v.CacheReadTokens), CacheWriteTokens: max(t.CacheWriteTokens, v.CacheWriteTokens)}
}

// Result is what the output told. Without a result line (the session was
// stopped) the usage is the sum of the model answers' usage as their
// stream events and assistant lines told: every token of each answer the
// model finished streaming, and the input and cache tokens of one it was
// still streaming (its output tokens are told at its end). Whenever the CLI told no cost for tokens, they are priced at the
// model's list prices (ListPrices): a session that was stopped costs what
// it used.
func (o *claudeOutput) Result() Result {
	r := o.res
	r.Model = or(o.servedBy, o.model)
	if !r.Final {
		r.Usage = runproto.Usage{}
		for _, t := range o.turns {
			r.Usage.InputTokens += t.InputTokens
			r.Usage.OutputTokens += t.OutputTokens
			r.Usage.CacheReadTokens += t.CacheReadTokens
			r.Usage.CacheWriteTokens += t.CacheWriteTokens
		}
	}
	p, _ := ListPrices(o.model)
	if r.Usage.CostUSD == 0 {
		r.Usage.CostUSD = p.Cost(r.Usage)
	}
	r.Usage = o.floor(r.Usage, p.Cost)
	return r
}

// blocks decodes a message's content: a list of blocks (a plain string has
// none).
func blocks(raw json.RawMessage) []claudeBlock {
	var bs []claudeBlock
	if json.Unmarshal(raw, &bs) != nil {
		return nil
	}
	return bs
}

// opencodeOutput reads opencode's --format json output.
type opencodeOutput struct {
	served
	res    Result
	errors []string
	model  string // the session's provider/model
	prices Prices // the configured prices; none: the model's list prices
}

type opencodeLine struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionID"`
	Part      struct {
		Tool   string `json:"tool"`
		Tokens struct {
			Input     int64 `json:"input"`
			Output    int64 `json:"output"`
			Reasoning int64 `json:"reasoning"`
			Cache     struct {
				Read  int64 `json:"read"`
				Write int64 `json:"write"`
			} `json:"cache"`
		} `json:"tokens"`
		Cost  float64 `json:"cost"`
		State struct {
			Status string          `json:"status"`
			Input  json.RawMessage `json:"input"`
		} `json:"state"`
	} `json:"part"`
	Timestamp int64 `json:"timestamp"` // Unix milliseconds
	Error     *struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
			// An APIError's HTTP status, the provider's headers and body.
			StatusCode      int               `json:"statusCode"`
			ResponseHeaders map[string]string `json:"responseHeaders"`
			ResponseBody    string            `json:"responseBody"`
		} `json:"data"`
	} `json:"error"`
}

func (o *opencodeOutput) Line(b []byte, truncated bool) Event {
	if truncated {
		return Event{}
	}
	var l opencodeLine
	if json.Unmarshal(b, &l) != nil {
		return Event{}
	}
	if l.SessionID != "" && o.res.SessionID == "" {
		o.res.SessionID = l.SessionID
	}
	switch l.Type {
	case "step_finish":
		t := l.Part.Tokens
		u := &o.res.Usage
		u.InputTokens += t.Input
		u.OutputTokens += t.Output + t.Reasoning // reasoning is billed as output
		u.CacheReadTokens += t.Cache.Read
		u.CacheWriteTokens += t.Cache.Write
		u.CostUSD += o.cost(l.Part.Cost, runproto.Usage{InputTokens: t.Input, OutputTokens: t.Output + t.Reasoning,
			CacheReadTokens: t.Cache.Read, CacheWriteTokens: t.Cache.Write})
	case "tool_use":
		if l.Part.Tool == opencodeReportTool && l.Part.State.Status == "completed" {
			var r Report
			if json.Unmarshal(l.Part.State.Input, &r) == nil {
				o.res.Report = &r
			}
		}
	case "error":
		msg := "an error event without detail"
		if e := l.Error; e != nil {
			msg = strings.TrimSpace(e.Name + ": " + e.Data.Message)
		}
		o.errors = append(o.errors, msg)
		o.res.Error = cut("opencode: "+strings.Join(o.errors, "; "), maxError)
		o.res.Limit = nil
		if e := l.Error; e != nil && e.Name == "APIError" {
			if lim := opencodeLimit(e.Data.StatusCode, e.Data.Message, e.Data.ResponseBody); lim != nil {
				lim.Reset(e.Data.ResponseHeaders, time.UnixMilli(l.Timestamp))
				o.res.Limit = lim
			}
		}
	}
	return Event{}
}

// Result is what the output told: the usage is the sum of the steps that
// finished, or what the model served when that is more (a step still
// under way when the session was stopped: opencode tells a step's tokens
// only after its tool calls ran).
func (o *opencodeOutput) Result() Result {
	r := o.res
	r.Model = o.model
	r.Usage = o.floor(r.Usage, func(u runproto.Usage) float64 { return o.cost(0, u) })
	return r
}

// cost is a step's cost: opencode's own figure, or when it told none for
// the step's tokens (a model it has no prices for), the configured prices,
// else the list prices of a Claude model. A model of no known family
// without configured prices stays free, as the configuration declares it
// (an OpenAI-compatible provider's model with no prices).
func (o *opencodeOutput) cost(told float64, u runproto.Usage) float64 {
	if told != 0 {
		return told
	}
	if o.prices.set() {
		return o.prices.Cost(u)
	}
	if p, ok := ListPrices(o.model); ok {
		return p.Cost(u)
	}
	return 0
}

// cut shortens s to at most n bytes of valid UTF-8, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "…"
}
