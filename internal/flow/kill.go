package flow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// flow.kill: the kill switch.

// handleKill is the kill switch: every running agent stage is cancelled at
// once and its flow waits for the pause to end; the stage runs again after
// the resume.
func (s *Service) handleKill(ctx context.Context, _ *job.Job, _ KillArgs) error {
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
			if err := s.interruptRun(ctx, t, f, run.ReasonKillSwitch, "kill switch", now); err != nil {
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
