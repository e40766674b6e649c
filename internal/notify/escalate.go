package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// DefaultEscalateAfter is [notify] escalate_after's default.
const DefaultEscalateAfter = 4 * time.Hour

// JobEscalate is the kind of the escalation job.
const JobEscalate = "notify.escalate"

// Recheck is how long an escalation job sleeps at most before it reads
// the wait and the project's escalate_after again: a project's setting
// made shorter applies to the waits already open within it.
const Recheck = 15 * time.Minute

// EscalateArgs are the arguments of the escalation job of one wait: a
// blocking question (Question), or the approval a flow waits for at a
// step (Flow, Step), waiting since Since. The notifier enqueues it, due at
// Since plus the project's escalate_after, in the batch that advances its
// cursor past the event that opened the wait.
type EscalateArgs struct {
	Question string    `json:"question,omitempty"`
	Flow     string    `json:"flow,omitempty"`
	Step     int       `json:"step,omitempty"`
	Since    time.Time `json:"since"`
}

// Kind is the job's kind.
func (EscalateArgs) Kind() string { return JobEscalate }

// DedupeKey makes one job per wait: a duplicate (the notifier deciding the
// same event again after a lost batch) is not enqueued.
func (a EscalateArgs) DedupeKey() string {
	if a.Question != "" {
		return "notify.escalate:question:" + a.Question
	}
	return fmt.Sprintf("notify.escalate:approval:%s:%d", a.Flow, a.Step)
}

// QuestionFinder reads a question by id (tracker.Service).
type QuestionFinder interface {
	FindQuestion(ctx context.Context, id string) (tracker.Question, error)
}

// ProjectFinder reads a project by id (tenancy.Service).
type ProjectFinder interface {
	FindProject(ctx context.Context, ref string) (tenancy.Project, error)
}

// Register installs the notifier's job handler (the escalation job).
func (n *Notifier) Register(r job.Registry) {
	job.Register(r, n.handleEscalate)
}

// escalateAfter is the platform's escalate_after.
func (n *Notifier) escalateAfter() time.Duration {
	if n.EscalateAfter <= 0 {
		return DefaultEscalateAfter
	}
	return n.EscalateAfter
}

// projectEscalateAfter is a project's escalate_after now.
func (n *Notifier) projectEscalateAfter(ctx context.Context, projectID string) (time.Duration, error) {
	p, err := n.Projects.FindProject(ctx, projectID)
	if err != nil {
		return 0, fmt.Errorf("read the project's escalate_after: %w", err)
	}
	return p.EscalateAfterOr(n.escalateAfter()), nil
}

// escalationJob is the escalation job of a wait that opened at since in a
// project whose escalate_after is after, due when it has passed, or after
// Recheck if that is sooner.
func escalationJob(after time.Duration, a EscalateArgs) job.Spec {
	return job.New(a).At(a.Since.Add(min(after, Recheck)))
}

// handleEscalate is the escalation job: when due, it reads the wait again.
// Answered, approved, gone or escalated already: nothing to do. Not due
// yet under the project's escalate_after now: the job snoozes until then,
// or for Recheck if that is sooner (the setting may change meanwhile). Else one batch marks the wait escalated, guarded
// on its being still open and unescalated, with its event
// (question.escalated, flow.approval_escalated), which the notifier turns
// into question.escalated notifications for the project's admins. A
// duplicate job, a restart or a second instance loses the guard's race:
// each wait is escalated once.
func (n *Notifier) handleEscalate(ctx context.Context, _ *job.Job, a EscalateArgs) error {
	now := n.Clock.Now().Truncate(time.Millisecond)
	t, ok, wait, err := n.decideEscalation(ctx, a, now)
	if err != nil || !ok {
		return err
	}
	if wait > 0 {
		return job.Snooze(min(wait, Recheck))
	}
	err = n.Applier.Apply(ctx, &t)
	if errors.Is(err, store.ErrLostRace) {
		return nil // answered, approved or escalated meanwhile
	}
	return err
}

// decideEscalation reads the wait a names and decides its escalation at
// now: ok is false when there is nothing to escalate; wait > 0 when it is
// not due yet.
func (n *Notifier) decideEscalation(ctx context.Context, a EscalateArgs, now time.Time) (t transition.Transition, ok bool, wait time.Duration, err error) {
	gone := func(err error) bool { return apperr.Code(err) == apperr.NotFound }
	if a.Question != "" {
		q, err := n.Questions.FindQuestion(ctx, a.Question)
		if gone(err) {
			return t, false, 0, nil
		}
		if err != nil {
			return t, false, 0, err
		}
		after, err := n.projectEscalateAfter(ctx, q.ProjectID)
		if err != nil {
			return t, false, 0, err
		}
		if t, ok = tracker.EscalateQuestion(Actor, q, after, now); !ok {
			return t, false, 0, nil
		}
		if due := q.AskedAt.Add(after); now.Before(due) {
			return t, true, due.Sub(now), nil
		}
		return t, true, 0, nil
	}
	f, err := flow.Read(ctx, n.Store, a.Flow)
	if gone(err) {
		return t, false, 0, nil
	}
	if err != nil {
		return t, false, 0, err
	}
	it, err := n.Items.FindItem(ctx, f.ItemID)
	if gone(err) {
		return t, false, 0, nil
	}
	if err != nil {
		return t, false, 0, err
	}
	after, err := n.projectEscalateAfter(ctx, f.ProjectID)
	if err != nil {
		return t, false, 0, err
	}
	if t, ok = flow.EscalateApproval(Actor, f, it.Key, a.Step, a.Since, after, now); !ok {
		return t, false, 0, nil
	}
	if due := a.Since.Add(after); now.Before(due) {
		return t, true, due.Sub(now), nil
	}
	return t, true, 0, nil
}
