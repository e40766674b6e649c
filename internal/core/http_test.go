package core_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/tracker"
)

// These tests run Core's own HTTP server (apitest.New serves through
// Core.HTTPServer and Core.LimitConns) with small limits. They assert what
// happens to the connection, never how long it took; the client's read
// deadline (the hang guard) only keeps a failing test from hanging. Those
// about connections alone run on SQLite; those whose answer comes from the
// store (a lease, the event log) run on both engines.

const stuck = apitest.HangGuard

var bootstrap = event.Actor{Kind: event.ActorHuman, Sub: "bootstrap"}

func httpEnv(t *testing.T, adjust func(h *config.HTTP)) *apitest.Env {
	t.Helper()
	return httpEnvOn(t, storetest.Open(t, "sqlite"), adjust)
}

func httpEnvOn(t *testing.T, s store.Store, adjust func(h *config.HTTP)) *apitest.Env {
	t.Helper()
	return apitest.New(t, s, func(c *config.Config) { adjust(&c.HTTP) })
}

func hostOf(t *testing.T, e *apitest.Env) string {
	t.Helper()
	u, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// dialFrom connects to the server from a given local IP (127.0.0.x).
func dialFrom(t *testing.T, e *apitest.Env, local string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", hostOf(t, e))
	if err != nil {
		t.Fatalf("dial from %s: %v", local, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reads c (through r, if given) until the server closes
// it; it returns what was read, failing the test if the connection stays
// open.
func closedByServer(t *testing.T, c net.Conn, r ...io.Reader) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(stuck))
	var rd io.Reader = c
	if len(r) > 0 {
		rd = r[0]
	}
	b, err := io.ReadAll(rd)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open (read so far: %q)", b)
	}
	return string(b) // EOF or a reset: closed
}

// roundTrip sends one keep-alive request on c and reads its answer.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, method, path, token string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, "http://x"+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(stuck))
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// A client that sends its body one byte at a time is cut off after
// http.read_timeout, authenticated or not (the 401 does not leave the
// connection to it either).
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	e := httpEnv(t, func(h *config.HTTP) {
		h.ReadHeaderTimeout.Duration = 200 * time.Millisecond
		h.ReadTimeout.Duration = 300 * time.Millisecond
	})
	for _, tc := range []struct{ name, token, want string }{
		{"authenticated", apitest.BootstrapToken, "HTTP/1.1 408"},
		{"unauthenticated", "", "HTTP/1.1 401"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := dialFrom(t, e, "127.0.0.1")
			head := "POST /api/v1/orgs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
			if tc.token != "" {
				head += "Authorization: Bearer " + tc.token + "\r\n"
			}
			if _, err := io.WriteString(c, head+"\r\n{"); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			go func() { // one byte every 50 ms until the server hangs up
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := io.WriteString(c, " "); err != nil {
							return
						}
					}
				}
			}()
			got := closedByServer(t, c)
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("answer %q, want %s before the close", got, tc.want)
			}
		})
	}
}

// A keep-alive connection left idle is closed after http.idle_timeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	t.Parallel()
	e := httpEnv(t, func(h *config.HTTP) { h.IdleTimeout.Duration = 200 * time.Millisecond })
	c := dialFrom(t, e, "127.0.0.1")
	br := bufio.NewReader(c)
	if resp := roundTrip(t, c, br, "GET", "/healthz", ""); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("healthz: %d close=%v", resp.StatusCode, resp.Close)
	}
	if rest := closedByServer(t, c, br); rest != "" {
		t.Fatalf("unexpected bytes %q", rest)
	}
}

// A runner's lease long poll waits longer than http.write_timeout and
// http.read_timeout and still gets its answer.
func TestLongPollOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		const timeout = 300 * time.Millisecond
		e := httpEnvOn(t, s, func(h *config.HTTP) {
			h.ReadHeaderTimeout.Duration, h.ReadTimeout.Duration, h.WriteTimeout.Duration = timeout, timeout, timeout
		})
		// The runner is registered through Go, not the API: the tiny
		// write timeout bounds every ordinary request, setup included.
		ctx := context.Background()
		secret, _, tr := auth.Issue(bootstrap, auth.KindRunner, "r1", "", "", []string{auth.ScopeRunner}, nil, time.Now())
		if err := e.Core.Applier.Apply(ctx, tr); err != nil {
			t.Fatal(err)
		}
		p, err := e.Core.Auth.Authenticate(ctx, "Bearer "+secret)
		if err != nil {
			t.Fatal(err)
		}
		rn, err := e.Core.Runs.RegisterRunner(ctx, run.RunnerCaller{TokenID: p.TokenID, Actor: p.Actor()}, run.RunnerInput{Name: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		e.Must(204, secret, "POST", "/api/v1/runners/"+rn.ID+"/lease", map[string]any{"wait_seconds": 1})
		if waited := time.Since(began); waited < time.Second {
			t.Fatalf("the lease answered after %v: it did not wait beyond the write timeout, so this proves nothing", waited)
		}
		// An ordinary route still has the write timeout: the server is the
		// one under test, not one without limits.
		if e.Core.HTTPServer().WriteTimeout != timeout {
			t.Fatal("the test server does not run with the configured write timeout")
		}
	})
}

