package run

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// The runner protocol's server side: a runner token leases runs (Lease)
// and, for the runs it holds (Held), keeps them alive (Heartbeat), uploads
// their logs (log.go), reports their usage and finishes them (finish.go).
// The run token a lease issues is the agent session's (agent.go): it
// serves none of these.

// Leased is a run a runner leased, with the secret of its run token (shown
// this once: the runner hands it to the agent session, for MCP) and what
// its session needs.
type Leased struct {
	Run      Run              `json:"run"`
	RunToken string           `json:"run_token"`
	Session  runproto.Session `json:"session"`
}

// Lease gives the runner the oldest queued run of one of adapters (nil:
// every adapter it registered; each must be one it registered): it becomes
// running on this runner, and a run token scoped to it is issued in the
// same batch (event run.started, plus token.created for the token). With
// nothing queued it waits up to wait (at most Config.LeaseWait) for a run
// to come, polling every Config.Poll and waking at once on Notify; ok is
// false when none came. Of several runners racing for one run exactly one
// gets it. A runner that drains, is drained or has a problem gets none. A run whose
// session cannot be prepared (ErrUnrunnable) is failed on the way, with
// the reason.
func (s *Service) Lease(ctx context.Context, c RunnerCaller, runnerID string, wait time.Duration, adapters []string) (Leased, bool, error) {
	rn, err := s.FindRunner(ctx, c, runnerID)
	if err != nil {
		return Leased{}, false, err
	}
	registered := rn.adapterNames()
	var v apperr.Validator
	for i, a := range adapters {
		f := fmt.Sprintf("adapters[%d]", i)
		switch {
		case !slices.Contains(Adapters, a):
			v.Add(f, "%q is not claude-code or opencode", a)
		case !slices.Contains(registered, a):
			v.Add(f, "%s is not among the adapters runner %s registered (%s)", a, rn.ID, strings.Join(registered, ", "))
		}
	}
	if err := v.Err(); err != nil {
		return Leased{}, false, err
	}
	if len(adapters) == 0 {
		adapters = registered
	}
	if !rn.leases() {
		adapters = nil // it waits like any runner, and gets nothing
	}
	if wait > s.cfg.LeaseWait {
		wait = s.cfg.LeaseWait
	}
	if _, err := s.touchRunner(ctx, rn); err != nil {
		return Leased{}, false, err
	}
	deadline := s.clock.Now().Add(wait)
	for {
		wake := s.woken()
		l, ok, err := s.leaseOnce(ctx, c, rn, adapters)
		if err != nil || ok {
			return l, ok, err
		}
		left := deadline.Sub(s.clock.Now())
		if left <= 0 {
			return Leased{}, false, nil
		}
		s.addWaiting(1) // before the timer: a test that sees the timer sees the count
		t := s.clock.NewTimer(min(s.cfg.Poll, left))
		select {
		case <-ctx.Done():
			t.Stop()
			s.addWaiting(-1)
			return Leased{}, false, ctx.Err()
		case <-wake:
			t.Stop()
		case <-t.C():
		}
		s.addWaiting(-1)
	}
}

// maxUnrunnable bounds how many unrunnable runs one lease fails before it
// answers that none came.
const maxUnrunnable = 20

// leaseOnce tries to lease the oldest queued run of adapters once, failing
// the unrunnable ones it meets first.
func (s *Service) leaseOnce(ctx context.Context, c RunnerCaller, rn Runner, adapters []string) (Leased, bool, error) {
	if len(adapters) == 0 {
		return Leased{}, false, nil
	}
	args := make([]any, len(adapters))
	for i, a := range adapters {
		args[i] = a
	}
	// A run of an adapter under a known provider limit is not leased: its
	// session would start into the limit (the flow engine records limits
	// per credential, which Core knows as the adapter: flow.Credential, and
	// makes such a run's flow wait for the provider).
	args = append(args, s.now().UnixMilli())
	queue := `r.status = 'queued' AND r.adapter IN (?` + strings.Repeat(", ?", len(adapters)-1) + `)
AND NOT EXISTS (SELECT 1 FROM provider_limits l WHERE l.credential = r.adapter AND l.until > ?) ORDER BY r.created_at, r.id LIMIT 1`
	for range maxUnrunnable {
		var out Leased
		failed := false
		t, err := s.applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
			failed = false
			runs, err := queryRuns(ctx, s.store, queue, args...)
			if err != nil || len(runs) == 0 {
				return nil, err
			}
			r := runs[0]
			// The runner as it is now: one drained since the long poll
			// began gets nothing (and the guard below makes a drain that
			// commits before this batch win).
			cur, err := s.queryRunners(ctx, `id = ?`, rn.ID)
			if err != nil {
				return nil, err
			}
			if len(cur) == 0 || !cur[0].leases() {
				return nil, nil
			}
			now := s.now()
			// The runner token was authenticated when the long poll began:
			// a runner revoked since gets no run.
			if err := auth.StillValid(ctx, s.store, c.TokenID, now); err != nil {
				return nil, err
			}
			session, err := s.session(ctx, r)
			if errors.Is(err, ErrUnrunnable) {
				failed = true
				return s.failQueued(r, err.Error(), now), nil
			}
			if err != nil {
				return nil, fmt.Errorf("prepare the session of run %s: %w", r.ID, err)
			}
			exp := now.Add(RunTokenTTL)
			secret, tok, issue := auth.Issue(c.Actor, auth.KindRun, "run "+r.ID, r.OrganizationID, "", []string{scopeOf(r.ID)}, &exp, now)
			at := now.UnixMilli()
			started := newEvent(r, c.Actor, RunStarted{RunnerID: rn.ID, Runner: rn.Name, TokenID: tok.ID,
				Stage: r.Stage, Step: r.Step})
			t := &transition.Transition{
				Events: []event.Event{started},
				Guarded: []store.Statement{store.Stmt(`UPDATE runs SET status = 'running', runner_id = ?, token_id = ?, started_at = ?,
heartbeat_at = ?, updated_at = ?, version = version + 1 WHERE id = ? AND status = 'queued' AND version = ?`,
					rn.ID, tok.ID, at, at, at, r.ID, r.Version), auth.ValidGuard(c.TokenID, now), undrainedGuard(rn.ID)},
			}
			t.Add(*issue)
			r.Status, r.RunnerID, r.TokenID, r.StartedAt, r.HeartbeatAt, r.UpdatedAt, r.Version = StatusRunning, rn.ID, tok.ID, &now, &now, now, r.Version+1
			out = Leased{Run: r, RunToken: secret, Session: session}
			return t, nil
		})
		switch {
		case errors.Is(err, transition.ErrGaveUp):
			return Leased{}, false, nil // every attempt lost to other runners: try again at the next poll
		case err != nil || t == nil:
			return Leased{}, false, err
		case failed:
			continue // the next queued run
		}
		return out, true, nil
	}
	return Leased{}, false, nil
}

