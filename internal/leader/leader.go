// Package leader elects one leader among Core instances that share a
// database (ADR-0016 follow-up). The leader holds a lease row, renewed by
// optimistic updates well inside its TTL; only the leader runs the
// orchestrator, scheduler and reconciler. A leader that cannot renew steps
// down half a renewal interval before its lease can have run out (a
// renewal that has not answered by then counts as failed), and a leader
// that stops cleanly keeps its lease until its work has wound down, so two
// leaders never act at once (assuming the instances' clocks agree to well
// within that margin). A new leader may therefore take over the work of
// every earlier holder at once.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/store"
)

// Elector campaigns for one named lease.
type Elector struct {
	store store.Store
	clock clock.Clock
	log   *slog.Logger
	name  string
	id    string
	ttl   time.Duration
	renew time.Duration

	onLost func() // see New

	leading    atomic.Bool
	version    int64     // the lease row's version while leading
	validUntil time.Time // while leading: the lease is ours at least until then
}

// New returns an elector for lease name on behalf of instance id. onLost,
// if not nil, is called the moment leadership is lost — the lease was
// taken, or could not be renewed in time — also while the leader's work
// winds down after a clean stop. Work that must not go on once another
// instance may lead stops there (Core's orchestrator abandons its
// handlers).
func New(s store.Store, c clock.Clock, log *slog.Logger, name, id string, ttl, renew time.Duration, onLost func()) *Elector {
	return &Elector{store: s, clock: c, log: log, name: name, id: id, ttl: ttl, renew: renew, onLost: onLost}
}

// Leading reports whether this instance leads now.
func (e *Elector) Leading() bool { return e.leading.Load() }

// ID returns this instance's id.
func (e *Elector) ID() string { return e.id }

// Run campaigns until ctx ends. Each time it is elected it calls lead with
// a context that is cancelled the moment leadership is lost (and then
// calls onLost) or ctx ends, and waits for lead to return before campaigning again. On a
// clean stop it goes on renewing the lease until lead has returned, then
// releases it so that another instance takes over at once.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context)) {
	for {
		ok, err := e.campaign(ctx)
		if err != nil && ctx.Err() == nil {
			e.log.Warn("leader election", "err", err)
		}
		if ok {
			e.hold(ctx, lead)
		}
		if ctx.Err() != nil {
			return
		}
		if !e.sleep(ctx, e.renew) {
			return
		}
	}
}

// lease is the row as read.
type lease struct {
	exists    bool
	holder    string
	expiresAt time.Time
	version   int64
}

func (e *Elector) read(ctx context.Context) (lease, error) {
	rows, err := e.store.Query(ctx, `SELECT holder, expires_at, version FROM leader_leases WHERE name = ?`, e.name)
	if err != nil {
		return lease{}, fmt.Errorf("read lease %s: %w", e.name, err)
	}
	if rows.Len() == 0 {
		return lease{}, nil
	}
	var l lease
	var exp int64
	if err := rows.Scan(0, &l.holder, &exp, &l.version); err != nil {
		return lease{}, err
	}
	l.exists, l.expiresAt = true, time.UnixMilli(exp)
	return l, nil
}

// campaign takes the lease if it is free, expired or already ours.
func (e *Elector) campaign(ctx context.Context) (bool, error) {
	l, err := e.read(ctx)
	if err != nil {
		return false, err
	}
	now := e.clock.Now()
	exp := now.Add(e.ttl).UnixMilli()
	var st store.Statement
	switch {
	case !l.exists:
		st = store.Stmt(`INSERT INTO leader_leases (name, holder, expires_at, version) VALUES (?, ?, ?, 1) ON CONFLICT DO NOTHING`, e.name, e.id, exp)
		l.version = 0
	case l.holder == e.id || !now.Before(l.expiresAt):
		st = store.Stmt(`UPDATE leader_leases SET holder = ?, expires_at = ?, version = version + 1 WHERE name = ? AND version = ?`, e.id, exp, e.name, l.version)
	default:
		return false, nil // someone else holds a live lease
	}
	res, err := e.store.Exec(ctx, st)
	if err != nil {
		return false, fmt.Errorf("take lease %s: %w", e.name, err)
	}
	if res[0].RowsAffected != 1 {
		return false, nil // lost the race to another instance
	}
	e.version, e.validUntil = l.version+1, now.Add(e.ttl)
	e.log.Info("elected leader", "lease", e.name, "instance", e.id)
	return true, nil
}

