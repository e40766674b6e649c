package notify_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// world is a whole Core's API over a real store with organization acme,
// project ACME and people: alice and bob (members), carol and dave
// (admins), each with an API token acting for them. Its notifier does not
// run by itself: tests call Pass.
type world struct {
	*apitest.Env
	org    string
	tokens map[string]string
}

func newWorld(t *testing.T, s store.Store) *world {
	t.Helper()
	return newWorldOn(t, s, nil)
}

// newWorldOn is newWorld with Core on clk (nil: the real clock).
func newWorldOn(t *testing.T, s store.Store, clk clock.Clock) *world {
	t.Helper()
	e := apitest.NewOn(t, s, clk)
	w := &world{Env: e, org: e.Org("acme"), tokens: map[string]string{}}
	e.Project("acme", "ACME")
	for person, role := range map[string]string{"alice": "member", "bob": "member", "carol": "admin", "dave": "admin"} {
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/"+person, map[string]any{"role": role})
		w.tokens[person] = e.TokenFor(person, w.org, role)
	}
	return w
}

// ticket creates a ticket as person (assigned to assignee unless "") and
// returns its key.
func (w *world) ticket(person, assignee string) string {
	w.T.Helper()
	body := map[string]any{"type": "task", "title": "a ticket"}
	if assignee != "" {
		body["assignee"] = assignee
	}
	var it struct{ Key string }
	w.Must(201, w.tokens[person], "POST", "/api/v1/projects/ACME/items", body).JSON(w.T, &it)
	return it.Key
}

// ask asks a blocking question on a ticket as person.
func (w *world) ask(person, key string) {
	w.T.Helper()
	w.Must(201, w.tokens[person], "POST", "/api/v1/items/"+key+"/questions", map[string]any{"text": "Which database?", "blocking": true})
}

// pass runs one pass of the notifier and returns how many it created.
func (w *world) pass(n *notify.Notifier) int {
	w.T.Helper()
	made, err := n.Pass(context.Background())
	if err != nil {
		w.T.Fatalf("notifier pass: %v", err)
	}
	return made
}

type inbox struct {
	Notifications []struct {
		ID, Cause, Item, Link, Text string
		ReadAt                      *string `json:"read_at"`
	}
	Unread int64
}

func (w *world) inbox(person string) inbox {
	w.T.Helper()
	var in inbox
	w.Must(200, w.tokens[person], "GET", "/api/v1/me/notifications/inbox", nil).JSON(w.T, &in)
	return in
}

// The notifications of a blocking question go to the ticket's assignee,
// else its creator, each with its cause, ticket key and link; the asker is
// never notified of their own question.
func TestABlockingQuestionReachesTheAssigneeElseTheCreator(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		n := w.Core.Notifier
		unassigned := w.ticket("alice", "")
		assigned := w.ticket("alice", "bob")
		w.ask("carol", unassigned) // → alice, the creator
		w.ask("carol", assigned)   // → bob, the assignee
		w.ask("alice", unassigned) // alice's own: nobody
		w.ask("bob", assigned)     // bob's own: nobody
		if made := w.pass(n); made != 2 {
			t.Fatalf("the pass made %d notifications, want 2", made)
		}
		a := w.inbox("alice")
		if a.Unread != 1 || len(a.Notifications) != 1 {
			t.Fatalf("alice's inbox: %+v, want one unread", a)
		}
		got := a.Notifications[0]
		if got.Cause != notify.CauseQuestionOpened || got.Item != unassigned || got.Link != "/items/"+unassigned+"#questions" ||
			got.Text != "Question: Which database?" {
			t.Errorf("alice's notification: %+v", got)
		}
		if b := w.inbox("bob"); b.Unread != 1 || b.Notifications[0].Item != assigned {
			t.Errorf("bob's inbox: %+v, want the question on %s", b, assigned)
		}
		for _, p := range []string{"carol", "dave"} {
			if in := w.inbox(p); in.Unread != 0 || len(in.Notifications) != 0 {
				t.Errorf("%s's inbox: %+v, want nothing (questions are for the assignee)", p, in)
			}
		}
		// A non-blocking question is no cause.
		w.Must(201, w.tokens["carol"], "POST", "/api/v1/items/"+unassigned+"/questions", map[string]any{"text": "fyi", "blocking": false})
		if made := w.pass(n); made != 0 {
			t.Errorf("a non-blocking question made %d notifications", made)
		}
	})
}

