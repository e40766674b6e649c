package flow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// EscalateApproval decides escalating the approval f (as read) waits for
// in the step it waited from: the part of a transition (for the
// notifier's escalation job) that marks the wait escalated and records
// flow.approval_escalated. It is guarded so that it commits only while the
// flow still waits for that approval, at that step, unescalated: an
// approval given meanwhile (the flow moved on) or an escalation by another
// instance loses the race. ok is false when f, as read, no longer waits
// for that approval or was escalated already. Like every change of a flow
// it moves the flow's version: one flow.* event per version.
func EscalateApproval(actor event.Actor, f Flow, ticket string, step int, since time.Time, after time.Duration, now time.Time) (t transition.Transition, ok bool) {
	if f.State() != (State{StatusWaiting, WaitApproval}) || f.Step != step || f.EscalatedAt != nil {
		return t, false
	}
	return transition.Transition{
		Events: []event.Event{flowEvent(actor, f, &ApprovalEscalated{Ticket: ticket, Since: since, After: after.String()})},
		Guarded: []store.Statement{store.Stmt(`UPDATE flows SET escalated_step = ?, escalated_at = ?, version = version + 1
WHERE id = ? AND step = ? AND status = 'waiting' AND waiting = 'approval' AND COALESCE(escalated_step, -1) <> ?`,
			step, now.UnixMilli(), f.ID, step, step)},
	}, true
}

// NoteRunnerMissing records flow.runner_missing for f, as read with its
// attention no_runner (NeedingAttention): once per queued run it waits
// for, so that the reconciler's passes record it once, and again only when
// a later run of the flow waits in vain; like every change of a flow it
// moves the flow's version. It reports whether it recorded
// it (false: it was recorded already, or the flow has moved on).
func (s *Service) NoteRunnerMissing(ctx context.Context, f Flow, ticket string) (bool, error) {
	if f.Attention != AttentionNoRunner || f.RunID == "" || f.runnerMissingRun == f.RunID {
		return false, nil
	}
	rows, err := s.Store.Query(ctx, `SELECT adapter FROM runs WHERE id = ?`, f.RunID)
	if err != nil {
		return false, fmt.Errorf("read the adapter of run %s: %w", f.RunID, err)
	}
	var adapter string
	if rows.Len() > 0 {
		if err := rows.Scan(0, &adapter); err != nil {
			return false, err
		}
	}
	t := &transition.Transition{
		Events: []event.Event{flowEvent(System, f, &RunnerMissing{Ticket: ticket, Run: f.RunID, Adapter: adapter})},
		Guarded: []store.Statement{store.Stmt(`UPDATE flows SET runner_missing_run = ?, version = version + 1
WHERE id = ? AND run_id = ? AND status = 'running' AND waiting = 'run' AND COALESCE(runner_missing_run, '') <> ?`,
			f.RunID, f.ID, f.RunID, f.RunID)},
	}
	switch err := s.Applier.Apply(ctx, t); {
	case errors.Is(err, store.ErrLostRace):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("record flow.runner_missing of flow %s: %w", f.ID, err)
	}
	return true, nil
}
