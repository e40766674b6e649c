// Package protocol is the runner's client of the runner protocol (version
// 2): the routes `ballet runner` calls, with the bodies of package
// runproto. It knows nothing of Core's internals; docs/runners.md
// describes the protocol.
//
// Secrets — the runner token, run tokens, a repository credential — travel
// in headers and bodies only: no error of this package holds one.
package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/outbound"
	"github.com/ballet/ballet/internal/runproto"
)

// DefaultTimeout bounds one request (a lease's wait comes on top).
const DefaultTimeout = 30 * time.Second

// maxAnswer bounds an answer's body: a lease (skills, reports) is the
// largest.
const maxAnswer = 64 << 20

// Client calls Core's runner routes. Its methods are safe for concurrent
// use.
type Client struct {
	// Base is Core's URL, e.g. http://127.0.0.1:8080 (no /api/v1).
	Base string
	// Token is the runner token: it authenticates the /runners routes.
	Token string
	// UserAgent names the runner's version in every request.
	UserAgent string
	// HTTP is the client to use; http.DefaultClient's transport when nil.
	HTTP *http.Client
	// Timeout bounds one request; DefaultTimeout when 0.
	Timeout time.Duration
}

// Error is an answer of Core other than the one expected.
type Error struct {
	Status  int    // the HTTP status
	Code    string // the error's code, when the body had one
	Message string
	Call    string // "POST /api/v1/runners/…/lease": never a secret
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("%s: %d %s", e.Call, e.Status, msg)
}

// Retryable reports whether a call that failed with err may succeed when
// tried again: Core unreachable or overloaded (a transport error, 408,
// 429, 5xx). A refused call (another 4xx) or a cancelled context is not.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests || e.Status >= 500
	}
	return true
}

// StatusOf is the HTTP status of an *Error, 0 for any other error.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Register registers the runner (201).
func (c *Client) Register(ctx context.Context, reg runproto.RunnerRegister) (runproto.Runner, error) {
	var r runproto.Runner
	err := c.call(ctx, c.Token, "POST", "/api/v1/runners", "", jsonBody(reg), http.StatusCreated, &r, 0)
	return r, err
}

// Heartbeat tells Core the runner is alive and what it runs; the answer
// names the sessions to stop.
func (c *Client) Heartbeat(ctx context.Context, runner string, hb runproto.RunnerHeartbeatIn) (runproto.HeartbeatAnswer, error) {
	var a runproto.HeartbeatAnswer
	err := c.call(ctx, c.Token, "POST", "/api/v1/runners/"+url.PathEscape(runner)+"/heartbeat", "", jsonBody(hb), http.StatusOK, &a, 0)
	return a, err
}

// Lease waits up to req.WaitSeconds for a run; nil when none came (204).
func (c *Client) Lease(ctx context.Context, runner string, req runproto.LeaseRequest) (*runproto.Lease, error) {
	var l runproto.Lease
	wait := time.Duration(req.WaitSeconds) * time.Second
	err := c.call(ctx, c.Token, "POST", "/api/v1/runners/"+url.PathEscape(runner)+"/lease", "", jsonBody(req), http.StatusOK, &l, wait)
	if errors.Is(err, errNoContent) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// The routes of a run the runner leased (heartbeat, log, usage, finish)
// take the runner token, as the /runners routes do: the run token of the
// lease is the agent session's, for MCP, and serves none of them.

// RunHeartbeat keeps a run alive; cancelled asks its session to stop.
func (c *Client) RunHeartbeat(ctx context.Context, run string) (cancelled bool, err error) {
	var a runproto.HeartbeatReply
	err = c.call(ctx, c.Token, "POST", "/api/v1/runs/"+url.PathEscape(run)+"/heartbeat", "", nil, http.StatusOK, &a, 0)
	return a.Cancelled, err
}

// AppendLog sends bytes of the session's output that start at offset.
func (c *Client) AppendLog(ctx context.Context, run string, offset int64, data []byte) (runproto.LogAppended, error) {
	var a runproto.LogAppended
	err := c.call(ctx, c.Token, "POST", "/api/v1/runs/"+url.PathEscape(run)+"/log", "offset="+strconv.FormatInt(offset, 10),
		rawBody(data), http.StatusOK, &a, 0)
	return a, err
}

// Finish ends a run; the answer is the run in its final status.
func (c *Client) Finish(ctx context.Context, run string, f runproto.FinishIn) (runproto.Run, error) {
	var r runproto.Run
	err := c.call(ctx, c.Token, "POST", "/api/v1/runs/"+url.PathEscape(run)+"/finish", "", jsonBody(f), http.StatusOK, &r, 0)
	return r, err
}

// ReportUsage tells Core what the run's session has consumed so far (a
// running total); the answer is the run.
func (c *Client) ReportUsage(ctx context.Context, run string, u runproto.Usage) (runproto.Run, error) {
	var r runproto.Run
	err := c.call(ctx, c.Token, "POST", "/api/v1/runs/"+url.PathEscape(run)+"/usage", "", jsonBody(u), http.StatusOK, &r, 0)
	return r, err
}

var errNoContent = errors.New("no content")

type body struct {
	data        []byte
	contentType string
}

func jsonBody(v any) *body {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("protocol: %T does not marshal: %v", v, err)) // every body is a plain struct
	}
	return &body{b, "application/json"}
}

func rawBody(b []byte) *body { return &body{b, "application/octet-stream"} }

// call makes one request and decodes the answer of status want into out.
// extra lengthens the timeout (a lease's wait).
func (c *Client) call(ctx context.Context, token, method, path, query string, in *body, want int, out any, extra time.Duration) error {
	name := method + " " + path
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+extra)
	defer cancel()
	u := strings.TrimRight(c.Base, "/") + path
	if query != "" {
		u += "?" + query
	}
	var rd io.Reader
	if in != nil {
		rd = bytes.NewReader(in.data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", in.contentType)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	hc := outbound.Guard(c.HTTP) // the runner's credential never follows a redirect
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is known; keep the cause
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", name, err)
	}
	switch {
	case resp.StatusCode == want:
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s: the answer is not the expected JSON: %w", name, err)
		}
		return nil
	case resp.StatusCode == http.StatusNoContent:
		return errNoContent
	}
	e := &Error{Status: resp.StatusCode, Call: name}
	e.Code, e.Message = errorOf(b)
	return e
}

// errorOf reads Core's error body, {"error":{"code","message"}} or
// {"error":"message"}.
func errorOf(b []byte) (code, message string) {
	var shape struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &shape) != nil || len(shape.Error) == 0 {
		return "", printable(string(b), 500)
	}
	var s string
	if json.Unmarshal(shape.Error, &s) == nil {
		return "", printable(s, 2000)
	}
	var o struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"details"`
	}
	if json.Unmarshal(shape.Error, &o) != nil {
		return "", printable(string(shape.Error), 500)
	}
	msg := o.Message
	for _, d := range o.Details {
		if detail := d.Field + ": " + d.Message; !strings.Contains(msg, detail) {
			msg += "; " + detail
		}
	}
	return o.Code, printable(msg, 2000)
}

// printable cuts s to max bytes and replaces control characters: Core's
// words go into logs.
func printable(s string, max int) string {
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}
