package tracker

import (
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/transition"
)

var decideNow = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// outcome sums up a decision: the error code, or the event type it
// records ("" for none).
func outcome(t *transition.Transition, err error) string {
	switch {
	case err != nil:
		return "error " + apperr.Code(err)
	case t == nil:
		return "nothing"
	}
	return t.Events[0].Type
}

// TestDecideUpdate: an item update is a pure function of the item and what
// was read for it (its project, the epic it names, the items it holds).
func TestDecideUpdate(t *testing.T) {
	s := func(v string) *string { return &v }
	epicKey, epicID := "ACME-1", "e1"
	task := Item{ID: "t1", Key: "ACME-2", ProjectID: "p1", Type: "task", Title: "Lexer", State: StateBacklog, Version: 3}
	inEpic := task
	inEpic.Epic, inEpic.EpicID = &epicKey, &epicID
	epic := Item{ID: epicID, Key: epicKey, ProjectID: "p1", Type: TypeEpic, Title: "Parser", State: StateBacklog, Version: 1}
	running := task
	running.State = StateInProgress
	project := updateReads{}
	project.project.TicketTypes = []string{"task", "bug"}
	for _, c := range []struct {
		name string
		cur  Item
		in   ItemPatch
		rd   updateReads
		want string // outcome
		msg  string // in the error, when one
	}{
		{"a title", task, ItemPatch{Title: s("  Scanner ")}, updateReads{}, "ticket.updated", ""},
		{"the same values", task, ItemPatch{Title: s("Lexer"), State: s(StateBacklog)}, updateReads{}, "nothing", ""},
		{"a ticket type", task, ItemPatch{Type: s("bug")}, project, "ticket.updated", ""},
		{"an unknown type", task, ItemPatch{Type: s("story")}, project, "error invalid", `"story" is not "epic" or one of the project's ticket types`},
		{"into an epic", task, ItemPatch{Epic: s(epicKey)}, updateReads{epic: epic, epicFound: true}, "ticket.updated", ""},
		{"into nothing", task, ItemPatch{Epic: s("ACME-9")}, updateReads{}, "error invalid", `"ACME-9" is not an item of this project`},
		{"into another project's epic", task, ItemPatch{Epic: s("OPS-1")}, updateReads{epic: Item{ProjectID: "p2", Type: TypeEpic}, epicFound: true},
			"error invalid", `"OPS-1" is not an item of this project`},
		{"into a task", task, ItemPatch{Epic: s("ACME-3")}, updateReads{epic: Item{Key: "ACME-3", ProjectID: "p1", Type: "task"}, epicFound: true},
			"error invalid", "ACME-3 is a task, not an epic"},
		{"out of its epic", inEpic, ItemPatch{Epic: s("")}, updateReads{}, "ticket.updated", ""},
		{"out of no epic", task, ItemPatch{Epic: s("")}, updateReads{}, "nothing", ""},
		{"an epic in an epic", inEpic, ItemPatch{Type: s(TypeEpic)}, project, "error invalid", "an epic cannot belong to an epic"},
		{"a user's move", task, ItemPatch{State: s(StateReady), Title: s("Scanner")}, updateReads{}, "ticket.state_changed", ""},
		{"a flow's move", task, ItemPatch{State: s(StateInProgress)}, updateReads{}, "error conflict", "from backlog to in_progress"},
		{"an epic with items to a task", epic, ItemPatch{Type: s("task")}, updateReads{project: project.project, children: 2}, "error conflict", "still holds 2 items"},
		{"an empty epic to a task", epic, ItemPatch{Type: s("task")}, project, "ticket.updated", ""},
		{"a running ticket to an epic", running, ItemPatch{Type: s(TypeEpic)}, project, "error conflict", "only in backlog, ready, done, cancelled"},
	} {
		tr, next, err := decideUpdate(itemAlice, c.cur, c.in, c.rd, decideNow)
		if got := outcome(tr, err); got != c.want || (c.msg != "" && !strings.Contains(err.Error(), c.msg)) {
			t.Errorf("%s: %s (%v), want %s naming %q", c.name, got, err, c.want, c.msg)
			continue
		}
		if tr != nil && (next.Version != c.cur.Version+1 || !next.UpdatedAt.Equal(decideNow) || len(tr.Guarded) != 1) {
			t.Errorf("%s: next %+v, %d guarded statements", c.name, next, len(tr.Guarded))
		}
	}
}

