package flow

import (
	"context"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// The machinery every step of a flow shares: one read-decide-write per step, stopping a flow, cancelling its run, and the
// moves a step makes (advance, wait for an answer, resume).

// step runs one read-decide-write of a flow step. decide returns a nil
// transition (and no error) when there is nothing to do: the step has
// passed, or the flow moved on. An error — a failed read included — fails
// the job, which is retried with backoff.
func (s *Service) step(ctx context.Context, decide func(ctx context.Context) (*transition.Transition, error)) error {
	_, err := s.Applier.Do(ctx, decide)
	return err
}

// load reads the flow and its ticket.
func (s *Service) load(ctx context.Context, flowID string) (Flow, tracker.Item, error) {
	f, err := Read(ctx, s.Store, flowID)
	if err != nil {
		if apperr.Code(err) == apperr.NotFound {
			return f, tracker.Item{}, job.Permanent(err)
		}
		return f, tracker.Item{}, err
	}
	it, err := s.Tracker.FindItem(ctx, f.ItemID)
	return f, it, err
}

// onFlow runs one step of a flow, read-decide-write: it re-reads the flow
// and its ticket; when current says the step has passed, it does nothing
// (so every handler is idempotent); a ticket that a person paused or
// cancelled stops the flow; otherwise decide writes the step.
func (s *Service) onFlow(ctx context.Context, flowID string, current func(Flow) bool,
	decide func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error)) error {
	return s.step(ctx, func(ctx context.Context) (*transition.Transition, error) {
		f, it, err := s.load(ctx, flowID)
		if err != nil {
			return nil, err
		}
		if !current(f) {
			return nil, nil
		}
		now := s.now()
		if it.State != "in_progress" {
			return s.Stopped(ctx, f, it, now)
		}
		return decide(ctx, f, it, now)
	})
}

// Stopped returns the transition that stops a flow whose ticket a person
// paused or cancelled, cancelling its active run.
func (s *Service) Stopped(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
	next := f
	next.Status, next.Waiting, next.FinishedAt = StatusStopped, WaitNone, &now
	t := &transition.Transition{
		Events:  []event.Event{flowEvent(System, f, &FlowStopped{Reason: fmt.Sprintf("the ticket is %s", it.State), TicketState: it.State})},
		Guarded: []store.Statement{update(f, next, now)},
	}
	if err := s.CancelRun(ctx, t, f, "the flow stopped", now); err != nil {
		return nil, err
	}
	if it.State == tracker.StateCancelled && f.PullRequest != nil && f.PullRequest.Number != 0 {
		t.Jobs = append(t.Jobs, job.New(ClosePRArgs{FlowID: f.ID})) // a paused ticket may resume: its pull request stays
	}
	return t, nil
}

// CancelRun adds the cancellation of the flow's active run to t (nothing
// when it is final already or its cancellation was requested).
func (s *Service) CancelRun(ctx context.Context, t *transition.Transition, f Flow, reason string, now time.Time) error {
	if f.RunID == "" {
		return nil
	}
	r, err := s.Runs.Get(ctx, f.RunID)
	if err != nil {
		return err
	}
	if r.Status != run.StatusQueued && r.Status != run.StatusRunning {
		return nil
	}
	cancel, _ := s.Runs.Cancel(r, reason, now) // empty when its cancellation was requested already
	t.Add(cancel)
	return nil
}

// interruptRun adds to t the interruption (reason, one of
// runproto.Reasons; why: the text) of the flow's active run: a running run
// ends interrupted once its runner has stopped it (run.Service.Interrupt),
// a queued one is cancelled.
func (s *Service) interruptRun(ctx context.Context, t *transition.Transition, f Flow, reason, why string, now time.Time) error {
	if f.RunID == "" {
		return nil
	}
	r, err := s.Runs.Get(ctx, f.RunID)
	if err != nil {
		return err
	}
	if r.Final() {
		return nil
	}
	stop, _ := s.Runs.Interrupt(r, reason, why, now)
	t.Add(stop)
	return nil
}

// advance ends the current stage with outcome and moves the flow where the
// pipeline says. The flow's event records actor (the system, or the person
// who decided a human stage); the ticket's moves and questions are the
// system's.
func (s *Service) advance(ctx context.Context, actor event.Actor, f Flow, it tracker.Item, outcome, report string, now time.Time) (*transition.Transition, error) {
	return s.advanceSeen(ctx, actor, f, it, outcome, report, "", now)
}

