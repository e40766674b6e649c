// Package keys validates and allocates human-facing keys: project keys
// (ACME) and item keys (ACME-42). Entities are identified by UUIDv7; keys
// are separate attributes, unique per scope and never reused.
package keys

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ballet/ballet/internal/store"
)

var projectKey = regexp.MustCompile(`^[A-Z][A-Z0-9]{1,9}$`)

// ValidateProject checks a project key: an upper-case letter, then 1 to 9
// upper-case letters or digits.
func ValidateProject(k string) error {
	if !projectKey.MatchString(k) {
		return fmt.Errorf("project key %q must match [A-Z][A-Z0-9]{1,9}", k)
	}
	return nil
}

// Item formats an item key.
func Item(project string, n int64) string { return project + "-" + strconv.FormatInt(n, 10) }

// ParseItem splits an item key such as ACME-42.
func ParseItem(k string) (project string, n int64, err error) {
	i := strings.LastIndexByte(k, '-')
	if i < 0 {
		return "", 0, fmt.Errorf("item key %q must look like ACME-42", k)
	}
	project = k[:i]
	if err := ValidateProject(project); err != nil {
		return "", 0, fmt.Errorf("item key %q: %w", k, err)
	}
	num := k[i+1:]
	if num == "" || strings.TrimLeft(num, "0123456789") != "" {
		return "", 0, fmt.Errorf("item key %q: number must be a positive integer without leading zeros", k)
	}
	n, err = strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || num[0] == '0' {
		return "", 0, fmt.Errorf("item key %q: number must be a positive integer without leading zeros", k)
	}
	return project, n, nil
}

// Querier runs reads; store.Store satisfies it.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (*store.Rows, error)
}

// Allocation is a number read from a scope's counter, with the statement
// that takes it. The statement must run guarded (transition.Guarded): if
// another writer took the number meanwhile, the batch is a lost race and is
// retried from a fresh read, so a number is never handed out twice.
type Allocation struct {
	Number int64
	Take   store.Statement
}

// Next reads the next number of scope (a project id for item keys).
func Next(ctx context.Context, q Querier, scope string) (Allocation, error) {
	rows, err := q.Query(ctx, `SELECT next FROM key_counters WHERE scope = ?`, scope)
	if err != nil {
		return Allocation{}, fmt.Errorf("read key counter %s: %w", scope, err)
	}
	if rows.Len() == 0 {
		return Allocation{Number: 1, Take: store.Stmt(
			`INSERT INTO key_counters (scope, next) VALUES (?, 2) ON CONFLICT DO NOTHING`, scope)}, nil
	}
	var next int64
	if err := rows.Scan(0, &next); err != nil {
		return Allocation{}, err
	}
	return Allocation{Number: next, Take: store.Stmt(
		`UPDATE key_counters SET next = ? WHERE scope = ? AND next = ?`, next+1, scope, next)}, nil
}
