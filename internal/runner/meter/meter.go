// Package meter counts the tokens a model API serves an agent CLI. A
// Meter is a reverse proxy on 127.0.0.1 that the runner puts between a
// session's CLI and its model API: it passes every request and answer
// through unchanged and reads the usage out of the answers as they stream
// (the Anthropic Messages API's message_start and message_delta events,
// the OpenAI chat completions' usage chunk, or a whole JSON answer's
// usage).
//
// It exists because a CLI tells its usage late: opencode tells a step's
// tokens only once the step's tool calls have run, so a session stopped in
// its first command told none, although the model had served its answer.
// What the meter counted is what the model served, whatever the CLI told
// before it was stopped.
//
// It also keeps the headers of the model API's last refusal (429, 503,
// 529): the provider's retry-after and rate-limit reset times, which a CLI
// does not always print (claude-code's output has none), for the runner to
// say until when a provider's limit holds.
package meter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ballet/ballet/internal/runproto"
)

// maxJSONAnswer bounds the whole (not streamed) JSON answer the meter
// reads the usage from; a larger one passes through uncounted.
const maxJSONAnswer = 4 << 20

// maxLine bounds one line of a streamed answer the meter parses; a longer
// one (a large text delta) passes through unparsed: usage lines are short.
const maxLine = 256 << 10

// Meter is a running metering proxy. Its methods are safe for concurrent
// use.
type Meter struct {
	base string // the URL the CLI is given
	srv  *http.Server
	ln   net.Listener

	mu      sync.Mutex
	answers []runproto.Usage // each answer's usage so far, in order of arrival
	refusal *Refusal         // the last answer that refused for a limit
}

// Refusal is an answer of the model API that refused for a limit: its
// status and headers, and when it came.
type Refusal struct {
	Status int
	Header http.Header
	// Seq counts the answers before it (a refusal followed by an answer
	// that served is over).
	Seq int
}

// limitStatus tells the statuses of a provider's limits: rate limit (or
// quota), unavailable, overloaded.
func limitStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable || code == 529
}

// Start starts a meter in front of the model API at upstream (an http(s)
// base URL such as https://api.anthropic.com/v1). Requests to the meter's
// URL (URL) go to upstream with the same path; nothing else is changed
// (the CLI sends its own credentials).
func Start(upstream string, log *slog.Logger) (*Meter, error) {
	up, err := url.Parse(upstream)
	if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
		return nil, fmt.Errorf("meter: the model API's URL %q is not an http(s) URL", upstream)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("meter: %w", err)
	}
	m := &Meter{ln: ln, base: "http://" + ln.Addr().String() + strings.TrimRight(up.Path, "/")}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host, r.Out.Host = up.Scheme, up.Host, up.Host
		},
		Transport:     transport,
		FlushInterval: -1, // streamed answers reach the CLI as they come
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode/100 == 2 {
				resp.Body = m.reader(resp.Body, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"))
			} else if limitStatus(resp.StatusCode) {
				m.mu.Lock()
				m.refusal = &Refusal{Status: resp.StatusCode, Header: resp.Header.Clone(), Seq: len(m.answers)}
				m.mu.Unlock()
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if log != nil && r.Context().Err() == nil {
				log.Warn("meter: the model API did not answer", "path", r.URL.Path, "err", err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	m.srv = &http.Server{Handler: proxy, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// URL is the base URL to give the CLI instead of upstream.
func (m *Meter) URL() string { return m.base }

// Usage is the sum of what the model API served so far: every answer's
// tokens as far as it streamed.
func (m *Meter) Usage() runproto.Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s runproto.Usage
	for _, u := range m.answers {
		s.InputTokens += u.InputTokens
		s.OutputTokens += u.OutputTokens
		s.CacheReadTokens += u.CacheReadTokens
		s.CacheWriteTokens += u.CacheWriteTokens
	}
	return s
}

// LastRefusal is the model API's last refusal for a limit, when no answer
// served since (ok false otherwise).
func (m *Meter) LastRefusal() (Refusal, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refusal == nil || m.refusal.Seq != len(m.answers) {
		return Refusal{}, false
	}
	r := *m.refusal
	r.Header = r.Header.Clone()
	return r, true
}

// Close stops the meter and the requests under way.
func (m *Meter) Close() error {
	if err := m.srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("meter: %w", err)
	}
	return nil
}

// reader wraps an answer's body: what passes through is parsed for usage.
func (m *Meter) reader(body io.ReadCloser, stream bool) io.ReadCloser {
	m.mu.Lock()
	m.answers = append(m.answers, runproto.Usage{})
	i := len(m.answers) - 1
	m.mu.Unlock()
	return &counting{body: body, m: m, i: i, stream: stream}
}

// told records usage u an answer told: each figure is a running total of
// the answer, so the largest counts.
func (m *Meter) told(i int, u runproto.Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := &m.answers[i]
	a.InputTokens = max(a.InputTokens, u.InputTokens)
	a.OutputTokens = max(a.OutputTokens, u.OutputTokens)
	a.CacheReadTokens = max(a.CacheReadTokens, u.CacheReadTokens)
	a.CacheWriteTokens = max(a.CacheWriteTokens, u.CacheWriteTokens)
}

// counting is an answer's body as it passes: whole lines of a stream are
// parsed as they complete, a JSON answer when it has been read.
type counting struct {
	body   io.ReadCloser
	m      *Meter
	i      int
	stream bool
	buf    []byte // a stream's unfinished line, or the JSON answer so far
	skip   bool   // the line under way (or the answer) is too long to parse
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.body.Read(p)
	c.take(p[:n])
	if err == io.EOF && !c.stream && !c.skip {
		c.m.told(c.i, parse(c.buf))
	}
	return n, err
}

func (c *counting) Close() error { return c.body.Close() }

func (c *counting) take(b []byte) {
	if !c.stream {
		if len(c.buf)+len(b) > maxJSONAnswer {
			c.skip, c.buf = true, nil
		} else if !c.skip {
			c.buf = append(c.buf, b...)
		}
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if !c.skip {
			if len(c.buf)+len(part) > maxLine {
				c.skip, c.buf = true, c.buf[:0]
			} else {
				c.buf = append(c.buf, part...)
			}
		}
		if i < 0 {
			return
		}
		if !c.skip {
			if data, ok := bytes.CutPrefix(bytes.TrimSpace(c.buf), []byte("data:")); ok {
				c.m.told(c.i, parse(bytes.TrimSpace(data)))
			}
		}
		c.buf, c.skip, b = c.buf[:0], false, b[i+1:]
	}
}

// usageJSON is the usage of both APIs: Anthropic's (input_tokens…, in a
// message, a message_start's message or a message_delta) and OpenAI's
// (prompt_tokens counts the cached tokens too).
type usageJSON struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`

	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// parse reads the usage out of one JSON object of an answer (nothing when
// it tells none).
func parse(b []byte) runproto.Usage {
	var v struct {
		Usage   *usageJSON `json:"usage"`
		Message struct {
			Usage *usageJSON `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(b, &v) != nil {
		return runproto.Usage{}
	}
	u := v.Usage
	if u == nil {
		u = v.Message.Usage
	}
	if u == nil {
		return runproto.Usage{}
	}
	r := runproto.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens + u.CompletionTokens,
		CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
	if u.PromptTokens > 0 {
		cached := min(u.PromptTokensDetails.CachedTokens, u.PromptTokens)
		r.InputTokens += u.PromptTokens - cached
		r.CacheReadTokens += cached
	}
	return r
}
