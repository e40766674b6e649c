package notify

import (
	"slices"
	"testing"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/tracker"
)

// Each cause comes from its typed event, and only from it.
func TestClassify(t *testing.T) {
	human := event.Actor{Kind: event.ActorHuman, Sub: "alice"}
	for _, c := range []struct {
		name     string
		e        event.Event
		cause    string
		audience string
	}{
		{"blocking question", event.Of(human, "o", "p", "q", tracker.QuestionAsked{ItemID: "i", Text: "?", Blocking: true}), CauseQuestionOpened, AudienceAssignee},
		{"non-blocking question", event.Of(human, "o", "p", "q", tracker.QuestionAsked{ItemID: "i", Text: "?"}), "", ""},
		{"epic's question", event.Of(human, "o", "p", "q", tracker.QuestionAsked{ItemID: "i", ItemType: "epic", Blocking: true}), "", ""},
		{"ticket done", event.Of(event.System, "o", "p", "i", tracker.TicketStateChanged{From: "in_progress", To: "done"}), CauseTicketDone, AudienceCreator},
		{"ticket paused", event.Of(human, "o", "p", "i", tracker.TicketStateChanged{From: "in_progress", To: "paused"}), "", ""},
		{"epic done", event.Of(human, "o", "p", "i", tracker.EpicStateChanged{From: "ready", To: "done"}), "", ""},
		{"human stage", event.Of(event.System, "o", "p", "f", flow.StageStarted{Kind: "human", Waiting: flow.WaitApproval}), CauseApprovalWaiting, AudienceAssignee},
		{"agent stage", event.Of(event.System, "o", "p", "f", flow.StageStarted{Kind: "agent", Waiting: flow.WaitRun}), "", ""},
		{"merge", event.Of(event.System, "o", "p", "f", flow.FlowWaiting{Waiting: flow.WaitMerge}), CauseMergeWaiting, AudienceAdmins},
		{"review", event.Of(event.System, "o", "p", "f", flow.FlowWaiting{Waiting: flow.WaitReview}), CauseMergeWaiting, AudienceAdmins},
		{"budget", event.Of(event.System, "o", "p", "f", flow.FlowWaiting{Waiting: flow.WaitBudget}), CauseBudgetExhausted, AudienceAdmins},
		{"pause", event.Of(event.System, "o", "p", "f", flow.FlowWaiting{Waiting: flow.WaitPause}), "", ""},
		{"answer", event.Of(event.System, "o", "p", "f", flow.FlowWaiting{Waiting: flow.WaitAnswer}), "", ""},
		{"stuck", event.Of(event.System, "o", "p", "f", flow.FlowStuck{Waiting: flow.WaitAnswer, Reason: "lost"}), CauseFlowStuck, AudienceAdmins},
		{"failed", event.Of(human, "o", "p", "f", flow.FlowFailed{Reason: "rejected"}), CauseFlowFailed, AudienceAdmins},
		{"done flow", event.Of(event.System, "o", "p", "f", flow.FlowDone{}), "", ""},
		{"question escalated", event.Of(Actor, "o", "p", "q", tracker.QuestionEscalated{ItemID: "i", Text: "?"}), CauseQuestionEscalated, AudienceAdmins},
		{"approval escalated", event.Of(Actor, "o", "p", "f", flow.ApprovalEscalated{}), CauseQuestionEscalated, AudienceAdmins},
		{"runner missing", event.Of(event.System, "o", "p", "f", flow.RunnerMissing{Run: "r"}), CauseRunnerMissing, AudienceAdmins},
	} {
		tr, ok, err := classify(c.e)
		if err != nil || ok != (c.cause != "") || tr.cause != c.cause || tr.audience != c.audience {
			t.Errorf("%s: %+v, %v, %v; want cause %q for %q", c.name, tr, ok, err, c.cause, c.audience)
		}
		if ok && !causeTypes[c.e.Type] {
			t.Errorf("%s: %s is a cause but does not wake the notifier", c.name, c.e.Type)
		}
	}
}

// Who a cause reaches: the assignee else the creator, the creator, the
// admins; never the person who caused it.
func TestRecipients(t *testing.T) {
	f := ticketFacts{assignee: "bob", creator: "alice", admins: []string{"dave", "carol", "dave"}}
	for _, c := range []struct {
		audience, actor string
		facts           ticketFacts
		want            []string
	}{
		{AudienceAssignee, "", f, []string{"bob"}},
		{AudienceAssignee, "bob", f, nil},
		{AudienceAssignee, "", ticketFacts{creator: "alice"}, []string{"alice"}},
		{AudienceAssignee, "alice", ticketFacts{creator: "alice"}, nil},
		{AudienceAssignee, "", ticketFacts{}, nil},
		{AudienceCreator, "", f, []string{"alice"}},
		{AudienceCreator, "alice", f, nil},
		{AudienceAdmins, "", f, []string{"carol", "dave"}},
		{AudienceAdmins, "carol", f, []string{"dave"}},
	} {
		if got := recipients(trigger{audience: c.audience}, c.actor, c.facts); !slices.Equal(got, c.want) {
			t.Errorf("recipients(%s, actor %q, %+v) = %v, want %v", c.audience, c.actor, c.facts, got, c.want)
		}
	}
}

