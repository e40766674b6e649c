package tracker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/bounds"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/keys"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/strictjson"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/transition"
)

// Item states.
const (
	StateBacklog          = "backlog"
	StateReady            = "ready"
	StateInProgress       = "in_progress"
	StateWaitingForAnswer = "waiting_for_answer"
	StatePaused           = "paused"
	StateDone             = "done"
	StateCancelled        = "cancelled"
)

// States lists every item state.
var States = []string{StateBacklog, StateReady, StateInProgress, StateWaitingForAnswer, StatePaused, StateDone, StateCancelled}

// TypeEpic is the item type of epics; every other type is a ticket type.
const TypeEpic = "epic"

// Item limits.
const (
	MaxTitle        = 500      // characters
	MaxItemText     = 64 << 10 // bytes: description, acceptance criteria
	MaxItemPage     = 200
	DefaultItemPage = 50
)

// Item is a ticket or an epic.
type Item struct {
	ID                 string    `json:"id"`
	Key                string    `json:"key"`
	OrganizationID     string    `json:"organization_id"`
	ProjectID          string    `json:"project_id"`
	Number             int64     `json:"number"`
	Type               string    `json:"type"`
	Title              string    `json:"title"`
	Description        string    `json:"description"`
	AcceptanceCriteria string    `json:"acceptance_criteria"`
	Epic               *string   `json:"epic"`    // the epic's key
	EpicID             *string   `json:"epic_id"` // the epic's id
	State              string    `json:"state"`
	Assignee           *string   `json:"assignee"`   // the subject of the project member it is assigned to; null: none
	BlockedBy          []string  `json:"blocked_by"` // keys of the items blocking this one
	Blocks             []string  `json:"blocks"`     // keys of the items this one blocks
	CreatedBy          string    `json:"created_by"`
	CreatedAt          time.Time `json:"created_at"`
	UpdatedAt          time.Time `json:"updated_at"`
	Version            int64     `json:"version"`
}

// IsEpic reports whether the item is an epic.
func (it *Item) IsEpic() bool { return it.Type == TypeEpic }

// EntityType is the item's entity type in events: "epic" or "ticket".
func (it *Item) EntityType() string { return entityType(it.Type) }

func entityType(itemType string) string {
	if itemType == TypeEpic {
		return "epic"
	}
	return "ticket"
}

// ItemInput is a new ticket or epic.
type ItemInput struct {
	Type               string
	Title              string
	Description        string
	AcceptanceCriteria string
	Epic               string // an epic's key or id in the same project; "" for none
	State              string // backlog ("": the default) or ready
	Assignee           string // a project member's subject; "" for none
}

// ItemPatch changes some of an item's fields: what is nil stays. Epic ""
// takes the item out of its epic.
type ItemPatch struct {
	Title              *string
	Description        *string
	AcceptanceCriteria *string
	Type               *string
	Epic               *string
	State              *string
	Assignee           *string // "" unassigns
}

// ItemFilter selects a page of a project's items, by number.
type ItemFilter struct {
	State  string
	Type   string
	EpicID string
	After  int64 // items numbered after this one
	Limit  int
}

// ValidState reports whether s is an item state.
func ValidState(s string) bool {
	for _, st := range States {
		if st == s {
			return true
		}
	}
	return false
}

// userTicketMoves are the state changes a user may make to a ticket; the
// flow engine makes the others (FlowTransitionAllowed).
var userTicketMoves = map[string][]string{
	StateBacklog:          {StateReady, StateCancelled},
	StateReady:            {StateBacklog, StateCancelled},
	StateInProgress:       {StatePaused, StateCancelled},
	StateWaitingForAnswer: {StatePaused, StateCancelled},
	StatePaused:           {StateReady, StateBacklog, StateCancelled},
	StateDone:             {StateBacklog},
	StateCancelled:        {StateBacklog},
}

// epicStates are the states of an epic; users move epics freely between
// them (no flow runs epics).
var epicStates = []string{StateBacklog, StateReady, StateInProgress, StateDone, StateCancelled}

// flowMoves are the state changes the flow engine makes to a ticket.
var flowMoves = map[string][]string{
	StateReady:            {StateInProgress},
	StateInProgress:       {StateWaitingForAnswer, StateDone, StatePaused, StateCancelled},
	StateWaitingForAnswer: {StateInProgress, StatePaused, StateCancelled},
}

