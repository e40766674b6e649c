// Package realtime is Core's realtime API at GET /api/v1/realtime (ADR-0018):
// a WebSocket speaking JSON-RPC 2.0, JSON in text frames and MessagePack in
// binary frames (the client's first frame decides; the server answers in
// that encoding for the whole connection). The caller authenticates at the
// handshake with a bearer token, as for REST.
//
// Methods: subscribe {"stream": "project:KEY" | "item:KEY-N" | "org:SLUG",
// "after_seq"?} → {"subscription", "position"}; unsubscribe
// {"subscription"} → true; ping → "pong". A subscription replays every
// visible event after after_seq from the log, then streams live from the
// event feed, in seq order with no gap and no duplicate. Notifications:
// "event" {"subscription", "event"}, "lagged" {"subscription", "last_seq",
// "code": -32001, "message"} (the subscriber fell behind; the subscription
// has ended: resume with after_seq = last_seq) and "ended" (the feed
// stopped or the log could not be read: resume likewise).
//
// Authorization happens at subscribe: tracker.read on the stream's project
// (or organization for org streams), with the credential re-checked, so
// permission changes and revocations apply to every new subscription.
// Unknown streams and streams the caller may not read get the same error
// (-32003), so other organizations' keys cannot be probed.
package realtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/server"
	"github.com/ballet/ballet/internal/tracker"
)

// Path is where Core mounts the handler (GET).
const Path = "/api/v1/realtime"

// Authenticator resolves a bearer credential (auth.Authenticator).
type Authenticator interface {
	Authenticate(ctx context.Context, header string) (*auth.Principal, error)
}

// Config tunes the handler. Zero fields take the defaults.
type Config struct {
	// ReadLimit bounds one client message (default 64 KiB): a larger one
	// gets an invalid-request error and the connection stays usable, up
	// to HardReadLimit (default 1 MiB), beyond which the connection is
	// closed with status 1009.
	ReadLimit     int64
	HardReadLimit int64
	// WriteTimeout bounds one write to a client (default 10 s); a client
	// that does not read for that long is disconnected.
	WriteTimeout time.Duration
	// MaxSubscriptions per connection (default 64).
	MaxSubscriptions int
	// FeedWait bounds how long subscribe waits for the feed to start
	// (default 5 s).
	FeedWait time.Duration
}

func (c Config) withDefaults() Config {
	if c.ReadLimit <= 0 {
		c.ReadLimit = 64 << 10
	}
	if c.HardReadLimit < c.ReadLimit {
		c.HardReadLimit = max(c.ReadLimit, 1<<20)
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.MaxSubscriptions <= 0 {
		c.MaxSubscriptions = 64
	}
	if c.FeedWait <= 0 {
		c.FeedWait = 5 * time.Second
	}
	return c
}

// Handler serves the realtime API.
type Handler struct {
	Feed    *feed.Feed
	Auth    Authenticator
	Access  *access.Resolver
	Tracker *tracker.Service
	Store   event.Querier
	Log     *slog.Logger
	Config  Config

	encoded *encodedEvents
}

// New returns the handler.
func New(f *feed.Feed, authn Authenticator, res *access.Resolver, t *tracker.Service, q event.Querier, log *slog.Logger, cfg Config) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{Feed: f, Auth: authn, Access: res, Tracker: t, Store: q, Log: log, Config: cfg.withDefaults(), encoded: newEncodedEvents()}
}

// ServeHTTP authenticates the handshake and runs the connection.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	header := r.Header.Get("Authorization")
	if _, err := h.Auth.Authenticate(r.Context(), header); err != nil {
		switch apperr.Code(err) {
		case apperr.Unauthenticated:
			w.Header().Set("WWW-Authenticate", `Bearer realm="ballet"`)
			server.WriteError(w, http.StatusUnauthorized, apperr.Unauthenticated, err.Error())
		case apperr.Forbidden:
			server.WriteError(w, http.StatusForbidden, apperr.Forbidden, err.Error())
		default:
			h.Log.Error("realtime: authentication failed", "err", err)
			server.WriteError(w, http.StatusServiceUnavailable, apperr.Unavailable, "cannot authenticate now; retry")
		}
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered the handshake
	}
	cfg := h.Config.withDefaults()
	ws.SetReadLimit(cfg.HardReadLimit)
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{h: h, cfg: cfg, ws: ws, header: header, ctx: ctx, cancel: cancel, subs: map[string]*subState{}}
	c.serve()
}

