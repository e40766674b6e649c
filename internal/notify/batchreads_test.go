package notify_test

import (
	"testing"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// A batch reads each ticket, role, subscriber list and setting once, for
// all its events; the next batch reads them again: a member removed and a
// subscriber added between two batches are honoured by the second, and
// three questions on one ticket in one batch are three notifications.
func TestABatchsReadsDoNotOutliveIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		key := w.ticket("alice", "bob")
		for range 3 {
			w.ask("carol", key)
		}
		if made := w.pass(w.Core.Notifier); made != 3 {
			t.Fatalf("the first batch made %d notifications, want 3 (bob's, one per question)", made)
		}
		w.Admin(204, "DELETE", "/api/v1/orgs/acme/members/bob", nil)
		w.subscription("dave", "PUT", key, 200)
		w.ask("carol", key)
		if made := w.pass(w.Core.Notifier); made != 1 {
			t.Fatalf("the second batch made %d notifications, want 1 (dave's)", made)
		}
		if got := countRows(t, s, `SELECT COUNT(*) FROM notifications WHERE recipient = 'bob'`); got != 3 {
			t.Errorf("bob, removed between the batches, has %d notifications, want the first batch's 3", got)
		}
		if got := countRows(t, s, `SELECT COUNT(*) FROM notifications WHERE recipient = 'dave'`); got != 1 {
			t.Errorf("dave, subscribed between the batches, has %d notifications, want 1", got)
		}
	})
}
