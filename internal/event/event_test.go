package event_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

func TestListFiltersAndResumes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		at := time.Date(2026, 11, 1, 12, 0, 0, 123e6, time.UTC)
		a := &transition.Applier{Store: s, Clock: clock.NewFake(at)}
		// org1/p1 ticket t1 ×3, org1/p2 ticket t2 ×2, org2/p3 ticket t3 ×1
		for i, spec := range []struct{ org, project, entity string }{
			{"org1", "p1", "t1"}, {"org1", "p2", "t2"}, {"org1", "p1", "t1"},
			{"org2", "p3", "t3"}, {"org1", "p1", "t1"}, {"org1", "p2", "t2"},
		} {
			e := event.Event{OrganizationID: spec.org, ProjectID: spec.project, EntityType: "ticket", EntityID: spec.entity,
				Type: "ticket.updated", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
			e.SetActor(event.Actor{Kind: event.ActorService, Sub: "planner", ActingFor: "alice"})
			if err := a.Apply(ctx, &transition.Transition{Events: []event.Event{e}}); err != nil {
				t.Fatal(err)
			}
		}
		seqs := func(f event.Filter) []int64 {
			evs, err := event.List(ctx, s, f)
			if err != nil {
				t.Fatal(err)
			}
			out := []int64{}
			for _, e := range evs {
				out = append(out, e.Seq)
			}
			return out
		}
		for name, c := range map[string]struct {
			f    event.Filter
			want string
		}{
			"all":          {event.Filter{}, "[1 2 3 4 5 6]"},
			"after":        {event.Filter{AfterSeq: 4}, "[5 6]"},
			"organization": {event.Filter{OrganizationID: "org1"}, "[1 2 3 5 6]"},
			"project":      {event.Filter{ProjectID: "p2"}, "[2 6]"},
			"entity":       {event.Filter{EntityType: "ticket", EntityID: "t1", AfterSeq: 1}, "[3 5]"},
			"limit":        {event.Filter{OrganizationID: "org1", AfterSeq: 1, Limit: 2}, "[2 3]"},
			"other org":    {event.Filter{OrganizationID: "org2", ProjectID: "p1"}, "[]"},
		} {
			if got := fmt.Sprint(seqs(c.f)); got != c.want {
				t.Errorf("%s: got %s, want %s", name, got, c.want)
			}
		}
		evs, _ := event.List(ctx, s, event.Filter{AfterSeq: 5})
		e := evs[0]
		if e.OrganizationID != "org1" || e.ProjectID != "p2" || e.ActorKind != "service" || e.ActorSub != "planner" ||
			e.ActingFor != "alice" || !e.OccurredAt.Equal(at.Truncate(time.Millisecond)) || string(e.Payload) != `{"n":5}` || len(e.ID) != 36 {
			t.Fatalf("event read back wrong: %+v", e)
		}
		got, ok, err := event.ByID(ctx, s, e.ID)
		if err != nil || !ok || got.Seq != 6 {
			t.Fatalf("ByID: %+v %v %v", got, ok, err)
		}
		if last, err := event.LastSeq(ctx, s); err != nil || last != 6 {
			t.Fatalf("LastSeq %d %v", last, err)
		}
	})
}

// TestSeqBefore: the seq of the last event that occurred before a time (0
// when none did): where a reader that starts at that time starts.
func TestSeqBefore(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		clk := clock.NewFake(at)
		a := &transition.Applier{Store: s, Clock: clk}
		for range 3 {
			e := event.Event{EntityType: "platform", EntityID: "p", Type: "platform.updated", Payload: json.RawMessage(`{}`)}
			e.SetActor(event.System)
			if err := a.Apply(ctx, &transition.Transition{Events: []event.Event{e}}); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Hour)
		}
		for _, c := range []struct {
			t    time.Time
			want int64
		}{{at, 0}, {at.Add(time.Millisecond), 1}, {at.Add(90 * time.Minute), 2}, {at.Add(5 * time.Hour), 3}} {
			got, err := event.SeqBefore(ctx, s, c.t)
			if err != nil || got != c.want {
				t.Errorf("before %s: %d (%v), want %d", c.t, got, err, c.want)
			}
		}
	})
}
