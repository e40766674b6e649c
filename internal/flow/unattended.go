package flow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// Job kinds of unattended operation (spec pipelines.md "Budgets",
// "Project and platform pauses").
const (
	JobRelease = "flow.release" // a pause ended or budget came back: release waiting flows
	JobKill    = "flow.kill"    // the kill switch: cancel every running stage
)

// pauseReason says why new stages may not start in a project now ("" when
// they may).
func (s *Service) pauseReason(ctx context.Context, projectID string) (string, error) {
	pl, err := s.Tenancy.GetPlatform(ctx)
	if err != nil {
		return "", err
	}
	if pl.Paused {
		return "the platform is paused (kill switch)", nil
	}
	p, err := s.Tenancy.FindProject(ctx, projectID)
	if err != nil {
		return "", err
	}
	if p.Paused {
		return fmt.Sprintf("project %s is paused", p.Key), nil
	}
	return "", nil
}

// limits returns the project's budgets.
func (s *Service) limits(ctx context.Context, projectID string) (budget.Limits, error) {
	p, err := s.Tenancy.FindProject(ctx, projectID)
	if err != nil {
		return budget.Limits{}, err
	}
	return budget.Limits{PerTicket: (*int64)(p.Budgets.PerTicketUSD), PerDay: (*int64)(p.Budgets.PerDayUSD)}, nil
}

// gate checks the budget of an agent stage about to start.
func (s *Service) gate(ctx context.Context, f Flow) (budget.Verdict, error) {
	if s.Budget == nil {
		return budget.Verdict{Kind: budget.OK}, nil
	}
	l, err := s.limits(ctx, f.ProjectID)
	if err != nil {
		return budget.Verdict{}, err
	}
	v, _, err := s.Budget.Gate(ctx, l, f.ProjectID, f.ItemID)
	return v, err
}

// wait makes the flow wait for budget or a pause (no human needed: it is
// released without one).
func (s *Service) wait(f Flow, waiting, reason string, now time.Time) *transition.Transition {
	next := f
	next.Status, next.Waiting, next.RunID = StatusWaiting, waiting, ""
	return &transition.Transition{
		Events:  []event.Event{flowEvent(System, f, "waiting", &FlowWaiting{Waiting: waiting, Reason: reason})},
		Guarded: []store.Statement{update(f, next, now)},
	}
}

// Release runs the stage of a flow waiting for a pause or budget again, in
// a new step, when its reason to wait is gone (ok=false: it still waits).
func (s *Service) Release(ctx context.Context, flowID string) (bool, error) {
	released := false
	err := s.step(ctx, func(ctx context.Context) (*transition.Transition, error) {
		released = false
		f, it, err := s.load(ctx, flowID)
		if err != nil {
			return nil, err
		}
		if !Accepts(f.State(), InRelease) {
			return nil, nil
		}
		if why, err := s.pauseReason(ctx, f.ProjectID); err != nil || why != "" {
			return nil, err
		}
		if f.Waiting == WaitBudget {
			v, err := s.gate(ctx, f)
			if err != nil {
				return nil, err
			}
			if v.Kind == budget.DaySpent {
				return nil, nil
			}
		}
		now := s.now()
		if it.State != "in_progress" {
			return s.Stopped(ctx, f, it, now)
		}
		released = true
		next := f
		next.Status, next.Waiting, next.RunID, next.Step = StatusRunning, WaitNone, "", f.Step+1
		return &transition.Transition{
			Events:  []event.Event{flowEvent(System, f, "resumed", &FlowResumed{Reason: fmt.Sprintf("no longer waiting for %s", f.Waiting)})},
			Guarded: []store.Statement{update(f, next, now)},
			Jobs:    []job.Spec{enterJob(next)},
		}, nil
	})
	return released, err
}

// waitingFlows lists flows waiting for a pause or budget, in a project or
// everywhere.
func (s *Service) waitingFlows(ctx context.Context, projectID string) ([]string, error) {
	q := `SELECT id FROM flows WHERE status = 'waiting' AND waiting IN ('pause', 'budget')`
	var args []any
	if projectID != "" {
		q += ` AND project_id = ?`
		args = append(args, projectID)
	}
	rows, err := s.Store.Query(ctx, q+` ORDER BY started_at`, args...)
	if err != nil {
		return nil, fmt.Errorf("list waiting flows: %w", err)
	}
	ids := make([]string, rows.Len())
	for i := range ids {
		if err := rows.Scan(i, &ids[i]); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// handleRelease releases every waiting flow of a project (or of the
// platform) after a resume or a budget change, without a human touching
// each one.
func (s *Service) handleRelease(ctx context.Context, j *job.Job) error {
	var p struct {
		ProjectID string `json:"project_id"`
	}
	if err := j.Decode(&p); err != nil {
		return err
	}
	ids, err := s.waitingFlows(ctx, p.ProjectID)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if _, err := s.Release(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("release flow %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// handleKill is the kill switch: every running agent stage is cancelled at
// once and its flow waits for the pause to end; the stage runs again after
// the resume.
func (s *Service) handleKill(ctx context.Context, _ *job.Job) error {
	rows, err := s.Store.Query(ctx, `SELECT id FROM flows WHERE status = 'running' AND waiting = 'run'`)
	if err != nil {
		return fmt.Errorf("list running stages: %w", err)
	}
	var errs []error
	for i := range rows.Len() {
		var id string
		if err := rows.Scan(i, &id); err != nil {
			return fmt.Errorf("list running stages: %w", err)
		}
		current := func(f Flow) bool { return Accepts(f.State(), InRunFinished) }
		err := s.onFlow(ctx, id, current, func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
			pl, err := s.Tenancy.GetPlatform(ctx)
			if err != nil || !pl.Paused {
				return nil, err // !pl.Paused: resumed meanwhile
			}
			t := s.wait(f, WaitPause, "the kill switch cancelled the running stage; it runs again after the resume", now)
			if err := s.CancelRun(ctx, t, f, "kill switch", now); err != nil {
				return nil, err
			}
			return t, nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("kill flow %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// TenancyHooks are the tenancy hooks through which pauses and budgets
// reach the flow engine, as jobs in the same batch as their change.
func (s *Service) TenancyHooks() tenancy.Hooks {
	var h tenancy.Hooks
	h.ProjectChanged = func(p tenancy.Project, changes tenancy.ProjectChanges) []job.Spec {
		if (changes.Paused != nil && !p.Paused) || changes.Budgets != nil {
			return []job.Spec{{Kind: JobRelease, Payload: map[string]any{"project_id": p.ID}, DedupeKey: "flow-release:" + p.ID}}
		}
		return nil
	}
	h.PlatformPaused = func(paused bool) []job.Spec {
		if paused {
			return []job.Spec{{Kind: JobKill, DedupeKey: "flow-kill"}}
		}
		return []job.Spec{{Kind: JobRelease, Payload: map[string]any{"project_id": ""}, DedupeKey: "flow-release:"}}
	}
	return h
}
