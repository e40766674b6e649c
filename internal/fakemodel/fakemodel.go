// Package fakemodel is a scripted model server: it speaks the Anthropic
// Messages API and OpenAI chat completions, both streamed (SSE), well
// enough for the real claude-code and opencode CLIs to run whole sessions
// against it offline. A marker in the prompt,
// [[ballet-scenario:NAME key=value …]], picks the scenario that plays the
// session turn by turn, deciding each turn from the conversation so far
// (Scenarios lists them; DefaultScenario plays without a marker). Tool
// names are found by role in each request (the MCP tool named
// submit_report, a shell tool, a write tool), so one script serves both
// CLIs; claude-code's deferred MCP tools are loaded with its ToolSearch
// tool first.
//
// Token counts are exact and deterministic (see Usage), and the server
// keeps per-session counters a test reads (Sessions, Wait) to check the
// usage a CLI reported against what was served. It backs the agent tests
// and `ballet dev fake-model`.
package fakemodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxBody bounds a request body: a session's whole history, which the
// huge-line scenario makes tens of MB.
const maxBody = 256 << 20

// Usage counts tokens the way the Anthropic API reports them: Input
// excludes the cached part of the prompt.
//
// A prompt of P tokens is ceil(bytes/4) of the request's messages (as JSON)
// plus its system text; the system text's ceil(bytes/4) tokens are cached:
// written the first time a session sends it (CacheWrite), read afterwards
// (CacheRead), and Input is the rest. Over OpenAI there is no cache write:
// the first time they are plain input. Output is ceil(bytes/4) of the text
// plus each call's input JSON, at least 1.
type Usage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cache_read"`
	CacheWrite int64 `json:"cache_write"`
}

func (u *Usage) add(v Usage) {
	u.Input += v.Input
	u.Output += v.Output
	u.CacheRead += v.CacheRead
	u.CacheWrite += v.CacheWrite
}

// Session is what the server saw and served in one CLI session (requests
// with the same session header).
type Session struct {
	// ID is the client's session id: claude-code's X-Claude-Code-Session-Id
	// (its --session-id), opencode's X-Session-Id; "" for clients that send
	// none.
	ID string `json:"id"`
	// Scenario is the scenario that played it; Params its marker's
	// parameters.
	Scenario string            `json:"scenario"`
	Params   map[string]string `json:"params,omitempty"`
	// API is "anthropic" or "openai".
	API string `json:"api"`
	// Turns counts the turns served to requests that offered tools (the
	// session's own steps); Usage is their tokens.
	Turns int   `json:"turns"`
	Usage Usage `json:"usage"`
	// AuxTurns and AuxUsage count requests without tools: title
	// generation and the like, which opencode does not count in its steps.
	AuxTurns int   `json:"aux_turns"`
	AuxUsage Usage `json:"aux_usage"`
	// Errors counts API errors served; Hangs requests left hanging.
	Errors int `json:"errors"`
	Hangs  int `json:"hangs"`
	// Calls are the tool calls the model made, in order.
	Calls []Call `json:"calls,omitempty"`
	// Results are the tool results that came back, in order (content cut
	// to 2 KiB).
	Results []Result `json:"results,omitempty"`
	// Problems are scenario errors the model answered with as text (no
	// shell tool offered, an unknown scenario …).
	Problems []string `json:"problems,omitempty"`

	cached map[string]bool // system texts already sent (the prompt cache)
}

// Server is the fake model server: an http.Handler. Close releases
// hanging requests; call it before closing the HTTP server.
type Server struct {
	// Log, if set, gets a line per request.
	Log *slog.Logger
	// Default is the scenario played without a marker (DefaultScenario
	// when empty).
	Default string
	// Dump, if set, is a folder that gets every model request's body, as
	// NNNN-<api>.json: what a CLI sends, for writing an adapter.
	Dump string

	// Now, if set, is the clock the rate-limit scenario's durations and
	// reset times are taken from (time.Now when nil).
	Now func() time.Time

	scenarios map[string]Scenario
	limits    limits
	dumped    atomic.Int64
	done      chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	sessions map[string]*Session
	order    []string
	changed  chan struct{} // closed and replaced on every change
}

// New returns a server playing the built-in scenarios.
func New() *Server {
	return &Server{
		scenarios: Scenarios(),
		done:      make(chan struct{}),
		sessions:  map[string]*Session{},
		changed:   make(chan struct{}),
	}
}

// Close releases every hanging request; later ones do not hang.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
}

// Sessions returns a copy of every session seen, in order of first request.
func (s *Server) Sessions() []Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Session, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.sessions[id].copy())
	}
	return out
}

// Session returns a copy of the session with the client's id.
func (s *Server) Session(id string) (Session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[id]
	if !ok {
		return Session{}, false
	}
	return ss.copy(), true
}

