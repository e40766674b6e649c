package flow

import (
	"context"
	"errors"
	"fmt"

	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// flow.release: a pause ended or budget came back.

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
			Events:  []event.Event{flowEvent(System, f, &FlowResumed{Reason: fmt.Sprintf("no longer waiting for %s", f.Waiting)})},
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
func (s *Service) handleRelease(ctx context.Context, _ *job.Job, p ReleaseArgs) error {
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
