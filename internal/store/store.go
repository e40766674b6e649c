// Package store is Ballet's storage boundary (ADR-0016, ADR-0019). A Store
// does two things: execute a batch of statements atomically, and run a query.
// There are no interactive transactions: callers read, decide in pure code,
// and write one batch. The same SQL runs on the SQLite engine
// (store/sqlite) and the rqlite engine (store/rqlite); it must therefore
// never use 'now', random() or RETURNING, and takes every time and id as a
// bound parameter.
package store

import (
	"context"
)

// Statement is one SQL statement with its bound parameters.
type Statement struct {
	SQL  string
	Args []any
}

// Stmt builds a Statement.
func Stmt(sql string, args ...any) Statement { return Statement{SQL: sql, Args: args} }

// Result is what executing one statement of a batch reported.
type Result struct {
	RowsAffected int64
}

// Store is implemented by each storage engine.
type Store interface {
	// Exec runs the statements as one atomic batch: all of them commit, or
	// none does. A statement that fails aborts the batch with a *SQLError
	// naming it. On rqlite a write whose outcome could not be learned returns
	// an error matching ErrUnknownOutcome.
	Exec(ctx context.Context, batch ...Statement) ([]Result, error)
	// Query runs one read-only statement and returns all of its rows.
	Query(ctx context.Context, sql string, args ...any) (*Rows, error)
	// Engine names the engine ("sqlite" or "rqlite").
	Engine() string
	Close() error
}
