package tenancy

import (
	"context"

	"github.com/ballet/ballet/internal/bounds"

	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// Platform holds the platform-wide switches.
type Platform struct {
	Paused           bool      `json:"paused"` // the kill switch
	ConcurrencyLimit int       `json:"concurrency_limit"`
	UpdatedAt        time.Time `json:"updated_at"`
	Version          int64     `json:"version"`
}

// PlatformPatch changes the platform's settings.
type PlatformPatch struct {
	ConcurrencyLimit *int // required
}

// GetPlatform reads the platform row.
func (s *Service) GetPlatform(ctx context.Context) (Platform, error) {
	rows, err := store.One(ctx, s.Store, "platform", `SELECT paused, concurrency_limit, updated_at, version FROM platform WHERE id = 1`)
	if err != nil {
		return Platform{}, err
	}
	var p Platform
	var u int64
	if err := rows.Scan(0, &p.Paused, &p.ConcurrencyLimit, &u, &p.Version); err != nil {
		return Platform{}, err
	}
	p.UpdatedAt = store.Time(u)
	return p, nil
}

// SetPlatformPaused pulls or releases the kill switch. Pausing a paused
// platform changes nothing.
func (s *Service) SetPlatformPaused(ctx context.Context, actor event.Actor, paused bool) (Platform, error) {
	var out Platform
	_, err := s.Applier.Do(ctx, func(ctx context.Context) (*transition.Transition, error) {
		p, err := s.GetPlatform(ctx)
		if err != nil {
			return nil, err
		}
		var t *transition.Transition
		out, t = p.pause(actor, paused, s.now())
		if t != nil && s.Hooks.PlatformPaused != nil {
			t.Jobs = s.Hooks.PlatformPaused(paused)
		}
		return t, nil
	})
	return out, err
}

// pause decides pulling (paused) or releasing the kill switch of the
// platform as read: the platform it makes and the transition (nil when it
// is so already).
func (p Platform) pause(actor event.Actor, paused bool, now time.Time) (Platform, *transition.Transition) {
	if p.Paused == paused {
		return p, nil
	}
	var payload event.Payload = PlatformResumed{}
	if paused {
		payload = PlatformPaused{}
	}
	next := p
	next.Paused, next.UpdatedAt, next.Version = paused, now, p.Version+1
	return next, &transition.Transition{
		Events: []event.Event{event.Of(actor, "", "", "platform", payload)},
		Guarded: []store.Statement{store.Stmt(`UPDATE platform SET paused = ?, updated_at = ?, version = version + 1 WHERE id = 1 AND version = ?`,
			paused, now.UnixMilli(), p.Version)},
	}
}

// UpdatePlatform changes the global concurrency limit of the platform at
// the version the caller read.
func (s *Service) UpdatePlatform(ctx context.Context, actor event.Actor, version int64, in PlatformPatch) (Platform, error) {
	var v apperr.Validator
	bounds.CheckVersionRead(&v, version)
	v.Check(in.ConcurrencyLimit != nil, "concurrency_limit", "is required")
	if in.ConcurrencyLimit != nil {
		bounds.PlatformConcurrency.Check(&v, "concurrency_limit", int64(*in.ConcurrencyLimit))
	}
	if err := v.Err(); err != nil {
		return Platform{}, err
	}
	p, err := s.GetPlatform(ctx)
	if err != nil {
		return Platform{}, err
	}
	now := s.now()
	payload := PlatformUpdated{Changes: PlatformChanges{ConcurrencyLimit: *in.ConcurrencyLimit}}
	err = s.Applier.Apply(ctx, &transition.Transition{
		Events: []event.Event{event.Of(actor, "", "", "platform", payload)},
		Guarded: []store.Statement{store.Stmt(`UPDATE platform SET concurrency_limit = ?, updated_at = ?, version = version + 1 WHERE id = 1 AND version = ?`,
			*in.ConcurrencyLimit, now.UnixMilli(), version)},
	})
	if err != nil {
		return Platform{}, transition.Stale(err, "the platform")
	}
	p.ConcurrencyLimit, p.UpdatedAt, p.Version = *in.ConcurrencyLimit, now, version+1
	return p, nil
}
