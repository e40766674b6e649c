package tracker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

var (
	itemAlice = event.Actor{Kind: event.ActorHuman, Sub: "alice"}
	itemBob   = event.Actor{Kind: event.ActorService, Sub: "token:planner", ActingFor: "bob"}
)

// itemWorld is a tracker with organization acme and project ACME.
type itemWorld struct {
	t   *testing.T
	st  store.Store
	svc *Service
	ten *tenancy.Service
	org tenancy.Organization
	p   tenancy.Project
}

func newItemWorld(t *testing.T, st store.Store) *itemWorld {
	t.Helper()
	ctx := context.Background()
	c := clock.Real{}
	// Generous attempts: the concurrency tests make many writers collide.
	a := &transition.Applier{Store: st, Clock: c, Attempts: 200}
	ten := tenancy.New(st, a, c, tenancy.Hooks{})
	svc := New(st, a, c, ten, Hooks{})
	o, err := ten.CreateOrganization(ctx, itemAlice, tenancy.OrganizationInput{Slug: "acme", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.CreateProject(ctx, itemAlice, o.ID, tenancy.ProjectInput{Key: "ACME", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	return &itemWorld{t: t, st: st, svc: svc, ten: ten, org: o, p: p}
}

// item creates an item or fails the test.
func (w *itemWorld) item(typ, title string, mod ...func(*ItemInput)) Item {
	w.t.Helper()
	in := ItemInput{Type: typ, Title: title}
	for _, m := range mod {
		m(&in)
	}
	it, err := w.svc.CreateItem(context.Background(), itemAlice, w.p, in)
	if err != nil {
		w.t.Fatalf("create %s %q: %v", typ, title, err)
	}
	return it
}

// get re-reads an item.
func (w *itemWorld) get(ref string) Item {
	w.t.Helper()
	it, err := w.svc.FindItem(context.Background(), ref)
	if err != nil {
		w.t.Fatal(err)
	}
	return it
}

// events returns every event after seq.
func (w *itemWorld) events(after int64) []event.Event {
	w.t.Helper()
	evs, err := event.List(context.Background(), w.st, event.Filter{AfterSeq: after, Limit: event.MaxLimit})
	if err != nil {
		w.t.Fatal(err)
	}
	return evs
}

func (w *itemWorld) lastSeq() int64 {
	w.t.Helper()
	n, err := event.LastSeq(context.Background(), w.st)
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

// expect runs op and checks its error code ("" for success) and that it
// wrote exactly wantEvents events, of the given type when one.
func (w *itemWorld) expect(name, wantCode string, wantType string, op func() error) []event.Event {
	w.t.Helper()
	before := w.lastSeq()
	err := op()
	code := ""
	if err != nil {
		code = apperr.Code(err)
	}
	if code != wantCode {
		w.t.Fatalf("%s: error %v (code %q), want code %q", name, err, code, wantCode)
	}
	evs := w.events(before)
	want := 0
	if wantType != "" {
		want = 1
	}
	if len(evs) != want {
		w.t.Fatalf("%s: %d events written, want %d: %+v", name, len(evs), want, evs)
	}
	if want == 1 && evs[0].Type != wantType {
		w.t.Fatalf("%s: event %s, want %s", name, evs[0].Type, wantType)
	}
	return evs
}

func itemStr(s string) *string { return &s }

// flowMove moves ref, as the flow engine read it (in state from at
// version), to another state: FlowMove's part, applied in a transition of
// its own as the flow engine applies it within one of its steps. A lost
// race is a conflict.
func (w *itemWorld) flowMove(ref, from, to string, version int64) (Item, error) {
	w.t.Helper()
	it := w.get(ref)
	it.State, it.Version = from, version
	part, err := FlowMove(event.System, it, to, w.svc.now())
	if err != nil {
		return Item{}, err
	}
	if err := w.svc.Applier.Apply(context.Background(), &part); err != nil {
		return Item{}, transition.Stale(err, it.Key)
	}
	return w.get(ref), nil
}

func payloadOf(t *testing.T, e event.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Payload, &m); err != nil {
		t.Fatalf("payload of %s: %v", e.Type, err)
	}
	return m
}

// TestUserTransitions checks UserTransitionAllowed over every pair of
// states, for tickets and epics, against the table written out here.
func TestUserTransitions(t *testing.T) {
	ticket := map[string]bool{
		"backlog>ready": true, "backlog>cancelled": true,
		"ready>backlog": true, "ready>cancelled": true,
		"in_progress>paused": true, "in_progress>cancelled": true,
		"waiting_for_answer>paused": true, "waiting_for_answer>cancelled": true,
		"paused>ready": true, "paused>backlog": true, "paused>cancelled": true,
		"done>backlog":      true,
		"cancelled>backlog": true,
	}
	epicStates := map[string]bool{"backlog": true, "ready": true, "in_progress": true, "done": true, "cancelled": true}
	n := 0
	for _, from := range States {
		for _, to := range States {
			for _, typ := range []string{"task", "bug", "epic"} {
				want := ticket[from+">"+to]
				if typ == "epic" {
					want = from != to && epicStates[from] && epicStates[to]
				}
				if got := UserTransitionAllowed(typ, from, to); got != want {
					t.Errorf("UserTransitionAllowed(%s, %s, %s) = %v, want %v", typ, from, to, got, want)
				}
				n++
			}
		}
	}
	if n != 7*7*3 {
		t.Fatalf("checked %d pairs", n)
	}
	for _, bad := range [][2]string{{"", "ready"}, {"backlog", ""}, {"nope", "ready"}, {"backlog", "nope"}} {
		if UserTransitionAllowed("task", bad[0], bad[1]) || UserTransitionAllowed("epic", bad[0], bad[1]) {
			t.Errorf("%v allowed", bad)
		}
	}
}

// TestFlowTransitions checks FlowTransitionAllowed over every pair.
func TestFlowTransitions(t *testing.T) {
	flow := map[string]bool{
		"ready>in_progress":              true,
		"in_progress>waiting_for_answer": true,
		"waiting_for_answer>in_progress": true,
		"in_progress>done":               true,
		"in_progress>paused":             true,
		"waiting_for_answer>paused":      true,
		"in_progress>cancelled":          true,
		"waiting_for_answer>cancelled":   true,
	}
	for _, from := range States {
		for _, to := range States {
			if got, want := FlowTransitionAllowed(from, to), flow[from+">"+to]; got != want {
				t.Errorf("FlowTransitionAllowed(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	// A user can never start, resume or finish a ticket.
	for _, pair := range [][2]string{{"ready", "in_progress"}, {"waiting_for_answer", "in_progress"}, {"in_progress", "done"}, {"in_progress", "waiting_for_answer"}, {"paused", "in_progress"}} {
		if UserTransitionAllowed("task", pair[0], pair[1]) {
			t.Errorf("a user may move a ticket %s → %s", pair[0], pair[1])
		}
	}
}

// TestItemKeysUnderConcurrency: concurrent creations in one project get
// unique, consecutive numbers, and one event each.
func TestItemKeysUnderConcurrency(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newItemWorld(t, st)
		before := w.lastSeq()
		const writers, each = 8, 4
		var mu sync.Mutex
		var got []Item
		var wg sync.WaitGroup
		errs := make(chan error, writers*each)
		for g := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					it, err := w.svc.CreateItem(context.Background(), itemAlice, w.p, ItemInput{Type: "task", Title: fmt.Sprintf("w%d i%d", g, i)})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					got = append(got, it)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		sort.Slice(got, func(a, b int) bool { return got[a].Number < got[b].Number })
		for i, it := range got {
			if it.Number != int64(i+1) || it.Key != fmt.Sprintf("ACME-%d", i+1) {
				t.Fatalf("item %d: number %d key %s", i, it.Number, it.Key)
			}
			if stored := w.get(it.Key); stored.ID != it.ID || stored.Title != it.Title {
				t.Fatalf("%s stored as %+v, returned %+v", it.Key, stored, it)
			}
		}
		evs := w.events(before)
		if len(evs) != writers*each {
			t.Fatalf("%d events for %d items", len(evs), writers*each)
		}
		events := map[string]int{} // per item
		for _, e := range evs {
			if e.Type != "ticket.created" || e.OrganizationID != w.org.ID || e.ProjectID != w.p.ID || e.ActorSub != "alice" {
				t.Fatalf("event %+v", e)
			}
			events[e.EntityID]++
		}
		for _, it := range got {
			if events[it.ID] != 1 {
				t.Fatalf("%s has %d ticket.created events, want 1", it.Key, events[it.ID])
			}
		}
		items, next, err := w.svc.ListItems(context.Background(), w.p.ID, ItemFilter{Limit: 200})
		if err != nil || len(items) != writers*each || next != 0 {
			t.Fatalf("list: %d items, next %d, %v", len(items), next, err)
		}
	})
}

// TestItemChangesWriteOneEventEach walks an item through its changes;
// each writes exactly one event of the right type and payload, and every
// refused or lost change writes none.
func TestItemChangesWriteOneEventEach(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newItemWorld(t, st)
		ctx := context.Background()
		var it Item
		evs := w.expect("create", "", "ticket.created", func() (err error) {
			it, err = w.svc.CreateItem(ctx, itemBob, w.p, ItemInput{Type: "task", Title: "  Write the parser  ", Description: "d", AcceptanceCriteria: "ac"})
			return err
		})
		if e := evs[0]; e.EntityType != "ticket" || e.EntityID != it.ID || e.ActorKind != "service" || e.ActorSub != "token:planner" || e.ActingFor != "bob" {
			t.Fatalf("created event %+v", e)
		}
		if p := payloadOf(t, evs[0]); p["key"] != "ACME-1" || p["title"] != "Write the parser" || p["state"] != "backlog" {
			t.Fatalf("created payload %v", p)
		}
		if it.Key != "ACME-1" || it.Version != 1 || it.State != "backlog" || it.CreatedBy != "token:planner" || it.Epic != nil {
			t.Fatalf("created %+v", it)
		}
		v := it.Version
		evs = w.expect("update title", "", "ticket.updated", func() (err error) {
			it, err = w.svc.UpdateItem(ctx, itemAlice, it.ID, v, ItemPatch{Title: itemStr("Write the lexer"), Description: itemStr("d")})
			return err
		})
		if p := payloadOf(t, evs[0]); fmt.Sprint(p["changes"]) != "map[title:Write the lexer]" || fmt.Sprint(p["previous"]) != "map[title:Write the parser]" {
			t.Fatalf("updated payload %v", p)
		}
		if it.Version != 2 || w.get(it.Key).Title != "Write the lexer" {
			t.Fatalf("after update %+v", it)
		}
		w.expect("same values", "", "", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, it.ID, 2, ItemPatch{Title: itemStr("Write the lexer")})
			return err
		})
		w.expect("stale version", apperr.Conflict, "", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, it.ID, 1, ItemPatch{Title: itemStr("Lost")})
			return err
		})
		w.expect("no version", apperr.Invalid, "", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, it.ID, 0, ItemPatch{Title: itemStr("x")})
			return err
		})
		w.expect("title too long", apperr.Invalid, "", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, it.ID, 2, ItemPatch{Title: itemStr(strings.Repeat("é", MaxTitle+1))})
			return err
		})
		w.expect("title 500 chars", "", "ticket.updated", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, it.ID, 2, ItemPatch{Title: itemStr(strings.Repeat("é", MaxTitle))})
			return err
		})
		w.expect("flow-only transition", apperr.Conflict, "", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, it.ID, 3, ItemPatch{State: itemStr("in_progress")})
			if err == nil || !strings.Contains(err.Error(), "from backlog to in_progress") || !strings.Contains(err.Error(), "ready, cancelled") {
				t.Errorf("refusal names from, to and the allowed moves: %v", err)
			}
			return err
		})
		evs = w.expect("to ready", "", "ticket.state_changed", func() (err error) {
			it, err = w.svc.UpdateItem(ctx, itemAlice, it.ID, 3, ItemPatch{State: itemStr("ready")})
			return err
		})
		if p := payloadOf(t, evs[0]); p["from"] != "backlog" || p["to"] != "ready" || p["changes"] != nil {
			t.Fatalf("state_changed payload %v", p)
		}
		evs = w.expect("flow starts", "", "ticket.state_changed", func() (err error) {
			it, err = w.flowMove(it.Key, "ready", "in_progress", 4)
			return err
		})
		if e := evs[0]; e.ActorKind != "system" || string(e.Payload) != `{"from":"ready","to":"in_progress"}` {
			t.Fatalf("system event %+v %s", e, e.Payload)
		}
		w.expect("flow with a stale version", apperr.Conflict, "", func() error {
			_, err := w.flowMove(it.ID, "in_progress", "done", 4)
			return err
		})
		w.expect("flow from the wrong state", apperr.Conflict, "", func() error {
			_, err := w.flowMove(it.ID, "ready", "in_progress", 5)
			return err
		})
		w.expect("not a flow move", apperr.Conflict, "", func() error {
			_, err := w.flowMove(it.ID, "in_progress", "backlog", 5)
			return err
		})
		w.expect("user pauses with an edit", "", "ticket.state_changed", func() (err error) {
			it, err = w.svc.UpdateItem(ctx, itemAlice, it.ID, 5, ItemPatch{State: itemStr("paused"), Description: itemStr("d2")})
			return err
		})
		if p := payloadOf(t, w.events(w.lastSeq() - 1)[0]); p["from"] != "in_progress" || p["to"] != "paused" || fmt.Sprint(p["changes"]) != "map[description:d2]" {
			t.Fatalf("combined payload %v", p)
		}
		if it.State != "paused" || it.Version != 6 || it.Description != "d2" {
			t.Fatalf("after pause %+v", it)
		}
		w.expect("nothing named", apperr.Invalid, "", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, it.ID, 6, ItemPatch{})
			return err
		})
		w.expect("unknown item", apperr.NotFound, "", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, "ACME-99", 1, ItemPatch{Title: itemStr("x")})
			return err
		})
		w.expect("bad create", apperr.Invalid, "", func() error {
			_, err := w.svc.CreateItem(ctx, itemAlice, w.p, ItemInput{Type: "story", Title: "", State: "done", Description: strings.Repeat("x", MaxItemText+1)})
			var ae *apperr.Error
			if !errors.As(err, &ae) || len(ae.FieldErrors()) != 4 {
				t.Errorf("want type, title, description and state named: %v", err)
			}
			return err
		})
	})
}

