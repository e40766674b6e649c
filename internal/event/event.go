// Package event is Ballet's event log (spec data.md "Event log"): every
// change to a tracked entity produces exactly one event, written in the same
// atomic batch as the change. Events are append-only; seq is assigned by the
// database in commit order, so a reader that has seen seq N has seen every
// event up to N.
package event

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/store"
)

// Actor kinds.
const (
	ActorHuman   = "human"
	ActorService = "service"
	ActorSystem  = "system"
)

// Actor is who caused a change.
type Actor struct {
	Kind      string // human, service or system
	Sub       string // OIDC subject, token subject, or the system component
	ActingFor string // the human behind a service, if any
}

// System is Core acting on its own.
var System = Actor{Kind: ActorSystem, Sub: "core"}

// Event is one entry of the log, with exactly the fields data.md lists.
type Event struct {
	Seq            int64           `json:"seq"`
	ID             string          `json:"id"`
	OccurredAt     time.Time       `json:"occurred_at"`
	OrganizationID string          `json:"organization_id"`
	ProjectID      string          `json:"project_id"`
	EntityType     string          `json:"entity_type"`
	EntityID       string          `json:"entity_id"`
	Type           string          `json:"type"`
	ActorKind      string          `json:"actor_kind"`
	ActorSub       string          `json:"actor_sub"`
	ActingFor      string          `json:"acting_for"`
	Payload        json.RawMessage `json:"payload"`
}

// MustPayload encodes an event's payload: the payload struct of its type,
// as the catalogue (event/catalogue.Core) lists it. Payload structs hold
// plain data, so encoding cannot fail: a failure is a programming error
// and panics.
func MustPayload(p any) json.RawMessage {
	b, err := json.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("event payload %T: %v", p, err))
	}
	return b
}

// New builds the event of a change to an entity: its type is
// <entityType>.<change>, its payload the change's payload struct
// (MustPayload), its actor the one given.
func New(actor Actor, orgID, projectID, entityType, entityID, change string, payload any) Event {
	e := Event{OrganizationID: orgID, ProjectID: projectID, EntityType: entityType, EntityID: entityID,
		Type: entityType + "." + change, Payload: MustPayload(payload)}
	e.SetActor(actor)
	return e
}

// SetActor copies an Actor into the event's actor fields.
func (e *Event) SetActor(a Actor) {
	e.ActorKind, e.ActorSub, e.ActingFor = a.Kind, a.Sub, a.ActingFor
}

// Validate checks what every event must carry before it is written.
func (e *Event) Validate() error {
	var missing []string
	if e.ID == "" {
		missing = append(missing, "id")
	}
	if e.OccurredAt.IsZero() {
		missing = append(missing, "occurred_at")
	}
	if e.EntityType == "" {
		missing = append(missing, "entity_type")
	}
	if e.EntityID == "" {
		missing = append(missing, "entity_id")
	}
	if e.Type == "" {
		missing = append(missing, "type")
	}
	if len(missing) > 0 {
		return fmt.Errorf("event %q: missing %s", e.Type, strings.Join(missing, ", "))
	}
	switch e.ActorKind {
	case ActorHuman, ActorService, ActorSystem:
	default:
		return fmt.Errorf("event %q: actor_kind %q is not human, service or system", e.Type, e.ActorKind)
	}
	if !strings.HasPrefix(e.Type, e.EntityType+".") {
		return fmt.Errorf("event type %q must be <entity>.<change> with entity %q", e.Type, e.EntityType)
	}
	if len(e.Payload) > 0 && !json.Valid(e.Payload) {
		return fmt.Errorf("event %q: payload is not valid JSON", e.Type)
	}
	return nil
}