// Marking read: one notification, then all; another person's notification
// is not found; the unread count follows.
func TestMarkingNotificationsRead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		first, second := w.ticket("alice", ""), w.ticket("alice", "")
		w.ask("carol", first)
		w.ask("carol", second)
		w.ask("carol", first)
		w.pass(w.Core.Notifier)
		in := w.inbox("alice")
		if in.Unread != 3 || len(in.Notifications) != 3 || in.Notifications[0].Item != first {
			t.Fatalf("alice's inbox: %+v, want 3 unread, the newest first", in)
		}
		id := in.Notifications[0].ID
		w.Must(404, w.tokens["bob"], "POST", "/api/v1/me/notifications/inbox/"+id+"/read", nil)
		var one struct {
			ReadAt *string `json:"read_at"`
		}
		w.Must(200, w.tokens["alice"], "POST", "/api/v1/me/notifications/inbox/"+id+"/read", nil).JSON(t, &one)
		if one.ReadAt == nil {
			t.Errorf("the notification marked read has no read_at")
		}
		w.Must(200, w.tokens["alice"], "POST", "/api/v1/me/notifications/inbox/"+id+"/read", nil) // again: no change
		if got := w.inbox("alice").Unread; got != 2 {
			t.Errorf("unread after one was read: %d, want 2", got)
		}
		var unread inbox
		w.Must(200, w.tokens["alice"], "GET", "/api/v1/me/notifications/inbox?unread=true&limit=1", nil).JSON(t, &unread)
		if len(unread.Notifications) != 1 || unread.Notifications[0].ID == id {
			t.Errorf("the unread page: %+v", unread)
		}
		var all struct{ Read int }
		w.Must(200, w.tokens["alice"], "POST", "/api/v1/me/notifications/inbox/read", nil).JSON(t, &all)
		if all.Read != 2 || w.inbox("alice").Unread != 0 {
			t.Errorf("read all marked %d (want 2); unread now %d", all.Read, w.inbox("alice").Unread)
		}
		reads := countEvents(t, s, "notification.read")
		if reads != 3 {
			t.Errorf("%d notification.read events, want 3 (one per notification marked, none for the repeat)", reads)
		}
	})
}

// Recipients are re-checked against their roles: a member removed before
// the pass gets nothing, and a member removed after it no longer sees (or
// counts) what they received.
func TestRecipientsAreRecheckedAgainstTheirRoles(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		before, after := w.ticket("alice", ""), w.ticket("bob", "")
		w.ask("carol", before)
		w.Admin(204, "DELETE", "/api/v1/orgs/acme/members/alice", nil)
		w.ask("carol", after)
		if made := w.pass(w.Core.Notifier); made != 1 {
			t.Fatalf("the pass made %d notifications, want 1 (bob's; alice is no member any more)", made)
		}
		if got := countRows(t, s, `SELECT COUNT(*) FROM notifications WHERE recipient = 'alice'`); got != 0 {
			t.Errorf("alice, removed before the pass, got %d notifications", got)
		}
		if in := w.inbox("bob"); in.Unread != 1 {
			t.Fatalf("bob's inbox: %+v", in)
		}
		bobs := w.tokens["bob"]
		w.Admin(204, "DELETE", "/api/v1/orgs/acme/members/bob", nil)
		// bob's token now reads nothing of acme; as a person (the
		// bootstrap acts for no one) he is no member either.
		var in inbox
		w.Must(200, bobs, "GET", "/api/v1/me/notifications/inbox", nil).JSON(t, &in)
		if in.Unread != 0 || len(in.Notifications) != 0 {
			t.Errorf("bob, removed, still sees %+v", in)
		}
	})
}

