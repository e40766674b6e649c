package flow

import (
	"context"

	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/transition"
)

// flow.stop: a person paused or cancelled the ticket.

// handleStop stops the active flow of a ticket a person paused or
// cancelled, and cancels its run.
func (s *Service) handleStop(ctx context.Context, _ *job.Job, p StopArgs) error {
	return s.step(ctx, func(ctx context.Context) (*transition.Transition, error) {
		f, ok, err := s.active(ctx, p.ItemID)
		if err != nil || !ok {
			return nil, err
		}
		it, err := s.Tracker.FindItem(ctx, f.ItemID)
		if err != nil {
			return nil, err
		}
		if it.State != "paused" && it.State != "cancelled" {
			return nil, nil // resumed meanwhile
		}
		return s.Stopped(ctx, f, it, s.now())
	})
}
