package flow

import (
	"context"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// flow.timeout: a stage's run reached the stage's timeout.

// handleTimeout enforces a stage's timeout: a run still going when it is
// up is cancelled and the flow is flagged.
func (s *Service) handleTimeout(ctx context.Context, _ *job.Job, p TimeoutArgs) error {
	// The step has passed when the run finished in time.
	current := func(f Flow) bool { return f.Step == p.Step && Accepts(f.State(), InRunFinished) }
	return s.onFlow(ctx, p.FlowID, current, func(ctx context.Context, f Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
		stage, _ := f.Definition.Stage(f.Stage)
		t, err := s.Flag(f, it, now, fmt.Sprintf("stage %s ran longer than its timeout of %s", f.Stage, stage.Timeout()))
		if err != nil {
			return nil, err
		}
		if err := s.CancelRun(ctx, t, f, "the stage timed out", now); err != nil {
			return nil, err
		}
		return t, nil
	})
}
