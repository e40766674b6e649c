// Package rqlite is the distributed storage engine: a small HTTP client for
// an rqlite cluster (DESIGN.md "Storage", rqlite v8).
//
// Writes. Every Exec is one POST /db/execute?transaction, so the batch
// commits atomically or not at all. Parameters are always bound. The
// request goes to one node; a follower forwards it to the leader itself
// (never ?redirect, ?queue or /db/request). A node that refuses the
// connection certainly did not receive the write, so the next URL is tried
// and the node that answered is remembered for the next call. Once a write
// may have reached a node (the connection broke after sending, a timeout, a
// leader change reported by the cluster), it is never re-sent: Exec returns
// an error matching store.ErrUnknownOutcome and the caller re-reads and
// retries, which the version check of every transition makes safe.
//
// Reads. Query is POST /db/query?level=<Options.Consistency>. The default
// level is "weak": the leader answers from its local database without a
// Raft round trip, so during a leader change a read may be slightly stale.
// Correctness never relies on read freshness: every write is guarded by a
// version check (the lost-race guard), so a decision made on a stale read
// fails with store.ErrLostRace and is retried from a fresh read.
// "linearizable" (and "strong") are available where freshness matters;
// "none" reads the contacted node's own copy. Reads are retried freely on
// other nodes, and for up to readRetryWindow while the cluster has no
// leader.
//
// Values. Responses are decoded with json.Number and converted exactly:
// integral numbers become int64, others float64, and every number of a
// column whose type rqlite reports as REAL (REAL affinity) becomes float64,
// as SQLite returns it. Rows therefore hold int64, float64, string or nil,
// like the SQLite engine, with one difference JSON cannot avoid: an
// integral REAL (3.0) in an untyped column or expression reads back as
// int64 3 (Scan into *float64 works either way). Arguments may be
// nil, string, int, int64, float64 or bool (sent as 1 or 0); anything else,
// including []byte (rqlite does not carry blobs faithfully), is refused
// before sending.
//
// Deployment: start rqlited with -fk. The SQLite engine enforces foreign
// keys, and rqlited does not unless told to.
//
// rqlite traps handled here (all seen with v8.43.4): rqlite turns a string
// parameter that looks like a hex blob literal (x'…') into a BLOB, so such
// strings are sent as CAST(x'…' AS TEXT) of their exact bytes; float64
// values are sent with a decimal point, or rqlite would bind 3.0 as the
// integer 3; strings must be valid UTF-8 (JSON would replace bad bytes);
// columns declared TIMESTAMP, DATETIME or DATE come back rewritten as time
// strings by rqlite's SQLite driver, so a query returning one is refused
// with an error (declare such columns INTEGER or TEXT); BOOLEAN columns come
// back as true/false and are returned as 1/0.
package rqlite

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/store"
)

// Read consistency levels accepted in Options.Consistency.
const (
	Weak         = "weak"
	Linearizable = "linearizable"
	Strong       = "strong"
	None         = "none"
)

const (
	defaultTimeout = 10 * time.Second
	// readRetryWindow bounds how long Query keeps retrying while no node
	// can answer (no leader, nodes restarting).
	readRetryWindow = 5 * time.Second
	minBackoff      = 10 * time.Millisecond
	maxBackoff      = 250 * time.Millisecond
	// maxErrorBody bounds how much of an error response is kept.
	maxErrorBody = 4 << 10
)

// Options configure a Store.
type Options struct {
	// URLs are the nodes' base URLs, e.g. http://127.0.0.1:4001. They are
	// tried in order, failing over when a node refuses the connection.
	URLs []string
	// Username and Password enable HTTP basic authentication when set.
	Username, Password string
	// Consistency is the read level: "weak" (default), "linearizable",
	// "strong" or "none".
	Consistency string
	// Timeout bounds each HTTP request; default 10s.
	Timeout time.Duration
	// HTTPClient is used if set; otherwise the Store makes its own, which
	// never follows redirects and checks before each write that the node
	// has not closed a kept-alive connection (so a restarted node's stale
	// connection fails over instead of giving an unknown outcome).
	HTTPClient *http.Client
}

// Store is a client for one rqlite cluster. It is safe for concurrent use.
type Store struct {
	urls       []string
	user, pass string
	level      string
	timeout    time.Duration
	client     *http.Client
	ownClient  bool
	current    atomic.Int64 // index in urls of the node that last answered
	closed     atomic.Bool
}

