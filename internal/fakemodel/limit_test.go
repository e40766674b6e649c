package fakemodel_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/fakemodel"
)

// rate-limit refuses in each API's own error format, with retry-after and
// each API's reset headers when asked, as long as its limit holds (so many
// requests, or a span of time from the first refusal, shared by every
// session with the same marker), then plays then=.
func TestRateLimit(t *testing.T) {
	fm, url := newServer(t)
	now := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	fm.Now = func() time.Time { return now }
	anthropicReq := func(session, marker string) (*http.Response, []byte) {
		return post(t, url+"/v1/messages", session, map[string]any{"model": "claude-sonnet-4-5", "stream": true,
			"tools": claudeTools(false), "messages": []any{userText(marker)}})
	}
	openAIReq := func(marker string) (*http.Response, []byte) {
		return post(t, url+"/v1/chat/completions", "", map[string]any{"model": "fake-model", "stream": true,
			"tools":    []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}},
			"messages": []any{map[string]any{"role": "user", "content": marker}}})
	}
	type anthropicError struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	type openAIError struct {
		Error struct {
			Message, Type string
			Code          *string
		}
	}

	// Three requests of two sessions refused, the fourth served.
	m := fakemodel.Marker("rate-limit", "requests=3", "retry_after=30", "reset=60")
	for i, session := range []string{"a", "a", "b"} {
		resp, body := anthropicReq(session, m)
		var e anthropicError
		must(t, json.Unmarshal(body, &e))
		if resp.StatusCode != 429 || e.Type != "error" || e.Error.Type != "rate_limit_error" || !strings.Contains(e.Error.Message, "rate limit") ||
			resp.Header.Get("Retry-After") != "30" || resp.Header.Get("Anthropic-Ratelimit-Requests-Remaining") != "0" ||
			resp.Header.Get("Anthropic-Ratelimit-Requests-Reset") != "2026-12-07T03:01:00Z" {
			t.Errorf("request %d: %d %v %s", i, resp.StatusCode, resp.Header, body)
		}
	}
	if resp, body := anthropicReq("b", m); resp.StatusCode != 200 || !strings.Contains(string(body), "hello.txt") {
		t.Errorf("after the limit: %d %s", resp.StatusCode, body)
	}
	if s, _ := fm.Session("a"); s.Errors != 2 || s.Scenario != "rate-limit" {
		t.Errorf("session a: %+v", s)
	}

	// Overloaded, no retry-after: 529 overloaded_error, no headers.
	resp, body := anthropicReq("c", fakemodel.Marker("rate-limit", "kind=overloaded", "requests=1"))
	var e anthropicError
	must(t, json.Unmarshal(body, &e))
	if resp.StatusCode != 529 || e.Error.Type != "overloaded_error" || resp.Header.Get("Retry-After") != "" || resp.Header.Get("Retry-After-Ms") != "" {
		t.Errorf("overloaded: %d %v %s", resp.StatusCode, resp.Header, body)
	}

	// For a span: refused until 90 s after the first refusal.
	m = fakemodel.Marker("rate-limit", "for=90s", "kind=quota")
	for _, c := range []struct {
		after  time.Duration
		status int
	}{{0, 400}, {89 * time.Second, 400}, {90 * time.Second, 200}} {
		now = time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC).Add(c.after)
		resp, body := anthropicReq("d", m)
		if resp.StatusCode != c.status || (c.status == 400 && !strings.Contains(string(body), "credit balance is too low")) {
			t.Errorf("quota at +%v: %d %s", c.after, resp.StatusCode, body)
		}
	}

	// OpenAI's format and headers.
	now = time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		marker, typ, code string
		status            int
		header            map[string]string
	}{
		{fakemodel.Marker("rate-limit", "retry_after=2", "reset=360"), "requests", "rate_limit_exceeded", 429,
			map[string]string{"Retry-After": "2", "X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "6m0s"}},
		{fakemodel.Marker("rate-limit", "kind=quota"), "insufficient_quota", "insufficient_quota", 429, map[string]string{"Retry-After": ""}},
		{fakemodel.Marker("rate-limit", "kind=overloaded"), "server_error", "", 503, map[string]string{"Retry-After": ""}},
	} {
		resp, body := openAIReq(c.marker)
		var e openAIError
		must(t, json.Unmarshal(body, &e))
		code := ""
		if e.Error.Code != nil {
			code = *e.Error.Code
		}
		if resp.StatusCode != c.status || e.Error.Type != c.typ || code != c.code || e.Error.Message == "" {
			t.Errorf("openai %s: %d %s", c.marker, resp.StatusCode, body)
		}
		for k, v := range c.header {
			if resp.Header.Get(k) != v {
				t.Errorf("openai %s: %s %q, want %q", c.marker, k, resp.Header.Get(k), v)
			}
		}
	}

	// from=1: the session's first step is played, its second refused.
	m = fakemodel.Marker("rate-limit", "from=1")
	if resp, body := anthropicReq("f", m); resp.StatusCode != 200 || !strings.Contains(string(body), "hello.txt") {
		t.Errorf("from=1, first step: %d %s", resp.StatusCode, body)
	}
	if resp, _ := post(t, url+"/v1/messages", "f", map[string]any{"model": "claude-sonnet-4-5", "stream": true, "tools": claudeTools(false),
		"messages": []any{userText(m), map[string]any{"role": "assistant", "content": "I will write the file."}, userText("go on")}}); resp.StatusCode != 429 {
		t.Errorf("from=1, second step: %d", resp.StatusCode)
	}

	// Bad parameters are told, not played.
	for _, bad := range []string{"kind=soon", "for=forever", "then=rate-limit", "then=nope", "requests=-1"} {
		resp, body := anthropicReq("bad", fakemodel.Marker("rate-limit", bad))
		if resp.StatusCode != 200 || !strings.Contains(string(body), "fake model: marker parameter") {
			t.Errorf("%s: %d %s", bad, resp.StatusCode, body)
		}
	}
}
