package tracker

import "github.com/ballet/ballet/internal/strictjson"

// Event payloads of the tracker's changes. ticket.created and epic.created
// carry the Item; the other types carry the structs below. The
// catalogue of every event type's payload is server.EventPayloads.

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
	Epic               strictjson.Nullable[string] `json:"epic,omitzero"` // the epic's key; null: none
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
