// Package realtime is Core's realtime API at GET /api/v1/realtime (ADR-0018):
// a WebSocket speaking JSON-RPC 2.0, JSON in text frames and MessagePack in
// binary frames (the client's first frame decides; the server answers in
// that encoding for the whole connection). The caller authenticates at the
// handshake with a bearer token, as for REST, or a browser's session cookie
// (then only from a page of Core's own origin).
//
// Methods: subscribe {"stream": "project:KEY" | "item:KEY-N" | "org:SLUG" |
// "notifications", "after_seq"?} → {"subscription", "position"}; unsubscribe
// {"subscription"} → true; ping → "pong". A subscription replays every
// visible event after after_seq from the log, then streams live from the
// event feed, in seq order with no gap and no duplicate. Notifications:
// "event" {"subscription", "event"}, "lagged" {"subscription", "last_seq",
// "code": -32001, "message"} (the subscriber fell behind; the subscription
// has ended: resume with after_seq = last_seq) and "ended" (the feed
// stopped or the log could not be read: resume likewise).
//
// A subscribe whose after_seq lies beyond the log's head is refused
// (-32602, naming the head): the events up to it do not exist yet, and
// skipping them when they come would lose them silently.
//
// The server pings every client at PingInterval and drops one that does
// not answer within PingTimeout, so dead peers do not hold connections.
//
// Authorization happens at subscribe: tracker.read on the stream's project
// (or organization for org streams), with the credential re-checked. The
// notifications stream is the caller's own: only the notification events
// whose recipient is the caller's person, each in a project the caller may
// read when it is delivered.
// Unknown streams and streams the caller may not read get the same error
// (-32003), so other organizations' keys cannot be probed.
//
// An open subscription ends when its credential stops allowing it:
//
//   - at once on a revocation or a membership change that concerns the
//     credential (token.revoked of its token; session.ended of its browser
//     session; member.* of its person — the
//     human, or the creator of a token): its pump, which sees those events
//     in seq order with the stream's, re-checks before it delivers anything
//     later, so no event committed after the change reaches the caller;
//   - at the credential's expiry (a timer on the injected clock);
//   - at the latest after Config.AuthRecheck (default 1 minute), a safety
//     net that re-checks every connection.
//
// The subscription then gets "ended" with code -32003 (the stream may no
// longer be read; the connection stays usable) or -32004 (the credential
// is no longer valid: every subscription ends so, and the connection
// closes with status 1008). A re-check that cannot be decided now (the
// store is unavailable) ends the subscription with -32002: resume.
package realtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/door"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/tenancy"
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
	// AuthRecheck is the safety net: every connection's credential and
	// subscriptions are re-checked at least this often (default 1 min).
	AuthRecheck time.Duration
	// PingInterval is how often the server pings a client (default 30 s;
	// on the handler's clock); one that does not answer within PingTimeout
	// (default 10 s) is dropped.
	PingInterval time.Duration
	PingTimeout  time.Duration
	// Metrics may be nil.
	Metrics *Metrics
	// OriginPatterns are the other hosts whose pages may open a connection
	// (coder/websocket's patterns: the host of [http] public_url behind a
	// proxy). A page of Core's own host always may; any other Origin is
	// refused at the handshake, whatever the credential.
	OriginPatterns []string
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
	if c.AuthRecheck <= 0 {
		c.AuthRecheck = time.Minute
	}
	if c.PingInterval <= 0 {
		c.PingInterval = 30 * time.Second
	}
	if c.PingTimeout <= 0 {
		c.PingTimeout = 10 * time.Second
	}
	return c
}

// Handler serves the realtime API.
type Handler struct {
	Feed    *feed.Feed
	Auth    Authenticator
	Access  *access.Resolver
	Tenancy *tenancy.Service // finds org: and project: streams
	Tracker *tracker.Service // finds item: streams
	Store   event.Querier
	Clock   clock.Clock // times credential expiry, the re-checks and the pings
	Log     *slog.Logger
	Config  Config

	encoded *encodedEvents
}

// New returns the handler.
func New(f *feed.Feed, authn Authenticator, res *access.Resolver, tn *tenancy.Service, t *tracker.Service, q event.Querier, clk clock.Clock, log *slog.Logger, cfg Config) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{Feed: f, Auth: authn, Access: res, Tenancy: tn, Tracker: t, Store: q, Clock: clk, Log: log, Config: cfg.withDefaults(), encoded: newEncodedEvents()}
}

