package notify

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/consumer"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// A batch decided on a cursor that moved meanwhile (another instance
// processed those events) commits nothing: not its notifications, not
// their events, not the cursor. The batch decided on the cursor as it is
// commits all three.
func TestABatchOnAStaleCursorCommitsNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		a := &transition.Applier{Store: s, Clock: clock.NewFake(now)}
		if _, err := s.Exec(ctx, store.Stmt(`UPDATE event_cursors SET seq = 5 WHERE name = ?`, Cursor)); err != nil {
			t.Fatal(err)
		}
		ns := func() []Notification {
			return []Notification{{Cause: CauseQuestionOpened, Item: "ACME-1", ItemID: "i1", OrganizationID: "o", ProjectID: "p",
				Title: "t", Text: "Question: ?", Link: "/items/ACME-1#questions", EventSeq: 4, recipient: "alice", eventID: "e4"}}
		}
		err := a.Apply(ctx, withAdvance(write(ns(), "ballet.test", now), consumer.Advance(Cursor, 3, 8, now)))
		if !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("a batch on the stale cursor 3 (it is 5): %v, want a lost race", err)
		}
		for table, want := range map[string]int64{"notifications": 0, "events": 0} {
			if got := count(t, s, `SELECT COUNT(*) FROM `+table); got != want {
				t.Errorf("%d rows in %s after the lost race, want %d", got, table, want)
			}
		}
		if cur, err := ReadCursor(ctx, s); err != nil || cur != 5 {
			t.Errorf("cursor %d, %v; want 5", cur, err)
		}
		if err := a.Apply(ctx, withAdvance(write(ns(), "ballet.test", now), consumer.Advance(Cursor, 5, 8, now))); err != nil {
			t.Fatal(err)
		}
		if cur, err := ReadCursor(ctx, s); err != nil || cur != 8 {
			t.Errorf("cursor %d, %v; want 8", cur, err)
		}
		if n, e := count(t, s, `SELECT COUNT(*) FROM notifications`), count(t, s, `SELECT COUNT(*) FROM events WHERE type = 'notification.created'`); n != 1 || e != 1 {
			t.Errorf("%d notifications and %d events, want one each", n, e)
		}
	})
}

func count(t *testing.T, s store.Store, sql string) int64 {
	t.Helper()
	return storetest.Count(t, s, sql)
}

// withAdvance is t guarded by the cursor's advance, as the consumer
// writes it.
func withAdvance(t *transition.Transition, adv store.Statement) *transition.Transition {
	t.Guarded = append([]store.Statement{adv}, t.Guarded...)
	return t
}