// TestDecideBlockers: adding and removing a blocker are pure functions of
// the two items, the graph version and what the graph holds.
func TestDecideBlockers(t *testing.T) {
	a := Item{ID: "a", Key: "ACME-1", OrganizationID: "o1", Type: "task"}
	b := Item{ID: "b", Key: "ACME-2", OrganizationID: "o1", Type: "task"}
	other := Item{ID: "g", Key: "GLX-1", OrganizationID: "o2", Type: "task"}
	for _, c := range []struct {
		name string
		rd   blockerReads
		want string
		msg  string
	}{
		{"new", blockerReads{it: a, bl: b, blockerRef: "ACME-2", graphVersion: 4}, "ticket.blocker_added", ""},
		{"there already", blockerReads{it: a, bl: b, blockerRef: "ACME-2", exists: true}, "nothing", ""},
		{"itself", blockerReads{it: a, bl: a, blockerRef: "ACME-1"}, "error unprocessable", "ACME-1 cannot block itself"},
		{"another organization's", blockerReads{it: a, bl: other, blockerRef: "GLX-1"}, "error not_found", `item "GLX-1" not found`},
		{"a cycle", blockerReads{it: a, bl: b, blockerRef: "ACME-2", cycle: []string{"ACME-2", "ACME-3", "ACME-1"}},
			"error unprocessable", "ACME-1 → ACME-2 → ACME-3 → ACME-1"},
	} {
		tr, err := c.rd.add(itemAlice, decideNow)
		if got := outcome(tr, err); got != c.want || (c.msg != "" && !strings.Contains(err.Error(), c.msg)) {
			t.Errorf("add %s: %s (%v), want %s naming %q", c.name, got, err, c.want, c.msg)
		}
	}
	tr, err := (blockerReads{it: a, bl: b, exists: true, graphVersion: 4}).remove(itemAlice)
	if got := outcome(tr, err); got != "ticket.blocker_removed" || len(tr.Guarded) != 2 {
		t.Errorf("remove: %s (%v)", got, err)
	}
	if _, err := (blockerReads{it: a, bl: b}).remove(itemAlice); apperr.Code(err) != apperr.NotFound {
		t.Errorf("remove what is not there: %v", err)
	}
}

// TestDecideAnswer: an answer is a pure function of the question and how
// many other blocking questions of its item are open.
func TestDecideAnswer(t *testing.T) {
	done := "yes"
	for _, c := range []struct {
		name     string
		q        Question
		others   int64
		want     string
		wantLast bool
	}{
		{"the last blocking one", Question{ID: "q1", Blocking: true, Version: 1}, 0, "question.answered", true},
		{"a blocking one of two", Question{ID: "q1", Blocking: true, Version: 1}, 1, "question.answered", false},
		{"a plain one", Question{ID: "q1", Version: 1}, 0, "question.answered", false},
		{"answered already", Question{ID: "q1", Answer: &done, AnsweredBy: &done, Version: 2}, 0, "error conflict", false},
	} {
		out, tr, last, err := answerQuestion(itemAlice, c.q, c.others, "Use JSON", decideNow)
		if got := outcome(tr, err); got != c.want || last != c.wantLast {
			t.Errorf("%s: %s last=%v (%v), want %s last=%v", c.name, got, last, err, c.want, c.wantLast)
		}
		if err == nil && (*out.Answer != "Use JSON" || *out.AnsweredBy != "alice" || out.Version != c.q.Version+1) {
			t.Errorf("%s: answered %+v", c.name, out)
		}
	}
}

// TestFlowMove: the flow engine's moves are refused unless
// FlowTransitionAllowed allows them, and never move an epic; an allowed
// move is the ticket's state_changed event and its guarded update from the
// state and version read.
func TestFlowMove(t *testing.T) {
	for _, from := range States {
		for _, to := range States {
			for _, typ := range []string{"task", TypeEpic} {
				it := Item{ID: "i1", Key: "ACME-1", Type: typ, State: from, Version: 7}
				part, err := FlowMove(itemAlice, it, to, decideNow)
				if allowed := typ != TypeEpic && FlowTransitionAllowed(from, to); !allowed {
					if apperr.Code(err) != apperr.Conflict {
						t.Errorf("%s %s → %s: %v, want refused", typ, from, to, err)
					}
					continue
				}
				if err != nil || len(part.Events) != 1 || len(part.Guarded) != 1 || part.Events[0].Type != "ticket.state_changed" ||
					string(part.Events[0].Payload) != `{"from":"`+from+`","to":"`+to+`"}` || part.Guarded[0].Args[3] != int64(7) || part.Guarded[0].Args[4] != from {
					t.Errorf("%s → %s: %+v, %v", from, to, part, err)
				}
			}
		}
	}
}
