//go:build !linux

package proc

import (
	"context"
	"errors"
)

var errLinuxOnly = errors.New("proc: agent sessions run on Linux only")

// Session is a running session (Linux only).
type Session struct{}

// Start fails: sessions need Linux (process groups, Pdeathsig, /proc).
func Start(ctx context.Context, spec Spec) (*Session, error) { return nil, errLinuxOnly }

// PID is 0.
func (s *Session) PID() int { return 0 }

// Final does nothing.
func (s *Session) Final() {}

// Stop does nothing.
func (s *Session) Stop() {}

// Done is never closed.
func (s *Session) Done() <-chan struct{} { return nil }

// Wait returns a zero Result.
func (s *Session) Wait() Result { return Result{} }

// Swept is a session of a dead runner that Sweep cleaned up.
type Swept struct {
	ID     string
	Killed []int
}

// Sweep fails: sessions need Linux.
func Sweep(dir string) ([]Swept, error) { return nil, errLinuxOnly }

// Process is a live process of a session.
type Process struct {
	PID, PGID int
}

// Find finds nothing: sessions need Linux.
func Find(id string) []Process { return nil }