// Wait returns the sessions once cond holds for them, checking after every
// change, or ctx's error.
func (s *Server) Wait(ctx context.Context, cond func([]Session) bool) ([]Session, error) {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if all := s.Sessions(); cond(all) {
			return all, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return s.Sessions(), ctx.Err()
		}
	}
}

func (ss *Session) copy() Session {
	c := *ss
	c.Calls = append([]Call(nil), ss.Calls...)
	c.Results = append([]Result(nil), ss.Results...)
	c.Problems = append([]string(nil), ss.Problems...)
	c.cached = nil
	return c
}

// update changes the session id under the lock and wakes waiters.
func (s *Server) update(id string, f func(*Session)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[id]
	if !ok {
		ss = &Session{ID: id, cached: map[string]bool{}}
		s.sessions[id] = ss
		s.order = append(s.order, id)
	}
	f(ss)
	close(s.changed)
	s.changed = make(chan struct{})
}

// dialect is one wire API.
type dialect interface {
	name() string
	// parse reads a request body into a conversation.
	parse(body []byte) (*Conversation, error)
	// write streams turn t with its usage.
	write(w http.ResponseWriter, c *Conversation, t Turn, u Usage, hang <-chan struct{})
	// fail answers with an error (before any streaming).
	fail(w http.ResponseWriter, status int, typ, msg string)
	// failure answers with a scripted failure, in the API's own error
	// format.
	failure(w http.ResponseWriter, f Failure)
}

// ServeHTTP answers POST /v1/messages (Anthropic), POST
// /v1/messages/count_tokens, POST /v1/chat/completions (OpenAI, also
// without /v1) and GET /v1/models.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	var d dialect
	switch path {
	case "/v1/messages":
		d = anthropic{}
	case "/v1/chat/completions", "/chat/completions":
		d = openAI{}
	case "/v1/messages/count_tokens":
		s.countTokens(w, r)
		return
	case "/v1/models", "/models":
		s.models(w, r)
		return
	default:
		writeJSON(w, http.StatusNotFound, errorBody("not_found_error",
			fmt.Sprintf("fake model: no endpoint %s %s (it serves POST /v1/messages, POST /v1/chat/completions, GET /v1/models)", r.Method, r.URL.Path)))
		return
	}
	if r.Method != http.MethodPost {
		d.fail(w, http.StatusMethodNotAllowed, "invalid_request_error", "fake model: "+r.URL.Path+" takes POST")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		status := http.StatusBadRequest
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			status = http.StatusRequestEntityTooLarge
		}
		d.fail(w, status, "invalid_request_error", fmt.Sprintf("fake model: read the request body: %v", err))
		return
	}
	if s.Dump != "" {
		name := filepath.Join(s.Dump, fmt.Sprintf("%04d-%s.json", s.dumped.Add(1), d.name()))
		if err := os.WriteFile(name, body, 0o600); err != nil && s.Log != nil {
			s.Log.Warn("fake model: dump a request", "err", err)
		}
	}
	c, err := d.parse(body)
	if err != nil {
		d.fail(w, http.StatusBadRequest, "invalid_request_error", "fake model: "+err.Error())
		return
	}
	s.serveTurn(w, r, d, c)
}