// ServeHTTP authenticates the handshake and runs the connection. The
// credential is the Authorization header, else the browser's session
// cookie; a page of another origin is refused (403) before its cookie is
// even looked at.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	opts := &websocket.AcceptOptions{OriginPatterns: h.Config.OriginPatterns}
	header, cookie := door.Credential(r)
	if cookie && !sameOrigin(r, opts.OriginPatterns) {
		door.WriteError(w, http.StatusForbidden, apperr.Forbidden,
			fmt.Sprintf("cross-origin WebSocket refused: a connection with the session cookie must come from Ballet's own pages, not %s", r.Header.Get("Origin")))
		return
	}
	principal, err := h.Auth.Authenticate(r.Context(), header)
	if err != nil {
		switch apperr.Code(err) {
		case apperr.Unauthenticated:
			w.Header().Set("WWW-Authenticate", `Bearer realm="ballet"`)
			door.WriteError(w, http.StatusUnauthorized, apperr.Unauthenticated, err.Error())
		case apperr.Forbidden:
			door.WriteError(w, http.StatusForbidden, apperr.Forbidden, err.Error())
		default:
			h.Log.Error("realtime: authentication failed", "err", err)
			door.WriteError(w, http.StatusServiceUnavailable, apperr.Unavailable, "cannot authenticate now; retry")
		}
		return
	}
	// Accept hijacks the connection, which lifts the HTTP server's read
	// and write deadlines: pings keep it honest instead, and every write
	// has its own timeout.
	ws, err := websocket.Accept(w, r, opts) // refuses a foreign Origin too (never InsecureSkipVerify)
	if err != nil {
		return // Accept has answered the handshake
	}
	cfg := h.Config.withDefaults()
	ws.SetReadLimit(cfg.HardReadLimit)
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{h: h, cfg: cfg, ws: ws, header: header, principal: principal, ctx: ctx, cancel: cancel,
		subs: map[string]*subState{}, kick: make(chan struct{}, 1)}
	cfg.Metrics.opened()
	defer cfg.Metrics.closed()
	c.serve()
}

type conn struct {
	h      *Handler
	cfg    Config
	ws     *websocket.Conn
	header string
	// principal is who authenticated at the handshake: the identity whose
	// revocations and membership changes the pumps watch for.
	principal *auth.Principal
	codec     codec // set by the first frame, before any pump starts
	ctx       context.Context
	cancel    context.CancelFunc
	kick      chan struct{} // asks the guard to re-check now

	mu     sync.Mutex
	subs   map[string]*subState
	dead   *Error // set once the credential is no longer valid
	nextID int
	wg     sync.WaitGroup
}

type subState struct {
	st *stream
	// cancel ends the pump; a *Error cause is sent as its "ended"
	// notification (nil: unsubscribed, nothing to send).
	cancel context.CancelCauseFunc
	done   chan struct{}
}

func (c *conn) serve() {
	defer func() {
		c.cancel()
		c.wg.Wait()
		_ = c.ws.CloseNow()
	}()
	c.wg.Add(1)
	go c.guard()
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.keepAlive() }()
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

// keepAlive pings the client every PingInterval and drops the connection
// when a ping goes unanswered for PingTimeout (the serve loop's reads
// process the pongs).
func (c *conn) keepAlive() {
	for {
		t := c.h.Clock.NewTimer(c.cfg.PingInterval)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		if !c.ping() {
			if c.ctx.Err() == nil {
				c.h.Log.Debug("realtime: client did not answer a ping: dropped")
			}
			c.cancel()
			_ = c.ws.CloseNow() // unblocks the serve loop and any write
			return
		}
	}
}