// UserTransitionAllowed reports whether a user may move an item of the
// given type from one state to another.
func UserTransitionAllowed(itemType, from, to string) bool {
	if from == to {
		return false
	}
	if itemType == TypeEpic {
		return slices.Contains(epicStates, from) && slices.Contains(epicStates, to)
	}
	return slices.Contains(userTicketMoves[from], to)
}

// FlowTransitionAllowed reports whether the flow engine may move a ticket
// from one state to another (starting, waiting for and resuming after an
// answer, finishing, failing into paused, stopping).
func FlowTransitionAllowed(from, to string) bool {
	return slices.Contains(flowMoves[from], to)
}

// allowedUserMoves lists where a user may move an item from a state.
func allowedUserMoves(itemType, from string) []string {
	var out []string
	for _, to := range States {
		if UserTransitionAllowed(itemType, from, to) {
			out = append(out, to)
		}
	}
	return out
}

// kindChangeStates are the states in which an item may become an epic or
// stop being one (no flow can be attached to it there).
var kindChangeStates = []string{StateBacklog, StateReady, StateDone, StateCancelled}

func validateTitle(v *apperr.Validator, title string) {
	v.Check(title != "" && utf8.RuneCountInString(title) <= MaxTitle, "title", "must be 1–%d characters on one line", MaxTitle)
	v.CheckErr("title", text.Line(title))
}

func validateItemText(v *apperr.Validator, field, s string) {
	v.Check(len(s) <= MaxItemText, field, "must be at most %d bytes (is %d)", MaxItemText, len(s))
	v.CheckErr(field, text.Multiline(s))
}

func validateItemType(v *apperr.Validator, p *tenancy.Project, t string) {
	v.Check(t == TypeEpic || slices.Contains(p.TicketTypes, t), "type", "%q is not \"epic\" or one of the project's ticket types (%s)", t, strings.Join(p.TicketTypes, ", "))
}

// itemColumns selects an Item; the epic's key and the blocker keys come
// from joins (group_concat of keys: they never hold a comma).
const itemColumns = `i.id, i.key, i.organization_id, i.project_id, i.number, i.type, i.title, i.description, i.acceptance_criteria,
COALESCE(e.key, ''), COALESCE(i.epic_id, ''), i.state, COALESCE(i.assignee, ''),
COALESCE((SELECT group_concat(k.key) FROM blockers b JOIN items k ON k.id = b.blocker_id WHERE b.item_id = i.id), ''),
COALESCE((SELECT group_concat(k.key) FROM blockers b JOIN items k ON k.id = b.item_id WHERE b.blocker_id = i.id), ''),
i.created_by, i.created_at, i.updated_at, i.version`

const itemFrom = ` FROM items i LEFT JOIN items e ON e.id = i.epic_id`

func scanItem(rows *store.Rows, i int) (Item, error) {
	var it Item
	var epicKey, epicID, assignee, blockedBy, blocks string
	var c, u int64
	if err := rows.Scan(i, &it.ID, &it.Key, &it.OrganizationID, &it.ProjectID, &it.Number, &it.Type, &it.Title, &it.Description,
		&it.AcceptanceCriteria, &epicKey, &epicID, &it.State, &assignee, &blockedBy, &blocks, &it.CreatedBy, &c, &u, &it.Version); err != nil {
		return it, fmt.Errorf("scan item: %w", err)
	}
	if assignee != "" {
		it.Assignee = &assignee
	}
	if epicID != "" {
		it.Epic, it.EpicID = &epicKey, &epicID
	}
	it.BlockedBy, it.Blocks = splitKeys(blockedBy), splitKeys(blocks)
	it.CreatedAt, it.UpdatedAt = store.Time(c), store.Time(u)
	return it, nil
}

// splitKeys splits a group_concat of item keys and sorts them by project
// key, then number.
func splitKeys(s string) []string {
	if s == "" {
		return []string{}
	}
	out := strings.Split(s, ",")
	sortKeys(out)
	return out
}

func sortKeys(ks []string) {
	sort.Slice(ks, func(a, b int) bool {
		pa, na, _ := keys.ParseItem(ks[a])
		pb, nb, _ := keys.ParseItem(ks[b])
		if pa != pb {
			return pa < pb
		}
		return na < nb
	})
}

// FindItem finds an item by key (ACME-42) or id.
func (s *Service) FindItem(ctx context.Context, ref string) (Item, error) {
	rows, err := store.One(ctx, s.Store, fmt.Sprintf("item %q", ref), `SELECT `+itemColumns+itemFrom+` WHERE i.key = ? OR i.id = ?`, ref, ref)
	if err != nil {
		return Item{}, err
	}
	return scanItem(rows, 0)
}

