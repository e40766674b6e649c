package tracker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// Escalating a question is guarded by the question as it is, not as it
// was read: two escalations decided on one read (a duplicate job, a second
// Core instance) commit once, and one decided before an answer came
// commits nothing. Nothing is escalated without its event, or the reverse.
func TestAQuestionIsEscalatedOnceAndOnlyWhileOpen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newItemWorld(t, st)
		ctx := context.Background()
		it := w.item("task", "Needs input")
		escalated := func() int64 {
			return storetest.Count(t, st, `SELECT COUNT(*) FROM events WHERE type = 'question.escalated'`)
		}
		now := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
		actor := event.Actor{Kind: event.ActorSystem, Sub: "notify"}

		open, err := w.svc.AskQuestion(ctx, itemBob, it.Key, "Which format?", true)
		if err != nil {
			t.Fatal(err)
		}
		first, ok1 := EscalateQuestion(actor, open, 4*time.Hour, now)
		second, ok2 := EscalateQuestion(actor, open, 4*time.Hour, now)
		if !ok1 || !ok2 {
			t.Fatal("an open blocking question is not escalated")
		}
		if err := w.svc.Applier.Apply(ctx, &first); err != nil {
			t.Fatal(err)
		}
		if err := w.svc.Applier.Apply(ctx, &second); !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("a second escalation on the same read: %v, want a lost race", err)
		}
		got, err := w.svc.FindQuestion(ctx, open.ID)
		if err != nil || got.EscalatedAt == nil || !got.EscalatedAt.Equal(now) || got.Version != 2 || escalated() != 1 {
			t.Fatalf("escalated question %+v (%v), %d events; want escalated_at %v, version 2, one event", got, err, escalated(), now)
		}
		if _, ok := EscalateQuestion(actor, got, 4*time.Hour, now); ok {
			t.Error("a question escalated already is escalated again")
		}

		stale, err := w.svc.AskQuestion(ctx, itemBob, it.Key, "And the encoding?", true)
		if err != nil {
			t.Fatal(err)
		}
		late, _ := EscalateQuestion(actor, stale, 4*time.Hour, now)
		answered, err := w.svc.AnswerQuestion(ctx, itemAlice, stale.ID, "UTF-8")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.svc.Applier.Apply(ctx, &late); !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("an escalation decided before the answer: %v, want a lost race", err)
		}
		if _, ok := EscalateQuestion(actor, answered, 4*time.Hour, now); ok {
			t.Error("an answered question is escalated")
		}
		fyi, err := w.svc.AskQuestion(ctx, itemBob, it.Key, "FYI", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := EscalateQuestion(actor, fyi, 4*time.Hour, now); ok {
			t.Error("a non-blocking question is escalated")
		}
		if escalated() != 1 {
			t.Errorf("%d question.escalated events, want 1", escalated())
		}
	})
}
