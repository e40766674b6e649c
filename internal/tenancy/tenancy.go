// Package tenancy is Ballet's tenancy domain: organizations, their projects
// (repository, merge policy, budgets, ticket types, pause, concurrency),
// memberships with each organization's membership version, and the
// platform switches. It owns the tables organizations, projects,
// memberships, member_versions and platform. Each change is read, decided in
// pure code and written as one transition batch with exactly one event
// (<entity>.<change>) carrying the actor.
package tenancy

import (
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/transition"
)

// Service reads and changes organizations, projects, members and the
// platform.
type Service struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
	// Hooks let the flow engine enqueue durable work in the same batch as a
	// tenancy change, so that no reaction can be lost between the two.
	Hooks Hooks
	// Secrets decides whether a project may save a secret reference
	// (secret.Policy: the platform's [secrets] allow list, never Ballet's
	// own credentials); nil refuses every reference.
	Secrets SecretRefs
}

// SecretRefs decides whether a secret reference may be saved for the
// organization org (its slug): nil, or an error saying why not.
type SecretRefs interface {
	Check(org, ref string) error
}

// Hooks return jobs to enqueue with a tenancy change. Nil hooks add none.
type Hooks struct {
	// ProjectChanged: a project's settings changed (pause, budgets…).
	ProjectChanged func(p Project, changes ProjectChanges) []job.Spec
	// PlatformPaused: the kill switch was pulled (true) or released.
	PlatformPaused func(paused bool) []job.Spec
}

// New returns a Service with its hooks (the flow engine's
// flow.TenancyHooks in Core; zero Hooks add no jobs).
func New(s store.Store, a *transition.Applier, c clock.Clock, h Hooks) *Service {
	return &Service{Store: s, Applier: a, Clock: c, Hooks: h}
}

// now is the current time at the precision times are stored with, so that
// what a change returns equals what a later read returns.
func (s *Service) now() time.Time { return s.Clock.Now().Truncate(time.Millisecond) }
