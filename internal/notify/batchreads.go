package notify

import (
	"context"
	"time"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/tracker"
)

// batchReads are the reads of one batch's decision, each made once: a
// batch of questions on a few tickets reads each ticket, flow, project,
// admin list, subscriber list, role and setting once instead of once per
// event. It lives for one call of decideBatch only — the next batch reads
// everything again — so a change committed before a batch is decided (a
// member removed, a subscription, a new address) is honoured by that batch
// as it was without it. (A read within a batch sees the database as it is
// while the batch is decided, not as it was when its events happened:
// that was so before, too.)
type batchReads struct {
	n           *Notifier
	flows       memo[string, flow.Flow]
	items       memo[string, tracker.Item]
	after       memo[string, time.Duration]
	persons     memo[string, string]
	admins      memo[[2]string, []string]
	subscribers memo[string, []string]
	mayRead     memo[[3]string, bool]
	settings    memo[string, Settings]
}

func (n *Notifier) newBatchReads() *batchReads {
	return &batchReads{n: n, flows: memo[string, flow.Flow]{}, items: memo[string, tracker.Item]{},
		after: memo[string, time.Duration]{}, persons: memo[string, string]{}, admins: memo[[2]string, []string]{},
		subscribers: memo[string, []string]{}, mayRead: memo[[3]string, bool]{}, settings: memo[string, Settings]{}}
}

// memo keeps the answers of a read by key, errors included: an error
// other than NotFound fails the whole batch anyway, and NotFound stays
// true within it.
type memo[K comparable, V any] map[K]memoized[V]

type memoized[V any] struct {
	v   V
	err error
}

// get returns the memoized answer for k, reading it the first time.
func (m memo[K, V]) get(k K, read func() (V, error)) (V, error) {
	if r, ok := m[k]; ok {
		return r.v, r.err
	}
	v, err := read()
	m[k] = memoized[V]{v, err}
	return v, err
}

func (r *batchReads) flow(ctx context.Context, id string) (flow.Flow, error) {
	return r.flows.get(id, func() (flow.Flow, error) { return flow.Read(ctx, r.n.Store, id) })
}

func (r *batchReads) item(ctx context.Context, id string) (tracker.Item, error) {
	return r.items.get(id, func() (tracker.Item, error) { return r.n.Items.FindItem(ctx, id) })
}

func (r *batchReads) escalateAfter(ctx context.Context, projectID string) (time.Duration, error) {
	return r.after.get(projectID, func() (time.Duration, error) { return r.n.projectEscalateAfter(ctx, projectID) })
}

func (r *batchReads) person(ctx context.Context, subject string) (string, error) {
	return r.persons.get(subject, func() (string, error) { return r.n.person(ctx, subject) })
}

func (r *batchReads) projectAdmins(ctx context.Context, orgID, projectID string) ([]string, error) {
	return r.admins.get([2]string{orgID, projectID}, func() ([]string, error) { return r.n.admins(ctx, orgID, projectID) })
}

func (r *batchReads) itemSubscribers(ctx context.Context, itemID string) ([]string, error) {
	return r.subscribers.get(itemID, func() ([]string, error) { return subscribers(ctx, r.n.Store, itemID) })
}

func (r *batchReads) may(ctx context.Context, subject, orgID, projectID string) (bool, error) {
	return r.mayRead.get([3]string{subject, orgID, projectID}, func() (bool, error) {
		return r.n.mayRead(ctx, subject, orgID, projectID)
	})
}

func (r *batchReads) personSettings(ctx context.Context, subject string) (Settings, error) {
	return r.settings.get(subject, func() (Settings, error) { return ReadSettings(ctx, r.n.Store, subject) })
}
