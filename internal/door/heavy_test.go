package door

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/ballet/ballet/internal/apperr"
)

// testRequest is a door's request type: a Call and the caller.
type testRequest struct {
	*Call
	who string
}

type testPerm string

type testRoute = Route[*testRequest, testPerm]

// testTable is a door whose prologue lets the Bearer "ok" through (and
// checks nothing itself) and refuses any other credential.
func testTable() *Table[*testRequest, testPerm] {
	return &Table[*testRequest, testPerm]{Log: slog.New(slog.DiscardHandler), MaxBody: 1 << 20, Realm: "test",
		Open: func(_ http.ResponseWriter, c *Call, _ *testRoute) (*testRequest, error) {
			if h := c.Header.Get("Authorization"); h != "" && h != "Bearer ok" {
				return nil, apperr.New(apperr.Unauthenticated, "who are you?")
			}
			return &testRequest{Call: c, who: "ok"}, nil
		}}
}

// TestAGuardlessRouteAnswers500: a handler that returns without an access
// check answers 500, not its answer; one that checked answers.
func TestAGuardlessRouteAnswers500(t *testing.T) {
	tb := testTable()
	tb.Add(&testRoute{Method: "GET", Path: "/forgot", Handle: func(r *testRequest) (any, error) { return map[string]string{"secret": "x"}, nil }},
		&testRoute{Method: "GET", Path: "/checked", Handle: func(r *testRequest) (any, error) {
			r.Checked()
			return map[string]string{"who": r.who}, nil
		}},
		&testRoute{Method: "GET", Path: "/failed", Handle: func(r *testRequest) (any, error) { return nil, errors.New("db down") }})
	mux := http.NewServeMux()
	tb.Register(mux)
	for path, want := range map[string]int{"/forgot": 500, "/checked": 200, "/failed": 500} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Errorf("%s: %d %s, want %d", path, rec.Code, rec.Body, want)
		}
	}
	rec := httptest.NewRecorder()
	hr := httptest.NewRequest("GET", "/checked", nil)
	hr.Header.Set("Authorization", "Bearer nope")
	mux.ServeHTTP(rec, hr)
	if rec.Code != 401 || rec.Header().Get("WWW-Authenticate") != `Bearer realm="test"` {
		t.Errorf("a refused credential: %d, WWW-Authenticate %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
}

// TestHeavyRoutesTakeTurns: while as many heavy requests run as there are
// slots, the next one waits for a slot (and gives up with its client),
// while other routes go on.
func TestHeavyRoutesTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := testTable()
		api.HeavySlots = 1 // one slot, whatever the machine
		release := make(chan struct{})
		var entered atomic.Int32
		api.Add(
			&testRoute{Method: "POST", Path: "/heavy", Heavy: true, Handle: func(r *testRequest) (any, error) {
				r.Checked()
				entered.Add(1)
				<-release
				return nil, nil
			}},
			&testRoute{Method: "GET", Path: "/light", Handle: func(r *testRequest) (any, error) {
				r.Checked()
				return nil, nil
			}},
		)
		mux := http.NewServeMux()
		api.Register(mux)
		serve := func(ctx context.Context, method, path string) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, method, path, nil))
			return rec
		}
		first, second := make(chan int), make(chan int)
		go func() { first <- serve(context.Background(), "POST", "/heavy").Code }()
		synctest.Wait()
		go func() { second <- serve(context.Background(), "POST", "/heavy").Code }()
		gaveUp := make(chan *httptest.ResponseRecorder)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { gaveUp <- serve(ctx, "POST", "/heavy") }()
		synctest.Wait() // every goroutine is blocked: the second and third wait for the slot
		if n := entered.Load(); n != 1 {
			t.Fatalf("%d heavy handlers entered with one slot, want 1", n)
		}
		if code := serve(context.Background(), "GET", "/light").Code; code != http.StatusOK {
			t.Fatalf("a light route answered %d while the heavy slot was taken", code)
		}
		cancel()
		if rec := <-gaveUp; entered.Load() != 1 || rec.Body.Len() != 0 {
			t.Fatalf("a request whose client gave up ran (entered %d, body %q)", entered.Load(), rec.Body.String())
		}
		release <- struct{}{}
		if code := <-first; code != http.StatusOK {
			t.Fatalf("first heavy request: %d", code)
		}
		synctest.Wait()
		if n := entered.Load(); n != 2 {
			t.Fatalf("the waiting heavy request did not run once the slot was free (%d entered)", n)
		}
		release <- struct{}{}
		if code := <-second; code != http.StatusOK {
			t.Fatalf("second heavy request: %d", code)
		}
	})
}
