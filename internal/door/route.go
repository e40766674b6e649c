package door

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/openapi"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/strictjson"
	"github.com/ballet/ballet/internal/transition"
)

// Caller is a door's request type: a struct of the door's own that embeds
// *Call (and so has its methods) and adds the caller it resolved.
type Caller interface{ call() *Call }

// Route is one endpoint of a door whose requests are R and whose
// permissions are P.
type Route[R Caller, P ~string] struct {
	Method  string
	Path    string // net/http pattern path below the table's Prefix, e.g. /api/v1/items/{item}
	Perm    P
	Summary string
	// Query documents the query parameters (OpenAPI).
	Query []openapi.Param
	// Request and Response are zero values of the body types, for the
	// OpenAPI document (nil: no body).
	Request  any
	Response any
	Status   int // success status (200 when 0)
	// Also lists the other statuses the handler answers beyond those every
	// route may give (openapi.Statuses): a success's alternative
	// (HTTPStatus; 204 has no body) or a route's own error, e.g. 422.
	Also []int
	// OptionalBody: the request body may be left out.
	OptionalBody bool
	// RawBody, when set, is the media type of a request body of raw bytes
	// (not JSON; Request is then unused): the handler reads it with
	// Call.Raw.
	RawBody string
	// MaxBody is the route's own request body limit, instead of the
	// table's: a protocol's fixed limit.
	MaxBody int64
	// Hold is the longest the handler may keep the request waiting (a long
	// poll). The server's read and write timeouts would cut it short, so
	// for such a route the body is read first, under the read timeout, and
	// then the connection's deadlines move to Hold plus the write timeout
	// from then.
	Hold time.Duration
	// Heavy marks a route whose work grows with its body (parsing a
	// pipeline of up to the body limit takes a core and ~200 bytes of
	// memory per byte for a moment): at most one such request per slot
	// runs at a time; the others wait their turn, so a burst of them
	// cannot exhaust memory or starve the other routes.
	Heavy bool
	// HTML: the route may also answer its success as a page (an HTMLPage
	// from Handle); the OpenAPI document lists text/html beside JSON.
	HTML   bool
	Handle func(r R) (any, error)
	// Serve, set instead of Handle, is for a route that speaks a protocol
	// of its own (MCP): it checks access like Handle and returns the
	// handler that answers the request; an error is answered in the one
	// error shape, and so are the plain-text errors (http.Error) that
	// handler writes. Other methods on its path are 405.
	Serve func(r R) (http.Handler, error)
}

// Statuses lists every status the route may answer (openapi.Statuses).
func (rt *Route[R, P]) Statuses() []int {
	return openapi.Statuses(rt.Status, rt.Method, rt.Request != nil, rt.RawBody != "", rt.Also...)
}

// Call is a request as every door sees it, after the door's prologue: the
// HTTP request, its body limit, and whether access was checked (the
// guard).
type Call struct {
	*http.Request
	w       http.ResponseWriter
	limit   int64
	rawBody string
	checked bool
}

func (c *Call) call() *Call { return c }

// Checked records that the request's access was checked: by the door's
// prologue (a scope it decides alone), by a handler once it knows the
// scope, or for a route whose scope is the caller itself (its own
// tokens), after the handler has filtered by the caller. A route whose
// handler returns without it answers 500.
func (c *Call) Checked() { c.checked = true }

// SetCookie adds a Set-Cookie header to the answer.
func (c *Call) SetCookie(ck *http.Cookie) { http.SetCookie(c.w, ck) }

// Writer is the answer's writer, for headers a door sets beside its
// answer (a cookie cleared).
func (c *Call) Writer() http.ResponseWriter { return c.w }

// Decode reads a JSON body strictly into v (package strictjson): unknown,
// duplicate or differently-cased fields, wrong types, invalid UTF-8,
// trailing data and oversized bodies are errors naming the problem and its
// field.
func (c *Call) Decode(v any) error {
	// The body must be JSON whatever Content-Type says (curl -d sends a
	// form type by default); anything else fails as malformed JSON.
	return DecodeError(strictjson.Read(c.Body, v), c.limit)
}

// Raw reads the raw body of a route with RawBody: another Content-Type
// is a 415, a body over the route's limit a 413.
func (c *Call) Raw() ([]byte, error) {
	ct := c.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != c.rawBody {
		return nil, apperr.New(apperr.Unsupported, "the body must be sent as Content-Type: %s, not %q", c.rawBody, ct)
	}
	b, err := io.ReadAll(c.Body)
	if err != nil {
		return nil, DecodeError(err, c.limit)
	}
	return b, nil
}

