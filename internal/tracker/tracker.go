// Package tracker is Ballet's tenancy and tracker domain: organizations,
// projects, members, items (tickets and epics) with their blockers,
// questions, skills and the platform switches. Each change is read, decided
// in pure code and written as one transition batch with exactly one event
// (<entity>.<change>) carrying the actor.
package tracker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// Service reads and changes the tracker.
type Service struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
	// Hooks let the flow engine enqueue durable work in the same batch as a
	// tracker change, so that no reaction can be lost between the two.
	Hooks Hooks
}

// Hooks return jobs to enqueue with a tracker change. Nil hooks add none.
type Hooks struct {
	// StateChanged: a user moved an item from one state to another.
	StateChanged func(it Item, from, to string) []job.Spec
	// LastBlockingAnswered: an answer closed the item's last open
	// blocking question.
	LastBlockingAnswered func(itemID string) []job.Spec
	// ProjectChanged: a project's settings changed (pause, budgets…).
	ProjectChanged func(p Project, changes ProjectChanges) []job.Spec
	// PlatformPaused: the kill switch was pulled (true) or released.
	PlatformPaused func(paused bool) []job.Spec
}

// New returns a Service.
func New(s store.Store, a *transition.Applier, c clock.Clock) *Service {
	return &Service{Store: s, Applier: a, Clock: c}
}

// ms converts a stored unix-millisecond time.
func ms(v int64) time.Time { return time.UnixMilli(v).UTC() }

// msPtr converts an optional stored time.
func msPtr(v int64) *time.Time {
	if v == 0 {
		return nil
	}
	t := ms(v)
	return &t
}

// newEvent builds an event for a change; payload is the event type's
// payload struct (payloads.go).
func newEvent(actor event.Actor, orgID, projectID, entityType, entityID, change string, payload any) event.Event {
	e := event.Event{OrganizationID: orgID, ProjectID: projectID, EntityType: entityType, EntityID: entityID,
		Type: entityType + "." + change, Payload: event.MustPayload(payload)}
	e.SetActor(actor)
	return e
}

// bumpOrgVersion returns the guarded statement that moves an
// organization's row of a version table (graph_versions, member_versions)
// from v to v+1 (v = 0: there is no row yet). A change that reads v before
// deciding on the rows the table covers, and commits the bump in the same
// batch, loses its race when another such change committed meanwhile.
func bumpOrgVersion(table, orgID string, v int64) store.Statement {
	if v == 0 {
		return store.Stmt(`INSERT INTO `+table+` (organization_id, version) VALUES (?, 1) ON CONFLICT DO NOTHING`, orgID)
	}
	return store.Stmt(`UPDATE `+table+` SET version = version + 1 WHERE organization_id = ? AND version = ?`, orgID, v)
}

// stale turns a lost race on a caller-supplied version into a 409.
func stale(err error, what string) error {
	if errors.Is(err, store.ErrLostRace) {
		return apperr.New(apperr.Conflict, "%s was changed by someone else (stale version): read it again and retry", what)
	}
	return err
}

// one reads exactly one row or returns NotFound.
func one(ctx context.Context, q store.Store, what, sql string, args ...any) (*store.Rows, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if rows.Len() == 0 {
		return nil, apperr.New(apperr.NotFound, "%s not found", what)
	}
	return rows, nil
}

// now is the current time at the precision times are stored with, so that
// what a change returns equals what a later read returns.
func (s *Service) now() time.Time { return s.Clock.Now().Truncate(time.Millisecond) }