// ending is why keep stopped renewing.
type ending int

const (
	stopped  ending = iota // its context ended: a clean stop
	lost                   // the lease was taken, or could not be renewed in time
	finished               // lead returned
)

// hold runs lead while renewing the lease.
func (e *Elector) hold(ctx context.Context, lead func(ctx context.Context)) {
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	e.leading.Store(true)
	go func() { defer close(done); lead(lctx) }()
	end := e.keep(ctx, done)
	e.leading.Store(false) // stop leading at once
	cancel()
	if end == stopped {
		// Keep the lease while the leader's work winds down (job handlers
		// may finish within their grace), so that no other instance takes
		// over meanwhile.
		end = e.keep(context.WithoutCancel(ctx), done)
	}
	if end == lost && e.onLost != nil {
		e.onLost()
	}
	<-done
	if end == finished {
		e.release()
	}
}

// keep renews the lease every `renew` until ctx ends (stopped), lead is
// done (finished) or the lease is lost: taken by another instance, or not
// renewed by half a renewal interval before it could run out.
func (e *Elector) keep(ctx context.Context, done <-chan struct{}) ending {
	for {
		deadline := e.validUntil.Add(-e.renew / 2)
		wait := min(e.renew, deadline.Sub(e.clock.Now()))
		if wait <= 0 {
			e.log.Error("leader lease could not be renewed in time: stepping down", "lease", e.name)
			return lost
		}
		t := e.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return stopped
		case <-done:
			t.Stop()
			return finished
		case <-t.C():
		}
		start := e.clock.Now()
		// A renewal that has not answered by the deadline has failed.
		rctx, cancel := context.WithTimeout(ctx, deadline.Sub(start))
		ok, err := e.renewLease(rctx, start)
		cancel()
		switch {
		case ctx.Err() != nil:
			return stopped
		case err != nil:
			e.log.Warn("renew leader lease", "err", err)
		case !ok:
			e.log.Warn("leader lease taken by another instance: stepping down", "lease", e.name)
			return lost
		default:
			e.validUntil = start.Add(e.ttl)
		}
	}
}

func (e *Elector) renewLease(ctx context.Context, now time.Time) (bool, error) {
	res, err := e.store.Exec(ctx, store.Stmt(`UPDATE leader_leases SET expires_at = ?, version = version + 1 WHERE name = ? AND holder = ? AND version = ?`,
		now.Add(e.ttl).UnixMilli(), e.name, e.id, e.version))
	if err != nil {
		if errors.Is(err, store.ErrUnknownOutcome) {
			// It may have landed: re-read to learn our version.
			l, rerr := e.read(ctx)
			if rerr == nil && l.holder == e.id {
				e.version = l.version
				return true, nil
			}
		}
		return false, err
	}
	if res[0].RowsAffected != 1 {
		return false, nil
	}
	e.version++
	return true, nil
}

// release gives the lease up so that another instance need not wait for it
// to run out.
func (e *Elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := e.store.Exec(ctx, store.Stmt(`UPDATE leader_leases SET expires_at = ?, version = version + 1 WHERE name = ? AND holder = ? AND version = ?`,
		e.clock.Now().UnixMilli(), e.name, e.id, e.version))
	if err != nil {
		e.log.Warn("release leader lease", "err", err)
		return
	}
	e.log.Info("released leader lease", "lease", e.name)
}

func (e *Elector) sleep(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, e.clock, d) == nil
}
