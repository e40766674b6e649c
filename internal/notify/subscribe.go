package notify

import (
	"context"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// Subscription is a person's subscription to a ticket, as they read it.
type Subscription struct {
	Item       string     `json:"item"` // the ticket's key
	Subscribed bool       `json:"subscribed"`
	CreatedAt  *time.Time `json:"created_at"` // null when not subscribed
}

// Subscriptions are people's subscriptions to tickets: a subscriber
// receives the ticket's causes that SubscriberCauses lists, as its
// assignee does. Each change records its event (notification.subscribed,
// notification.unsubscribed), of no organization, like a person's
// notifications.
type Subscriptions struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
}

// SubscriberCauses are the causes a ticket's subscribers receive.
var SubscriberCauses = []string{CauseQuestionOpened, CauseApprovalWaiting, CauseFlowFailed, CauseTicketDone}

// Get reads person's subscription to it.
func (s *Subscriptions) Get(ctx context.Context, person string, it tracker.Item) (Subscription, error) {
	rows, err := s.Store.Query(ctx, `SELECT created_at FROM item_subscriptions WHERE item_id = ? AND subject = ?`, it.ID, person)
	if err != nil {
		return Subscription{}, fmt.Errorf("read the subscription to %s: %w", it.Key, err)
	}
	out := Subscription{Item: it.Key}
	if rows.Len() > 0 {
		var at int64
		if err := rows.Scan(0, &at); err != nil {
			return out, err
		}
		t := store.Time(at)
		out.Subscribed, out.CreatedAt = true, &t
	}
	return out, nil
}

// Subscribe subscribes person (the caller, actor, or the person it acts
// for) to it (idempotent: subscribed already, it
// changes nothing).
func (s *Subscriptions) Subscribe(ctx context.Context, actor event.Actor, person string, it tracker.Item) (Subscription, error) {
	var out Subscription
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		cur, err := s.Get(ctx, person, it)
		if err != nil || cur.Subscribed {
			out = cur
			return nil, err
		}
		now := s.Clock.Now().Truncate(time.Millisecond)
		out = Subscription{Item: it.Key, Subscribed: true, CreatedAt: &now}
		return &transition.Transition{
			Events: []event.Event{event.Of(actor, "", "", it.ID, NotificationSubscribed{Subscriber: person, Item: it.Key, ItemID: it.ID,
				ProjectID: it.ProjectID})},
			Guarded: []store.Statement{store.Stmt(`INSERT INTO item_subscriptions (item_id, subject, organization_id, project_id, created_at)
SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM item_subscriptions WHERE item_id = ? AND subject = ?)`,
				it.ID, person, it.OrganizationID, it.ProjectID, now.UnixMilli(), it.ID, person)},
		}, nil
	})
	return out, err
}

// Unsubscribe ends person's subscription to it (idempotent).
func (s *Subscriptions) Unsubscribe(ctx context.Context, actor event.Actor, person string, it tracker.Item) error {
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		cur, err := s.Get(ctx, person, it)
		if err != nil || !cur.Subscribed {
			return nil, err
		}
		return &transition.Transition{
			Events: []event.Event{event.Of(actor, "", "", it.ID, NotificationUnsubscribed{Subscriber: person, Item: it.Key, ItemID: it.ID,
				ProjectID: it.ProjectID})},
			Guarded: []store.Statement{store.Stmt(`DELETE FROM item_subscriptions WHERE item_id = ? AND subject = ?`, it.ID, person)},
		}, nil
	})
	return err
}

// subscribers lists the people subscribed to a ticket.
func subscribers(ctx context.Context, q store.Store, itemID string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT subject FROM item_subscriptions WHERE item_id = ? ORDER BY subject`, itemID)
	if err != nil {
		return nil, fmt.Errorf("list the ticket's subscribers: %w", err)
	}
	return store.ScanAll(rows, func(rows *store.Rows, i int) (string, error) {
		var s string
		return s, rows.Scan(i, &s)
	})
}
