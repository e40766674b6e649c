package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/auth"
)

type adminAuthn struct{}

func (adminAuthn) Authenticate(context.Context, string) (*auth.Principal, error) {
	return &auth.Principal{Subject: "admin", PlatformAdmin: true}, nil
}

// TestHeavyRoutesTakeTurns: while as many heavy requests run as there are
// slots, the next one waits for a slot (and gives up with its client),
// while other routes go on.
func TestHeavyRoutesTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := NewAPI(slog.New(slog.DiscardHandler), adminAuthn{}, &access.Resolver{}, Finders{}, 1<<20, 0)
		api.heavy = make(chan struct{}, 1) // one slot, whatever the machine
		release := make(chan struct{})
		var entered atomic.Int32
		api.Add(
			&Route{Method: "POST", Path: "/heavy", Perm: access.PlatformAdmin, Heavy: true, Handle: func(r *Request) (any, error) {
				entered.Add(1)
				<-release
				return nil, nil
			}},
			&Route{Method: "GET", Path: "/light", Perm: access.PlatformAdmin, Handle: func(r *Request) (any, error) { return nil, nil }},
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
