package notify_test

import (
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

type subscription struct {
	Item       string
	Subscribed bool
	CreatedAt  *string `json:"created_at"`
}

func (w *world) subscription(person, method, key string, want int) subscription {
	w.T.Helper()
	var s subscription
	r := w.Must(want, w.tokens[person], method, "/api/v1/items/"+key+"/subscription", nil)
	if want == 200 {
		r.JSON(w.T, &s)
	}
	return s
}

// A ticket's subscribers receive its blocking questions, besides its
// assignee (else creator), but not of their own asking; an unsubscribed
// person no longer does; subscribing twice is one subscription (one
// event). A subscriber who lost access to the project receives nothing.
func TestSubscribersReceiveATicketsQuestions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		n := w.Core.Notifier
		key := w.ticket("alice", "")
		if got := w.subscription("bob", "GET", key, 200); got.Subscribed || got.CreatedAt != nil || got.Item != key {
			t.Fatalf("before subscribing: %+v", got)
		}
		w.subscription("bob", "PUT", key, 200)
		if got := w.subscription("bob", "PUT", key, 200); !got.Subscribed || got.CreatedAt == nil {
			t.Fatalf("subscribed: %+v", got)
		}
		if got := countEvents(t, s, "notification.subscribed"); got != 1 {
			t.Errorf("%d notification.subscribed events for two PUTs, want 1", got)
		}
		if got := w.subscription("alice", "GET", key, 200); got.Subscribed {
			t.Errorf("alice sees bob's subscription as hers: %+v", got)
		}
		for person, want := range map[string]bool{"bob": true, "alice": false} {
			var it struct{ Subscribed *bool }
			w.Must(200, w.tokens[person], "GET", "/api/v1/items/"+key, nil).JSON(t, &it)
			if it.Subscribed == nil || *it.Subscribed != want {
				t.Errorf("%s reads the item with subscribed %v, want %v", person, it.Subscribed, want)
			}
		}
		w.subscription("dave", "PUT", key, 200)

		w.ask("carol", key) // → alice (creator), bob and dave (subscribers)
		w.ask("bob", key)   // → alice and dave; not bob, who asked
		if made := w.pass(n); made != 5 {
			t.Fatalf("two questions made %d notifications, want 5", made)
		}
		for person, want := range map[string]int64{"alice": 2, "bob": 1, "dave": 2, "carol": 0} {
			if got := w.inbox(person).Unread; got != want {
				t.Errorf("%s has %d notifications, want %d", person, got, want)
			}
		}

		// dave unsubscribes; bob loses his membership (his subscription
		// stays, but he may no longer read the ticket).
		w.Must(204, w.tokens["dave"], "DELETE", "/api/v1/items/"+key+"/subscription", nil)
		w.Must(204, w.tokens["dave"], "DELETE", "/api/v1/items/"+key+"/subscription", nil)
		if got := countEvents(t, s, "notification.unsubscribed"); got != 1 {
			t.Errorf("%d notification.unsubscribed events for two DELETEs, want 1", got)
		}
		w.Admin(204, "DELETE", "/api/v1/orgs/acme/members/bob", nil)
		w.ask("carol", key)
		if made := w.pass(n); made != 1 {
			t.Fatalf("the third question made %d notifications, want 1 (alice's)", made)
		}
		if got := countRows(t, s, `SELECT COUNT(*) FROM notifications WHERE recipient = 'bob'`); got != 1 {
			t.Errorf("bob, removed from the organization, has %d notifications, want the 1 from before", got)
		}
		if got := countRows(t, s, `SELECT COUNT(*) FROM notifications WHERE recipient = 'dave'`); got != 2 {
			t.Errorf("dave, unsubscribed, has %d notifications, want the 2 from before", got)
		}
		// bob's token no longer reads the ticket: its subscription is not
		// found either.
		r := w.Do(w.tokens["bob"], "PUT", "/api/v1/items/"+key+"/subscription", nil)
		if r.Status != 404 {
			t.Errorf("a removed member subscribing: %d %s, want 404", r.Status, r.Body)
		}
		if !strings.Contains(string(r.Body), key) {
			t.Errorf("the 404 does not name the ticket: %s", r.Body)
		}
	})
}
