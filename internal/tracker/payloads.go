package tracker

import (
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/strictjson"
)

// Event payloads of the tracker's changes, one type per event type (Events
// lists them). A ticket's and an epic's events carry the same data under
// two types: ticket.created and epic.created carry the Item, the others the
// structs below.

// Events are the payload types of the events the tracker writes.
var Events = []event.Payload{
	TicketCreated{}, TicketUpdated{}, TicketStateChanged{}, TicketBlockerAdded{}, TicketBlockerRemoved{},
	EpicCreated{}, EpicUpdated{}, EpicStateChanged{}, EpicBlockerAdded{}, EpicBlockerRemoved{},
	QuestionAsked{}, QuestionAnswered{}, QuestionEscalated{},
}

type (
	TicketCreated        Item             // ticket.created: the ticket
	EpicCreated          Item             // epic.created: the epic
	TicketUpdated        ItemUpdated      // ticket.updated
	EpicUpdated          ItemUpdated      // epic.updated
	TicketStateChanged   ItemStateChanged // ticket.state_changed
	EpicStateChanged     ItemStateChanged // epic.state_changed
	TicketBlockerAdded   BlockerChanged   // ticket.blocker_added
	EpicBlockerAdded     BlockerChanged   // epic.blocker_added
	TicketBlockerRemoved BlockerChanged   // ticket.blocker_removed
	EpicBlockerRemoved   BlockerChanged   // epic.blocker_removed
)

func (TicketCreated) EventType() string        { return "ticket.created" }
func (EpicCreated) EventType() string          { return "epic.created" }
func (TicketUpdated) EventType() string        { return "ticket.updated" }
func (EpicUpdated) EventType() string          { return "epic.updated" }
func (TicketStateChanged) EventType() string   { return "ticket.state_changed" }
func (EpicStateChanged) EventType() string     { return "epic.state_changed" }
func (TicketBlockerAdded) EventType() string   { return "ticket.blocker_added" }
func (EpicBlockerAdded) EventType() string     { return "epic.blocker_added" }
func (TicketBlockerRemoved) EventType() string { return "ticket.blocker_removed" }
func (EpicBlockerRemoved) EventType() string   { return "epic.blocker_removed" }
func (QuestionAsked) EventType() string        { return "question.asked" }
func (QuestionAnswered) EventType() string     { return "question.answered" }
func (QuestionEscalated) EventType() string    { return "question.escalated" }

// createdPayload is it's *.created payload.
func createdPayload(it Item) event.Payload {
	if it.IsEpic() {
		return EpicCreated(it)
	}
	return TicketCreated(it)
}

// updatedPayload is the *.updated payload of an item, an epic or not.
func updatedPayload(epic bool, p ItemUpdated) event.Payload {
	if epic {
		return EpicUpdated(p)
	}
	return TicketUpdated(p)
}

// stateChangedPayload is the *.state_changed payload of an item.
func stateChangedPayload(epic bool, p ItemStateChanged) event.Payload {
	if epic {
		return EpicStateChanged(p)
	}
	return TicketStateChanged(p)
}

// blockerPayload is the *.blocker_added (added) or *.blocker_removed
// payload of an item.
func blockerPayload(epic, added bool, p BlockerChanged) event.Payload {
	switch {
	case epic && added:
		return EpicBlockerAdded(p)
	case epic:
		return EpicBlockerRemoved(p)
	case added:
		return TicketBlockerAdded(p)
	}
	return TicketBlockerRemoved(p)
}

// ItemUpdated is the payload of ticket.updated and epic.updated: the new
// and the previous values of the fields that changed.
type ItemUpdated struct {
	Changes  ItemFields `json:"changes"`
	Previous ItemFields `json:"previous"`
}

// ItemStateChanged is the payload of ticket.state_changed and
// epic.state_changed; a user's change may change fields at the same time.
type ItemStateChanged struct {
	From     string      `json:"from"`
	To       string      `json:"to"`
	Changes  *ItemFields `json:"changes,omitempty"`
	Previous *ItemFields `json:"previous,omitempty"`
}

// ItemFields are an item's fields that changed; the others are absent.
type ItemFields struct {
	Title              *string                     `json:"title,omitempty"`
	Description        *string                     `json:"description,omitempty"`
	AcceptanceCriteria *string                     `json:"acceptance_criteria,omitempty"`
	Type               *string                     `json:"type,omitempty"`
	Epic               strictjson.Nullable[string] `json:"epic,omitzero"`     // the epic's key; null: none
	Assignee           strictjson.Nullable[string] `json:"assignee,omitzero"` // the assignee's subject; null: none
}

// BlockerChanged is the payload of ticket.blocker_added,
// ticket.blocker_removed and their epic.* twins.
type BlockerChanged struct {
	Blocker   string `json:"blocker"` // the blocking item's key
	BlockerID string `json:"blocker_id"`
}

// QuestionAsked is the payload of question.asked.
type QuestionAsked struct {
	Item     string `json:"item"` // the item's key
	ItemID   string `json:"item_id"`
	ItemType string `json:"item_type"`
	Text     string `json:"text"`
	Blocking bool   `json:"blocking"`
}

// QuestionAnswered is the payload of question.answered.
type QuestionAnswered struct {
	Item                 string `json:"item"` // the item's key
	ItemID               string `json:"item_id"`
	Blocking             bool   `json:"blocking"`
	Answer               string `json:"answer"`
	LastBlockingAnswered bool   `json:"last_blocking_answered"` // no blocking question of the item is open any more
}

// QuestionEscalated is the payload of question.escalated: a blocking
// question was still open after the project's escalate_after, and its
// project's admins are told (docs/notifications.md).
type QuestionEscalated struct {
	Item    string    `json:"item"` // the item's key
	ItemID  string    `json:"item_id"`
	Text    string    `json:"text"`
	AskedAt time.Time `json:"asked_at"`
	After   string    `json:"after"` // the escalate_after that passed, e.g. "4h0m0s"
}
