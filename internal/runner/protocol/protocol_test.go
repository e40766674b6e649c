package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/runproto"
)

// seen is a request as Core got it.
type seen struct {
	method, path, query, auth, agent, contentType string
	body                                          string
}

// core answers every request with status and body, recording it.
func core(t *testing.T, status int, body string) (*Client, chan seen) {
	t.Helper()
	got := make(chan seen, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("User-Agent"), r.Header.Get("Content-Type"), string(b)}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return &Client{Base: srv.URL + "/", Token: "runner-token", UserAgent: "ballet-runner/test"}, got
}

// Each call goes to its route with its credential (the runner token for
// the runner's routes, the run token for the run's), the user agent and
// its body, and decodes the answer.
func TestClientCalls(t *testing.T) {
	ctx := context.Background()
	two, exit := 2, 143
	type call struct {
		name   string
		status int
		answer string
		do     func(c *Client) (any, error)
		want   seen
		result string // the result as JSON
	}
	for _, c := range []call{
		{"register", 201, `{"id":"rn1","name":"r","capacity":2}`,
			func(c *Client) (any, error) {
				return c.Register(ctx, runproto.RunnerRegister{Name: "r", Capacity: &two})
			},
			seen{"POST", "/api/v1/runners", "", "Bearer runner-token", "ballet-runner/test", "application/json",
				`{"name":"r","capacity":2}`},
			`"id":"rn1"`},
		{"heartbeat", 200, `{"id":"rn1","cancel":["run1"]}`,
			func(c *Client) (any, error) {
				return c.Heartbeat(ctx, "rn/1", runproto.RunnerHeartbeatIn{Sessions: []string{"run1"}, Draining: true})
			},
			seen{"POST", "/api/v1/runners/rn/1/heartbeat", "", "Bearer runner-token", "ballet-runner/test", "application/json",
				`{"sessions":["run1"],"draining":true}`},
			`"cancel":["run1"]`},
		{"lease", 200, `{"run":{"id":"run1","status":"running"},"run_token":"rt"}`,
			func(c *Client) (any, error) {
				return c.Lease(ctx, "rn1", runproto.LeaseRequest{WaitSeconds: 1, Adapters: []string{runproto.ClaudeCode}})
			},
			seen{"POST", "/api/v1/runners/rn1/lease", "", "Bearer runner-token", "ballet-runner/test", "application/json",
				`{"wait_seconds":1,"adapters":["claude-code"]}`},
			`"run_token":"rt"`},
		{"no lease", 204, ``,
			func(c *Client) (any, error) { return c.Lease(ctx, "rn1", runproto.LeaseRequest{}) },
			seen{"POST", "/api/v1/runners/rn1/lease", "", "Bearer runner-token", "ballet-runner/test", "application/json",
				`{}`},
			`null`},
		{"run heartbeat", 200, `{"cancelled":true}`,
			func(c *Client) (any, error) { return c.RunHeartbeat(ctx, "run1") },
			seen{"POST", "/api/v1/runs/run1/heartbeat", "", "Bearer runner-token", "ballet-runner/test", "", ""},
			`true`},
		{"log", 200, `{"size":15,"truncated":true}`,
			func(c *Client) (any, error) { return c.AppendLog(ctx, "run1", 10, []byte("hello")) },
			seen{"POST", "/api/v1/runs/run1/log", "offset=10", "Bearer runner-token", "ballet-runner/test", "application/octet-stream", "hello"},
			`"size":15,"truncated":true`},
		{"finish", 200, `{"id":"run1","status":"succeeded","outcome":"done"}`,
			func(c *Client) (any, error) {
				return c.Finish(ctx, "run1", runproto.FinishIn{ExitStatus: &exit, Usage: &runproto.Usage{InputTokens: 1, CostUSD: 0.5}, Error: "stopped"})
			},
			seen{"POST", "/api/v1/runs/run1/finish", "", "Bearer runner-token", "ballet-runner/test", "application/json",
				`{"exit_status":143,"usage":{"input_tokens":1,"output_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0.5},"error":"stopped"}`},
			`"status":"succeeded"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, got := core(t, c.status, c.answer)
			res, err := c.do(cl)
			if err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r != c.want {
				t.Errorf("request %+v, want %+v", r, c.want)
			}
			b, _ := json.Marshal(res)
			if !strings.Contains(string(b), c.result) {
				t.Errorf("result %s, want it to hold %s", b, c.result)
			}
		})
	}
}

// Core's refusals come back as *Error with the status, the code and the
// message (with the details of each field), never the token; an answer of
// the right status that is not JSON is an error too.
func TestClientErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		status int
		body   string
		code   string
		msg    string
	}{
		{400, `{"error":{"code":"invalid","message":"bad input","details":[{"field":"usage.cost_usd","message":"must be a number"}]}}`,
			"invalid", "bad input; usage.cost_usd: must be a number"},
		{400, `{"error":{"code":"invalid","message":"usage.cost_usd: must be a number","details":[{"field":"usage.cost_usd","message":"must be a number"}]}}`,
			"invalid", "usage.cost_usd: must be a number"},
		{409, `{"error":"run is cancelled"}`, "", "run is cancelled"},
		{500, "oops\nmore", "", "oops more"},
		{502, `{"error":[1,2]}`, "", "[1,2]"},
		{503, ``, "", ""},
	} {
		cl, _ := core(t, c.status, c.body)
		_, err := cl.Finish(ctx, "run1", runproto.FinishIn{})
		var e *Error
		if !errors.As(err, &e) || e.Status != c.status || e.Code != c.code || e.Message != c.msg || e.Call != "POST /api/v1/runs/run1/finish" {
			t.Errorf("%d %s: %#v", c.status, c.body, err)
			continue
		}
		want := fmt.Sprintf("POST /api/v1/runs/run1/finish: %d %s", c.status, c.msg)
		if c.msg == "" {
			want = fmt.Sprintf("POST /api/v1/runs/run1/finish: %d %s", c.status, http.StatusText(c.status))
		}
		if err.Error() != want || strings.Contains(err.Error(), "runner-token") {
			t.Errorf("error %q, want %q", err, want)
		}
		if StatusOf(err) != c.status {
			t.Errorf("StatusOf = %d", StatusOf(err))
		}
	}
	cl, _ := core(t, 200, `not json`)
	if _, err := cl.Finish(ctx, "run1", runproto.FinishIn{}); err == nil || !strings.Contains(err.Error(), "not the expected JSON") || StatusOf(err) != 0 {
		t.Errorf("an answer that is no JSON: %v", err)
	}
	cl, _ = core(t, 200, strings.Repeat("x", 3000))
	if _, err := cl.RunHeartbeat(ctx, "run1"); err == nil {
		t.Error("an answer that is no JSON is no error")
	}
}

// A long or unprintable message is cut and cleaned: Core's words go into
// logs.
func TestErrorMessagesPrintable(t *testing.T) {
	long := strings.Repeat("é", 1500) // 3000 bytes
	if _, msg := errorOf([]byte(`{"error":"` + long + `"}`)); len(msg) != 2000+len("…") || !strings.HasSuffix(msg, "…") {
		t.Errorf("a long message: %d bytes", len(msg))
	}
	if _, msg := errorOf([]byte(strings.Repeat("a", 600))); len(msg) != 500+len("…") {
		t.Errorf("a long body: %d bytes", len(msg))
	}
	if _, msg := errorOf([]byte("a\x00b\x1fc\x7fd\xffe")); msg != "a b c d?e" {
		t.Errorf("control characters: %q", msg)
	}
	exact := strings.Repeat("b", 2000)
	if _, msg := errorOf([]byte(`{"error":"` + exact + `"}`)); msg != exact {
		t.Errorf("a message of exactly the limit is cut: %d bytes", len(msg))
	}
}

// A JSON body without Core's error shape (a proxy's answer) is the
// message as it came, not an empty one.
func TestErrorMessageOfAnotherShape(t *testing.T) {
	for _, body := range []string{`{"detail":"bad gateway"}`, `[1,2]`, `not json`} {
		if code, msg := errorOf([]byte(body)); code != "" || msg != body {
			t.Errorf("errorOf(%s) = %q, %q; want the body as the message", body, code, msg)
		}
	}
}

// Retryable: Core unreachable or overloaded, not a refusal nor a
// cancellation.
func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("call: %w", context.Canceled), false},
		{errors.New("connection refused"), true},
		{context.DeadlineExceeded, true},
		{&Error{Status: 408}, true},
		{&Error{Status: 429}, true},
		{&Error{Status: 500}, true},
		{fmt.Errorf("wrapped: %w", &Error{Status: 503}), true},
		{&Error{Status: 499}, false},
		{&Error{Status: 400}, false},
		{&Error{Status: 401}, false},
		{&Error{Status: 404}, false},
		{&Error{Status: 409}, false},
	} {
		if got := Retryable(c.err); got != c.want {
			t.Errorf("Retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// An unreachable Core is an error naming the call and the cause, not the
// URL with its path twice; each call is bounded by the timeout, and a
// lease's by its wait on top.
func TestClientTransport(t *testing.T) {
	ctx := context.Background()
	cl := &Client{Base: "http://127.0.0.1:1", Token: "t"}
	_, err := cl.Register(ctx, runproto.RunnerRegister{})
	if err == nil || !strings.HasPrefix(err.Error(), "POST /api/v1/runners: ") || strings.Contains(err.Error(), "127.0.0.1:1/api") || !Retryable(err) {
		t.Errorf("unreachable: %v", err)
	}
	cl = &Client{Base: "http://\x00bad", Token: "t"}
	if _, err := cl.Register(ctx, runproto.RunnerRegister{}); err == nil || !strings.HasPrefix(err.Error(), "POST /api/v1/runners: ") {
		t.Errorf("a bad base: %v", err)
	}

	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	var deadlines []time.Duration
	hc := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		d, _ := r.Context().Deadline()
		deadlines = append(deadlines, time.Until(d))
		return nil, errors.New("refused")
	})}
	cl = &Client{Base: srv.URL, HTTP: hc, Timeout: time.Hour}
	_, _ = cl.Lease(ctx, "rn1", runproto.LeaseRequest{WaitSeconds: 60})
	_, _ = cl.RunHeartbeat(ctx, "run1")
	cl.Timeout = 0
	_, _ = cl.RunHeartbeat(ctx, "run1")
	if len(deadlines) != 3 || deadlines[0] <= time.Hour+59*time.Second || deadlines[0] > time.Hour+time.Minute ||
		deadlines[1] <= 59*time.Minute || deadlines[1] > time.Hour || deadlines[2] <= 29*time.Second || deadlines[2] > DefaultTimeout {
		t.Errorf("deadlines %v: want the timeout plus the lease's wait, the timeout, DefaultTimeout", deadlines)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
