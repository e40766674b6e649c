package apitest_test

import (
	"context"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/oidctest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestRealtimeIsWired: Core serves the realtime API on its own handler; a
// subscriber sees the replay and then a change made through REST.
func TestRealtimeIsWired(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		ctx, cancel := context.WithTimeout(context.Background(), apitest.HangGuard)
		defer cancel()
		c, err := realtime.Dial(ctx, e.URL, apitest.BootstrapToken, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sub, err := c.Subscribe(ctx, "project:ACME", 0)
		if err != nil {
			t.Fatal(err)
		}
		first := apitest.Receive(t, sub.C(), "the replay")
		if first.Type != "project.created" {
			t.Fatalf("replay starts with %s", first.Type)
		}
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "live"})
		if ev := apitest.Receive(t, sub.C(), "the live event"); ev.Type != "ticket.created" || ev.Seq <= first.Seq {
			t.Fatalf("live event %s seq %d", ev.Type, ev.Seq)
		}
		if _, err := realtime.Dial(ctx, e.URL, "", nil); err == nil {
			t.Fatal("an unauthenticated handshake was accepted")
		}
	})
}

// TestRealtimeEndsWhenAPersonLosesAccess: a person (OIDC) subscribed to a
// project is removed from the organization: the subscription ends with
// -32003 before any later event, and the person's identity token still
// holds the connection (it is valid, only the role is gone).
func TestRealtimeEndsWhenAPersonLosesAccess(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		iss := oidctest.New(t)
		e := oidcEnv(t, s, iss)
		ctx, cancel := context.WithTimeout(context.Background(), apitest.HangGuard)
		defer cancel()
		c, err := realtime.Dial(ctx, e.URL, iss.Token(t, vera), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sub, err := c.Subscribe(ctx, "project:ACME", realtime.LiveOnly)
		if err != nil {
			t.Fatal(err)
		}
		e.Admin(204, "DELETE", "/api/v1/orgs/acme/members/"+vera, nil)
		removed, err := event.LastSeq(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "after"})
		for ended := false; !ended; {
			select {
			case ev, ok := <-sub.C():
				if ok && ev.Seq > removed {
					t.Fatalf("event %d (%s) delivered after the removal at seq %d", ev.Seq, ev.Type, removed)
				}
				ended = !ok
			case <-time.After(apitest.HangGuard):
				t.Fatal("the subscription of a person without access is still open")
			}
		}
		if !realtime.IsForbidden(sub.Err()) {
			t.Fatalf("ended with %v, want forbidden", sub.Err())
		}
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("connection: %v", err)
		}
	})
}