// advanceSeen is advance recording head, the branch head a person saw
// when they decided a human stage ("": none named).
func (s *Service) advanceSeen(ctx context.Context, actor event.Actor, f Flow, it tracker.Item, outcome, report, head string, now time.Time) (*transition.Transition, error) {
	m, err := Advance(f.Definition, f.Stage, f.Iteration, outcome)
	if err != nil {
		return nil, job.Permanent(err)
	}
	next := f
	next.Outcome, next.Report, next.OutcomeStage, next.RunID = outcome, report, f.Stage, ""
	finished := &StageFinished{Outcome: outcome, Report: report, Reason: m.Reason, Head: head}
	switch m.Kind {
	case MoveNext:
		next.Stage, next.Iteration, next.Step = m.Stage, m.Iteration, f.Step+1
		next.Status, next.Waiting = StatusRunning, WaitNone
		finished.Next, finished.NextIteration = m.Stage, m.Iteration
		return &transition.Transition{
			Events:  []event.Event{flowEvent(actor, f, finished)},
			Guarded: []store.Statement{update(f, next, now)},
			Jobs:    []job.Spec{enterJob(next)},
		}, nil
	case MoveDone, MoveFailed:
		var ended payload = (*FlowDone)(finished)
		ticketTo := "done"
		next.Status = StatusDone
		if m.Kind == MoveFailed {
			ended, ticketTo, next.Status = (*FlowFailed)(finished), "paused", StatusFailed
		}
		next.Waiting, next.FinishedAt = WaitNone, &now
		move, err := tracker.FlowMove(System, it, ticketTo, now)
		if err != nil {
			return nil, err
		}
		t := &transition.Transition{Events: []event.Event{flowEvent(actor, f, ended)}, Guarded: []store.Statement{update(f, next, now)}}
		return t.Add(move), nil
	default: // MoveQuestion
		text := fmt.Sprintf("%s: %s. How should %s go on?", it.Key, m.Reason, it.Key)
		if report != "" {
			text += "\n\nThe stage's report:\n" + report
		}
		return s.waitAnswer(actor, next, it, now, false, m.Reason, &text)
	}
}

// waitForAnswer makes the flow wait for an answer (asking question when
// set); the ticket becomes waiting_for_answer.
func (s *Service) waitForAnswer(f Flow, it tracker.Item, now time.Time, reason string, question *string) (*transition.Transition, error) {
	return s.waitAnswer(System, f, it, now, false, reason, question)
}

// Flag records that a flow is stuck (flow.stuck with the reason), raises a
// blocking question on the ticket and makes the flow wait for an answer.
func (s *Service) Flag(f Flow, it tracker.Item, now time.Time, reason string) (*transition.Transition, error) {
	q := fmt.Sprintf("%s is stuck: %s. Answer to run stage %s again (or pause or cancel the ticket).", it.Key, reason, f.Stage)
	return s.waitAnswer(System, f, it, now, true, reason, &q)
}

// waitAnswer makes the flow wait for an answer: its flow.waiting event, or
// flow.stuck when stuck (recording actor), the blocking question when one
// is asked (by the system), and the ticket's move to waiting_for_answer.
func (s *Service) waitAnswer(actor event.Actor, f Flow, it tracker.Item, now time.Time, stuck bool, reason string, question *string) (*transition.Transition, error) {
	next := f
	next.Status, next.Waiting, next.RunID = StatusWaiting, WaitAnswer, ""
	waiting := &FlowWaiting{Waiting: WaitAnswer, Reason: reason, Outcome: f.Outcome}
	var parts []transition.Transition
	if question != nil {
		q, ask := tracker.NewQuestion(System, it, *question, true, now)
		waiting.Question = q.ID
		parts = append(parts, ask)
	}
	if it.State != tracker.StateWaitingForAnswer {
		move, err := tracker.FlowMove(System, it, tracker.StateWaitingForAnswer, now)
		if err != nil {
			return nil, err
		}
		parts = append(parts, move)
	}
	var p payload = waiting
	if stuck {
		p = (*FlowStuck)(waiting)
	}
	t := &transition.Transition{Events: []event.Event{flowEvent(actor, f, p)}, Guarded: []store.Statement{update(f, next, now)}}
	return t.Add(parts...), nil
}

// resume runs the same stage again in a new session, with the answered
// questions handed over.
func (s *Service) resume(f Flow, it tracker.Item, now time.Time, reason string) (*transition.Transition, error) {
	next := f
	next.Status, next.Waiting, next.RunID, next.Step = StatusRunning, WaitNone, "", f.Step+1
	t := &transition.Transition{
		Events:  []event.Event{flowEvent(System, f, &FlowResumed{Reason: reason})},
		Guarded: []store.Statement{update(f, next, now)},
		Jobs:    []job.Spec{enterJob(next)},
	}
	if it.State == tracker.StateWaitingForAnswer {
		move, err := tracker.FlowMove(System, it, tracker.StateInProgress, now)
		if err != nil {
			return nil, err
		}
		t.Add(move)
	}
	return t, nil
}
