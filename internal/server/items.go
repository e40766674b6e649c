package server

import (
	"context"
	"net/http"

	"github.com/ballet/ballet/internal/bounds"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/schedule"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
)

// Items serves tickets and epics, their blockers, questions and history.
type Items struct {
	T *tracker.Service
	// Flows summarizes the items' flows on reads (one query per page).
	Flows FlowSummaries
	// Subscriptions tells GET /items/{item} whether the caller is
	// subscribed to it (nil: not shown).
	Subscriptions SubscriptionReader
	// Holds tells GET /items/{item} what keeps a ready ticket from
	// starting (nil: not shown).
	Holds HoldReader
}

// HoldReader says why a ready ticket does not start now
// (schedule.Scheduler.Holds with flow.Service.BudgetVerdict).
type HoldReader func(ctx context.Context, itemID string) ([]schedule.Hold, error)

// SubscriptionReader reads a person's subscription to a ticket
// (notify.Subscriptions).
type SubscriptionReader interface {
	Get(ctx context.Context, person string, it tracker.Item) (notify.Subscription, error)
}

// FlowSummaries reads the summary of each item's latest flow
// (flow.Service).
type FlowSummaries interface {
	Summaries(ctx context.Context, itemIDs []string) (map[string]flow.Summary, error)
}

// ItemView is an item as reads show it: with its flow (null when it never
// had one), so that a board is one request.
type ItemView struct {
	tracker.Item
	Flow *flow.Summary `json:"flow"`
	// Subscribed: the caller is subscribed to the item (GET
	// /items/{item} only; absent in lists).
	Subscribed *bool `json:"subscribed,omitempty"`
	// Start: what keeps a ready ticket without an active flow from
	// starting now, or would make its flow wait (GET /items/{item} only;
	// absent otherwise, and empty when nothing holds it).
	Start *StartHolds `json:"start,omitempty"`
}

// StartHolds is ItemView's start: the holds, each with its code and a
// sentence for people (docs/api.md lists the codes).
type StartHolds struct {
	Holds []schedule.Hold `json:"holds"`
}

// views joins items with their flows' summaries, in one read.
func (h *Items) views(ctx context.Context, items []tracker.Item) ([]ItemView, error) {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	sums, err := h.Flows.Summaries(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]ItemView, len(items))
	for i, it := range items {
		out[i].Item = it
		if sm, ok := sums[it.ID]; ok {
			out[i].Flow = &sm
		}
	}
	return out, nil
}

// ItemCreate is the body of POST /projects/{project}/items.
type ItemCreate struct {
	Type               string `json:"type"`
	Title              string `json:"title"`
	Description        string `json:"description,omitempty"`
	AcceptanceCriteria string `json:"acceptance_criteria,omitempty"`
	Epic               string `json:"epic,omitempty"`     // an epic's key or id in the same project
	State              string `json:"state,omitempty"`    // backlog (default) or ready
	Assignee           string `json:"assignee,omitempty"` // a project member's subject (tracker.write there)
}

// ItemUpdate is the body of PATCH /items/{item}: absent fields stay;
// version is the one read. Epic "" removes the item from its epic.
type ItemUpdate struct {
	Version            int64   `json:"version"`
	Title              *string `json:"title,omitempty"`
	Description        *string `json:"description,omitempty"`
	AcceptanceCriteria *string `json:"acceptance_criteria,omitempty"`
	Type               *string `json:"type,omitempty"`
	Epic               *string `json:"epic,omitempty"`
	State              *string `json:"state,omitempty"`
	Assignee           *string `json:"assignee,omitempty"` // a project member's subject; "" unassigns
}

// patch is the update without its version.
func (in ItemUpdate) patch() tracker.ItemPatch {
	return tracker.ItemPatch{Title: in.Title, Description: in.Description, AcceptanceCriteria: in.AcceptanceCriteria, Type: in.Type,
		Epic: in.Epic, State: in.State, Assignee: in.Assignee}
}

// QuestionAsk is the body of POST /items/{item}/questions and of
// POST /runs/{run}/questions.
type QuestionAsk struct {
	Text     string `json:"text"`
	Blocking bool   `json:"blocking"`
}

// QuestionAnswer is the body of POST /questions/{id}/answer.
type QuestionAnswer struct {
	Answer string `json:"answer"`
}

// ItemList is the body of GET /projects/{project}/items: a page by item
// number; next_after (null on the last page) fetches the next one.
type ItemList struct {
	Items     []ItemView `json:"items"`
	NextAfter *int64     `json:"next_after"`
}