// The person behind an event: a human, or the human a token acted for.
func TestActorPerson(t *testing.T) {
	for _, c := range []struct {
		a    event.Actor
		want string
	}{
		{event.Actor{Kind: event.ActorHuman, Sub: "alice"}, "alice"},
		{event.Actor{Kind: event.ActorService, Sub: "token:1", ActingFor: "bob"}, "bob"},
		{event.Actor{Kind: event.ActorService, Sub: "run:1"}, ""},
		{event.System, ""},
	} {
		e := event.Event{}
		e.SetActor(c.a)
		if got := actorPerson(e); got != c.want {
			t.Errorf("actorPerson(%+v) = %q, want %q", c.a, got, c.want)
		}
	}
}

// What opens a wait schedules its escalation, and only that; an escalation
// reaches the admins but never the person the ticket waits on, and a
// ticket's subscribers receive its questions and approvals but not its
// escalations.
func TestEscalationsAndSubscribers(t *testing.T) {
	human := event.Actor{Kind: event.ActorHuman, Sub: "alice"}
	ask := event.Of(human, "o", "p", "q1", tracker.QuestionAsked{ItemID: "i", Text: "?", Blocking: true})
	tr, _, _ := classify(ask)
	if tr.escalate == nil || tr.escalate.Question != "q1" || tr.escalate.DedupeKey() != "notify.escalate:question:q1" {
		t.Errorf("a blocking question's escalation: %+v", tr.escalate)
	}
	approval := event.Of(event.System, "o", "p", "f1", flow.StageStarted{Position: flow.Position{Step: 3}, Kind: "human", Waiting: flow.WaitApproval})
	tr, _, _ = classify(approval)
	if tr.escalate == nil || tr.escalate.Flow != "f1" || tr.escalate.Step != 3 || tr.escalate.DedupeKey() != "notify.escalate:approval:f1:3" {
		t.Errorf("an approval's escalation: %+v", tr.escalate)
	}
	for _, e := range []event.Event{
		event.Of(event.System, "o", "p", "f", flow.FlowStuck{Waiting: flow.WaitAnswer}),
		event.Of(Actor, "o", "p", "q", tracker.QuestionEscalated{ItemID: "i"}),
		event.Of(event.System, "o", "p", "f", flow.RunnerMissing{}),
	} {
		if tr, _, _ := classify(e); tr.escalate != nil {
			t.Errorf("%s schedules an escalation", e.Type)
		}
	}

	f := ticketFacts{assignee: "carol", creator: "alice", admins: []string{"carol", "dave"}, subscribers: []string{"erin", "dave"}}
	escalated, _, _ := classify(event.Of(Actor, "o", "p", "q", tracker.QuestionEscalated{ItemID: "i"}))
	if got := recipients(escalated, "", f); !slices.Equal(got, []string{"dave"}) {
		t.Errorf("an escalation reaches %v, want [dave]: the admins, not carol (the assignee, an admin too) nor a subscriber", got)
	}
	unassigned := ticketFacts{creator: "dave", admins: []string{"carol", "dave"}}
	if got := recipients(escalated, "", unassigned); !slices.Equal(got, []string{"carol"}) {
		t.Errorf("an escalation on an unassigned ticket reaches %v, want [carol] (dave, its creator, was asked)", got)
	}
	opened, _, _ := classify(ask)
	if got := recipients(opened, "alice", f); !slices.Equal(got, []string{"carol", "erin", "dave"}) {
		t.Errorf("a question reaches %v, want the assignee then the subscribers", got)
	}
	if got := recipients(opened, "erin", f); !slices.Equal(got, []string{"carol", "dave"}) {
		t.Errorf("a subscriber's own question reaches %v: never the asker", got)
	}
	stuck, _, _ := classify(event.Of(event.System, "o", "p", "f", flow.FlowStuck{Waiting: flow.WaitAnswer}))
	if got := recipients(stuck, "", f); !slices.Equal(got, []string{"carol", "dave"}) {
		t.Errorf("a stuck flow reaches %v: the admins, not the subscribers", got)
	}
}