// session builds r's session (Config.Sessions).
func (s *Service) session(ctx context.Context, r Run) (runproto.Session, error) {
	if s.cfg.Sessions == nil {
		return runproto.Session{Skills: []runproto.SessionSkill{}, AnsweredQuestions: []runproto.SessionAnswer{}}, nil
	}
	return s.cfg.Sessions.Session(ctx, r)
}

// failQueued fails queued r, whose session cannot be prepared, with reason
// (event run.finished, with the finish hook's jobs): no runner could run
// it, and it must not wait for one.
func (s *Service) failQueued(r Run, reason string, now time.Time) *transition.Transition {
	at := now.UnixMilli()
	version := r.Version
	r.Status, r.Error, r.FinishedAt, r.UpdatedAt, r.Version = StatusFailed, reason, &now, now, r.Version+1
	return &transition.Transition{
		Events: []event.Event{newEvent(r, event.System, RunFinished{Status: StatusFailed, Error: reason})},
		Guarded: []store.Statement{store.Stmt(`UPDATE runs SET status = 'failed', error = ?, finished_at = ?, updated_at = ?, version = version + 1
WHERE id = ? AND version = ? AND status = 'queued'`, reason, at, at, r.ID, version)},
		Jobs: s.finished(r),
	}
}

// Held returns the run runID if a runner of the runner token c leased it:
// the runner protocol's run routes (heartbeat, log, usage, finish) are the
// runner's, and only its. Any other run, or one no runner of c's leased,
// is not found.
func (s *Service) Held(ctx context.Context, c RunnerCaller, runID string) (Run, error) {
	rows, err := s.store.Query(ctx, `SELECT token_id FROM runners WHERE id = (SELECT runner_id FROM runs WHERE id = ?)`, runID)
	if err != nil {
		return Run{}, fmt.Errorf("read the runner of run %s: %w", runID, err)
	}
	var token string
	if rows.Len() == 1 {
		if err := rows.Scan(0, &token); err != nil {
			return Run{}, fmt.Errorf("read the runner of run %s: %w", runID, err)
		}
	}
	if token == "" || token != c.TokenID {
		return Run{}, runNotFound(runID)
	}
	return s.Get(ctx, runID)
}

// Heartbeat records that run r's session is alive (heartbeat_at; no event:
// liveness pings are not tracked changes) and says whether it was asked to
// stop. r is the run as the caller resolved it (Held): it must be running.
func (s *Service) Heartbeat(ctx context.Context, r Run) (runproto.HeartbeatReply, error) {
	if err := requireRunning(r); err != nil {
		return runproto.HeartbeatReply{}, err
	}
	res, err := s.store.Exec(ctx, store.Stmt(`UPDATE runs SET heartbeat_at = MAX(COALESCE(heartbeat_at, 0), ?) WHERE id = ? AND status = 'running'`,
		s.now().UnixMilli(), r.ID))
	if err != nil {
		return runproto.HeartbeatReply{}, fmt.Errorf("heartbeat run %s: %w", r.ID, err)
	}
	if len(res) == 1 && res[0].RowsAffected == 0 {
		now, err := s.Get(ctx, r.ID) // it finished meanwhile: say how
		if err == nil {
			err = requireRunning(now)
		}
		if err == nil {
			err = apperr.New(apperr.Conflict, "run %s changed concurrently: retry", r.ID)
		}
		return runproto.HeartbeatReply{}, err
	}
	return runproto.HeartbeatReply{Cancelled: r.CancelRequested}, nil
}

// requireRunning is 409 for a run that is not running (queued, or final).
// The runner reads ", not running" in the message: its run heartbeats stop.
func requireRunning(r Run) error {
	if r.Status != StatusRunning {
		return apperr.New(apperr.Conflict, "run %s is %s, not running", r.ID, r.Status)
	}
	return nil
}
