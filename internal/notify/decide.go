package notify

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/tracker"
)

// Audiences: who a cause is for.
const (
	// AudienceAssignee: the ticket's assignee, else its creator.
	AudienceAssignee = "assignee"
	// AudienceAdmins: the project's admins.
	AudienceAdmins = "admins"
	// AudienceCreator: the ticket's creator.
	AudienceCreator = "creator"
)

// trigger is what an event asks for: a cause about a ticket (named by its
// id, or by the flow it runs), for an audience.
type trigger struct {
	cause    string
	audience string
	itemID   string // the ticket, when the event names it
	flowID   string // else the flow whose ticket it is
	text     string // what happened, in a line
	anchor   string // the section of the ticket's page where the person acts
	// subscribers: the ticket's subscribers receive it too
	// (SubscriberCauses).
	subscribers bool
	// notWaitedOn: the person the ticket waits on (its assignee, else its
	// creator) does not receive it: an escalation goes over their head.
	notWaitedOn bool
	// escalate is the wait the event opens, which is escalated when it is
	// still open after escalate_after (nil: none).
	escalate *EscalateArgs
}

// maxText bounds a notification's text (a question can be long).
const maxText = 280

// classify tells whether e is the cause of notifications, and which. It
// decodes the typed payloads of the events it reads; an event of another
// type is not a cause.
func classify(e event.Event) (trigger, bool, error) {
	if q, ok, err := event.Decode[tracker.QuestionAsked](e); ok || err != nil {
		if err != nil || !q.Blocking || q.ItemType == tracker.TypeEpic {
			return trigger{}, false, err
		}
		return trigger{cause: CauseQuestionOpened, audience: AudienceAssignee, itemID: q.ItemID,
			text: "Question: " + clip(q.Text), anchor: "questions", subscribers: true,
			escalate: &EscalateArgs{Question: e.EntityID, Since: e.OccurredAt}}, true, nil
	}
	if q, ok, err := event.Decode[tracker.QuestionEscalated](e); ok || err != nil {
		if err != nil {
			return trigger{}, false, err
		}
		return trigger{cause: CauseQuestionEscalated, audience: AudienceAdmins, itemID: q.ItemID, notWaitedOn: true,
			text: "Unanswered for " + q.After + ": " + clip(q.Text), anchor: "questions"}, true, nil
	}
	if s, ok, err := event.Decode[tracker.TicketStateChanged](e); ok || err != nil {
		if err != nil || s.To != tracker.StateDone {
			return trigger{}, false, err
		}
		return trigger{cause: CauseTicketDone, audience: AudienceCreator, itemID: e.EntityID, text: "The ticket is done.",
			subscribers: true}, true, nil
	}
	if s, ok, err := event.Decode[flow.StageStarted](e); ok || err != nil {
		if err != nil || s.Waiting != flow.WaitApproval {
			return trigger{}, false, err
		}
		return trigger{cause: CauseApprovalWaiting, audience: AudienceAssignee, flowID: e.EntityID,
			text: fmt.Sprintf("Stage %s waits for an approval.", s.Stage), anchor: "flow", subscribers: true,
			escalate: &EscalateArgs{Flow: e.EntityID, Step: s.Step, Since: e.OccurredAt}}, true, nil
	}
	if a, ok, err := event.Decode[flow.ApprovalEscalated](e); ok || err != nil {
		if err != nil {
			return trigger{}, false, err
		}
		return trigger{cause: CauseQuestionEscalated, audience: AudienceAdmins, flowID: e.EntityID, notWaitedOn: true,
			text: fmt.Sprintf("Stage %s has waited for an approval for over %s.", a.Stage, a.After), anchor: "flow"}, true, nil
	}
	if r, ok, err := event.Decode[flow.RunnerMissing](e); ok || err != nil {
		if err != nil {
			return trigger{}, false, err
		}
		return trigger{cause: CauseRunnerMissing, audience: AudienceAdmins, flowID: e.EntityID,
			text: fmt.Sprintf("No live runner takes the run of stage %s (adapter %s).", r.Stage, r.Adapter), anchor: "flow"}, true, nil
	}
	if w, ok, err := event.Decode[flow.FlowWaiting](e); ok || err != nil {
		if err != nil {
			return trigger{}, false, err
		}
		switch w.Waiting {
		case flow.WaitMerge, flow.WaitReview:
			return trigger{cause: CauseMergeWaiting, audience: AudienceAdmins, flowID: e.EntityID,
				text: "The pull request waits for a person: " + clip(w.Reason), anchor: "flow"}, true, nil
		case flow.WaitBudget:
			return trigger{cause: CauseBudgetExhausted, audience: AudienceAdmins, flowID: e.EntityID,
				text: "The flow waits for budget: " + clip(w.Reason), anchor: "flow"}, true, nil
		}
		return trigger{}, false, nil
	}
	if s, ok, err := event.Decode[flow.FlowStuck](e); ok || err != nil {
		if err != nil {
			return trigger{}, false, err
		}
		return trigger{cause: CauseFlowStuck, audience: AudienceAdmins, flowID: e.EntityID,
			text: "The flow is stuck: " + clip(s.Reason), anchor: "questions"}, true, nil
	}
	if f, ok, err := event.Decode[flow.FlowFailed](e); ok || err != nil {
		if err != nil {
			return trigger{}, false, err
		}
		return trigger{cause: CauseFlowFailed, audience: AudienceAdmins, flowID: e.EntityID,
			text: "The flow failed: " + clip(f.Reason), anchor: "flow", subscribers: true}, true, nil
	}
	return trigger{}, false, nil
}

