package flow

import (
	"context"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/transition"
)

// A person approves or rejects the human stage a flow waits on.

// Decide approves (done) or rejects (failed) the human stage a flow waits
// on; the comment becomes the stage report.
func (s *Service) Decide(ctx context.Context, actor event.Actor, itemID string, approve bool, comment string) (Flow, error) {
	var out Flow
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		f, ok, err := s.active(ctx, itemID)
		if err != nil {
			return nil, err
		}
		input, outcome := InApprove, pipeline.OutcomeDone
		if !approve {
			input, outcome = InReject, pipeline.OutcomeFailed
		}
		if !ok || !Accepts(f.State(), input) {
			return nil, apperr.New(apperr.Conflict, "the flow does not wait for an approval")
		}
		it, err := s.Tracker.FindItem(ctx, f.ItemID)
		if err != nil {
			return nil, err
		}
		if comment == "" {
			comment = "approved by " + actor.Sub
			if !approve {
				comment = "rejected by " + actor.Sub
			}
		}
		// The decision is the human's: the flow's event carries them.
		t, err := s.advance(ctx, actor, f, it, outcome, comment, s.now())
		if err != nil {
			return nil, err
		}
		out = f
		return t, nil
	})
	if err != nil {
		return Flow{}, err
	}
	f, err := s.Get(ctx, out.ID)
	return f, err
}
