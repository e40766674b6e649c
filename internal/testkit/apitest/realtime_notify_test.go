package apitest_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/realtime"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// notificationEvent is what a notification event says of its recipient.
type notificationEvent struct {
	Recipient, Cause, Item string
}

func decodeNotification(t *testing.T, ev event.Event) notificationEvent {
	t.Helper()
	var n notificationEvent
	if err := json.Unmarshal(ev.Payload, &n); err != nil {
		t.Fatalf("%s payload: %v", ev.Type, err)
	}
	return n
}

// TestRealtimeNotificationsReachOnlyTheirRecipient: the notifications
// stream carries a person's own notification.created and notification.read
// events, live, and nothing else: another member of the project, a
// platform admin, another organization's admin and the recipient's own
// token of another organization each subscribed receive nothing of it.
// Each of them then gets a notification of their own, which arrives first
// on their stream: everything before it was withheld, not late.
func TestRealtimeNotificationsReachOnlyTheirRecipient(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		acme, globex := e.Org("acme"), e.Org("globex")
		e.Project("acme", "ACME")
		e.Project("globex", "GLX")
		for _, m := range []struct{ org, person, role string }{{"acme", "alice", "member"}, {"acme", "bob", "member"},
			{"globex", "alice", "member"}, {"globex", "gina", "admin"}} {
			e.Admin(200, "PUT", "/api/v1/orgs/"+m.org+"/members/"+m.person, map[string]any{"role": m.role})
		}
		alice, bob := e.TokenFor("alice", acme, "member"), e.TokenFor("bob", acme, "member")
		aliceGlobex, gina := e.TokenFor("alice", globex, "member"), e.TokenFor("gina", globex, "admin")

		ctx, cancel := context.WithTimeout(context.Background(), apitest.HangGuard)
		defer cancel()
		subs := map[string]*realtime.Subscription{}
		for name, tok := range map[string]string{"alice": alice, "bob": bob, "bootstrap": apitest.BootstrapToken,
			"gina": gina, "alice in globex": aliceGlobex} {
			c, err := realtime.Dial(ctx, e.URL, tok, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if subs[name], err = c.Subscribe(ctx, realtime.NotificationsStream, realtime.LiveOnly); err != nil {
				t.Fatalf("%s subscribing to %q: %v", name, realtime.NotificationsStream, err)
			}
		}
		// A runner's token acts for no one's inbox (its creator is a
		// platform admin: bootstrap).
		if c, err := realtime.Dial(ctx, e.URL, e.NewRunner("r1").Token, nil); err == nil {
			if _, err := c.Subscribe(ctx, realtime.NotificationsStream, realtime.LiveOnly); !realtime.IsForbidden(err) {
				t.Errorf("a runner token subscribing to %q: %v, want forbidden", realtime.NotificationsStream, err)
			}
			c.Close()
		}
		// ask makes a ticket in project created by creator's token, assigned
		// to assignee, and has asker's token ask a blocking question on it:
		// the assignee is notified.
		pass := func() {
			t.Helper()
			if _, err := e.Core.Notifier.Pass(ctx); err != nil {
				t.Fatalf("notifier pass: %v", err)
			}
		}
		ask := func(project, creator, assignee, asker string) string {
			t.Helper()
			var it struct{ Key string }
			body := map[string]any{"type": "task", "title": "for " + assignee}
			if assignee != "" {
				body["assignee"] = assignee
			}
			e.Must(201, creator, "POST", "/api/v1/projects/"+project+"/items", body).JSON(t, &it)
			e.Must(201, asker, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": "Which one?", "blocking": true})
			pass()
			return it.Key
		}

		// Alice's: created, then read through REST.
		key := ask("ACME", bob, "alice", bob)
		ev := apitest.Receive(t, subs["alice"].C(), "alice's notification")
		if n := decodeNotification(t, ev); ev.Type != "notification.created" || n.Recipient != "alice" || n.Item != key || n.Cause != "question.opened" {
			t.Fatalf("alice received %s %+v, want her notification.created of %s", ev.Type, n, key)
		}
		e.Must(200, alice, "POST", "/api/v1/me/notifications/inbox/"+ev.EntityID+"/read", nil)
		if read := apitest.Receive(t, subs["alice"].C(), "alice's read"); read.Type != "notification.read" || read.EntityID != ev.EntityID {
			t.Fatalf("alice received %s of %s, want notification.read of %s", read.Type, read.EntityID, ev.EntityID)
		}

		// Everyone else's own, after hers.
		mine := map[string]string{
			"bob":             ask("ACME", alice, "bob", alice),
			"bootstrap":       ask("ACME", apitest.BootstrapToken, "", alice), // the creator, unassigned
			"gina":            ask("GLX", gina, "", aliceGlobex),
			"alice in globex": ask("GLX", gina, "alice", gina),
		}
		for name, want := range mine {
			ev := apitest.Receive(t, subs[name].C(), name+"'s first notification event")
			if n := decodeNotification(t, ev); ev.Type != "notification.created" || n.Item != want || ev.Seq <= 0 {
				t.Errorf("%s's first notification event: %s %+v (seq %d), want their own of %s", name, ev.Type, n, ev.Seq, want)
			}
		}
		// Alice's acme token does not receive her globex notification:
		// its organization's token may not read that project.
		last := ask("ACME", bob, "alice", bob)
		if ev := apitest.Receive(t, subs["alice"].C(), "alice's next notification"); decodeNotification(t, ev).Item != last {
			t.Errorf("alice's acme token received %s of %s, want only her acme notification of %s", ev.Type, decodeNotification(t, ev).Item, last)
		}
	})
}

