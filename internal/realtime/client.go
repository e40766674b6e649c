package realtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/coder/websocket"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/outbound"
)

// ErrClosed is returned once the client's connection has ended.
var ErrClosed = errors.New("realtime: connection closed")

// DialOptions tune a client.
type DialOptions struct {
	// MessagePack selects binary MessagePack frames (default: JSON text).
	MessagePack bool
	// HTTPClient for the handshake (default http.DefaultClient; its cookie
	// jar sends a browser session's cookie).
	HTTPClient *http.Client
	// Header adds handshake headers (a browser's Origin).
	Header http.Header
	// Buffer is the number of events buffered per subscription before the
	// client stops reading (and the server eventually reports lagged).
	// Default 256.
	Buffer int
}

// Client is a realtime API connection.
type Client struct {
	ws    *websocket.Conn
	codec codec
	buf   int

	mu      sync.Mutex
	nextID  int64
	pending map[string]chan *message
	hookm   map[string]func(rawValue)
	subs    map[string]*Subscription
	err     error
	closing bool
	done    chan struct{}
}

// Dial connects to a Core. base is the server's URL (http://host:port) or
// the full realtime URL; token is the bearer token.
func Dial(ctx context.Context, base, token string, opts *DialOptions) (*Client, error) {
	var o DialOptions
	if opts != nil {
		o = *opts
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("realtime: server URL %q: %w", base, err)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = Path
	}
	h := o.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	ws, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: outbound.Guard(o.HTTPClient), HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, &HandshakeError{Status: resp.StatusCode, Err: err}
		}
		return nil, fmt.Errorf("realtime: dial %s: %w", u.Redacted(), err)
	}
	ws.SetReadLimit(16 << 20)
	c := &Client{ws: ws, codec: jsonCodec{}, buf: o.Buffer, pending: map[string]chan *message{}, hookm: map[string]func(rawValue){},
		subs: map[string]*Subscription{}, done: make(chan struct{})}
	if o.MessagePack {
		c.codec = msgpackCodec{}
	}
	if c.buf <= 0 {
		c.buf = 256
	}
	go c.readLoop()
	return c, nil
}

// HandshakeError is a refused WebSocket handshake (401: bad token).
type HandshakeError struct {
	Status int
	Err    error
}

func (e *HandshakeError) Error() string {
	return fmt.Sprintf("realtime: handshake refused with HTTP %d: %v", e.Status, e.Err)
}

func (e *HandshakeError) Unwrap() error { return e.Err }

// Close closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	err := c.ws.Close(websocket.StatusNormalClosure, "")
	<-c.done
	return err
}

// Done is closed when the connection has ended; Err tells why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (nil while it is up).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Subscription is a client-side subscription.
type Subscription struct {
	ID string
	// Position is the seq the server starts from: events after it follow
	// (after the replay, if one was asked for).
	Position int64
	c        chan event.Event
	quit     chan struct{}
	once     sync.Once

	mu   sync.Mutex
	err  error
	last int64
}

// C delivers the events; it is closed when the subscription ends (Err
// tells why).
func (s *Subscription) C() <-chan event.Event { return s.c }

// Err is why the subscription ended: an *Error with CodeLagged or
// CodeUnavailable (resume from LastSeq), CodeForbidden (the stream may no
// longer be read) or CodeUnauthorized (the credential is no longer valid),
// ErrClosed or a connection error; nil after Unsubscribe.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// LastSeq is the position the server reported when the subscription ended
// (0 while it runs); resume with it when it is higher than the last event
// received.
func (s *Subscription) LastSeq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// LiveOnly as afterSeq subscribes without a replay.
const LiveOnly = -1