// A realtime WebSocket outlives http.read_timeout and http.write_timeout:
// it still delivers events after both have passed.
func TestWebSocketOutlivesTheTimeouts(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		const timeout = 200 * time.Millisecond
		e := httpEnvOn(t, s, func(h *config.HTTP) {
			h.ReadHeaderTimeout.Duration, h.ReadTimeout.Duration, h.WriteTimeout.Duration = timeout, timeout, timeout
		})
		// Changes are made through Go, not the API: the tiny write timeout
		// bounds every ordinary request.
		org, err := e.Core.Tenancy.CreateOrganization(context.Background(), bootstrap, tenancy.OrganizationInput{Slug: "acme", Name: "Acme"})
		if err != nil {
			t.Fatal(err)
		}
		project, err := e.Core.Tenancy.CreateProject(context.Background(), bootstrap, org.ID, tenancy.ProjectInput{Key: "ACME", Name: "Acme"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), stuck)
		defer cancel()
		c, err := realtime.Dial(ctx, e.URL, apitest.BootstrapToken, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sub, err := c.Subscribe(ctx, "project:ACME", realtime.LiveOnly)
		if err != nil {
			t.Fatal(err)
		}
		// Not synchronisation: the condition under test is time passing
		// beyond the server's deadlines.
		time.Sleep(3 * timeout)
		if _, err := e.Core.Tracker.CreateItem(ctx, bootstrap, project, tracker.ItemInput{Type: "task", Title: "after the deadlines"}); err != nil {
			t.Fatal(err)
		}
		select {
		case ev, ok := <-sub.C():
			if !ok {
				t.Fatalf("the subscription ended: %v", sub.Err())
			}
			if ev.Type != "ticket.created" {
				t.Fatalf("got %s", ev.Type)
			}
		case <-ctx.Done():
			t.Fatal("no event")
		}
	})
}

// Connections beyond http.max_conns_per_ip (from one address) and
// http.max_conns (in all) are answered 503 and closed at once; a closed
// connection frees its slot.
func TestConnectionCaps(t *testing.T) {
	t.Parallel()
	e := httpEnv(t, func(h *config.HTTP) { h.MaxConns, h.MaxConnsPerIP = 3, 2 })
	open := func(local string) (net.Conn, *bufio.Reader) {
		c := dialFrom(t, e, local)
		br := bufio.NewReader(c)
		if resp := roundTrip(t, c, br, "GET", "/healthz", ""); resp.StatusCode != 200 {
			t.Fatalf("from %s: %d", local, resp.StatusCode)
		}
		return c, br
	}
	refused := func(local, want string) {
		t.Helper()
		c := dialFrom(t, e, local)
		got := closedByServer(t, c)
		if !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, want) {
			t.Fatalf("from %s: got %q, want a 503 saying %q", local, got, want)
		}
	}
	first, _ := open("127.0.0.1")
	open("127.0.0.1")
	refused("127.0.0.1", "too many connections from your address")
	if !canBind("127.0.0.2") || !canBind("127.0.0.3") {
		t.Log("127.0.0.2 and 127.0.0.3 are not local addresses here: the total cap is not checked")
	} else {
		open("127.0.0.2") // another address has its own allowance
		refused("127.0.0.3", "too many connections to this server")
	}
	// Closing a connection gives its slot back (once the server has seen
	// the close).
	first.Close()
	deadline := time.Now().Add(stuck)
	for {
		c := dialFrom(t, e, "127.0.0.1")
		br := bufio.NewReader(c)
		req, _ := http.NewRequest("GET", "http://x/healthz", nil)
		_ = req.Write(c)
		_ = c.SetReadDeadline(time.Now().Add(stuck))
		resp, err := http.ReadResponse(br, req)
		if err == nil && resp.StatusCode == 200 {
			break
		}
		if err == nil && resp.StatusCode != 503 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatal("the closed connection's slot was never given back")
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
}

func canBind(ip string) bool {
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// The default caps let a burst of concurrent requests from one address
// through (the test suites make such bursts from 127.0.0.1).
func TestDefaultCapsLetABurstThrough(t *testing.T) {
	t.Parallel()
	e := httpEnv(t, func(*config.HTTP) {})
	const n = 300
	errs := make(chan error, n)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}}
	defer client.CloseIdleConnections()
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			resp, err := client.Get(e.URL + "/healthz")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = errors.New(resp.Status)
				}
			}
			errs <- err
		}()
	}
	close(start)
	for range n {
		if err := apitest.Receive(t, errs, "the burst's answers"); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkNewConnection measures a fresh connection per request (GET
// /healthz, Connection: close) through Core's server with and without the
// connection caps: the cost of the limiter on the accept path.
func BenchmarkNewConnection(b *testing.B) {
	e := apitest.New(b, storetest.Open(b, "sqlite"))
	uncapped := httptest.NewUnstartedServer(nil)
	uncapped.Config = e.Core.HTTPServer()
	uncapped.Start()
	defer uncapped.Close()
	for name, base := range map[string]string{"capped": e.URL, "uncapped": uncapped.URL} {
		b.Run(name, func(b *testing.B) {
			host := strings.TrimPrefix(base, "http://")
			for b.Loop() {
				c, err := net.Dial("tcp", host)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
					b.Fatal(err)
				}
				if got, _ := io.ReadAll(c); !strings.HasPrefix(string(got), "HTTP/1.1 200") {
					b.Fatalf("%q", got)
				}
				c.Close()
			}
		})
	}
}