// ping sends one ping and waits PingTimeout (on the clock) for its pong.
func (c *conn) ping() bool {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	t := c.h.Clock.NewTimer(c.cfg.PingTimeout)
	defer t.Stop()
	res := make(chan error, 1)
	go func() { res <- c.ws.Ping(ctx) }()
	var err error
	select {
	case err = <-res:
	case <-t.C():
		cancel()
		err = <-res
		if err == nil {
			err = errors.New("no pong in time")
		}
	}
	if c.ctx.Err() == nil { // not closing anyway
		c.cfg.Metrics.pinged(err == nil)
	}
	return err == nil
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
	// A dead credential learns nothing, not even whether a stream exists.
	if _, e := c.authenticate(c.ctx); e != nil {
		return nil, nil, e
	}
	st, e := c.h.resolveStream(c.ctx, p.Stream, c.principal)
	if e != nil {
		return nil, nil, e
	}
	wctx, cancel := context.WithTimeout(c.ctx, c.cfg.FeedWait)
	sub, err := c.h.Feed.SubscribeContext(wctx, func(ev event.Event) bool { return st.live(ev) || c.concerns(st, ev) })
	cancel()
	if err != nil {
		return nil, nil, rpcErr(CodeUnavailable, "the event feed is not running; retry")
	}
	// Authorized once the feed's position is fixed: a revocation or role
	// change committed before it is seen here, a later one by the pump.
	e = c.recheck(c.ctx, st)
	if e == nil && p.AfterSeq != nil && *p.AfterSeq > sub.Start() {
		// Beyond this feed's position: fine up to the log's head (another
		// instance's feed may be ahead of this one), never past it.
		e = c.checkHead(*p.AfterSeq)
	}
	// Live only: from the log's head as of now, not from this feed's
	// position, which may trail a commit made just before the subscribe.
	from := sub.Start()
	if e == nil && p.AfterSeq == nil {
		var head int64
		if head, e = c.head(); e == nil {
			from = max(from, head)
		}
	}
	c.mu.Lock()
	if e == nil && c.dead != nil {
		e = c.dead
	}
	if e != nil {
		c.mu.Unlock()
		sub.Close()
		return nil, nil, e
	}
	c.nextID++
	id := fmt.Sprintf("s%d", c.nextID)
	sctx, scancel := context.WithCancelCause(c.ctx)
	ss := &subState{st: st, cancel: scancel, done: make(chan struct{})}
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
			c.pump(sctx, id, st, sub, p.AfterSeq, from)
		}()
	}
	return SubscribeResult{Subscription: id, Position: from}, start, nil
}

// authenticate re-checks the connection's credential.
func (c *conn) authenticate(ctx context.Context) (*auth.Principal, *Error) {
	p, err := c.h.Auth.Authenticate(ctx, c.header)
	switch code := apperr.Code(err); {
	case err == nil:
		return p, nil
	case code == apperr.Unauthenticated || code == apperr.Forbidden:
		return nil, rpcErr(CodeUnauthorized, "the connection's credential is no longer valid: %v", err)
	case ctx.Err() == nil:
		c.h.Log.Error("realtime: re-authentication failed", "err", err)
	}
	return nil, rpcErr(CodeUnavailable, "cannot authenticate now; retry")
}

// recheck re-authenticates the credential and checks that it may still
// read st.
func (c *conn) recheck(ctx context.Context, st *stream) *Error {
	p, e := c.authenticate(ctx)
	if e != nil {
		return e
	}
	return c.h.authorize(ctx, p, st)
}

// concerns reports whether e may change what the connection's credential
// may read in st: the revocation of its token, or a change to the
// memberships, in st's organization, of the person behind it (the human,
// or the creator of a token).
func (c *conn) concerns(st *stream, e event.Event) bool {
	p := c.principal
	switch {
	case e.Type == event.TypeOf[auth.TokenRevoked]():
		return p.TokenID != "" && e.EntityID == p.TokenID
	case e.Type == event.TypeOf[auth.SessionEnded]():
		return p.SessionID != "" && e.EntityID == p.SessionID
	case e.EntityType == "member":
		return e.OrganizationID == st.orgID && (e.EntityID == p.Subject || p.ActingFor != "" && e.EntityID == p.ActingFor)
	}
	return false
}

// guard ends what the connection's credential no longer allows: at the
// credential's expiry, when a pump found it invalid (kick), and every
// AuthRecheck as a safety net. It returns when the connection ends.
func (c *conn) guard() {
	defer c.wg.Done()
	clk := c.h.Clock
	var expiry <-chan time.Time
	if exp := c.principal.ExpiresAt; !exp.IsZero() {
		t := clk.NewTimer(exp.Sub(clk.Now()))
		defer t.Stop()
		expiry = t.C()
	}
	for {
		t := clk.NewTimer(c.cfg.AuthRecheck)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-expiry:
		case <-c.kick:
		}
		t.Stop()
		if c.recheckAll() {
			return
		}
	}
}

