package run

import (
	"context"
	"strings"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/text"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// The agent session's side of a run: with the run token its runner hands
// it (for MCP, or the REST routes of the same names), a session reads its
// run and skills, reports its outcome and asks questions — and nothing
// else. Every door (REST, MCP) reaches these functions with the run id
// its credential names; the rule that closes a run's tools lives here.

// ActorOf is the actor of what a run's agent session does: the service
// "run:<id>".
func ActorOf(runID string) event.Actor { return actorOf(runID) }

// TokenRun returns the run a run token acts on (its scope "run:<id>"),
// and false for any other credential: what every door of a session (REST,
// MCP) resolves once.
func TokenRun(p *auth.Principal) (string, bool) {
	if p.TokenKind != auth.KindRun {
		return "", false
	}
	for _, s := range p.Scopes {
		if id, ok := strings.CutPrefix(s, scopeOf("")); ok {
			return id, true
		}
	}
	return "", false
}

// open is the rule every session tool obeys: its run must be running and
// not asked to stop. A finished run, or one whose cancellation was
// requested, is a conflict saying so: its tools are closed.
func open(r Run) error {
	if err := requireRunning(r); err != nil {
		return err
	}
	if r.CancelRequested {
		return apperr.New(apperr.Conflict, "run %s was cancelled: its tools are closed; end the session", r.ID)
	}
	return nil
}

// SessionRun returns the run runID for its agent session: it must be open
// to it (running, its cancellation not requested).
func (s *Service) SessionRun(ctx context.Context, runID string) (Run, error) {
	r, err := s.Get(ctx, runID)
	if err != nil {
		return r, err
	}
	return r, open(r)
}

// ReportInput is a session's stage report.
type ReportInput struct {
	Outcome string // done, failed or blocked
	Summary string
}

func validateText(v *apperr.Validator, field, s string, max int, required bool) {
	v.Check(!required || strings.TrimSpace(s) != "", field, "must not be blank")
	v.Check(len(s) <= max, field, "must be at most %d bytes (is %d)", max, len(s))
	v.CheckErr(field, text.Multiline(s))
}

// Report stores the session's outcome and summary (event run.reported, by
// ActorOf(runID)). Sending the same report again changes nothing; a
// different second report is a conflict, and so is a report to a run that
// is not open to its session (see open).
func (s *Service) Report(ctx context.Context, runID string, in ReportInput) (Run, error) {
	var v apperr.Validator
	switch in.Outcome {
	case OutcomeDone, OutcomeFailed, OutcomeBlocked:
	default:
		v.Add("outcome", "%q is not done, failed or blocked", in.Outcome)
	}
	validateText(&v, "summary", in.Summary, MaxReport, true)
	if err := v.Err(); err != nil {
		return Run{}, err
	}
	var out Run
	_, err := s.applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		r, err := s.SessionRun(ctx, runID)
		if err != nil {
			return nil, err
		}
		out = r
		if r.Outcome != "" {
			if r.Outcome == in.Outcome && r.Report == in.Summary {
				return nil, nil // a repeat
			}
			return nil, apperr.New(apperr.Conflict, "run %s reported %s already: a run reports once", r.ID, r.Outcome)
		}
		now := s.now()
		out.Outcome, out.Report, out.UpdatedAt, out.Version = in.Outcome, in.Summary, now, r.Version+1
		return &transition.Transition{
			Events: []event.Event{newEvent(r, actorOf(r.ID), RunReported{Outcome: in.Outcome, Summary: in.Summary})},
			Guarded: []store.Statement{store.Stmt(`UPDATE runs SET outcome = ?, report = ?, updated_at = ?, version = version + 1
WHERE id = ? AND version = ? AND status = 'running' AND cancel_requested = 0 AND outcome IS NULL`, in.Outcome, in.Summary, now.UnixMilli(), r.ID, r.Version)},
		}, nil
	})
	if err != nil {
		return Run{}, err
	}
	return out, nil
}

// AskQuestion asks a question on the run's item, as the service
// "run:<id>" acting for nobody (tracker.AskQuestion, event
// question.asked); the run must be open to its session (see open). A
// blocking question first sets the run's blocking_question (event
// run.question_asked), in its own guarded transition: tracker.AskQuestion
// writes its own batch. The flag goes first so that a crash between the
// two errs towards waiting: a flagged run without an open question makes
// the flow wait for no answer and resume at once, whereas an open blocking
// question on an unflagged run would let the flow carry on past it. A
// repeat after a failure finds the flag set and only asks.
func (s *Service) AskQuestion(ctx context.Context, runID, text string, blocking bool) (tracker.Question, error) {
	var v apperr.Validator
	validateText(&v, "text", text, tracker.MaxQuestionText, true)
	if err := v.Err(); err != nil {
		return tracker.Question{}, err
	}
	var itemID string
	_, err := s.applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		r, err := s.SessionRun(ctx, runID)
		if err != nil {
			return nil, err
		}
		itemID = r.ItemID
		if !blocking || r.BlockingQuestion {
			return nil, nil
		}
		now := s.now()
		return &transition.Transition{
			Events: []event.Event{newEvent(r, actorOf(r.ID), RunQuestionAsked{Text: text, Blocking: true})},
			Guarded: []store.Statement{store.Stmt(`UPDATE runs SET blocking_question = 1, updated_at = ?, version = version + 1
WHERE id = ? AND version = ? AND status = 'running'`, now.UnixMilli(), r.ID, r.Version)},
		}, nil
	})
	if err != nil {
		return tracker.Question{}, err
	}
	return s.tracker.AskQuestion(ctx, actorOf(runID), itemID, text, blocking)
}