type conn struct {
	h      *Handler
	cfg    Config
	ws     *websocket.Conn
	header string
	codec  codec // set by the first frame, before any pump starts
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	subs   map[string]*subState
	nextID int
	wg     sync.WaitGroup
}

type subState struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (c *conn) serve() {
	defer func() {
		c.cancel()
		c.wg.Wait()
		_ = c.ws.CloseNow()
	}()
	for {
		typ, rd, err := c.ws.Reader(c.ctx)
		if err != nil {
			return // closed, protocol violation or over the hard limit
		}
		b, err := io.ReadAll(io.LimitReader(rd, c.cfg.ReadLimit+1))
		if err != nil {
			return
		}
		if c.codec == nil {
			c.codec = codecFor(typ)
		}
		if int64(len(b)) > c.cfg.ReadLimit {
			if _, err := io.Copy(io.Discard, rd); err != nil {
				return
			}
			c.respond(nil, nil, rpcErr(CodeInvalidRequest, "message too large: at most %d bytes", c.cfg.ReadLimit))
			continue
		}
		if typ != c.codec.frame() {
			c.respond(nil, nil, rpcErr(CodeInvalidRequest, "this connection speaks %s (its first frame's type); send %s frames",
				encodingName(c.codec), encodingName(c.codec)))
			continue
		}
		c.handle(b)
	}
}

func encodingName(cd codec) string {
	if cd.frame() == websocket.MessageBinary {
		return "MessagePack in binary"
	}
	return "JSON in text"
}

// write sends one message; a failed write ends the connection.
func (c *conn) write(v any) bool {
	b, err := c.codec.marshal(v)
	if err != nil {
		c.h.Log.Error("realtime: encode failed", "err", err)
		c.cancel()
		return false
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.WriteTimeout)
	defer cancel()
	if err := c.ws.Write(ctx, c.codec.frame(), b); err != nil {
		c.cancel()
		return false
	}
	return true
}

func (c *conn) respond(id any, result any, e *Error) {
	if e != nil {
		c.write(response{JSONRPC: "2.0", ID: id, Error: e})
		return
	}
	c.write(response{JSONRPC: "2.0", ID: id, Result: result})
}

