package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one embedded schema change.
type Migration struct {
	Name       string
	Statements []string
}

// Migrations returns the embedded migrations in the order they apply.
func Migrations() ([]Migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	sort.Strings(names)
	var out []Migration
	for _, n := range names {
		b, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", n, err)
		}
		out = append(out, Migration{
			Name:       strings.TrimSuffix(strings.TrimPrefix(n, "migrations/"), ".sql"),
			Statements: splitStatements(string(b)),
		})
	}
	return out, nil
}

// splitStatements splits a migration on semicolons that end a line, after
// dropping comment lines. Migrations contain no triggers, so this suffices.
func splitStatements(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		if i := strings.Index(line, " --"); i >= 0 {
			line = line[:i]
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// Migrate applies every embedded migration that is not yet recorded. Each
// migration is one atomic batch that starts by recording itself, so two
// processes migrating at once cannot both apply it: the loser's batch fails
// on the unique name and is skipped.
func Migrate(ctx context.Context, s Store, now time.Time) error {
	if _, err := s.Exec(ctx, Stmt(`CREATE TABLE IF NOT EXISTS schema_migrations (
    name       TEXT    PRIMARY KEY,
    applied_at INTEGER NOT NULL
)`)); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	rows, err := s.Query(ctx, `SELECT name FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	applied := map[string]bool{}
	for i := range rows.Len() {
		var n string
		if err := rows.Scan(i, &n); err != nil {
			return err
		}
		applied[n] = true
	}
	ms, err := Migrations()
	if err != nil {
		return err
	}
	for _, m := range ms {
		if applied[m.Name] {
			continue
		}
		batch := []Statement{Stmt(`INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)`, m.Name, now.UnixMilli())}
		for _, q := range m.Statements {
			batch = append(batch, Stmt(q))
		}
		if _, err := s.Exec(ctx, batch...); err != nil {
			if UniqueOn(err, "schema_migrations.name") {
				continue // another process applied it meanwhile
			}
			if errors.Is(err, ErrUnknownOutcome) {
				return fmt.Errorf("apply migration %s: %w (start again: applied migrations are skipped)", m.Name, err)
			}
			return fmt.Errorf("apply migration %s: %w", m.Name, err)
		}
	}
	return nil
}