// Open checks the options and that at least one node answers (a local read
// that needs no leader), and returns the Store.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if len(opts.URLs) == 0 {
		return nil, errors.New("rqlite: no node URLs")
	}
	s := &Store{
		user:    opts.Username,
		pass:    opts.Password,
		level:   opts.Consistency,
		timeout: opts.Timeout,
		client:  opts.HTTPClient,
	}
	for _, raw := range opts.URLs {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("rqlite: node URL %q: %w", raw, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("rqlite: node URL %q: want http://host:port or https://host:port", raw)
		}
		s.urls = append(s.urls, strings.TrimRight(u.String(), "/"))
	}
	switch s.level {
	case "":
		s.level = Weak
	case Weak, Linearizable, Strong, None:
	default:
		return nil, fmt.Errorf("rqlite: consistency %q: want weak, linearizable, strong or none", opts.Consistency)
	}
	if s.timeout <= 0 {
		s.timeout = defaultTimeout
	}
	if s.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 32
		if tr.DialContext != nil {
			tr.DialContext = checkedDial(tr.DialContext)
		} else {
			tr.DialContext = checkedDial((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
		}
		s.client = &http.Client{
			Transport: tr,
			// rqlite never redirects without ?redirect, and following a
			// redirect would turn a POST into a GET.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		s.ownClient = true
	}
	body, err := encode([]store.Statement{store.Stmt("SELECT 1")})
	if err != nil {
		return nil, err
	}
	if _, err := s.read(ctx, "/db/query?level=none", body, false); err != nil {
		s.Close()
		return nil, fmt.Errorf("rqlite: open: %w", err)
	}
	return s, nil
}

// Engine returns "rqlite".
func (s *Store) Engine() string { return "rqlite" }

// URLs returns the node URLs in the order they are tried.
func (s *Store) URLs() []string { return append([]string(nil), s.urls...) }

// Close releases idle connections. It does not affect the cluster.
func (s *Store) Close() error {
	s.closed.Store(true)
	if s.ownClient {
		s.client.CloseIdleConnections()
	}
	return nil
}

// Exec runs the batch as one transaction on the leader.
func (s *Store) Exec(ctx context.Context, batch ...store.Statement) ([]store.Result, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	if s.closed.Load() {
		return nil, errors.New("rqlite: store is closed")
	}
	body, err := encode(batch)
	if err != nil {
		return nil, err
	}
	resp, err := s.write(ctx, body)
	if err != nil {
		return nil, err
	}
	for i, r := range resp.Results {
		if r.Error != "" {
			if i >= len(batch) {
				i = -1
			}
			return nil, &store.SQLError{Index: i, Message: r.Error}
		}
	}
	if len(resp.Results) != len(batch) {
		return nil, fmt.Errorf("%w: rqlite answered %d results for %d statements", store.ErrUnknownOutcome, len(resp.Results), len(batch))
	}
	out := make([]store.Result, len(batch))
	for i, r := range resp.Results {
		out[i] = store.Result{RowsAffected: r.RowsAffected} // omitted means 0
	}
	return out, nil
}

// Query runs one read at the configured consistency level.
func (s *Store) Query(ctx context.Context, q string, args ...any) (*store.Rows, error) {
	if s.closed.Load() {
		return nil, errors.New("rqlite: store is closed")
	}
	body, err := encode([]store.Statement{{SQL: q, Args: args}})
	if err != nil {
		return nil, err
	}
	resp, err := s.read(ctx, "/db/query?level="+s.level, body, true)
	if err != nil {
		return nil, err
	}
	if len(resp.Results) != 1 {
		return nil, fmt.Errorf("rqlite query: %d results for one statement", len(resp.Results))
	}
	r := resp.Results[0]
	if r.Error != "" {
		return nil, &store.SQLError{Index: -1, Message: r.Error}
	}
	return toRows(r)
}

// response is the JSON body of /db/execute and /db/query.
type response struct {
	Results []result `json:"results"`
	Error   string   `json:"error"`
}

type result struct {
	Columns      []string `json:"columns"`
	Types        []string `json:"types"`
	Values       [][]any  `json:"values"`
	RowsAffected int64    `json:"rows_affected"`
	Error        string   `json:"error"`
}

// write sends a write batch. It fails over to the next node only when the
// request certainly did not leave this process (the connection could not
// be made).
func (s *Store) write(ctx context.Context, body []byte) (*response, error) {
	const path = "/db/execute?transaction"
	n := len(s.urls)
	start := int(s.current.Load())
	var refused []error
	for k := range n {
		i := (start + k) % n
		a := s.do(ctx, s.urls[i], path, body)
		if a.err != nil && !a.sent {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("rqlite execute: %w", ctx.Err())
			}
			refused = append(refused, a.err)
			continue
		}
		s.current.Store(int64(i))
		if a.err != nil {
			return nil, fmt.Errorf("%w: rqlite execute on %s: %w", store.ErrUnknownOutcome, s.urls[i], a.err)
		}
		if a.status < 200 || a.status > 299 {
			text := httpText(a.body)
			if retryableStatus(a.status, text) {
				return nil, fmt.Errorf("%w: rqlite execute on %s: HTTP %d: %s", store.ErrUnknownOutcome, s.urls[i], a.status, text)
			}
			return nil, fmt.Errorf("rqlite execute on %s: HTTP %d: %s", s.urls[i], a.status, text)
		}
		resp, err := decode(a.body)
		if err != nil {
			return nil, fmt.Errorf("%w: rqlite execute on %s: %w", store.ErrUnknownOutcome, s.urls[i], err)
		}
		if resp.Error != "" {
			if unavailable(resp.Error) {
				return nil, fmt.Errorf("%w: rqlite execute on %s: %s", store.ErrUnknownOutcome, s.urls[i], resp.Error)
			}
			return nil, &store.SQLError{Index: -1, Message: resp.Error}
		}
		return resp, nil
	}
	return nil, fmt.Errorf("rqlite execute: no node reachable (nothing was sent): %w", errors.Join(refused...))
}