func (c *conn) handle(b []byte) {
	m, perr := c.codec.decodeMessage(b)
	if perr != nil {
		var id any
		if m != nil {
			id = m.ID
		}
		c.respond(id, nil, perr)
		return
	}
	if m.JSONRPC != "2.0" {
		c.respond(m.ID, nil, rpcErr(CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`))
		return
	}
	if m.Method == "" {
		c.respond(m.ID, nil, rpcErr(CodeInvalidRequest, `invalid request: "method" is required`))
		return
	}
	var result any
	var e *Error
	switch m.Method {
	case MethodPing:
		result = "pong"
	case MethodSubscribe:
		var p SubscribeParams
		if err := c.codec.decodeStrict(m.Params, &p); err != nil {
			e = rpcErr(CodeInvalidParams, "invalid params: %v", err)
			break
		}
		var start func()
		result, start, e = c.subscribe(p)
		if m.HasID {
			c.respond(m.ID, result, e)
		}
		if start != nil {
			start() // after the answer, so no notification precedes it
		}
		return
	case MethodUnsubscribe:
		var p UnsubscribeParams
		if err := c.codec.decodeStrict(m.Params, &p); err != nil {
			e = rpcErr(CodeInvalidParams, "invalid params: %v", err)
			break
		}
		result, e = c.unsubscribe(p.Subscription)
	default:
		e = rpcErr(CodeMethodNotFound, "method not found: %q (methods: subscribe, unsubscribe, ping)", m.Method)
	}
	if m.HasID { // JSON-RPC: notifications get no answer
		c.respond(m.ID, result, e)
	}
}

func (c *conn) subscribe(p SubscribeParams) (any, func(), *Error) {
	if p.Stream == "" {
		return nil, nil, rpcErr(CodeInvalidParams, `invalid params: "stream" is required`)
	}
	if p.AfterSeq != nil && *p.AfterSeq < 0 {
		return nil, nil, rpcErr(CodeInvalidParams, `invalid params: "after_seq" must be ≥ 0`)
	}
	c.mu.Lock()
	n := len(c.subs)
	c.mu.Unlock()
	if n >= c.cfg.MaxSubscriptions {
		return nil, nil, rpcErr(CodeTooMany, "at most %d subscriptions per connection", c.cfg.MaxSubscriptions)
	}
	principal, err := c.h.Auth.Authenticate(c.ctx, c.header)
	if err != nil {
		if code := apperr.Code(err); code != apperr.Unauthenticated && code != apperr.Forbidden {
			c.h.Log.Error("realtime: re-authentication failed", "err", err)
			return nil, nil, rpcErr(CodeUnavailable, "cannot authenticate now; retry")
		}
		return nil, nil, rpcErr(CodeUnauthorized, "the connection's credential is no longer valid: %v", err)
	}
	st, e := c.h.resolveStream(c.ctx, principal, p.Stream)
	if e != nil {
		return nil, nil, e
	}
	wctx, cancel := context.WithTimeout(c.ctx, c.cfg.FeedWait)
	sub, err := c.h.Feed.SubscribeContext(wctx, st.live)
	cancel()
	if err != nil {
		return nil, nil, rpcErr(CodeUnavailable, "the event feed is not running; retry")
	}
	c.mu.Lock()
	c.nextID++
	id := fmt.Sprintf("s%d", c.nextID)
	sctx, scancel := context.WithCancel(c.ctx)
	ss := &subState{cancel: scancel, done: make(chan struct{})}
	c.subs[id] = ss
	c.mu.Unlock()
	c.wg.Add(1)
	start := func() {
		go func() {
			defer c.wg.Done()
			defer close(ss.done)
			defer func() {
				c.mu.Lock()
				if c.subs[id] == ss {
					delete(c.subs, id)
				}
				c.mu.Unlock()
			}()
			defer sub.Close()
			c.pump(sctx, id, st, sub, p.AfterSeq)
		}()
	}
	return SubscribeResult{Subscription: id, Position: sub.Start()}, start, nil
}

func (c *conn) unsubscribe(id string) (any, *Error) {
	c.mu.Lock()
	ss, ok := c.subs[id]
	delete(c.subs, id)
	c.mu.Unlock()
	if !ok {
		return nil, rpcErr(CodeInvalidParams, "invalid params: no subscription %q on this connection", id)
	}
	ss.cancel()
	<-ss.done // no notification of it follows the answer
	return true, nil
}

// pump replays (after, start] from the log, then forwards live events.
func (c *conn) pump(ctx context.Context, id string, st *stream, sub *feed.Subscription, after *int64) {
	msgp := c.codec.frame() == websocket.MessageBinary
	start := sub.Start()
	last := start
	send := func(e event.Event) bool {
		n, err := c.h.encoded.notification(id, e, msgp)
		if err != nil {
			c.h.Log.Error("realtime: encode failed", "err", err)
			c.cancel()
			return false
		}
		return c.write(n)
	}
	end := func(method string, code int, msg string) {
		c.write(notification{JSONRPC: "2.0", Method: method, Params: EndParams{Subscription: id, LastSeq: last, Code: code, Message: msg}})
	}
	filter := func(e event.Event) (bool, bool) {
		v, err := st.visible(ctx, c.h.Store, e)
		if err != nil {
			if ctx.Err() == nil {
				c.h.Log.Warn("realtime: cannot resolve an event's item", "err", err)
				end(NotifyEnded, CodeUnavailable, "the log cannot be read now; resume from last_seq")
			}
			return false, false
		}
		return v, true
	}
	if after != nil {
		last = *after
		batch := c.h.Feed.Config().Batch
	replay:
		for last < start {
			f := st.replay
			f.AfterSeq, f.Limit = last, batch
			evs, err := event.List(ctx, c.h.Store, f)
			if err != nil {
				if ctx.Err() == nil {
					c.h.Log.Warn("realtime: replay failed", "err", err)
					end(NotifyEnded, CodeUnavailable, "the log cannot be read now; resume from last_seq")
				}
				return
			}
			for _, e := range evs {
				if e.Seq > start {
					break replay
				}
				v, ok := filter(e)
				if !ok {
					return
				}
				if v && !send(e) {
					return
				}
				last = e.Seq
			}
			if len(evs) < batch {
				break
			}
		}
		last = max(last, start)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-sub.C():
			if !ok {
				if ctx.Err() != nil {
					return
				}
				select {
				case <-sub.Lagged():
					end(NotifyLagged, CodeLagged, "the subscription fell too far behind and has ended; resume with after_seq = last_seq")
				default:
					end(NotifyEnded, CodeUnavailable, "the event feed stopped; resume with after_seq = last_seq")
				}
				return
			}
			if e.Seq <= last {
				continue // already replayed (or passed): no duplicate
			}
			v, ok := filter(e)
			if !ok {
				return
			}
			if v && !send(e) {
				return
			}
			last = e.Seq
		}
	}
}