func (s *Server) serveTurn(w http.ResponseWriter, r *http.Request, d dialect, c *Conversation) {
	id := sessionID(r)
	name, params := c.marker()
	if name == "" {
		name = s.Default
		if name == "" {
			name = DefaultScenario
		}
	}
	c.Params = params
	c.api = d.name()
	c.limits = &s.limits
	c.now = s.now()
	c.nameResults()
	c.findDeferred()

	aux := len(c.Tools) == 0
	var t Turn
	var problem error
	switch sc, ok := s.scenarios[name]; {
	case aux:
		t = Turn{Text: "Ballet fake session"} // opencode's title call, and the like
	case !ok:
		problem = fmt.Errorf("unknown scenario %q (known: %s)", name, strings.Join(ScenarioNames(), ", "))
	default:
		t, problem = sc.Next(c)
	}
	if problem != nil {
		t = Turn{Text: "fake model: " + problem.Error()}
	}
	if !aux {
		t = s.loadDeferred(c, t)
	}
	answered := 0 // assistant messages so far: call ids stay unique across tool searches
	for _, m := range c.Messages {
		if m.Role == "assistant" {
			answered++
		}
	}
	for i := range t.Calls {
		t.Calls[i].ID = fmt.Sprintf("toolu_fake_%d_%d", answered, i)
	}

	var u Usage
	s.update(id, func(ss *Session) {
		if ss.Scenario == "" && !aux {
			ss.Scenario, ss.Params, ss.API = name, params, d.name()
		}
		if problem != nil {
			ss.Problems = append(ss.Problems, problem.Error())
		}
		if !aux {
			ss.Results = appendNew(ss.Results, c.Results())
		}
		switch {
		case t.Fail != nil:
			ss.Errors++
		case t.Hang != NoHang:
			ss.Hangs++
		default:
			u = usage(d, c, t, ss.cached)
			if aux {
				ss.AuxTurns++
				ss.AuxUsage.add(u)
			} else {
				ss.Turns++
				ss.Usage.add(u)
				ss.Calls = append(ss.Calls, t.Calls...)
			}
		}
	})
	if s.Log != nil {
		s.Log.Info("fake model turn", "api", d.name(), "session", id, "scenario", name, "step", c.Step(),
			"aux", aux, "calls", callNames(t.Calls), "text_bytes", len(t.Text), "fail", t.Fail != nil,
			"hang", t.Hang != NoHang, "problem", problem)
	}

	if t.Fail != nil && (!t.Fail.InStream || !c.stream) {
		if t.Fail.Status == 0 {
			t.Fail.Status = http.StatusInternalServerError
		}
		if t.Fail.RetryAfterMs > 0 {
			w.Header().Set("Retry-After-Ms", strconv.Itoa(t.Fail.RetryAfterMs))
		}
		for k, v := range t.Fail.Headers {
			w.Header().Set(k, v)
		}
		d.failure(w, *t.Fail)
		return
	}
	hang := make(chan struct{})
	if t.Hang != NoHang {
		// Released when the client goes away or the server closes.
		go func() {
			select {
			case <-r.Context().Done():
			case <-s.done:
			}
			close(hang)
		}()
		if t.Hang == HangAtStart || !c.stream {
			<-hang
			return
		}
	}
	d.write(w, c, t, u, hang)
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// loadDeferred turns a turn that calls a deferred tool into a tool search
// that loads it (claude-code lists MCP tools only after one).
func (s *Server) loadDeferred(c *Conversation, t Turn) Turn {
	var load []string
	for _, call := range t.Calls {
		if !c.callable(call.Tool) {
			load = append(load, call.Tool)
		}
	}
	if len(load) == 0 || c.toolSearch == "" {
		return t
	}
	return Turn{Calls: []Call{newCall(c.toolSearch, map[string]any{"query": "select:" + strings.Join(load, ","), "max_results": len(load)})}}
}

// usage counts the tokens of a turn (see Usage) and records the system
// text in the session's prompt cache.
func usage(d dialect, c *Conversation, t Turn, cached map[string]bool) Usage {
	prompt := tokens(c.promptSize)
	sys := tokens(len(c.System))
	if sys > prompt {
		sys = prompt
	}
	u := Usage{Input: prompt - sys}
	switch {
	case c.System == "":
	case cached[c.System]:
		u.CacheRead = sys
	case d.name() == "anthropic":
		u.CacheWrite = sys
	default:
		u.Input += sys
	}
	if c.System != "" {
		cached[c.System] = true
	}
	out := len(t.Text)
	for _, call := range t.Calls {
		out += len(call.Input)
	}
	u.Output = max(tokens(out), 1)
	return u
}

func tokens(n int) int64 { return int64((n + 3) / 4) }

// appendNew appends the results of all that seen does not hold yet (a
// request carries the whole history).
func appendNew(seen, all []Result) []Result {
	for _, r := range all[min(len(seen), len(all)):] {
		if len(r.Content) > 2048 {
			r.Content = r.Content[:2048] + "…"
		}
		seen = append(seen, r)
	}
	return seen
}

// sessionID is the client's session id from its headers.
func sessionID(r *http.Request) string {
	for _, h := range []string{"X-Claude-Code-Session-Id", "X-Session-Id", "X-Session-Affinity"} {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	return ""
}

func callNames(calls []Call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Tool)
	}
	return out
}

func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, errorBody("invalid_request_error", "fake model: count_tokens takes POST"))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody("invalid_request_error", "fake model: read the request body: "+err.Error()))
		return
	}
	c, err := anthropic{}.parse(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody("invalid_request_error", "fake model: "+err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"input_tokens": tokens(c.promptSize)})
}

// models lists a few model ids, in a shape both APIs' clients accept.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeJSON(w, http.StatusMethodNotAllowed, errorBody("invalid_request_error", "fake model: models takes GET"))
		return
	}
	var data []map[string]any
	for _, id := range []string{"claude-sonnet-4-5", "claude-haiku-4-5", "fake-model"} {
		data = append(data, map[string]any{"id": id, "type": "model", "object": "model",
			"display_name": id, "created_at": "2025-01-01T00:00:00Z", "created": 1735689600, "owned_by": "ballet"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "has_more": false,
		"first_id": data[0]["id"], "last_id": data[len(data)-1]["id"]})
}

// errorBody is the Anthropic error shape; OpenAI clients read its "error"
// member's message and type as well.
func errorBody(typ, msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
