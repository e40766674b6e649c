package flow

import (
	"context"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// flow.run_finished: a stage's run reached a final status.

// handleRunFinished takes the finished run's outcome: the pipeline's next
// target, or — when the run raised a blocking question — a wait for the
// answer without an outcome.
func (s *Service) handleRunFinished(ctx context.Context, _ *job.Job, p RunFinishedArgs) error {
	current := func(f Flow) bool { return f.RunID == p.RunID && Accepts(f.State(), InRunFinished) }
	return s.onFlow(ctx, p.FlowID, current, func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
		t, err := s.runFinished(ctx, f, it, p.RunID, now)
		if t != nil {
			// The run is over: its stage's timeout job has nothing left to do.
			t.Add(transition.Transition{Statements: []store.Statement{job.Retire(TimeoutArgs{FlowID: f.ID, Step: f.Step}, now)}})
		}
		return t, err
	})
}

// runFinished decides what a finished run means for its flow; a run that
// succeeded also ends the limits in a row of its provider credential.
func (s *Service) runFinished(ctx context.Context, f Flow, it tracker.Item, runID string, now time.Time) (*transition.Transition, error) {
	r, err := s.Runs.Get(ctx, runID)
	if err != nil {
		return nil, err
	}
	t, err := s.runEnded(ctx, f, it, r, now)
	if t == nil || err != nil || r.Status != run.StatusSucceeded {
		return t, err
	}
	l, err := ReadLimit(ctx, s.Store, Credential(r.Adapter))
	if err != nil {
		return nil, err
	}
	return t.Add(transition.Transition{Statements: streakReset(l)}), nil
}

// runEnded decides what finished run r means for its flow.
func (s *Service) runEnded(ctx context.Context, f Flow, it tracker.Item, r run.Run, now time.Time) (*transition.Transition, error) {
	if r.BlockingQuestion {
		open, err := s.Tracker.OpenBlockingQuestions(ctx, it.ID)
		if err != nil {
			return nil, err
		}
		if open > 0 {
			return s.waitForAnswer(f, it, now, "the session asked a blocking question", nil)
		}
		return s.resume(f, it, now, "the session's blocking question was answered while it ran")
	}
	if r.Status == run.StatusInterrupted && r.Reason == run.ReasonProviderLimit {
		return s.providerLimited(ctx, f, r, now)
	}
	if r.Status == run.StatusInterrupted {
		return s.interrupted(ctx, f, it, r, now)
	}
	outcome, report := r.Outcome, r.Report
	if r.Status != run.StatusSucceeded {
		// A stage whose run failed while over budget waits, instead of
		// failing.
		if v, err := s.gate(ctx, f); err != nil {
			return nil, err
		} else if v.Kind != budget.OK {
			return s.wait(f, WaitBudget, "the session failed while over budget: "+v.Reason, now), nil
		}
	}
	switch {
	case r.Status == run.StatusCancelled:
		outcome, report = pipeline.OutcomeFailed, "the session was cancelled"
	case r.Status != run.StatusSucceeded || outcome == "":
		outcome = pipeline.OutcomeFailed
		if report == "" {
			report = "the session failed"
			if r.Error != "" {
				report += ": " + r.Error
			}
		}
	}
	if r.BranchAhead != nil {
		// What the runner found goes into the flow's row (advance writes
		// f's fields) and, when the branch holds nothing, into the report.
		f.BranchAhead = r.BranchAhead
		report = NothingAheadNote(report, it.Key, *r.BranchAhead)
	}
	return s.advance(ctx, System, f, it, outcome, report, now)
}

// interrupted decides what an interrupted run means for its flow: the
// stage runs again from its checkpoint (same iteration, next step), unless
// it was interrupted too often in a row (Interrupted): then the flow is
// flagged with a blocking question that says what keeps interrupting it.
func (s *Service) interrupted(ctx context.Context, f Flow, it tracker.Item, r run.Run, now time.Time) (*transition.Transition, error) {
	max := s.MaxInterruptions
	if max <= 0 {
		max = DefaultMaxInterruptions
	}
	latest, err := s.Runs.Latest(ctx, f.ID, r.Step, 4*(max+1))
	if err != nil {
		return nil, err
	}
	streak := InterruptionStreak(latest, r.Stage, r.Iteration)
	what := r.Reason
	if r.Error != "" {
		what += ": " + r.Error
	}
	if !RunsAgain(streak, max) {
		return s.Flag(f, it, now, fmt.Sprintf("stage %s was interrupted %d times in a row (last: %s)", f.Stage, streak, what))
	}
	return s.resume(f, it, now, fmt.Sprintf("the session was interrupted (%s): stage %s runs again from its checkpoint, without spending an iteration (%d of %d in a row)",
		r.Reason, f.Stage, streak%(max+1), max))
}

// InterruptionStreak counts how many of a flow's latest runs (newest
// first), from the newest, ended interrupted in stage at iteration: the
// interruptions in a row of that stage. Provider limits are no
// interruption of Ballet's: they are waited out, never counted, and do not
// break a streak either.
func InterruptionStreak(latest []run.Run, stage string, iteration int) int {
	n := 0
	for _, r := range latest {
		if r.Status != run.StatusInterrupted || r.Stage != stage || r.Iteration != iteration {
			break
		}
		if r.Reason != run.ReasonProviderLimit {
			n++
		}
	}
	return n
}

// RunsAgain reports whether a stage interrupted streak times in a row
// runs again by itself (true), or asks (false): it runs again up to max
// times in a row; the next interruption asks, and once a person answered,
// it gets max more.
func RunsAgain(streak, max int) bool {
	return streak%(max+1) != 0
}

// NothingAheadNote adds to a stage's report that the ticket's branch has no
// commit ahead of the default branch after it (ahead = 0): there is nothing
// to review, approve or merge. Other counts leave the report as it is.
func NothingAheadNote(report, ticket string, ahead int) string {
	if ahead != 0 {
		return report
	}
	note := "Ballet: after this stage the branch ballet/" + ticket + " has no commit ahead of the default branch: there is nothing to review, approve or merge."
	if report == "" {
		return note
	}
	return report + "\n\n" + note
}