// QuestionList is the body of GET /items/{item}/questions.
type QuestionList struct {
	Questions []tracker.Question `json:"questions"`
}

// EventPage is a page of events in seq order; last_seq is where the next
// page starts (after=last_seq), the after asked for when the page is empty.
type EventPage struct {
	Events  []event.Event `json:"events"`
	LastSeq int64         `json:"last_seq"`
}

// BlockerAdded is the answer to POST …/blockers/{blocker}: the blocked
// item, with 201 when the blocker was added and 200 when it was there
// already (HTTPStatus).
type BlockerAdded struct {
	tracker.Item
	added bool
}

// HTTPStatus is the success status of this answer.
func (b BlockerAdded) HTTPStatus() int {
	if b.added {
		return http.StatusCreated
	}
	return http.StatusOK
}

// Routes returns the item endpoints.
func (h *Items) Routes() []*Route {
	return []*Route{
		{Method: "POST", Path: "/api/v1/projects/{project}/items", Perm: access.TrackerWrite, Summary: "Create a ticket or an epic",
			Request: ItemCreate{}, Response: tracker.Item{}, Status: http.StatusCreated, Handle: h.createItem},
		{Method: "GET", Path: "/api/v1/projects/{project}/items", Perm: access.TrackerRead,
			Summary:  "List a project's items by number, each with its flow (filters: state, type, epic; paging: after, limit 1–200)",
			Response: ItemList{}, Handle: h.listItems},
		{Method: "GET", Path: "/api/v1/items/{item}", Perm: access.TrackerRead, Summary: "Get an item by key (ACME-42) or id, with its flow",
			Response: ItemView{}, Handle: h.getItem},
		{Method: "PATCH", Path: "/api/v1/items/{item}", Perm: access.TrackerWrite,
			Summary: "Update an item: fields, epic, type or a user state change (optimistic: send the version read)",
			Request: ItemUpdate{}, Response: tracker.Item{}, Handle: h.updateItem},
		{Method: "POST", Path: "/api/v1/items/{item}/blockers/{blocker}", Perm: access.TrackerWrite,
			Summary:  "Record that the item is blocked by another item of the organization (201; 200 when it was already; 422 for a cycle)",
			Response: tracker.Item{}, Status: http.StatusCreated, Also: []int{http.StatusOK, http.StatusUnprocessableEntity}, Handle: h.addBlocker},
		{Method: "DELETE", Path: "/api/v1/items/{item}/blockers/{blocker}", Perm: access.TrackerWrite, Summary: "Remove a blocker from an item",
			Status: http.StatusNoContent, Handle: h.removeBlocker},
		{Method: "GET", Path: "/api/v1/items/{item}/questions", Perm: access.TrackerRead, Summary: "List an item's questions, oldest first",
			Response: QuestionList{}, Handle: h.listQuestions},
		{Method: "POST", Path: "/api/v1/items/{item}/questions", Perm: access.TrackerWrite, Summary: "Ask a question on an item (blocking or not)",
			Request: QuestionAsk{}, Response: tracker.Question{}, Status: http.StatusCreated, Handle: h.askQuestion},
		{Method: "POST", Path: "/api/v1/questions/{id}/answer", Perm: access.TrackerWrite, Summary: "Answer an open question (409 when answered already)",
			Request: QuestionAnswer{}, Response: tracker.Question{}, Handle: h.answerQuestion},
		{Method: "GET", Path: "/api/v1/items/{item}/events", Perm: access.TrackerRead,
			Summary:  "An item's history: its events and its questions' events in seq order (after, limit 1–1000)",
			Response: EventPage{}, Handle: h.itemEvents},
		{Method: "GET", Path: "/api/v1/projects/{project}/events", Perm: access.TrackerRead,
			Summary:  "A project's events in seq order (after, limit 1–1000)",
			Response: EventPage{}, Handle: h.projectEvents},
	}
}

// blocker resolves {blocker}: an item of its organization the caller may
// read.
func (h *Items) blocker(r *Request, it tracker.Item) (tracker.Item, error) {
	ref := r.PathValue("blocker")
	bl, err := h.T.FindItem(r.Context(), ref)
	if err == nil && bl.OrganizationID != it.OrganizationID {
		err = apperr.New(apperr.NotFound, "item %q not found", ref)
	}
	return bl, r.visibleAs(access.TrackerRead, "item", ref, err, bl.OrganizationID, bl.ProjectID)
}

func (h *Items) createItem(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	var in ItemCreate
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.T.CreateItem(r.Context(), r.Principal.Actor(), p, tracker.ItemInput(in))
}

