package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ballet/ballet/internal/apperr"
)

// One runs a query that must find a row: none is a NotFound naming what
// ("project \"ACME\""). The caller scans row 0.
func One(ctx context.Context, s Store, what, sql string, args ...any) (*Rows, error) {
	rows, err := s.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if rows.Len() == 0 {
		return nil, apperr.New(apperr.NotFound, "%s not found", what)
	}
	return rows, nil
}

// Time converts a stored time (unix milliseconds) to UTC.
func Time(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// OptionalTime converts a stored optional time: 0 (or NULL read as 0) is
// none.
func OptionalTime(ms int64) *time.Time {
	if ms == 0 {
		return nil
	}
	t := Time(ms)
	return &t
}
