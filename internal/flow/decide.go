package flow

import (
	"context"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// A person approves or rejects the human stage a flow waits on.

// Decide approves (done) or rejects (failed) the human stage a flow waits
// on; the comment becomes the stage report.
//
// it is the item as the caller read it (the door resolves it once, to
// authorize): the first attempt decides with it, and only a retry after a
// lost race reads it again.
func (s *Service) Decide(ctx context.Context, actor event.Actor, it tracker.Item, approve bool, comment string) (Flow, error) {
	var out Flow
	attempt := 0
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		if attempt++; attempt > 1 {
			var err error
			if it, err = s.Tracker.FindItem(ctx, it.ID); err != nil {
				return nil, err
			}
		}
		f, ok, err := s.active(ctx, it.ID)
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
