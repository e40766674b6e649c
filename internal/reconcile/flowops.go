package reconcile

import (
	"context"
	"time"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// stopped stops flow f (as read) whose ticket is no longer in progress,
// cancelling its active run.
func (r *Reconciler) stopped(ctx context.Context, f flow.Flow, it tracker.Item, now time.Time) (*transition.Transition, error) {
	return r.flows.Stopped(ctx, f, it, now)
}

// cancelRun adds the cancellation of f's active run to t.
func (r *Reconciler) cancelRun(ctx context.Context, t *transition.Transition, f flow.Flow, reason string, now time.Time) error {
	return r.flows.CancelRun(ctx, t, f, reason, now)
}

// flag is flow.Service.Flag: flow.stuck, a blocking question, the flow
// waits for an answer and the ticket is waiting_for_answer.
func (r *Reconciler) flag(f flow.Flow, it tracker.Item, now time.Time, reason string) (*transition.Transition, error) {
	return r.flows.Flag(f, it, now, reason)
}
