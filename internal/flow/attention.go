package flow

import (
	"context"
	"time"
)

// Attention values: what a flow needs from a person that its status and
// waiting do not say. A flow's attention is derived whenever it is read (on
// the injected clock); nothing is written when it starts or ends.
const (
	// AttentionNoRunner: the flow runs an agent stage whose run no runner
	// has leased for UnclaimedAfter ([runs] unclaimed_after). It ends when a
	// runner leases the run.
	AttentionNoRunner = "no_runner"
)

// Attentions lists every attention value.
var Attentions = []string{AttentionNoRunner}

// DefaultUnclaimedAfter is [runs] unclaimed_after's default.
const DefaultUnclaimedAfter = 2 * time.Minute

// noRunnerSQL is the condition on flows of attention no_runner; its one
// argument is the cutoff (unix ms) from unclaimedCutoff.
const noRunnerSQL = `flows.status = 'running' AND flows.waiting = 'run'
  AND EXISTS (SELECT 1 FROM runs r WHERE r.id = flows.run_id AND r.status = 'queued' AND r.created_at <= ?)`

// unclaimedCutoff is the latest creation time (unix ms) of a run that has
// waited for a runner too long now.
func (s *Service) unclaimedCutoff() int64 {
	after := s.UnclaimedAfter
	if after <= 0 {
		after = DefaultUnclaimedAfter
	}
	return s.now().Add(-after).UnixMilli()
}

// attend derives f's attention (f as read, with runQueuedAt).
func (s *Service) attend(f *Flow) {
	f.Attention = ""
	if f.Status == StatusRunning && f.Waiting == WaitRun && f.runQueuedAt != 0 && f.runQueuedAt <= s.unclaimedCutoff() {
		f.Attention = AttentionNoRunner
	}
}

// NeedingAttention returns every flow that needs attention now, across
// all projects, the oldest first.
func (s *Service) NeedingAttention(ctx context.Context) ([]Flow, error) {
	return s.query(ctx, "list flows needing attention", `SELECT `+flowColumns+` FROM flows WHERE `+noRunnerSQL+`
ORDER BY started_at, id`, s.unclaimedCutoff())
}

// countNoRunner counts the flows of attention no_runner now.
func (s *Service) countNoRunner(ctx context.Context) (int64, error) {
	rows, err := s.Store.Query(ctx, `SELECT COUNT(*) FROM flows WHERE `+noRunnerSQL, s.unclaimedCutoff())
	if err != nil {
		return 0, err
	}
	var n int64
	err = rows.Scan(0, &n)
	return n, err
}
