package notify

import (
	"context"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// CauseWebhookDisabled: a webhook failed for 24 hours and was disabled;
// the admins of its project (or organization) are told. It is no ticket's
// cause, so not one of Causes (no webhook subscribes to it), but one of
// SettingCauses (its admins choose whether it is mailed; mail by default);
// the webhook dispatcher (internal/webhook) creates its notifications
// through WriteMailing.
const CauseWebhookDisabled = "webhook.disabled"

// Cause is what an event asks of people, for the other consumers of the
// event log (the webhook dispatcher): the cause's name, the ticket it is
// about (ItemID, or the flow FlowID whose ticket it is), what happened in a
// line, and the section of the ticket's page where a person acts.
type Cause struct {
	Name   string
	ItemID string
	FlowID string
	Text   string
	Anchor string
}

// Classify tells whether e is a cause, and which: the same decision the
// notifier makes.
func Classify(e event.Event) (Cause, bool, error) {
	tr, ok, err := classify(e)
	if err != nil || !ok {
		return Cause{}, false, err
	}
	return Cause{Name: tr.cause, ItemID: tr.itemID, FlowID: tr.flowID, Text: tr.text, Anchor: tr.anchor}, true, nil
}

// MayCause tells whether an event of type t may be a cause (what wakes a
// consumer of causes at once).
func MayCause(t string) bool { return causeTypes[t] }

// Link is the path of the page where a person acts on a ticket's cause.
func Link(itemKey, anchor string) string { return link(itemKey, anchor) }

// Admins lists the admins of a project (projectID set: the organization's
// admins without a lower override there, and the project's admin
// overrides) or of an organization (projectID "").
func Admins(ctx context.Context, m MemberLister, orgID, projectID string) ([]string, error) {
	return (&Notifier{Members: m}).admins(ctx, orgID, projectID)
}

// To returns n addressed to recipient, caused by the event e.
func To(recipient string, e event.Event, n Notification) Notification {
	n.recipient, n.eventID, n.EventSeq = recipient, e.ID, e.Seq
	return n
}

// WriteMailing is Write with mail on (mail true: [notify.email] is
// configured): the notifications whose recipient chose mail for their
// cause and has a confirmed address get their delivery and notify.mail
// job in the same batch, decided once as the notifier decides its own
// (baseURL: [notify] base_url, the right side of the Message-IDs).
func WriteMailing(ctx context.Context, s store.Store, ns []Notification, mail bool, baseURL string, now time.Time) (*transition.Transition, error) {
	if mail {
		n := &Notifier{Store: s}
		if err := n.markMail(ctx, n.newBatchReads(), ns); err != nil {
			return nil, err
		}
	}
	return write(ns, Host(baseURL), now), nil
}

// Write is the part of a transition that creates the notifications ns
// (made with To): for a consumer of the event log other than the
// notifier, which writes it with its cursor's advance.
func Write(ns []Notification, now time.Time) *transition.Transition { return write(ns, "", now) }
