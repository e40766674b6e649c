// Package job is Ballet's durable job queue (spec data.md "Durable jobs"):
// work that must survive restarts is a row in the jobs table, inserted in the
// same atomic batch as the transition that causes it, and executed by the
// Orchestrator.
package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/store"
)

// Job statuses.
const (
	StatusPending = "pending"
	StatusRunning = "running"
	StatusDone    = "done"
	StatusDead    = "dead"
)

// DefaultMaxAttempts is used when a Spec leaves MaxAttempts at zero.
const DefaultMaxAttempts = 20

// When a job is dead. A job's attempt counts its claims and is their
// fencing token; what ends a job are two other counts:
//
//   - failures, the handler's errors in a row (a success or a snooze starts
//     again from zero): at MaxAttempts the job is dead. An error wrapped by
//     Permanent, a panic or a missing handler makes it dead at once.
//   - expiries, its claims in a row whose lease ran out without a result
//     (the holder vanished: a Core restart, a lost leader; any recorded
//     result starts again from zero): at ExpiryLimit(MaxAttempts) the job
//     is dead instead of being claimed again. This is the poison pill's
//     bound: a job whose handler takes its holder down each time must end,
//     but restarts are no fault of the job, so it is higher than
//     MaxAttempts.
//
// The backoff after a failure follows failures alone (Backoff), so claims
// lost to restarts cost no delay.

// ExpiriesPerAttempt is how many lost claims in a row a job may have per
// attempt it may fail: ExpiryLimit is MaxAttempts times this.
const ExpiriesPerAttempt = 2

// ExpiryLimit returns how many claims in a row may run out without a
// result before a job of maxAttempts is dead (the poison-pill bound).
func ExpiryLimit(maxAttempts int) int { return ExpiriesPerAttempt * max(maxAttempts, 1) }

// Spec describes a job to enqueue: the row it becomes. Jobs of the
// domain are built from their Args with New (outside this package no code
// but tests writes a Spec by hand: the lint test checks).
type Spec struct {
	Kind    string
	Payload any // marshalled to JSON; nil means {}
	// RunAt is when the job becomes due; zero means now.
	RunAt time.Time
	// DedupeKey, if set, makes enqueueing idempotent: while a pending or
	// running job has the key, inserting another is a no-op.
	DedupeKey   string
	MaxAttempts int
}

// Insert returns the statement that enqueues the job with the given id.
func (s Spec) Insert(id string, now time.Time) (store.Statement, error) {
	return s.insert(id, now, nil)
}

// InsertWhile returns the statement that enqueues the job with the given
// id only if cond, a boolean SQL expression with its arguments, holds when
// the statement runs (typically that the entity that wants the job is
// still at the version read: flow.Unchanged); otherwise it changes
// nothing.
func (s Spec) InsertWhile(id string, now time.Time, cond store.Statement) (store.Statement, error) {
	return s.insert(id, now, &cond)
}

func (s Spec) insert(id string, now time.Time, cond *store.Statement) (store.Statement, error) {
	if s.Kind == "" {
		return store.Statement{}, errors.New("job spec: kind is required")
	}
	payload := []byte("{}")
	if s.Payload != nil {
		var err error
		if raw, ok := s.Payload.(json.RawMessage); ok {
			payload = raw
		} else if payload, err = json.Marshal(s.Payload); err != nil {
			return store.Statement{}, fmt.Errorf("job %s: marshal payload: %w", s.Kind, err)
		}
	}
	runAt := s.RunAt
	if runAt.IsZero() {
		runAt = now
	}
	maxAttempts := s.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	var key any
	if s.DedupeKey != "" {
		key = s.DedupeKey
	}
	args := []any{id, s.Kind, string(payload), runAt.UnixMilli(), maxAttempts, key, now.UnixMilli(), now.UnixMilli()}
	// ON CONFLICT DO NOTHING covers the partial unique index on dedupe_key
	// (and the id, should a batch be re-sent after an unknown outcome).
	const into = `INSERT INTO jobs (id, kind, payload, status, run_at, attempt, max_attempts, dedupe_key, created_at, updated_at)`
	if cond == nil {
		return store.Stmt(into+`
VALUES (?, ?, ?, 'pending', ?, 0, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, args...), nil
	}
	return store.Stmt(into+`
SELECT ?, ?, ?, 'pending', ?, 0, ?, ?, ?, ? WHERE `+cond.SQL+` ON CONFLICT DO NOTHING`, append(args, cond.Args...)...), nil
}

// Retire returns the statement that marks the pending job of a's dedupe
// key done without running it, as it has nothing left to do (a stage's
// timeout once its run finished). A running job, or none, is left as it
// is.
func Retire(a Deduped, now time.Time) store.Statement {
	return store.Stmt(`UPDATE jobs SET status = 'done', finished_at = ?, updated_at = ? WHERE dedupe_key = ? AND status = 'pending'`,
		now.UnixMilli(), now.UnixMilli(), a.DedupeKey())
}

// Job is a claimed job as a handler sees it.
type Job struct {
	ID          string
	Kind        string
	Payload     json.RawMessage
	Attempt     int // the claim's number: 1 on the first run, +1 on every claim (also one after a lost lease)
	Failures    int // the handler's errors in a row before this run (0 after a success or a snooze)
	MaxAttempts int // failures in a row that make the job dead
	DedupeKey   string
	RunAt       time.Time
}

// LastTry reports whether a failure of this run makes the job dead: it
// has failed MaxAttempts-1 times in a row. A handler that records its own
// outcome (a mail's delivery) marks it final then.
func (j *Job) LastTry() bool { return j.MaxAttempts > 0 && j.Failures+1 >= j.MaxAttempts }

// Decode unmarshals the payload into v.
func (j *Job) Decode(v any) error {
	if err := json.Unmarshal(j.Payload, v); err != nil {
		return Permanent(fmt.Errorf("job %s %s: bad payload: %w", j.Kind, j.ID, err))
	}
	return nil
}

// permanentError marks an error that must not be retried.
type permanentError struct{ err error }

func (p *permanentError) Error() string { return "permanent: " + p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// Permanent wraps err so that the orchestrator marks the job dead at once
// instead of retrying it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// snoozeError asks for the job to run again later, without counting as a
// failure (a poll that found nothing new yet).
type snoozeError struct{ d time.Duration }

func (s *snoozeError) Error() string { return fmt.Sprintf("snoozed for %s", s.d) }

// Snooze returns the error a handler returns to run again after d, without
// counting as a failure (it resets the failures in a row, as a success
// does). Polling (a pull request's checks) is built on it.
func Snooze(d time.Duration) error { return &snoozeError{d: d} }

// IsSnooze reports whether err asks for a later run (Snooze).
func IsSnooze(err error) bool {
	var s *snoozeError
	return errors.As(err, &s)
}

// SnoozedFor returns how long err (Snooze) asks the job to wait.
func SnoozedFor(err error) (time.Duration, bool) {
	var s *snoozeError
	if errors.As(err, &s) {
		return s.d, true
	}
	return 0, false
}

// IsPermanent reports whether err was wrapped by Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// Backoff is the retry policy: the delay after the given failure in a
// row (1-based: a job's failures, counting the one just returned) is
// 2^failures seconds, at most limit.
func Backoff(failures int, limit time.Duration) time.Duration {
	if failures < 1 {
		failures = 1
	}
	if failures > 30 {
		return limit
	}
	d := time.Duration(1<<failures) * time.Second
	if d > limit {
		return limit
	}
	return d
}