// recheckAll re-checks the credential and every subscription. A
// credential that is no longer valid ends every subscription and closes
// the connection (true); a stream the caller may no longer read, or one
// whose access cannot be decided now, ends alone.
func (c *conn) recheckAll() bool {
	p, e := c.authenticate(c.ctx)
	if e != nil && e.Code == CodeUnauthorized {
		c.h.Log.Info("realtime: closing a connection whose credential is no longer valid", "subject", c.principal.Subject, "reason", e.Message)
		c.end(e)
		return true
	}
	c.mu.Lock()
	subs := maps.Clone(c.subs)
	c.mu.Unlock()
	for _, ss := range subs {
		se := e
		if se == nil {
			se = c.h.authorize(c.ctx, p, ss.st)
		}
		if se != nil {
			ss.cancel(se)
		}
	}
	return false
}

// end ends every subscription with e (each gets its "ended" notification)
// and closes the connection: its credential is no longer valid.
func (c *conn) end(e *Error) {
	c.mu.Lock()
	if c.dead == nil {
		c.dead = e
	}
	subs := maps.Clone(c.subs)
	c.mu.Unlock()
	for _, ss := range subs {
		ss.cancel(e)
	}
	for _, ss := range subs {
		<-ss.done
	}
	_ = c.ws.Close(websocket.StatusPolicyViolation, "the credential is no longer valid")
	c.cancel()
}

// kickGuard asks the guard to re-check now (never blocks).
func (c *conn) kickGuard() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// checkHead refuses an after_seq beyond the log's last seq.
func (c *conn) checkHead(after int64) *Error {
	head, e := c.head()
	if e != nil {
		return e
	}
	if after > head {
		return &Error{Code: CodeInvalidParams, Message: fmt.Sprintf(`invalid params: "after_seq" %d is beyond the log's head (seq %d): `+
			`resume from a seq you received, at most %d`, after, head, head), Data: map[string]int64{"head": head}}
	}
	return nil
}

// head reads the log's last seq.
func (c *conn) head() (int64, *Error) {
	head, err := event.LastSeq(c.ctx, c.h.Store)
	if err != nil {
		c.h.Log.Warn("realtime: cannot read the log's head", "err", err)
		return 0, rpcErr(CodeUnavailable, "the log cannot be read now; retry")
	}
	return head, nil
}

func (c *conn) unsubscribe(id string) (any, *Error) {
	c.mu.Lock()
	ss, ok := c.subs[id]
	delete(c.subs, id)
	c.mu.Unlock()
	if !ok {
		return nil, rpcErr(CodeInvalidParams, "invalid params: no subscription %q on this connection", id)
	}
	ss.cancel(nil)
	<-ss.done // no notification of it follows the answer
	return true, nil
}

// pump replays (after, start] from the log, then forwards live events.
func (c *conn) pump(ctx context.Context, id string, st *stream, sub *feed.Subscription, after *int64, liveFrom int64) {
	msgp := c.codec.frame() == websocket.MessageBinary
	start := sub.Start()
	last := liveFrom
	send := func(e event.Event) bool {
		if ctx.Err() != nil {
			return false // ended (by the guard, too): nothing more goes out
		}
		n, err := c.h.encoded.notification(id, e, msgp)
		if err != nil {
			c.h.Log.Error("realtime: encode failed", "err", err)
			c.cancel()
			return false
		}
		return c.write(n)
	}
	ended := false
	end := func(method string, code int, msg string) {
		ended = true
		c.write(notification{JSONRPC: "2.0", Method: method, Params: EndParams{Subscription: id, LastSeq: last, Code: code, Message: msg}})
	}
	defer func() {
		// Ended by the guard: say why.
		var e *Error
		if !ended && errors.As(context.Cause(ctx), &e) {
			end(NotifyEnded, e.Code, e.Message)
		}
	}()
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
			if c.concerns(st, e) {
				// Nothing after a revocation or role change is delivered
				// before the access it changed is re-checked.
				if re := c.recheck(ctx, st); re != nil {
					if ctx.Err() != nil {
						return
					}
					if re.Code == CodeUnauthorized {
						c.kickGuard() // and every other subscription
					}
					end(NotifyEnded, re.Code, re.Message)
					return
				}
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

// sameOrigin reports whether r's Origin, if any, is r's own host or one of
// patterns (coder/websocket's rule, checked before authenticating).
func sameOrigin(r *http.Request, patterns []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser's page
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, p := range patterns {
		if ok, err := path.Match(strings.ToLower(p), strings.ToLower(u.Host)); err == nil && ok {
			return true
		}
	}
	return false
}