// TestRealtimeNotificationsReplay: a subscription with after_seq replays
// the caller's own notification events after it, and another person's
// replay from the same seq has none of them.
func TestRealtimeNotificationsReplay(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		acme := e.Org("acme")
		e.Project("acme", "ACME")
		for _, p := range []string{"alice", "bob"} {
			e.Admin(200, "PUT", "/api/v1/orgs/acme/members/"+p, map[string]any{"role": "member"})
		}
		alice, bob := e.TokenFor("alice", acme, "member"), e.TokenFor("bob", acme, "member")
		var it struct{ Key string }
		e.Must(201, bob, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t", "assignee": "alice"}).JSON(t, &it)
		e.Must(201, bob, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": "Which?", "blocking": true})
		ctx, cancel := context.WithTimeout(context.Background(), apitest.HangGuard)
		defer cancel()
		if _, err := e.Core.Notifier.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		// bob's replay from 0 has nothing of alice's: his first event is
		// his own notification, made after it.
		c, err := realtime.Dial(ctx, e.URL, bob, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		bobs, err := c.Subscribe(ctx, realtime.NotificationsStream, 0)
		if err != nil {
			t.Fatal(err)
		}
		ca, err := realtime.Dial(ctx, e.URL, alice, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ca.Close()
		alices, err := ca.Subscribe(ctx, realtime.NotificationsStream, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ev := apitest.Receive(t, alices.C(), "alice's replay"); ev.Type != "notification.created" || decodeNotification(t, ev).Recipient != "alice" {
			t.Fatalf("alice's replay: %s %s", ev.Type, ev.Payload)
		}
		var his struct{ Key string }
		e.Must(201, alice, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "his", "assignee": "bob"}).JSON(t, &his)
		e.Must(201, alice, "POST", "/api/v1/items/"+his.Key+"/questions", map[string]any{"text": "And you?", "blocking": true})
		if _, err := e.Core.Notifier.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		if ev := apitest.Receive(t, bobs.C(), "bob's replay and live"); decodeNotification(t, ev).Recipient != "bob" {
			t.Fatalf("bob received %s %s, not his", ev.Type, ev.Payload)
		}
	})
}