// read sends a query to each node in turn until one answers. With wait,
// it keeps trying for up to readRetryWindow (with backoff) while no node
// can answer, e.g. while the cluster elects a leader.
func (s *Store) read(ctx context.Context, path string, body []byte, wait bool) (*response, error) {
	n := len(s.urls)
	deadline := time.Now().Add(readRetryWindow)
	backoff := minBackoff
	for {
		start := int(s.current.Load())
		var errs []error
		for k := range n {
			i := (start + k) % n
			a := s.do(ctx, s.urls[i], path, body)
			if ctx.Err() != nil {
				return nil, fmt.Errorf("rqlite query: %w", ctx.Err())
			}
			if a.err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.urls[i], a.err))
				continue
			}
			if a.status < 200 || a.status > 299 {
				text := httpText(a.body)
				if retryableStatus(a.status, text) {
					errs = append(errs, fmt.Errorf("%s: HTTP %d: %s", s.urls[i], a.status, text))
					continue
				}
				return nil, fmt.Errorf("rqlite query on %s: HTTP %d: %s", s.urls[i], a.status, text)
			}
			resp, err := decode(a.body)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.urls[i], err))
				continue
			}
			if resp.Error != "" {
				if unavailable(resp.Error) {
					errs = append(errs, fmt.Errorf("%s: %s", s.urls[i], resp.Error))
					continue
				}
				return nil, &store.SQLError{Index: -1, Message: resp.Error}
			}
			s.current.Store(int64(i))
			return resp, nil
		}
		if !wait || time.Now().Add(backoff).After(deadline) {
			return nil, fmt.Errorf("rqlite query: no node answered: %w", errors.Join(errs...))
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("rqlite query: %w (last: %w)", ctx.Err(), errors.Join(errs...))
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// attempt is the outcome of one HTTP request.
type attempt struct {
	status int
	body   []byte
	// sent is false only when the request certainly never reached the
	// node: no connection could be made.
	sent bool
	err  error
}

func (s *Store) do(ctx context.Context, base, path string, body []byte) attempt {
	for try := 0; ; try++ {
		a := s.doOnce(ctx, base, path, body)
		// The node had closed the kept-alive connection before the request
		// was put on it: nothing was sent. Try once more on a new one.
		if a.err != nil && !a.sent && try < 2 && closedIdle(a.err) && ctx.Err() == nil {
			continue
		}
		return a
	}
}

func (s *Store) doOnce(ctx context.Context, base, path string, body []byte) attempt {
	if err := ctx.Err(); err != nil {
		return attempt{err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var gotConn atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		return attempt{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if s.user != "" {
		req.SetBasicAuth(s.user, s.pass)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// The transport re-dials by itself only when nothing was written,
		// so a final dial error means the node never saw the request.
		return attempt{err: err, sent: gotConn.Load() && !isDialError(err) && !closedIdle(err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return attempt{err: fmt.Errorf("read response: %w", err), sent: true}
	}
	return attempt{status: resp.StatusCode, body: b, sent: true}
}

// closedIdle reports net/http's errServerClosedIdle: the connection's read
// loop saw the node close it before this request was registered on it, so
// the request was not sent (net/http retries that by itself only for
// idempotent methods).
func closedIdle(err error) bool {
	return strings.Contains(err.Error(), "http: server closed idle connection")
}

// retryableStatus reports whether an HTTP error status says the cluster
// (or a gateway in front of it) could not process the request now, rather
// than that the request was wrong.
func retryableStatus(status int, text string) bool {
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return status >= 500 && unavailable(text)
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// unavailable reports whether an rqlite error text describes the cluster
// rather than the SQL: no leader, a leader change, a failed forward to the
// leader, a node shutting down or timing out.
func unavailable(text string) bool {
	t := strings.ToLower(text)
	for _, m := range []string{
		"leader", // leader not found, not leader, leadership lost, leadership transfer
		"remote node",
		"raft",
		"shutdown",
		"shut down",
		"timed out",
		"timeout",
		"store not open",
		"store not ready",
		"connection refused",
		"connection reset",
		"broken pipe",
		"eof",
	} {
		if strings.Contains(t, m) {
			return true
		}
	}
	return false
}

func httpText(b []byte) string {
	if len(b) > maxErrorBody {
		b = b[:maxErrorBody]
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "(empty body)"
	}
	return t
}

func decode(b []byte) (*response, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var r response
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("decode response %q: %w", httpText(b), err)
	}
	return &r, nil
}

// encode builds the JSON body: one array per statement, SQL first, then
// the positional parameters.
func encode(batch []store.Statement) ([]byte, error) {
	stmts := make([][]any, len(batch))
	for i, st := range batch {
		if strings.TrimSpace(st.SQL) == "" {
			return nil, fmt.Errorf("rqlite: statement %d is empty", i)
		}
		if !utf8.ValidString(st.SQL) {
			return nil, fmt.Errorf("rqlite: statement %d is not valid UTF-8", i)
		}
		q := st.SQL
		row := make([]any, 1, len(st.Args)+1)
		var hexArgs []int
		for j, a := range st.Args {
			v, err := param(a)
			if err != nil {
				return nil, fmt.Errorf("rqlite: statement %d argument %d: %w", i, j+1, err)
			}
			if str, ok := v.(string); ok && looksHex(str) {
				hexArgs = append(hexArgs, j)
				v = "x'" + hex.EncodeToString([]byte(str)) + "'"
			}
			row = append(row, v)
		}
		if len(hexArgs) > 0 {
			var err error
			if q, err = castArgs(q, len(st.Args), hexArgs); err != nil {
				return nil, fmt.Errorf("rqlite: statement %d: %w", i, err)
			}
		}
		row[0] = q
		stmts[i] = row
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(stmts); err != nil {
		return nil, fmt.Errorf("rqlite: encode request: %w", err)
	}
	return buf.Bytes(), nil
}

// param converts an argument to its JSON form.
func param(a any) (any, error) {
	switch v := a.(type) {
	case nil:
		return nil, nil
	case string:
		if !utf8.ValidString(v) {
			return nil, errors.New("string is not valid UTF-8 (rqlite carries text as JSON)")
		}
		return v, nil
	case int:
		return int64(v), nil
	case int64:
		return v, nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("float %v cannot be stored", v)
		}
		// rqlite binds a JSON number without a fraction or exponent as an
		// integer: keep a float a float.
		f := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(f, ".eE") {
			f += ".0"
		}
		return json.Number(f), nil
	case bool:
		if v {
			return int64(1), nil
		}
		return int64(0), nil
	case []byte:
		return nil, errors.New("[]byte is not supported on rqlite (it does not carry blobs faithfully): store text")
	default:
		return nil, fmt.Errorf("unsupported type %T: use nil, string, int, int64, float64 or bool", a)
	}
}

// looksHex reports whether rqlite would bind the string as a BLOB: it
// treats any parameter of the form x'<hex>' (after trimming spaces) as a
// blob literal (db.ParseHex in rqlite v8).
func looksHex(s string) bool {
	t := strings.TrimSpace(s)
	if len(t) < 3 || (t[0] != 'x' && t[0] != 'X') {
		return false
	}
	t = t[1:]
	if t[0] != '\'' || t[len(t)-1] != '\'' {
		return false
	}
	_, err := hex.DecodeString(t[1 : len(t)-1])
	return err == nil
}

// castArgs rewrites the placeholders of the given arguments (0-based) as
// CAST(? AS TEXT), so that a string sent as a hex blob is bound as the
// text it was. It handles statements whose placeholders are all plain "?".
func castArgs(q string, nargs int, which []int) (string, error) {
	pos, ok := placeholders(q)
	if !ok {
		return "", errors.New("a string argument looks like a blob literal (x'…'), which rqlite would store as a BLOB, and the statement uses numbered or named parameters, so it cannot be rewritten: use plain ? placeholders")
	}
	if len(pos) != nargs {
		return "", fmt.Errorf("%d placeholders for %d arguments", len(pos), nargs)
	}
	var b strings.Builder
	last := 0
	for _, j := range which {
		p := pos[j]
		b.WriteString(q[last:p])
		b.WriteString("CAST(? AS TEXT)")
		last = p + 1
	}
	b.WriteString(q[last:])
	return b.String(), nil
}

// placeholders returns the byte offsets of the "?" parameters in q,
// skipping string literals, quoted identifiers and comments. ok is false if
// q also uses numbered (?NNN) or named (:a, @a, $a) parameters.
func placeholders(q string) (pos []int, ok bool) {
	isIdent := func(c byte) bool {
		return c == '_' || c == '$' || c >= 0x80 || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
	}
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(q) {
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c {
						j += 2
						continue
					}
					break
				}
				j++
			}
			i = j + 1
		case c == '[':
			j := strings.IndexByte(q[i:], ']')
			if j < 0 {
				return pos, true
			}
			i += j + 1
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				return pos, true
			}
			i += j + 1
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			j := strings.Index(q[i+2:], "*/")
			if j < 0 {
				return pos, true
			}
			i += j + 4
		case c == '?':
			if i+1 < len(q) && '0' <= q[i+1] && q[i+1] <= '9' {
				return nil, false
			}
			pos = append(pos, i)
			i++
		case c == ':' || c == '@' || c == '$':
			if i+1 < len(q) && isIdent(q[i+1]) {
				return nil, false
			}
			i++
		case isIdent(c):
			for i < len(q) && isIdent(q[i]) {
				i++
			}
		default:
			i++
		}
	}
	return pos, true
}

// toRows converts one query result, numbers exactly.
func toRows(r result) (*store.Rows, error) {
	real := make([]bool, len(r.Columns))
	for c := range r.Columns {
		if c >= len(r.Types) {
			break
		}
		switch t := r.Types[c]; t {
		case "timestamp", "datetime", "date":
			return nil, fmt.Errorf("rqlite query: column %q is declared %s, which rqlite returns rewritten as a time string: declare it INTEGER or TEXT", r.Columns[c], t)
		}
		real[c] = realAffinity(r.Types[c])
	}
	out := &store.Rows{Columns: r.Columns}
	if out.Columns == nil {
		out.Columns = []string{}
	}
	for _, row := range r.Values {
		if len(row) != len(r.Columns) {
			return nil, fmt.Errorf("rqlite query: row of %d values for %d columns", len(row), len(r.Columns))
		}
		vals := make([]any, len(row))
		for c, v := range row {
			x, err := value(v, real[c])
			if err != nil {
				return nil, fmt.Errorf("rqlite query: column %q: %w", r.Columns[c], err)
			}
			vals[c] = x
		}
		out.Values = append(out.Values, vals)
	}
	return out, nil
}

func value(v any, real bool) (any, error) {
	switch x := v.(type) {
	case nil, string:
		return x, nil
	case json.Number:
		if !real {
			if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
				return n, nil
			}
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", x, err)
		}
		return f, nil
	case bool: // a column declared BOOLEAN
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	default:
		return nil, fmt.Errorf("unexpected value %T %v", v, v)
	}
}

// realAffinity applies SQLite's column affinity rules to a declared type.
func realAffinity(decl string) bool {
	t := strings.ToUpper(decl)
	if strings.Contains(t, "INT") || strings.Contains(t, "CHAR") || strings.Contains(t, "CLOB") ||
		strings.Contains(t, "TEXT") || strings.Contains(t, "BLOB") {
		return false
	}
	return strings.Contains(t, "REAL") || strings.Contains(t, "FLOA") || strings.Contains(t, "DOUB")
}
