package run

import (
	"context"
	"errors"

	"github.com/ballet/ballet/internal/runproto"
)

// SessionSource builds the session of a run being leased (the flow
// engine's flow.Sessions). An error wrapping ErrUnrunnable means the run
// can never run as it is (a credential missing from Core's environment):
// the lease fails the run with the error's message instead of handing it
// out; any other error is Core's own and leases nothing.
type SessionSource interface {
	Session(ctx context.Context, r Run) (runproto.Session, error)
}

// ErrUnrunnable marks a SessionSource error that fails the run.
var ErrUnrunnable = errors.New("cannot prepare the session")