// causeTypes are the event types classify may find a cause in: a
// committed event of one of them wakes the notifier.
var causeTypes = map[string]bool{
	event.TypeOf[tracker.QuestionAsked]():      true,
	event.TypeOf[tracker.TicketStateChanged](): true,
	event.TypeOf[flow.StageStarted]():          true,
	event.TypeOf[flow.FlowWaiting]():           true,
	event.TypeOf[flow.FlowStuck]():             true,
	event.TypeOf[flow.FlowFailed]():            true,
	event.TypeOf[tracker.QuestionEscalated]():  true,
	event.TypeOf[flow.ApprovalEscalated]():     true,
	event.TypeOf[flow.RunnerMissing]():         true,
}

// clip shortens s to one line of at most maxText characters.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= maxText {
		return s
	}
	r := []rune(s)
	return string(r[:maxText-1]) + "…"
}

// actorPerson is the person behind an event: its human actor, or the
// human a service acted for ("" for Ballet itself or an agent session on
// its own).
func actorPerson(e event.Event) string {
	if e.ActingFor != "" {
		return e.ActingFor
	}
	if e.ActorKind == event.ActorHuman {
		return e.ActorSub
	}
	return ""
}

// ticketFacts is what a cause's recipients are decided on: the ticket's
// assignee and creator (as people: "" when none) and the project's admins.
type ticketFacts struct {
	assignee    string
	creator     string
	admins      []string
	subscribers []string // when the cause reaches them
}

// waitedOn is the person a ticket's questions and approvals wait on: its
// assignee, else its creator ("" when neither).
func (f ticketFacts) waitedOn() string {
	if f.assignee != "" {
		return f.assignee
	}
	return f.creator
}

// recipients decides who a trigger reaches: its audience and the ticket's
// subscribers (when it reaches them), without the person whose action
// caused it (nobody is notified of their own action) and, for an
// escalation, without the person the ticket waits on; each once, in
// order.
func recipients(tr trigger, actor string, f ticketFacts) []string {
	var out []string
	audience := tr.audience
	switch audience {
	case AudienceAssignee:
		if f.assignee != "" {
			out = []string{f.assignee}
		} else if f.creator != "" {
			out = []string{f.creator}
		}
	case AudienceCreator:
		if f.creator != "" {
			out = []string{f.creator}
		}
	case AudienceAdmins:
		out = slices.Clone(f.admins)
		slices.Sort(out)
		out = slices.Compact(out)
	}
	if tr.subscribers {
		for _, s := range f.subscribers {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	waitedOn := f.waitedOn()
	return slices.DeleteFunc(out, func(r string) bool { return r == actor || (tr.notWaitedOn && r == waitedOn) })
}

// link is the path of the page where a person acts on a ticket's cause.
func link(itemKey, anchor string) string {
	if anchor == "" {
		return "/items/" + itemKey
	}
	return "/items/" + itemKey + "#" + anchor
}
