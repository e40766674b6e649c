package notify_test

import (
	"context"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/mailtest"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// Core stopped between a cause's event and its mail: the next Core
// mails it, once. Two stops are covered: before the notifier decided the
// event (only the event is committed), and after (the notification, its
// delivery and its job are committed; the job has not run). A third Core
// sends nothing again.
func TestMailIsDeliveredOnceAcrossRestarts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		mp := mailtest.Start(t)
		first := newMailWorld(t, s, mp)
		addr := "bob-" + s.Engine() + "@example.com"
		first.confirm("bob", addr)
		if err := first.Stop(); err != nil {
			t.Fatal(err)
		}
		// Core's API alone (no notifier, no jobs): the causes are committed.
		api := apitest.New(t, s, withMail(mp))
		w := &mailWorld{Env: api, mp: mp, tokens: first.tokens}
		undecided := w.ticket("alice", "bob")
		w.ask("carol", undecided, "Decided?")
		decided := w.ticket("alice", "bob")
		w.ask("carol", decided, "Decided too?")
		ctx := context.Background()
		// The notifier decides these two by hand (their deliveries and
		// jobs committed, the jobs not run); a third question stays
		// undecided (only its event committed).
		if made, err := api.Core.Notifier.Pass(ctx); err != nil || made != 2 {
			t.Fatalf("pass: %d, %v; want 2", made, err)
		}
		w.ask("carol", undecided, "Still undecided?")
		if n := countRows(t, s, `SELECT COUNT(*) FROM mail_deliveries WHERE status = 'pending'`); n != 2 {
			t.Fatalf("%d pending deliveries before the restart, want 2", n)
		}
		if n := len(mp.To(t, addr)); n != 1 {
			t.Fatalf("%d mails before the restart, want the confirmation alone", n)
		}

		second := apitest.RunOn(t, s, nil, withMail(mp))
		mp.Wait(t, addr, 4, 20*time.Second) // the confirmation and three questions
		waitFor(t, func() bool { return countRows(t, s, `SELECT COUNT(*) FROM mail_deliveries WHERE status = 'sent'`) == 3 })
		if err := second.Stop(); err != nil {
			t.Fatal(err)
		}
		third := apitest.RunOn(t, s, nil, withMail(mp))
		third.Must(200, first.tokens["bob"], "GET", "/api/v1/me/notifications", nil) // it serves
		if made, err := third.Core.Notifier.Pass(ctx); err != nil || made != 0 {
			t.Errorf("the third Core's pass: %d, %v; want nothing new", made, err)
		}
		if n := len(mp.To(t, addr)); n != 4 {
			t.Errorf("%d mails after three Cores, want 4 (one per question, and the confirmation)", n)
		}
		if n := countEvents(t, s, "notification.mailed"); n != 3 {
			t.Errorf("%d notification.mailed events, want 3", n)
		}
	})
}

// Two Core instances on one rqlite cluster, each with its own connection:
// a question is mailed once, not once per instance.
func TestTwoInstancesMailOnce(t *testing.T) {
	rqlitetest.Binary(t)
	s := storetest.Open(t, "rqlite")
	mp := mailtest.Start(t)
	a := newMailWorld(t, s, mp)
	engine, addrs := storetest.Address(t, s)
	s2, err := storetest.OpenAddress(context.Background(), engine, addrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	b := apitest.RunOn(t, s2, nil, withMail(mp))
	addr := "bob@example.com"
	a.confirm("bob", addr)
	for i := range 3 {
		key := a.ticket("alice", "bob")
		// the question asked through one instance or the other
		env := a.Env
		if i%2 == 1 {
			env = b
		}
		env.Must(201, a.tokens["carol"], "POST", "/api/v1/items/"+key+"/questions", map[string]any{"text": "Which database?", "blocking": true})
	}
	waitFor(t, func() bool { return countRows(t, s, `SELECT COUNT(*) FROM mail_deliveries WHERE status = 'sent'`) == 3 })
	mp.Wait(t, addr, 4, 10*time.Second)
	if n := countRows(t, s, `SELECT COUNT(*) FROM notifications`); n != 3 {
		t.Errorf("%d notifications, want 3", n)
	}
	if n := len(mp.To(t, addr)); n != 4 {
		t.Errorf("%d mails for 3 questions (and the confirmation), want 4", n)
	}
}

// A recipient removed from the project between the notification and its
// mail gets nothing: the delivery is recorded as skipped, with its event.
func TestARemovedMemberIsNotMailed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		mp := mailtest.Start(t)
		first := newMailWorld(t, s, mp)
		addr := "bob-" + s.Engine() + "@example.com"
		first.confirm("bob", addr)
		if err := first.Stop(); err != nil {
			t.Fatal(err)
		}
		api := apitest.New(t, s, withMail(mp))
		w := &mailWorld{Env: api, mp: mp, tokens: first.tokens}
		key := w.ticket("alice", "bob")
		w.ask("carol", key, "Which database?")
		if made, err := api.Core.Notifier.Pass(context.Background()); err != nil || made != 1 {
			t.Fatalf("pass: %d, %v; want 1", made, err)
		}
		api.Admin(204, "DELETE", "/api/v1/orgs/acme/members/bob", nil)
		apitest.RunOn(t, s, nil, withMail(mp))
		waitFor(t, func() bool { return countEvents(t, s, "notification.mail_skipped") == 1 })
		if n := countRows(t, s, `SELECT COUNT(*) FROM mail_deliveries WHERE status = 'skipped'`); n != 1 {
			t.Errorf("%d skipped deliveries, want 1", n)
		}
		if n := len(mp.To(t, addr)); n != 1 {
			t.Errorf("bob, removed, received %d mails, want the confirmation alone", n)
		}
	})
}

// A delivery decided while mail was on, run by a Core whose mail is off,
// is recorded as skipped (not left pending for ever).
func TestADeliveryAfterMailIsTurnedOffIsSkipped(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		mp := mailtest.Start(t)
		first := newMailWorld(t, s, mp)
		first.confirm("bob", "bob-"+s.Engine()+"@example.com")
		if err := first.Stop(); err != nil {
			t.Fatal(err)
		}
		api := apitest.New(t, s, withMail(mp))
		w := &mailWorld{Env: api, mp: mp, tokens: first.tokens}
		key := w.ticket("alice", "bob")
		w.ask("carol", key, "Which database?")
		if made, err := api.Core.Notifier.Pass(context.Background()); err != nil || made != 1 {
			t.Fatalf("pass: %d, %v; want 1", made, err)
		}
		apitest.RunOn(t, s, nil) // mail off
		waitFor(t, func() bool {
			return countRows(t, s, `SELECT COUNT(*) FROM mail_deliveries WHERE status = 'skipped'`) == 1
		})
		if n := countRows(t, s, `SELECT COUNT(*) FROM events WHERE type = 'notification.mail_skipped' AND payload LIKE '%mail_off%'`); n != 1 {
			t.Errorf("%d mail_skipped events for mail_off, want 1", n)
		}
	})
}