// TestConcurrentItemUpdatesOneWins: writers patching the same version get
// one success and conflicts, and exactly one event is written.
func TestConcurrentItemUpdatesOneWins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newItemWorld(t, st)
		it := w.item("task", "Contended")
		before := w.lastSeq()
		const n = 6
		codes := make(chan string, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := w.svc.UpdateItem(context.Background(), itemAlice, it.ID, 1, ItemPatch{Title: itemStr(fmt.Sprintf("Title %d", i))})
				if err != nil {
					codes <- apperr.Code(err)
				} else {
					codes <- "ok"
				}
			}()
		}
		close(start)
		wg.Wait()
		close(codes)
		count := map[string]int{}
		for c := range codes {
			count[c]++
		}
		if count["ok"] != 1 || count[apperr.Conflict] != n-1 {
			t.Fatalf("outcomes %v", count)
		}
		if evs := w.events(before); len(evs) != 1 {
			t.Fatalf("%d events", len(evs))
		}
		if got := w.get(it.ID); got.Version != 2 {
			t.Fatalf("version %d", got.Version)
		}
	})
}

// TestEpics: the epic field takes an epic of the same project; epics have
// no epic; an epic with items keeps its type; the type changes between
// epic and ticket only outside flow states.
func TestEpics(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := newItemWorld(t, st)
		ctx := context.Background()
		var e Item
		w.expect("create epic", "", "epic.created", func() (err error) {
			e, err = w.svc.CreateItem(ctx, itemAlice, w.p, ItemInput{Type: "epic", Title: "Parser"})
			return err
		})
		task := w.item("task", "Lexer", func(c *ItemInput) { c.Epic = e.Key })
		if task.Epic == nil || *task.Epic != e.Key || *task.EpicID != e.ID || *w.get(task.ID).Epic != e.Key {
			t.Fatalf("epic of task: %+v", task)
		}
		byID := w.item("bug", "Crash", func(c *ItemInput) { c.Epic = e.ID; c.State = "ready" })
		if *byID.Epic != e.Key || byID.State != "ready" {
			t.Fatalf("%+v", byID)
		}
		for name, in := range map[string]ItemInput{
			"epic is a task":   {Type: "task", Title: "x", Epic: task.Key},
			"epic unknown":     {Type: "task", Title: "x", Epic: "ACME-999"},
			"epic of an epic":  {Type: "epic", Title: "x", Epic: e.Key},
			"epic not a state": {Type: "epic", Title: "x", State: "in_progress"},
		} {
			_, err := w.svc.CreateItem(ctx, itemAlice, w.p, in)
			if apperr.Code(err) != apperr.Invalid {
				t.Errorf("%s: %v", name, err)
			}
		}
		// Another project's epic is not this project's.
		p2, err := w.ten.CreateProject(ctx, itemAlice, w.org.ID, tenancy.ProjectInput{Key: "OPS", Name: "Ops"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.svc.CreateItem(ctx, itemAlice, p2, ItemInput{Type: "task", Title: "x", Epic: e.Key}); apperr.Code(err) != apperr.Invalid {
			t.Fatalf("foreign epic: %v", err)
		}
		// The epic cannot become a task while it holds items.
		w.expect("epic with items to task", apperr.Conflict, "", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, e.ID, 1, ItemPatch{Type: itemStr("task")})
			return err
		})
		w.expect("clear epic", "", "ticket.updated", func() error {
			it, err := w.svc.UpdateItem(ctx, itemAlice, task.ID, 1, ItemPatch{Epic: itemStr("")})
			if err == nil && (it.Epic != nil || it.EpicID != nil) {
				t.Errorf("epic kept: %+v", it)
			}
			return err
		})
		w.expect("clear epic again", "", "", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, task.ID, 2, ItemPatch{Epic: itemStr("")})
			return err
		})
		w.expect("task with an epic to epic", apperr.Invalid, "", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, byID.ID, 1, ItemPatch{Type: itemStr("epic")})
			return err
		})
		w.expect("move the bug out", "", "ticket.updated", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, byID.ID, 1, ItemPatch{Epic: itemStr("")})
			return err
		})
		// Now the epic is empty: it may become a task, and back.
		w.expect("epic to task", "", "ticket.updated", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, e.ID, 1, ItemPatch{Type: itemStr("task")})
			return err
		})
		w.expect("task to epic", "", "epic.updated", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, e.ID, 2, ItemPatch{Type: itemStr("epic")})
			return err
		})
		w.expect("unknown type", apperr.Invalid, "", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, e.ID, 3, ItemPatch{Type: itemStr("story")})
			return err
		})
		// Epics move freely between their states, but never to the flow's.
		w.expect("epic to in_progress", "", "epic.state_changed", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, e.ID, 3, ItemPatch{State: itemStr("in_progress")})
			return err
		})
		w.expect("epic to waiting", apperr.Conflict, "", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, e.ID, 4, ItemPatch{State: itemStr("waiting_for_answer")})
			return err
		})
		w.expect("in-progress epic to task", apperr.Conflict, "", func() error {
			_, err := w.svc.UpdateItem(ctx, itemAlice, e.ID, 4, ItemPatch{Type: itemStr("task")})
			return err
		})
		w.expect("no flow runs epics", apperr.Conflict, "", func() error {
			_, err := w.flowMove(e.ID, "in_progress", "done", 4)
			return err
		})
		// Filters.
		w.item("task", "In epic", func(c *ItemInput) { c.Epic = e.Key })
		list := func(f ItemFilter) []string {
			items, _, err := w.svc.ListItems(ctx, w.p.ID, f)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, it := range items {
				out = append(out, it.Key)
			}
			return out
		}
		if got := fmt.Sprint(list(ItemFilter{EpicID: e.ID})); got != "[ACME-4]" {
			t.Errorf("by epic: %s", got)
		}
		if got := fmt.Sprint(list(ItemFilter{Type: "epic"})); got != "[ACME-1]" {
			t.Errorf("by type: %s", got)
		}
		if got := fmt.Sprint(list(ItemFilter{State: "ready"})); got != "[ACME-3]" {
			t.Errorf("by state: %s", got)
		}
		if got := fmt.Sprint(list(ItemFilter{After: 1, Limit: 2})); got != "[ACME-2 ACME-3]" {
			t.Errorf("page: %s", got)
		}
	})
}
