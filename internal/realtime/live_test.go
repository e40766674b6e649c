package realtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/feed"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// TestLiveOnlyStartsAtTheHead: a subscription without after_seq streams
// what is committed after it, never an event committed before it that the
// instance's feed had not read yet.
func TestLiveOnlyStartsAtTheHead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := newEnv(t, s, feed.Config{Interval: time.Hour}) // the feed reads only when nudged
		orgID := e.org("acme")
		pid := e.project("acme", "ACME")
		c := dial(t, e.URL, bootstrap, false)
		warm := subscribe(t, c, "project:ACME", 0) // the feed has read everything so far
		collect(t, warm, lastSeq(e.logged(pid, 0)))

		// Committed without nudging this instance's feed, as another Core
		// instance's write would be: the feed does not know it yet.
		quiet := &transition.Applier{Store: s, Clock: e.core.Clock}
		before := event.Event{OrganizationID: orgID, ProjectID: pid, EntityType: "ticket", EntityID: pid, Type: "ticket.touched",
			Payload: []byte(`{"n":1}`)}
		before.SetActor(event.Actor{Kind: event.ActorHuman, Sub: "alice"})
		if err := quiet.Apply(context.Background(), &transition.Transition{Events: []event.Event{before}}); err != nil {
			t.Fatal(err)
		}
		head := lastSeq(e.logged(pid, 0))

		sub := subscribe(t, c, "project:ACME", realtime.LiveOnly)
		if sub.Position != head {
			t.Fatalf("a live subscription starts at %d, want the log's head %d", sub.Position, head)
		}
		_, key := e.item("ACME", "after the subscription")
		got := collect(t, sub, 0)
		if got[0].Seq <= head || got[0].Type != "ticket.created" {
			t.Fatalf("first live event: %s at seq %d, want %s's ticket.created after the head %d", got[0].Type, got[0].Seq, key, head)
		}
	})
}
