package store

import (
	"errors"
	"fmt"
	"strings"
)

// GuardConstraint is the name of the CHECK constraint that the lost-race
// guard violates. Every engine reports it in its error text.
const GuardConstraint = "ballet_lost_race"

var (
	// ErrLostRace reports that an optimistic update matched no row: another
	// writer changed the entity since it was read. The batch committed
	// nothing; the caller retries from a fresh read.
	ErrLostRace = errors.New("lost race: the row changed since it was read")
	// ErrUnique reports a UNIQUE or PRIMARY KEY constraint violation.
	ErrUnique = errors.New("unique constraint violated")
	// ErrUnknownOutcome reports a write that may or may not have committed
	// (the connection dropped, the leader changed). Re-sending the same batch
	// is safe for transitions: their version check and client-made event id
	// make a second application impossible.
	ErrUnknownOutcome = errors.New("write outcome unknown")
)

// SQLError is a statement that the engine refused. It aborts the batch.
type SQLError struct {
	Index   int    // position of the statement in the batch, -1 if unknown
	Message string // the engine's message
}

func (e *SQLError) Error() string {
	if e.Index < 0 {
		return "sql: " + e.Message
	}
	return fmt.Sprintf("sql statement %d: %s", e.Index, e.Message)
}

// Is lets errors.Is classify engine errors by their (engine-independent)
// SQLite message text.
func (e *SQLError) Is(target error) bool {
	switch target {
	case ErrLostRace:
		return strings.Contains(e.Message, GuardConstraint)
	case ErrUnique:
		return strings.Contains(e.Message, "UNIQUE constraint failed")
	}
	return false
}

// UniqueOn reports whether err is a UNIQUE violation on the given
// "table.column" (as SQLite names it, e.g. "events.id").
func UniqueOn(err error, column string) bool {
	var se *SQLError
	if !errors.As(err, &se) || !errors.Is(se, ErrUnique) {
		return false
	}
	i := strings.Index(se.Message, "UNIQUE constraint failed: ")
	if i < 0 {
		return false
	}
	// "UNIQUE constraint failed: t.a, t.b" possibly followed by " (…)"
	cols := se.Message[i+len("UNIQUE constraint failed: "):]
	if j := strings.Index(cols, " ("); j >= 0 {
		cols = cols[:j]
	}
	for _, c := range strings.Split(cols, ",") {
		if f := strings.Fields(c); len(f) > 0 && f[0] == column {
			return true
		}
	}
	return false
}