// ListItems returns a page of a project's items by number, and the number
// to pass as After for the next page (0: none).
func (s *Service) ListItems(ctx context.Context, projectID string, f ItemFilter) ([]Item, int64, error) {
	if f.Limit <= 0 || f.Limit > MaxItemPage {
		f.Limit = DefaultItemPage
	}
	where := []string{"i.project_id = ?", "i.number > ?"}
	args := []any{projectID, f.After}
	if f.State != "" {
		where, args = append(where, "i.state = ?"), append(args, f.State)
	}
	if f.Type != "" {
		where, args = append(where, "i.type = ?"), append(args, f.Type)
	}
	if f.EpicID != "" {
		where, args = append(where, "i.epic_id = ?"), append(args, f.EpicID)
	}
	rows, err := s.Store.Query(ctx, `SELECT `+itemColumns+itemFrom+` WHERE `+strings.Join(where, " AND ")+` ORDER BY i.number LIMIT ?`,
		append(args, f.Limit+1)...)
	if err != nil {
		return nil, 0, fmt.Errorf("list items: %w", err)
	}
	n := min(rows.Len(), f.Limit)
	out := make([]Item, n)
	for i := range out {
		if out[i], err = scanItem(rows, i); err != nil {
			return nil, 0, err
		}
	}
	var next int64
	if rows.Len() > f.Limit {
		next = out[n-1].Number
	}
	return out, next, nil
}

// lookup reads an item by key or id; found is false when there is none.
func (s *Service) lookup(ctx context.Context, ref string) (it Item, found bool, err error) {
	it, err = s.FindItem(ctx, ref)
	if apperr.Code(err) == apperr.NotFound {
		return Item{}, false, nil
	}
	return it, err == nil, err
}

// FindEpic resolves an epic of a project by key or id; anything else is
// an invalid value of field.
func (s *Service) FindEpic(ctx context.Context, projectID, ref, field string) (Item, error) {
	e, found, err := s.lookup(ctx, ref)
	if err != nil {
		return Item{}, err
	}
	return asEpic(e, found, projectID, ref, field)
}

// asEpic checks that ref, read as e (found), is an epic of the project:
// anything else is an invalid value of field.
func asEpic(e Item, found bool, projectID, ref, field string) (Item, error) {
	if !found || e.ProjectID != projectID {
		return Item{}, apperr.Fields([]apperr.FieldError{{Field: field, Message: fmt.Sprintf("%q is not an item of this project", ref)}})
	}
	if !e.IsEpic() {
		return Item{}, apperr.Fields([]apperr.FieldError{{Field: field, Message: fmt.Sprintf("%s is a %s, not an epic", e.Key, e.Type)}})
	}
	return e, nil
}

// isEpicCond is the SQL condition, for a guarded write, that an item is
// still an epic: a concurrent change of its type makes the write lose its
// race and be decided again.
const isEpicCond = `EXISTS (SELECT 1 FROM items WHERE id = ? AND type = 'epic')`

// CreateItem creates a ticket or an epic in a project, allocating its key.
func (s *Service) CreateItem(ctx context.Context, actor event.Actor, p tenancy.Project, in ItemInput) (Item, error) {
	in.Title = strings.TrimSpace(in.Title)
	var v apperr.Validator
	validateItemType(&v, &p, in.Type)
	validateTitle(&v, in.Title)
	validateItemText(&v, "description", in.Description)
	validateItemText(&v, "acceptance_criteria", in.AcceptanceCriteria)
	v.Check(in.State == "" || in.State == StateBacklog || in.State == StateReady, "state", "%q: a new item starts in backlog (default) or ready", in.State)
	v.Check(in.Epic == "" || in.Type != TypeEpic, "epic", "an epic cannot belong to an epic")
	if in.Assignee != "" {
		v.CheckErr("assignee", validAssignee(in.Assignee))
	}
	if err := v.Err(); err != nil {
		return Item{}, err
	}
	var out Item
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		if err := s.checkAssignee(ctx, p.OrganizationID, p.ID, in.Assignee); err != nil {
			return nil, err
		}
		var epic *Item
		if in.Epic != "" {
			e, err := s.FindEpic(ctx, p.ID, in.Epic, "epic")
			if err != nil {
				return nil, err
			}
			epic = &e
		}
		alloc, err := keys.Next(ctx, s.Store, p.ID)
		if err != nil {
			return nil, err
		}
		var t *transition.Transition
		out, t = newItem(actor, p, in, epic, alloc, s.now())
		return t, nil
	})
	if err != nil {
		return Item{}, err
	}
	return out, nil
}