// QueryInt reads an optional integer query parameter within [min, max].
func (c *Call) QueryInt(name string, def, min, max int64) (int64, error) {
	return QueryInt(c.Request, name, def, min, max)
}

// QueryBool reads an optional boolean query parameter (true or false).
func (c *Call) QueryBool(name string) (bool, error) { return QueryBool(c.Request, name) }

// Table is a door's route table and its handler prologue.
type Table[R Caller, P ~string] struct {
	Log *slog.Logger // internal errors, once each
	// Prefix stands before every route's Path (the Knowledge service's
	// routes live below its organization).
	Prefix string
	// MaxBody bounds request bodies (a route's MaxBody overrides it).
	MaxBody int64
	// WriteTimeout is the server's: a route that holds requests gets it on
	// top of its Hold.
	WriteTimeout time.Duration
	// Realm is the WWW-Authenticate realm of a 401.
	Realm string
	// HeavySlots is how many Heavy requests run at once (one per core
	// when 0).
	HeavySlots int
	// Open is the door's own prologue: it authenticates the request (and
	// may check access where the route alone decides it, calling
	// c.Checked), and returns the door's request. Its error is answered,
	// a 401 with WWW-Authenticate.
	Open func(w http.ResponseWriter, c *Call, rt *Route[R, P]) (R, error)

	routes []*Route[R, P]
	heavy  chan struct{}
}

// Add adds routes.
func (t *Table[R, P]) Add(routes ...*Route[R, P]) { t.routes = append(t.routes, routes...) }

// Routes returns the route table.
func (t *Table[R, P]) Routes() []*Route[R, P] { return t.routes }

// Register installs every route on mux.
func (t *Table[R, P]) Register(mux *http.ServeMux) {
	if t.heavy == nil {
		n := t.HeavySlots
		if n <= 0 {
			n = runtime.GOMAXPROCS(0)
		}
		t.heavy = make(chan struct{}, n)
	}
	for _, rt := range t.routes {
		mux.Handle(rt.Method+" "+t.Prefix+rt.Path, t.handler(rt))
		if rt.Serve != nil { // a protocol's endpoint: other methods are 405 (MCP: no event stream)
			mux.Handle(t.Prefix+rt.Path, notAllowed(rt.Method))
		}
	}
}

// Operations are the OpenAPI operations of the table, each with the
// security its permission takes.
func (t *Table[R, P]) Operations(security func(P) []any) []openapi.Operation {
	ops := make([]openapi.Operation, 0, len(t.routes))
	for _, rt := range t.routes {
		ops = append(ops, openapi.Operation{Method: rt.Method, Path: t.Prefix + rt.Path, Summary: rt.Summary, Permission: string(rt.Perm),
			Security: security(rt.Perm), Query: rt.Query, Request: rt.Request, Response: rt.Response, RawBody: rt.RawBody,
			OptionalBody: rt.OptionalBody, Statuses: rt.Statuses(), ProtocolErrors: rt.Serve != nil, HTML: rt.HTML})
	}
	return ops
}

func (t *Table[R, P]) handler(rt *Route[R, P]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		c := &Call{Request: hr, w: w, limit: t.bodyLimit(rt), rawBody: rt.RawBody}
		r, err := t.Open(w, c, rt)
		if err != nil {
			if apperr.Code(err) == apperr.Unauthenticated {
				w.Header().Set("WWW-Authenticate", `Bearer realm="`+t.Realm+`"`)
			}
			t.WriteErr(w, hr, err)
			return
		}
		if hr.Body != nil {
			hr.Body = http.MaxBytesReader(w, hr.Body, c.limit)
		}
		if rt.Hold > 0 {
			if err := t.hold(w, hr, rt.Hold); err != nil {
				t.WriteErr(w, hr, err)
				return
			}
		}
		if rt.Heavy {
			select {
			case t.heavy <- struct{}{}:
				defer func() { <-t.heavy }()
			case <-hr.Context().Done():
				return // the client gave up while waiting its turn
			}
		}
		if rt.Serve != nil {
			t.serve(w, c, rt, r)
			return
		}
		out, err := rt.Handle(r)
		if err == nil && !c.checked {
			err = fmt.Errorf("route %s %s returned without an access check", rt.Method, rt.Path)
		}
		if err != nil {
			t.WriteErr(w, hr, err)
			return
		}
		status := rt.Status
		if status == 0 {
			status = http.StatusOK
		}
		if s, ok := out.(interface{ HTTPStatus() int }); ok {
			status = s.HTTPStatus() // e.g. 200 instead of 201 for an idempotent repeat
		}
		if out == nil {
			w.WriteHeader(status)
			return
		}
		if page, ok := out.(HTMLPage); ok && rt.HTML {
			page.write(w, status)
			return
		}
		Write(w, status, out)
	})
}

