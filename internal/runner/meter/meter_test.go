package meter

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/runproto"
)

// upstream serves canned answers by path, and records the requests' paths
// and Authorization headers.
func upstream(t *testing.T, answers map[string]func(w http.ResponseWriter)) (*httptest.Server, *[]string) {
	t.Helper()
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
		a, ok := answers[r.URL.Path]
		if !ok {
			http.Error(w, `{"error":"no such path"}`, http.StatusNotFound)
			return
		}
		a(w)
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func sse(events ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			fmt.Fprintf(w, "event: x\ndata: %s\n\n", e)
			w.(http.Flusher).Flush()
		}
	}
}

func get(t *testing.T, url, body string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-cli")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The meter passes requests and answers through unchanged (path, query,
// the CLI's credentials, the body) and counts what each answer served:
// Anthropic's streamed message_start and message_delta (the largest of each
// running total), OpenAI's usage chunk (prompt tokens less the cached ones
// are input), whole JSON answers of both; answers that are errors or tell
// no usage count nothing; the answers add up.
func TestMeterCountsWhatTheModelServed(t *testing.T) {
	anthropicStream := sse(
		`{"type":"message_start","message":{"id":"m1","usage":{"input_tokens":100,"cache_creation_input_tokens":2000,"cache_read_input_tokens":300,"output_tokens":1}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"{\"usage\":{\"output_tokens\":99999}} in a text"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}`,
		`{"type":"message_stop"}`)
	openaiStream := sse(
		`{"choices":[{"delta":{"content":"hi"}}]}`,
		`{"choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":600}}}`,
		`[DONE]`)
	srv, seen := upstream(t, map[string]func(http.ResponseWriter){
		"/v1/messages":         anthropicStream,
		"/v1/chat/completions": openaiStream,
		"/v1/json": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"m2","usage":{"input_tokens":5,"output_tokens":6,"cache_read_input_tokens":7,"cache_creation_input_tokens":8}}`)
		},
		"/v1/error": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"usage":{"input_tokens":1000000}}`)
		},
	})
	m, err := Start(srv.URL+"/v1/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !strings.HasPrefix(m.URL(), "http://127.0.0.1:") || !strings.HasSuffix(m.URL(), "/v1") {
		t.Fatalf("URL %q", m.URL())
	}
	if got := get(t, m.URL()+"/messages?beta=true", `{"stream":true}`); !strings.Contains(got, `"output_tokens":42`) {
		t.Errorf("the answer did not pass through: %q", got)
	}
	want := runproto.Usage{InputTokens: 100, OutputTokens: 42, CacheWriteTokens: 2000, CacheReadTokens: 300}
	if got := m.Usage(); got != want {
		t.Errorf("after an Anthropic stream: %+v, want %+v", got, want)
	}
	get(t, m.URL()+"/chat/completions", `{}`)
	want.InputTokens += 400
	want.CacheReadTokens += 600
	want.OutputTokens += 7
	if got := m.Usage(); got != want {
		t.Errorf("after an OpenAI stream: %+v, want %+v", got, want)
	}
	get(t, m.URL()+"/json", `{}`)
	get(t, m.URL()+"/error", `{}`)
	get(t, m.URL()+"/nowhere", `{}`)
	want = runproto.Usage{InputTokens: want.InputTokens + 5, OutputTokens: want.OutputTokens + 6,
		CacheReadTokens: want.CacheReadTokens + 7, CacheWriteTokens: want.CacheWriteTokens + 8}
	if got := m.Usage(); got != want {
		t.Errorf("after a JSON answer, an error and a 404: %+v, want %+v", got, want)
	}
	for i, p := range []string{"/v1/messages?beta=true", "/v1/chat/completions", "/v1/json", "/v1/error", "/v1/nowhere"} {
		if len(*seen) <= i || (*seen)[i] != p+" Bearer sk-cli" {
			t.Errorf("request %d reached the API as %q, want %q", i, (*seen)[i:], p)
			break
		}
	}
}

// An answer cut off mid-stream (the CLI killed) counts what it had
// streamed: its message_start's input and cache tokens.
func TestMeterCountsACutStream(t *testing.T) {
	release := make(chan struct{})
	srv, _ := upstream(t, map[string]func(http.ResponseWriter){"/v1/messages": func(w http.ResponseWriter) {
		sse(`{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":20,"output_tokens":0}}}`)(w)
		<-release
	}})
	defer close(release)
	m, err := Start(srv.URL+"/v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(m.URL()+"/messages", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for !strings.Contains(string(buf), "message_start") {
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	resp.Body.Close()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := m.Usage(), (runproto.Usage{InputTokens: 10, CacheReadTokens: 20}); got != want {
		t.Errorf("usage %+v, want %+v", got, want)
	}
}

// Only http(s) URLs with a host are metered.
func TestMeterRefusesABadURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x/v1", "http:///v1", "::"} {
		if m, err := Start(u, nil); err == nil {
			m.Close()
			t.Errorf("Start(%q) took it", u)
		}
	}
}

// The meter keeps the headers of the model API's last refusal for a limit
// (429, 503, 529), passed through unchanged; a refusal that an answer
// followed is over; other errors are no refusal.
func TestLastRefusal(t *testing.T) {
	refuse := func(status int, retryAfter string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", retryAfter)
			w.Header().Set("Anthropic-Ratelimit-Requests-Reset", "2026-12-07T03:05:00Z")
			http.Error(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, status)
		}
	}
	srv, _ := upstream(t, map[string]func(w http.ResponseWriter){
		"/v1/429": refuse(http.StatusTooManyRequests, "30"),
		"/v1/529": refuse(529, "5"),
		"/v1/500": refuse(http.StatusInternalServerError, "1"),
		"/v1/ok":  sse(`{"type":"message_start","message":{"usage":{"input_tokens":3}}}`),
		"/v1/400": refuse(http.StatusBadRequest, "7"),
	})
	m, err := Start(srv.URL+"/v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, ok := m.LastRefusal(); ok {
		t.Error("a refusal before any request")
	}
	if body := get(t, m.URL()+"/429", "{}"); !strings.Contains(body, "slow down") {
		t.Errorf("the refusal's body did not pass: %q", body)
	}
	r, ok := m.LastRefusal()
	if !ok || r.Status != 429 || r.Header.Get("Retry-After") != "30" || r.Header.Get("Anthropic-Ratelimit-Requests-Reset") != "2026-12-07T03:05:00Z" {
		t.Errorf("after a 429: %+v %v", r, ok)
	}
	get(t, m.URL()+"/500", "{}") // no limit: the 429 stays the last refusal
	if r, ok := m.LastRefusal(); !ok || r.Status != 429 {
		t.Errorf("after a 500: %+v %v", r, ok)
	}
	get(t, m.URL()+"/529", "{}")
	if r, ok := m.LastRefusal(); !ok || r.Status != 529 || r.Header.Get("Retry-After") != "5" {
		t.Errorf("after a 529: %+v %v", r, ok)
	}
	get(t, m.URL()+"/ok", "{}")
	if r, ok := m.LastRefusal(); ok {
		t.Errorf("an answer served after the refusal, yet %+v", r)
	}
	get(t, m.URL()+"/400", "{}")
	if r, ok := m.LastRefusal(); ok {
		t.Errorf("a 400 is no refusal for a limit: %+v", r)
	}
}
