package notify_test

import (
	"context"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/strictjson"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// An entered address: its change, its event and its confirmation job are
// one write; its link confirms it once, within 24 hours; a link of an
// address replaced since confirms nothing; unsubscribe tokens are bound
// to their person and cause.
func TestConfirmationLinks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
		a := &transition.Applier{Store: s, Clock: clk}
		keys := &notify.Keys{Store: s, Applier: a, Clock: clk}
		svc := &notify.SettingsService{Store: s, Applier: a, Clock: clk, Keys: keys, MailOn: true}
		ada := event.Actor{Kind: event.ActorHuman, Sub: "ada"}
		email := func(addr string) notify.SettingsUpdate {
			return notify.SettingsUpdate{Email: strictjson.Nullable[string]{Set: true, Value: &addr}}
		}
		if _, err := svc.Update(ctx, ada, "ada", email("ada@example.com")); err != nil {
			t.Fatal(err)
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM jobs WHERE kind = 'notify.confirm'`); n != 1 {
			t.Errorf("%d confirmation jobs, want 1", n)
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM events WHERE type = 'notification.settings_changed'`); n != 1 {
			t.Errorf("%d settings events, want 1", n)
		}
		old, err := keys.ConfirmToken(ctx, "ada", "ada@example.com", 1)
		if err != nil {
			t.Fatal(err)
		}
		// Replaced by another address: the first link is dead.
		if _, err := svc.Update(ctx, ada, "ada", email("ada@example.org")); err != nil {
			t.Fatal(err)
		}
		if err := svc.Confirm(ctx, old); apperr.Code(err) != apperr.NotFound {
			t.Errorf("the replaced address's link: %v, want not found", err)
		}
		tok, _ := keys.ConfirmToken(ctx, "ada", "ada@example.org", 2)
		clk.Advance(notify.ConfirmFor + time.Minute)
		if err := svc.Confirm(ctx, tok); apperr.Code(err) != apperr.Invalid {
			t.Errorf("an expired link: %v, want invalid", err)
		}
		if _, err := svc.Update(ctx, ada, "ada", email("ada@example.org")); err != nil { // entered again: a new link
			t.Fatal(err)
		}
		tok, _ = keys.ConfirmToken(ctx, "ada", "ada@example.org", 3)
		if err := svc.Confirm(ctx, tok); err != nil {
			t.Fatalf("a fresh link: %v", err)
		}
		if err := svc.Confirm(ctx, tok); apperr.Code(err) != apperr.NotFound {
			t.Errorf("a link used twice: %v, want not found", err)
		}
		set, _ := notify.ReadSettings(ctx, s, "ada")
		if !set.EmailConfirmed || set.MailTo(notify.CauseQuestionOpened) != "ada@example.org" || set.MailTo(notify.CauseTicketDone) != "" {
			t.Errorf("after confirming: %+v", set)
		}

		unsub, _ := keys.UnsubscribeToken(ctx, "ada", notify.CauseFlowFailed)
		if sub, cause, err := keys.CheckUnsubscribe(ctx, unsub); err != nil || sub != "ada" || cause != notify.CauseFlowFailed {
			t.Errorf("a good unsubscribe token: %q %q %v", sub, cause, err)
		}
		bobs, _ := keys.UnsubscribeToken(ctx, "bob", notify.CauseFlowFailed)
		forged := bobs[:len(bobs)-43] + unsub[len(unsub)-43:] // bob's subject with ada's signature
		for _, bad := range []string{forged, "", "x~y~z", unsub + "x"} {
			if _, _, err := keys.CheckUnsubscribe(ctx, bad); apperr.Code(err) != apperr.NotFound {
				t.Errorf("token %q: %v, want not found", bad, err)
			}
		}
	})
}