// HTMLPage is a success answered as a page of HTML instead of JSON (a
// route with HTML). The page may style itself inline and nothing more:
// its policy still lets no script run and nobody frame it.
type HTMLPage string

func (p HTMLPage) write(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; sandbox")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, string(p))
}

// serve answers a request of a route with Serve.
func (t *Table[R, P]) serve(w http.ResponseWriter, c *Call, rt *Route[R, P], r R) {
	h, err := rt.Serve(r)
	if err == nil && !c.checked {
		err = fmt.Errorf("route %s %s returned without an access check", rt.Method, rt.Path)
	}
	if err != nil {
		t.WriteErr(w, c.Request, err)
		return
	}
	pw := &plainErrors{ResponseWriter: w}
	h.ServeHTTP(pw, c.Request)
	pw.finish()
}

// bodyLimit is the most a request body of rt may hold.
func (t *Table[R, P]) bodyLimit(rt *Route[R, P]) int64 {
	if rt.MaxBody > 0 {
		return rt.MaxBody
	}
	return t.MaxBody
}

// hold reads the body of a request that may wait up to d (under the
// server's read timeout, so a slow body is still cut off), then moves the
// connection's read and write deadlines to d plus the write timeout from
// now (http.ResponseController), past the server's own.
func (t *Table[R, P]) hold(w http.ResponseWriter, hr *http.Request, d time.Duration) error {
	if hr.Body != nil {
		b, err := io.ReadAll(hr.Body)
		if err != nil {
			return DecodeError(err, t.MaxBody)
		}
		hr.Body = io.NopCloser(bytes.NewReader(b))
	}
	until := time.Now().Add(d + t.WriteTimeout)
	rc := http.NewResponseController(w)
	err := errors.Join(rc.SetReadDeadline(until), rc.SetWriteDeadline(until))
	if err != nil && !errors.Is(err, http.ErrNotSupported) { // a test recorder has no deadlines
		return fmt.Errorf("hold the request open: %w", err)
	}
	return nil
}

// WriteErr answers err: an application error with its code's status; a
// write that lost its race past every retry as 409; nothing when the
// client went away; anything else as a 500 "internal error", logged here,
// once.
func (t *Table[R, P]) WriteErr(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apperr.Error
	switch {
	case errors.As(err, &ae) && ae.Code != apperr.Internal:
	case errors.Is(err, transition.ErrGaveUp) || errors.Is(err, store.ErrLostRace):
		ae = apperr.New(apperr.Conflict, "the resource changed concurrently; read it again and retry")
	case errors.Is(err, context.Canceled) || r.Context().Err() != nil:
		return // the client went away
	default:
		t.Log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = apperr.New(apperr.Internal, "internal error")
	}
	WriteApp(w, ae)
}

// notAllowed answers 405 naming the method a path takes.
func notAllowed(method string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", method)
		WriteError(w, http.StatusMethodNotAllowed, apperr.NotAllowed, fmt.Sprintf("%s takes only %s, not %s", r.URL.Path, method, r.Method))
	})
}

// NoRoute answers 404 for a path no route matches.
func NoRoute(w http.ResponseWriter, r *http.Request) {
	WriteError(w, http.StatusNotFound, apperr.NotFound, "no route for "+r.Method+" "+r.URL.Path)
}

// Document serves doc (an OpenAPI document) as JSON, encoded once. It
// panics if doc does not encode: plain maps and strings, a programming
// error.
func Document(doc any) http.Handler {
	b, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("encode the OpenAPI document: %v", err))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
}

// plainErrors gives the plain-text errors of a handler Ballet does not
// own (http.Error in a library) the one error shape.
type plainErrors struct {
	http.ResponseWriter
	status int // an error held back
	msg    bytes.Buffer
}

func (p *plainErrors) WriteHeader(status int) {
	if status >= 400 && strings.HasPrefix(p.Header().Get("Content-Type"), "text/plain") {
		p.status = status
		return
	}
	p.ResponseWriter.WriteHeader(status)
}

func (p *plainErrors) Write(b []byte) (int, error) {
	if p.status != 0 {
		return p.msg.Write(b)
	}
	return p.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines).
func (p *plainErrors) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// finish writes the error held back, if any.
func (p *plainErrors) finish() {
	if p.status == 0 {
		return
	}
	code, ok := CodeOf(p.status)
	if !ok {
		code = apperr.Invalid
	}
	WriteError(p.ResponseWriter, p.status, code, strings.TrimSpace(p.msg.String()))
}