// The cursor survives a restart: a new notifier (another process) resumes
// after the last seq processed, and what was notified before is not
// notified again.
func TestANewNotifierResumesFromTheCursor(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		key := w.ticket("alice", "")
		w.ask("carol", key)
		if made := w.pass(w.Core.Notifier); made != 1 {
			t.Fatalf("first pass: %d", made)
		}
		// The next pass reads the notification's own event, no cause.
		if made := w.pass(w.Core.Notifier); made != 0 {
			t.Fatalf("second pass: %d", made)
		}
		head, err := event.LastSeq(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if cur, err := notify.ReadCursor(context.Background(), s); err != nil || cur != head {
			t.Fatalf("cursor %d, %v; want the head %d", cur, err, head)
		}
		if n, age, err := notify.Lag(context.Background(), s, time.Now()); err != nil || n != 0 || age != 0 {
			t.Errorf("caught up, the lag is %d events, %s (%v)", n, age, err)
		}
		w.ask("dave", key)
		if n, _, err := notify.Lag(context.Background(), s, time.Now()); err != nil || n != 1 {
			t.Errorf("after a question, the lag is %d events (%v), want 1", n, err)
		}
		restarted := fresh(w)
		if made := w.pass(restarted); made != 1 {
			t.Errorf("the restarted notifier made %d, want 1 (only the new question)", made)
		}
		if made := w.pass(restarted); made != 0 {
			t.Errorf("a pass with nothing new made %d", made)
		}
		if got := w.inbox("alice").Unread; got != 2 {
			t.Errorf("alice has %d unread, want 2", got)
		}
	})
}

// Two notifiers (two Core instances) passing at the same time over the
// same log create each notification once: the batch of the one that read
// a cursor the other has advanced loses its race and is decided again.
func TestTwoNotifiersNotifyExactlyOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		const tickets = 12
		keys := make([]string, tickets)
		for i := range keys {
			keys[i] = w.ticket("alice", "")
		}
		a, b := fresh(w), fresh(w)
		a.Batch, b.Batch = 3, 3 // many small batches: many chances to collide
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for _, n := range []*notify.Notifier{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 8 {
					if _, err := n.Pass(context.Background()); err != nil {
						errs <- err
					}
				}
			}()
		}
		for _, k := range keys {
			w.ask("carol", k)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("pass: %v", err)
		}
		w.pass(a) // whatever the last passes left
		if got := countRows(t, s, `SELECT COUNT(*) FROM notifications`); got != tickets {
			t.Errorf("%d notifications, want %d: one per question", got, tickets)
		}
		if got := countEvents(t, s, "notification.created"); got != tickets {
			t.Errorf("%d notification.created events, want %d", got, tickets)
		}
	})
}

// fresh is another notifier on w's store, as another Core (or the same
// after a restart) would build it.
func fresh(w *world) *notify.Notifier {
	c := w.Core.Notifier
	return (&notify.Notifier{Store: c.Store, Applier: c.Applier, Clock: c.Clock, Items: c.Items, Members: c.Members, Roles: c.Roles,
		PlatformAdmin: c.PlatformAdmin, Questions: c.Questions, Projects: c.Projects, EscalateAfter: c.EscalateAfter}).Init()
}

func countRows(t *testing.T, s store.Store, sql string, args ...any) int64 {
	t.Helper()
	return storetest.Count(t, s, sql, args...)
}

func countEvents(t *testing.T, s store.Store, typ string) int64 {
	t.Helper()
	return countRows(t, s, `SELECT COUNT(*) FROM events WHERE type = ?`, typ)
}
