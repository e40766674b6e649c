// Package tracker is Ballet's issue tracker: items (tickets and epics) with
// their states and the rules for moving between them, blockers (with each
// organization's blocker graph version), and questions. It owns the tables
// items, blockers, graph_versions and questions. Each change is
// read, decided in pure code and written as one transition batch with
// exactly one event (<entity>.<change>) carrying the actor.
package tracker

import (
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/transition"
)

// Service reads and changes the tracker.
//
// Every domain has a Service of its own over the store, the applier and
// the clock (one per domain, as STYLE.md's layout has it): what looks alike
// across domains' Service types is that layout, not shared logic.
type Service struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
	// Tenancy reads the projects items belong to.
	Tenancy *tenancy.Service
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
}

// New returns a Service over the projects of tn, with its hooks (the flow
// engine's flow.TrackerHooks in Core; zero Hooks add no jobs).
func New(s store.Store, a *transition.Applier, c clock.Clock, tn *tenancy.Service, h Hooks) *Service {
	return &Service{Store: s, Applier: a, Clock: c, Tenancy: tn, Hooks: h}
}

// now is the current time at the precision times are stored with, so that
// what a change returns equals what a later read returns.
func (s *Service) now() time.Time { return s.Clock.Now().Truncate(time.Millisecond) }