// newItem decides a new item of p (input validated) in epic (nil: none),
// numbered by alloc.
func newItem(actor event.Actor, p tenancy.Project, in ItemInput, epic *Item, alloc keys.Allocation, now time.Time) (Item, *transition.Transition) {
	state := in.State
	if state == "" {
		state = StateBacklog
	}
	it := Item{ID: transition.NewID(), Key: keys.Item(p.Key, alloc.Number), OrganizationID: p.OrganizationID, ProjectID: p.ID,
		Number: alloc.Number, Type: in.Type, Title: in.Title, Description: in.Description, AcceptanceCriteria: in.AcceptanceCriteria,
		State: state, BlockedBy: []string{}, Blocks: []string{}, CreatedBy: actor.Sub, CreatedAt: now, UpdatedAt: now, Version: 1}
	if epic != nil {
		it.Epic, it.EpicID = &epic.Key, &epic.ID
	}
	var assignee any
	if in.Assignee != "" {
		it.Assignee, assignee = &in.Assignee, in.Assignee
	}
	insert := `INSERT INTO items (id, organization_id, project_id, number, key, type, title, description, acceptance_criteria, epic_id,
state, created_by, created_at, updated_at, version, assignee) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?`
	args := []any{it.ID, it.OrganizationID, it.ProjectID, it.Number, it.Key, it.Type, it.Title, it.Description, it.AcceptanceCriteria,
		nil, it.State, it.CreatedBy, now.UnixMilli(), now.UnixMilli(), assignee}
	if epic != nil {
		args[9] = epic.ID
		insert += ` WHERE ` + isEpicCond
		args = append(args, epic.ID)
	}
	return it, &transition.Transition{
		Events:  []event.Event{event.Of(actor, it.OrganizationID, it.ProjectID, it.ID, createdPayload(it))},
		Guarded: []store.Statement{alloc.Take, store.Stmt(insert, args...)},
	}
}

// UpdateItem applies a patch to the version of the item the caller read: a
// stale version is a conflict, as is a state change a user may not make.
func (s *Service) UpdateItem(ctx context.Context, actor event.Actor, itemID string, version int64, in ItemPatch) (Item, error) {
	var v apperr.Validator
	bounds.CheckVersionRead(&v, version)
	if in.Title != nil {
		validateTitle(&v, strings.TrimSpace(*in.Title))
	}
	if in.Description != nil {
		validateItemText(&v, "description", *in.Description)
	}
	if in.AcceptanceCriteria != nil {
		validateItemText(&v, "acceptance_criteria", *in.AcceptanceCriteria)
	}
	if in.State != nil {
		v.Check(ValidState(*in.State), "state", "%q is not one of %s", *in.State, strings.Join(States, ", "))
	}
	if in.Assignee != nil && *in.Assignee != "" {
		v.CheckErr("assignee", validAssignee(*in.Assignee))
	}
	if err := v.Err(); err != nil {
		return Item{}, err
	}
	if in.Title == nil && in.Description == nil && in.AcceptanceCriteria == nil && in.Type == nil && in.Epic == nil && in.State == nil && in.Assignee == nil {
		return Item{}, apperr.New(apperr.Invalid, "nothing to change: name a field to update")
	}
	var out Item
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		cur, err := s.FindItem(ctx, itemID)
		if err != nil {
			return nil, err
		}
		if cur.Version != version {
			return nil, transition.Stale(store.ErrLostRace, cur.Key)
		}
		rd, err := s.readForUpdate(ctx, cur, in)
		if err != nil {
			return nil, err
		}
		t, next, err := decideUpdate(actor, cur, in, rd, s.now())
		if t != nil && next.State != cur.State && s.Hooks.StateChanged != nil {
			t.Jobs = append(t.Jobs, s.Hooks.StateChanged(next, cur.State, next.State)...)
		}
		out = next
		return t, err
	})
	if err != nil {
		return Item{}, err
	}
	return out, nil
}

// updateReads is what an item update decides on besides the item itself.
type updateReads struct {
	project   tenancy.Project // the item's project, when its type changes
	epic      Item            // what the patch's epic names, when it names one
	epicFound bool
	children  int64 // the items an epic holds, when it may stop being one
}

