package run

import (
	"context"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// A platform admin drains a runner to take it out of service without
// cutting its work short: a drained runner leases no new run (Lease checks
// it inside the lease's own batch, so a drain that commits first wins over
// a lease in flight), while the runs it holds go on and finish. Undrain
// puts it back. The drain is Core's record, apart from the runner's own
// draining (its heartbeat while it stops on SIGTERM): neither a heartbeat
// nor a new registration of the runner lifts it.

// DrainRunner drains runner id for actor (event runner.drained) and
// answers the runner. Draining a drained runner changes nothing.
func (s *Service) DrainRunner(ctx context.Context, actor event.Actor, id string) (Runner, error) {
	return s.setDrained(ctx, actor, id, true)
}

// UndrainRunner ends runner id's drain for actor (event runner.undrained)
// and answers the runner. Undraining a runner not drained changes nothing.
func (s *Service) UndrainRunner(ctx context.Context, actor event.Actor, id string) (Runner, error) {
	return s.setDrained(ctx, actor, id, false)
}

func (s *Service) setDrained(ctx context.Context, actor event.Actor, id string, drain bool) (Runner, error) {
	var rn Runner
	_, err := s.applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		var err error
		if rn, err = s.GetRunner(ctx, id); err != nil {
			return nil, err
		}
		return decideDrain(&rn, actor, drain, s.now()), nil
	})
	if err != nil {
		return Runner{}, err
	}
	return s.withSessions(ctx, rn)
}

// decideDrain changes rn to drained (or not) by actor at now and returns
// the batch that records it, nil when rn already is (pure).
func decideDrain(rn *Runner, actor event.Actor, drain bool, now time.Time) *transition.Transition {
	if rn.Drained == drain {
		return nil
	}
	version := rn.revision
	rn.revision++
	rn.Drained = drain
	var e event.Event
	var write store.Statement
	if drain {
		rn.DrainedAt, rn.DrainedBy = &now, actor.Sub
		e = event.Of(actor, "", "", rn.ID, RunnerDrained{Name: rn.Name, Sessions: len(rn.Sessions)})
		write = store.Stmt(`UPDATE runners SET drained_at = ?, drained_by = ?, version = version + 1 WHERE id = ? AND version = ?`,
			now.UnixMilli(), actor.Sub, rn.ID, version)
	} else {
		rn.DrainedAt, rn.DrainedBy = nil, ""
		e = event.Of(actor, "", "", rn.ID, RunnerUndrained{Name: rn.Name})
		write = store.Stmt(`UPDATE runners SET drained_at = NULL, drained_by = '', version = version + 1 WHERE id = ? AND version = ?`,
			rn.ID, version)
	}
	return &transition.Transition{Events: []event.Event{e}, Guarded: []store.Statement{write}}
}

// GetRunner returns the runner with the id, with its sessions (a platform
// admin's read); NotFound when there is none.
func (s *Service) GetRunner(ctx context.Context, id string) (Runner, error) {
	runners, err := s.queryRunners(ctx, `id = ?`, id)
	if err != nil {
		return Runner{}, err
	}
	if len(runners) == 0 {
		return Runner{}, apperr.New(apperr.NotFound, "runner %q not found", id)
	}
	return s.withSessions(ctx, runners[0])
}

// undrainedGuard is the lease batch's guard that its runner is still not
// drained: a drain committed since the lease read the runner makes the
// lease lose its race, re-read, and give nothing.
func undrainedGuard(runnerID string) store.Statement {
	return store.Stmt(`UPDATE runners SET version = version WHERE id = ? AND drained_at IS NULL`, runnerID)
}
