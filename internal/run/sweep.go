package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/transition"
)

// sweepBatch bounds how many silent runs one read of SweepSilent fetches.
const sweepBatch = 100

// SweepSilent interrupts every running run whose last heartbeat is older
// than the grace period: status interrupted, reason runner_lost, error
// "runner silent for …" (a lost runner is no failure of the agent), its
// run token revoked and the flow.run_finished job enqueued, in one batch
// per run (events run.finished and token.revoked, actor the system). A
// heartbeat that lands meanwhile wins: the write is guarded by the
// heartbeat it read. A run is silent only once this Core has served for
// the grace period too: while Core was down its runners could not
// heartbeat, and they are given the grace to reach it again. It returns how
// many runs it interrupted. Only the leader should run it.
func (s *Service) SweepSilent(ctx context.Context) (int, error) {
	if s.now().Before(s.started.Add(s.cfg.Grace)) {
		return 0, nil
	}
	n := 0
	var errs []error
	seen := map[string]bool{}
	for {
		cutoff := s.now().Add(-s.cfg.Grace)
		runs, err := queryRuns(ctx, s.store, `r.status = 'running' AND r.heartbeat_at < ? ORDER BY r.heartbeat_at, r.id LIMIT ?`,
			cutoff.UnixMilli(), sweepBatch)
		if err != nil {
			return n, err
		}
		fresh := 0
		for _, r := range runs {
			if seen[r.ID] {
				continue
			}
			seen[r.ID] = true
			fresh++
			failed, err := s.failSilent(ctx, r.ID)
			if err != nil {
				errs = append(errs, err)
			}
			if failed {
				n++
			}
		}
		if len(runs) < sweepBatch || fresh == 0 {
			return n, errors.Join(errs...)
		}
	}
}

// failSilent fails one run if it is still running and silent.
func (s *Service) failSilent(ctx context.Context, id string) (bool, error) {
	var out Run
	t, err := s.applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		r, err := s.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		now := s.now()
		if r.Status != StatusRunning || r.HeartbeatAt == nil || !r.HeartbeatAt.Before(now.Add(-s.cfg.Grace)) {
			return nil, nil
		}
		silent := now.Sub(*r.HeartbeatAt).Truncate(time.Second)
		end := ending{StatusInterrupted, fmt.Sprintf("runner silent for %s (no heartbeat since %s)", silent, r.HeartbeatAt.Format(time.RFC3339)),
			ReasonRunnerLost}
		return s.finishTransition(ctx, r, event.System, end, nil, r.Usage, true, true, &out)
	})
	if err != nil {
		return false, fmt.Errorf("fail silent run %s: %w", id, err)
	}
	return t != nil, nil
}

// RunSweeper runs SweepSilent every Grace/4 on the service's clock until
// ctx ends, logging what it could not do.
func (s *Service) RunSweeper(ctx context.Context) {
	every := s.cfg.Grace / 4
	for {
		t := s.clock.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		n, err := s.SweepSilent(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("sweep silent runs", "err", err)
		}
		if n > 0 {
			s.log.Warn("interrupted runs whose runner went silent", "runs", n, "grace", s.cfg.Grace)
		}
	}
}