// readForUpdate reads what the patch in of cur needs to be decided.
func (s *Service) readForUpdate(ctx context.Context, cur Item, in ItemPatch) (updateReads, error) {
	var rd updateReads
	var err error
	if in.Type != nil && *in.Type != cur.Type {
		if rd.project, err = s.Tenancy.FindProject(ctx, cur.ProjectID); err != nil {
			return rd, err
		}
	}
	if in.Epic != nil && *in.Epic != "" {
		if rd.epic, rd.epicFound, err = s.lookup(ctx, *in.Epic); err != nil {
			return rd, err
		}
	}
	if cur.IsEpic() && in.Type != nil && *in.Type != TypeEpic {
		if rd.children, err = s.countChildren(ctx, cur.ID); err != nil {
			return rd, err
		}
	}
	if in.Assignee != nil && *in.Assignee != "" && (cur.Assignee == nil || *cur.Assignee != *in.Assignee) {
		if err := s.checkAssignee(ctx, cur.OrganizationID, cur.ProjectID, *in.Assignee); err != nil {
			return rd, err
		}
	}
	return rd, nil
}

// decideUpdate decides a patch of cur (fresh, at the version the caller
// read) on what readForUpdate read: the transition (nil when nothing
// differs) and the item it makes.
func decideUpdate(actor event.Actor, cur Item, in ItemPatch, rd updateReads, now time.Time) (*transition.Transition, Item, error) {
	next := cur
	var changes, previous ItemFields
	changed := false
	if in.Title != nil && strings.TrimSpace(*in.Title) != cur.Title {
		next.Title = strings.TrimSpace(*in.Title)
		changes.Title, previous.Title, changed = new(next.Title), new(cur.Title), true
	}
	if in.Description != nil && *in.Description != cur.Description {
		next.Description = *in.Description
		changes.Description, previous.Description, changed = new(next.Description), new(cur.Description), true
	}
	if in.AcceptanceCriteria != nil && *in.AcceptanceCriteria != cur.AcceptanceCriteria {
		next.AcceptanceCriteria = *in.AcceptanceCriteria
		changes.AcceptanceCriteria, previous.AcceptanceCriteria, changed = new(next.AcceptanceCriteria), new(cur.AcceptanceCriteria), true
	}
	if in.Type != nil && *in.Type != cur.Type {
		var v apperr.Validator
		validateItemType(&v, &rd.project, *in.Type)
		if err := v.Err(); err != nil {
			return nil, cur, err
		}
		next.Type = *in.Type
		changes.Type, previous.Type, changed = new(next.Type), new(cur.Type), true
	}
	if in.Epic != nil {
		var epic *Item
		if *in.Epic != "" {
			e, err := asEpic(rd.epic, rd.epicFound, cur.ProjectID, *in.Epic, "epic")
			if err != nil {
				return nil, cur, err
			}
			epic = &e
		}
		switch {
		case epic == nil && cur.EpicID != nil:
			next.Epic, next.EpicID = nil, nil
			changes.Epic, previous.Epic, changed = strictjson.Nullable[string]{Set: true}, strictjson.Nullable[string]{Set: true, Value: cur.Epic}, true
		case epic != nil && (cur.EpicID == nil || *cur.EpicID != epic.ID):
			next.Epic, next.EpicID = &epic.Key, &epic.ID
			changes.Epic, previous.Epic, changed = strictjson.Nullable[string]{Set: true, Value: &epic.Key}, strictjson.Nullable[string]{Set: true, Value: cur.Epic}, true
		}
	}
	if in.Assignee != nil {
		was := ""
		if cur.Assignee != nil {
			was = *cur.Assignee
		}
		if *in.Assignee != was {
			next.Assignee = nil
			if *in.Assignee != "" {
				next.Assignee = new(*in.Assignee)
			}
			changes.Assignee = strictjson.Nullable[string]{Set: true, Value: next.Assignee}
			previous.Assignee = strictjson.Nullable[string]{Set: true, Value: cur.Assignee}
			changed = true
		}
	}
	if next.IsEpic() && next.EpicID != nil {
		return nil, cur, apperr.Fields([]apperr.FieldError{{Field: "epic", Message: "an epic cannot belong to an epic: clear epic (\"\") to make this item an epic"}})
	}
	stateChanged := false
	if in.State != nil && *in.State != cur.State {
		if !UserTransitionAllowed(cur.Type, cur.State, *in.State) {
			return nil, cur, transitionRefused(cur, *in.State)
		}
		next.State, stateChanged = *in.State, true
	}
	kindChanged := cur.IsEpic() != next.IsEpic()
	if kindChanged && !slices.Contains(kindChangeStates, next.State) {
		return nil, cur, apperr.New(apperr.Conflict, "%s is %s: an item becomes an epic or stops being one only in %s",
			cur.Key, next.State, strings.Join(kindChangeStates, ", "))
	}
	if kindChanged && cur.IsEpic() && rd.children > 0 {
		return nil, cur, apperr.New(apperr.Conflict, "epic %s still holds %d items: move them out before changing its type", cur.Key, rd.children)
	}
	if !changed && !stateChanged {
		return nil, cur, nil // nothing differs: no change, no event
	}
	next.UpdatedAt, next.Version = now, cur.Version+1
	var epicID any
	if next.EpicID != nil {
		epicID = *next.EpicID
	}
	var assignee any
	if next.Assignee != nil {
		assignee = *next.Assignee
	}
	sql := `UPDATE items SET type = ?, title = ?, description = ?, acceptance_criteria = ?, epic_id = ?, state = ?, assignee = ?, updated_at = ?,
version = version + 1 WHERE id = ? AND version = ?`
	args := []any{next.Type, next.Title, next.Description, next.AcceptanceCriteria, epicID, next.State, assignee, now.UnixMilli(), cur.ID, cur.Version}
	if next.EpicID != nil {
		sql += ` AND ` + isEpicCond
		args = append(args, *next.EpicID)
	}
	if kindChanged && cur.IsEpic() {
		sql += ` AND NOT EXISTS (SELECT 1 FROM items WHERE epic_id = ?)`
		args = append(args, cur.ID)
	}
	payload := updatedPayload(next.IsEpic(), ItemUpdated{Changes: changes, Previous: previous})
	if stateChanged {
		sc := ItemStateChanged{From: cur.State, To: next.State}
		if changed {
			sc.Changes, sc.Previous = &changes, &previous
		}
		payload = stateChangedPayload(next.IsEpic(), sc)
	}
	return &transition.Transition{
		Events:  []event.Event{event.Of(actor, cur.OrganizationID, cur.ProjectID, cur.ID, payload)},
		Guarded: []store.Statement{store.Stmt(sql, args...)},
	}, next, nil
}