func (h *Items) listItems(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	f := tracker.ItemFilter{State: q.Get("state"), Type: q.Get("type")}
	var v apperr.Validator
	v.Check(f.State == "" || tracker.ValidState(f.State), "state", "%q is not an item state", f.State)
	v.Check(f.Type == "" || f.Type == tracker.TypeEpic || tenancy.ValidTicketType(f.Type), "type", "%q is not an item type", f.Type)
	if err := v.Err(); err != nil {
		return nil, err
	}
	if ref := q.Get("epic"); ref != "" {
		e, err := h.T.FindEpic(r.Context(), p.ID, ref, "epic")
		if err != nil {
			return nil, err
		}
		f.EpicID = e.ID
	}
	if f.After, err = r.QueryInt("after", 0, bounds.After.Min, bounds.After.Max); err != nil {
		return nil, err
	}
	limit, err := r.QueryInt("limit", tracker.DefaultItemPage, 1, tracker.MaxItemPage)
	if err != nil {
		return nil, err
	}
	f.Limit = int(limit)
	items, next, err := h.T.ListItems(r.Context(), p.ID, f)
	if err != nil {
		return nil, err
	}
	views, err := h.views(r.Context(), items)
	if err != nil {
		return nil, err
	}
	out := ItemList{Items: views}
	if next != 0 {
		out.NextAfter = &next
	}
	return out, nil
}

func (h *Items) getItem(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	views, err := h.views(r.Context(), []tracker.Item{it})
	if err != nil {
		return nil, err
	}
	if h.Subscriptions != nil {
		sub, err := h.Subscriptions.Get(r.Context(), person(r), it)
		if err != nil {
			return nil, err
		}
		views[0].Subscribed = &sub.Subscribed
	}
	if h.Holds != nil && it.State == "ready" && it.Type != "epic" {
		holds, err := h.Holds(r.Context(), it.ID)
		if err != nil {
			return nil, err
		}
		if holds == nil {
			holds = []schedule.Hold{}
		}
		views[0].Start = &StartHolds{Holds: holds}
	}
	return views[0], nil
}

func (h *Items) updateItem(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	var in ItemUpdate
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.T.UpdateItem(r.Context(), r.Principal.Actor(), it.ID, in.Version, in.patch())
}

func (h *Items) addBlocker(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	bl, err := h.blocker(r, it)
	if err != nil {
		return nil, err
	}
	added, err := h.T.AddBlocker(r.Context(), r.Principal.Actor(), it.ID, bl.ID)
	if err != nil {
		return nil, err
	}
	if it, err = h.T.FindItem(r.Context(), it.ID); err != nil {
		return nil, err
	}
	return BlockerAdded{Item: it, added: added}, nil
}

func (h *Items) removeBlocker(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	bl, err := h.blocker(r, it)
	if err != nil {
		return nil, err
	}
	return nil, h.T.RemoveBlocker(r.Context(), r.Principal.Actor(), it.ID, bl.ID)
}

func (h *Items) listQuestions(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	qs, err := h.T.ListQuestions(r.Context(), it.ID)
	return QuestionList{Questions: qs}, err
}

func (h *Items) askQuestion(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	var in QuestionAsk
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.T.AskQuestion(r.Context(), r.Principal.Actor(), it.ID, in.Text, in.Blocking)
}

func (h *Items) answerQuestion(r *Request) (any, error) {
	id := r.PathValue("id")
	q, err := h.T.FindQuestion(r.Context(), id)
	if err := r.Visible("question", id, err, q.OrganizationID, q.ProjectID); err != nil {
		return nil, err
	}
	var in QuestionAnswer
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.T.AnswerQuestion(r.Context(), r.Principal.Actor(), q.ID, in.Answer)
}

func (h *Items) itemEvents(r *Request) (any, error) {
	it, err := r.Item()
	if err != nil {
		return nil, err
	}
	after, limit, err := eventPage(r)
	if err != nil {
		return nil, err
	}
	evs, err := event.ItemHistory(r.Context(), h.T.Store, it.ID, after, limit)
	if err != nil {
		return nil, err
	}
	return page(r, h.T.Store, evs, after)
}

func (h *Items) projectEvents(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	after, limit, err := eventPage(r)
	if err != nil {
		return nil, err
	}
	evs, err := event.List(r.Context(), h.T.Store, event.Filter{ProjectID: p.ID, AfterSeq: after, Limit: limit})
	if err != nil {
		return nil, err
	}
	return page(r, h.T.Store, evs, after)
}