// Insert returns the statement that appends the event. seq is left to the
// database.
func (e *Event) Insert() store.Statement {
	payload := string(e.Payload)
	if payload == "" {
		payload = "{}"
	}
	return store.Stmt(`INSERT INTO events (id, occurred_at, organization_id, project_id, entity_type, entity_id, type, actor_kind, actor_sub, acting_for, payload)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.OccurredAt.UnixMilli(), nullable(e.OrganizationID), nullable(e.ProjectID),
		e.EntityType, e.EntityID, e.Type, e.ActorKind, nullable(e.ActorSub), nullable(e.ActingFor), payload)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Querier runs reads; store.Store satisfies it.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (*store.Rows, error)
}

// Filter selects events. Zero fields do not filter.
type Filter struct {
	AfterSeq       int64
	OrganizationID string
	ProjectID      string
	EntityType     string
	EntityID       string
	// OrganizationOnly keeps the events of no project (an organization's
	// own history: the organization, its members, its tokens);
	// PlatformOnly those of no organization (the platform, runners,
	// browser sessions, platform tokens).
	OrganizationOnly bool
	PlatformOnly     bool
	Limit            int // default 100, at most 10,000
}

// MaxLimit bounds one read.
const MaxLimit = 10000

const columns = `seq, id, occurred_at, organization_id, project_id, entity_type, entity_id, type, actor_kind, actor_sub, acting_for, payload`

// List returns the events after f.AfterSeq that match f, in seq order.
func List(ctx context.Context, q Querier, f Filter) ([]Event, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	if limit > MaxLimit {
		limit = MaxLimit
	}
	where := []string{"seq > ?"}
	args := []any{f.AfterSeq}
	if f.OrganizationID != "" {
		where = append(where, "organization_id = ?")
		args = append(args, f.OrganizationID)
	}
	if f.ProjectID != "" {
		where = append(where, "project_id = ?")
		args = append(args, f.ProjectID)
	}
	if f.OrganizationOnly {
		where = append(where, "project_id IS NULL")
	}
	if f.PlatformOnly {
		where = append(where, "organization_id IS NULL")
	}
	if f.EntityType != "" {
		where = append(where, "entity_type = ?")
		args = append(args, f.EntityType)
	}
	if f.EntityID != "" {
		where = append(where, "entity_id = ?")
		args = append(args, f.EntityID)
	}
	args = append(args, limit)
	rows, err := q.Query(ctx, `SELECT `+columns+` FROM events WHERE `+strings.Join(where, " AND ")+` ORDER BY seq LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return scan(rows)
}

// ItemHistory returns an item's history after seq: its own events (as a
// ticket or an epic) and those of its questions, flows and runs, in seq
// order, at most limit (100 when ≤ 0 or beyond MaxLimit). It is a read
// model: the ids of the item's questions, flows and runs come from their
// tables, read here and nowhere else for this purpose.
func ItemHistory(ctx context.Context, q Querier, itemID string, after int64, limit int) ([]Event, error) {
	if limit <= 0 || limit > MaxLimit {
		limit = 100
	}
	// Four lookups on the events_entity index, merged by seq.
	const cols = `SELECT ` + columns + ` FROM events`
	rows, err := q.Query(ctx, cols+` WHERE entity_type IN ('ticket', 'epic') AND entity_id = ? AND seq > ?
UNION ALL `+cols+` WHERE entity_type = 'question' AND entity_id IN (SELECT id FROM questions WHERE item_id = ?) AND seq > ?
UNION ALL `+cols+` WHERE entity_type = 'flow' AND entity_id IN (SELECT id FROM flows WHERE item_id = ?) AND seq > ?
UNION ALL `+cols+` WHERE entity_type = 'run' AND entity_id IN (SELECT id FROM runs WHERE item_id = ?) AND seq > ?
ORDER BY seq LIMIT ?`, itemID, after, itemID, after, itemID, after, itemID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list item events: %w", err)
	}
	return scan(rows)
}

// ByID returns the event with the given id, or ok=false.
func ByID(ctx context.Context, q Querier, id string) (Event, bool, error) {
	rows, err := q.Query(ctx, `SELECT `+columns+` FROM events WHERE id = ?`, id)
	if err != nil {
		return Event{}, false, fmt.Errorf("read event %s: %w", id, err)
	}
	evs, err := scan(rows)
	if err != nil || len(evs) == 0 {
		return Event{}, false, err
	}
	return evs[0], true, nil
}

// SeqBefore returns the seq of the last event that occurred before t (0
// when none): where a reader that starts at a time starts in the log. It
// reads back from the head, so its cost is the events since t.
func SeqBefore(ctx context.Context, q Querier, t time.Time) (int64, error) {
	rows, err := q.Query(ctx, `SELECT seq FROM events WHERE occurred_at < ? ORDER BY seq DESC LIMIT 1`, t.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("read the seq before %s: %w", t.Format(time.RFC3339), err)
	}
	if rows.Len() == 0 {
		return 0, nil
	}
	var n int64
	return n, rows.Scan(0, &n)
}

// LastSeq returns the highest seq in the log (0 when empty).
func LastSeq(ctx context.Context, q Querier) (int64, error) {
	rows, err := q.Query(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`)
	if err != nil {
		return 0, fmt.Errorf("read last seq: %w", err)
	}
	var n int64
	if err := rows.Scan(0, &n); err != nil {
		return 0, err
	}
	return n, nil
}

func scan(rows *store.Rows) ([]Event, error) {
	out := make([]Event, rows.Len())
	for i := range out {
		e := &out[i]
		var at int64
		var payload string
		if err := rows.Scan(i, &e.Seq, &e.ID, &at, &e.OrganizationID, &e.ProjectID, &e.EntityType, &e.EntityID,
			&e.Type, &e.ActorKind, &e.ActorSub, &e.ActingFor, &payload); err != nil {
			return nil, fmt.Errorf("scan event: %w", err)
		}
		e.OccurredAt = time.UnixMilli(at).UTC()
		e.Payload = json.RawMessage(payload)
	}
	return out, nil
}