func transitionRefused(it Item, to string) error {
	allowed := allowedUserMoves(it.Type, it.State)
	what := "nowhere: only the flow engine moves it on"
	if len(allowed) > 0 {
		what = strings.Join(allowed, ", ")
	}
	kind := "ticket"
	if it.IsEpic() {
		kind = "epic"
	}
	return apperr.New(apperr.Conflict, "%s %s cannot move from %s to %s: from %s a user may move it to %s", kind, it.Key, it.State, to, it.State, what)
}

func (s *Service) countChildren(ctx context.Context, epicID string) (int64, error) {
	rows, err := s.Store.Query(ctx, `SELECT COUNT(*) FROM items WHERE epic_id = ?`, epicID)
	if err != nil {
		return 0, fmt.Errorf("count epic items: %w", err)
	}
	var n int64
	return n, rows.Scan(0, &n)
}

// FlowMove returns the part of a transition by which the flow engine moves
// a ticket, as read (it.State, it.Version), to another state: the
// ticket's state_changed event and its guarded update, for the caller to
// write within its own transition. It is the only way a ticket changes
// state other than a user's UpdateItem: a move the flow engine may not
// make (FlowTransitionAllowed), or any move of an epic, is refused as a
// conflict; a ticket that moved on since it was read makes the batch lose
// its race.
func FlowMove(actor event.Actor, it Item, to string, now time.Time) (transition.Transition, error) {
	if it.IsEpic() {
		return transition.Transition{}, apperr.New(apperr.Conflict, "%s is an epic: no flow runs epics", it.Key)
	}
	if !FlowTransitionAllowed(it.State, to) {
		return transition.Transition{}, apperr.New(apperr.Conflict, "%s is %s: the flow engine cannot move a ticket from %s to %s", it.Key, it.State, it.State, to)
	}
	return transition.Transition{
		Events: []event.Event{event.Of(actor, it.OrganizationID, it.ProjectID, it.ID, stateChangedPayload(it.IsEpic(), ItemStateChanged{From: it.State, To: to}))},
		Guarded: []store.Statement{store.Stmt(`UPDATE items SET state = ?, updated_at = ?, version = version + 1 WHERE id = ? AND version = ? AND state = ?`,
			to, now.UnixMilli(), it.ID, it.Version, it.State)},
	}, nil
}