// Subscribe subscribes to a stream ("project:ACME", "item:ACME-42",
// "org:acme"), replaying the events after afterSeq first (LiveOnly: none).
func (c *Client) Subscribe(ctx context.Context, stream string, afterSeq int64) (*Subscription, error) {
	p := SubscribeParams{Stream: stream}
	if afterSeq >= 0 {
		p.AfterSeq = &afterSeq
	}
	// Register the channel before the answer can arrive: the server sends
	// events only after answering, and the read loop routes them by id.
	var res SubscribeResult
	sub := &Subscription{c: make(chan event.Event, c.buf), quit: make(chan struct{})}
	err := c.call(ctx, MethodSubscribe, p, &res, func(raw rawValue) {
		var r SubscribeResult
		if c.codec.decode(raw, &r) == nil {
			sub.ID, sub.Position = r.Subscription, r.Position
			c.subs[r.Subscription] = sub // under c.mu in the read loop
		}
	})
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// Unsubscribe ends a subscription; its channel is closed (events not yet
// received are dropped).
func (c *Client) Unsubscribe(ctx context.Context, sub *Subscription) error {
	sub.once.Do(func() { close(sub.quit) })
	var ok bool
	return c.call(ctx, MethodUnsubscribe, UnsubscribeParams{Subscription: sub.ID}, &ok, func(rawValue) {
		if c.subs[sub.ID] == sub { // in the read loop, the only sender
			delete(c.subs, sub.ID)
			close(sub.c)
		}
	})
}

// Ping round-trips a ping.
func (c *Client) Ping(ctx context.Context) error {
	var s string
	return c.call(ctx, MethodPing, nil, &s, nil)
}

// call sends a request and waits for its answer. onResult, if set, runs in
// the read loop under c.mu before any later message is handled.
func (c *Client) call(ctx context.Context, method string, params, result any, onResult func(rawValue)) error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	c.nextID++
	id := c.nextID
	key := fmt.Sprint(id)
	ch := make(chan *message, 1)
	c.pending[key] = ch
	c.mu.Unlock()
	b, err := c.codec.marshal(request{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		return err
	}
	if onResult != nil {
		// stash the hook with the pending entry
		c.mu.Lock()
		c.hooks()[key] = onResult
		c.mu.Unlock()
	}
	if err := c.ws.Write(ctx, c.codec.frame(), b); err != nil {
		c.forget(key)
		return fmt.Errorf("realtime: send %s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m == nil {
			return c.Err()
		}
		if m.Error != nil {
			return m.Error
		}
		if result != nil {
			if err := c.codec.decode(m.Result, result); err != nil {
				return fmt.Errorf("realtime: decode %s result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.forget(key)
		return ctx.Err()
	}
}

func (c *Client) hooks() map[string]func(rawValue) { return c.hookm }

func (c *Client) forget(key string) {
	c.mu.Lock()
	delete(c.pending, key)
	delete(c.hooks(), key)
	c.mu.Unlock()
}

func (c *Client) readLoop() {
	var err error
	defer func() {
		c.mu.Lock()
		if err == nil || c.closing {
			err = ErrClosed
		}
		c.err = err
		for k, ch := range c.pending {
			close(ch)
			delete(c.pending, k)
		}
		for id, s := range c.subs {
			s.mu.Lock()
			if s.err == nil {
				s.err = err
			}
			s.mu.Unlock()
			close(s.c)
			delete(c.subs, id)
		}
		c.mu.Unlock()
		close(c.done)
	}()
	for {
		var b []byte
		_, b, err = c.ws.Read(context.Background())
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) && ce.Code == websocket.StatusNormalClosure {
				err = ErrClosed
			}
			return
		}
		m, perr := c.codec.decodeMessage(b)
		if perr != nil {
			continue
		}
		switch m.Method {
		case "":
			key := fmt.Sprint(m.ID)
			if jn, ok := m.ID.(interface{ String() string }); ok {
				key = jn.String()
			}
			c.mu.Lock()
			ch := c.pending[key]
			delete(c.pending, key)
			if hook := c.hooks()[key]; hook != nil {
				delete(c.hooks(), key)
				if m.Error == nil {
					hook(m.Result)
				}
			}
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		case NotifyEvent:
			var p EventParams
			if c.codec.decode(m.Params, &p) != nil {
				continue
			}
			c.mu.Lock()
			s := c.subs[p.Subscription]
			c.mu.Unlock()
			if s != nil {
				select {
				case s.c <- p.Event.ToEvent(): // back-pressure: stop reading while full
				case <-s.quit:
				}
			}
		case NotifyLagged, NotifyEnded:
			var p EndParams
			if c.codec.decode(m.Params, &p) != nil {
				continue
			}
			c.mu.Lock()
			s := c.subs[p.Subscription]
			if s != nil {
				delete(c.subs, p.Subscription)
				s.mu.Lock()
				s.err = &Error{Code: p.Code, Message: p.Message}
				s.last = p.LastSeq
				s.mu.Unlock()
				close(s.c)
			}
			c.mu.Unlock()
		}
	}
}

// IsLagged reports whether err ended a subscription that fell behind.
func IsLagged(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeLagged
}

// IsForbidden reports whether err refused a stream, or ended a
// subscription whose stream the caller may no longer read.
func IsForbidden(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeForbidden
}

// IsUnauthorized reports whether err says the connection's credential is
// no longer valid (revoked, expired or void).
func IsUnauthorized(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeUnauthorized
}
