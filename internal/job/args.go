package job

import (
	"context"
	"time"
)

// Args are a job's arguments, in the style of River's JobArgs: a Go type
// that knows its kind. The value is the job's payload: New marshals it to
// JSON, and the handler Register installs for its kind receives the
// payload decoded into the same type, so that a payload is written and read
// as one type. Kind must work on the zero value; field names are the
// stored payload's (json tags), so renaming one breaks the jobs queued
// before.
type Args interface{ Kind() string }

// Deduped is implemented by Args whose jobs are deduplicated: while a
// pending or running job has the key, enqueueing another is a no-op.
type Deduped interface {
	Args
	DedupeKey() string
}

// New returns the spec that enqueues a job with the arguments a (due now;
// At sets another time).
func New(a Args) Spec {
	s := Spec{Kind: a.Kind(), Payload: a}
	if d, ok := a.(Deduped); ok {
		s.DedupeKey = d.DedupeKey()
	}
	return s
}

// At returns s due at t.
func (s Spec) At(t time.Time) Spec {
	s.RunAt = t
	return s
}

// Registry is where Register installs handlers: the Orchestrator, or a
// test's table of handlers.
type Registry interface {
	Handle(kind string, h Handler)
}

// Register installs h as the handler of A's kind. h receives the job's
// payload decoded into A; a payload that does not decode makes the job dead
// (Decode).
func Register[A Args](r Registry, h func(ctx context.Context, j *Job, args A) error) {
	var zero A
	r.Handle(zero.Kind(), func(ctx context.Context, j *Job) error {
		var args A
		if err := j.Decode(&args); err != nil {
			return err
		}
		return h(ctx, j, args)
	})
}
