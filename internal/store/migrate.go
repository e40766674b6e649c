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

// MigrationSet is one service's schema: the *.sql files at the root of FS,
// applied in name order. Each stateful service owns its database and so
// its set (spec data.md "Databases"): Core's is CoreMigrations, the
// Knowledge service's lives in internal/knowledge.
type MigrationSet struct {
	FS fs.FS
}

// CoreMigrations is Core's schema.
var CoreMigrations = MigrationSet{FS: must(fs.Sub(migrationFiles, "migrations"))}

func must(f fs.FS, err error) fs.FS {
	if err != nil {
		panic(err)
	}
	return f
}

// Migrations returns Core's migrations in the order they apply.
func Migrations() ([]Migration, error) { return CoreMigrations.Migrations() }

// Migrations returns the set's migrations in the order they apply.
func (set MigrationSet) Migrations() ([]Migration, error) {
	names, err := fs.Glob(set.FS, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	sort.Strings(names)
	var out []Migration
	for _, n := range names {
		b, err := fs.ReadFile(set.FS, n)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", n, err)
		}
		out = append(out, Migration{
			Name:       strings.TrimSuffix(n, ".sql"),
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

// Migrate applies Core's migrations (CoreMigrations.Apply).
func Migrate(ctx context.Context, s Store, now time.Time) error {
	return CoreMigrations.Apply(ctx, s, now)
}

// Apply applies every migration of the set that is not yet recorded. Each
// migration is one atomic batch that starts by recording itself, so two
// processes migrating at once cannot both apply it: the loser's batch fails
// on the unique name and is skipped.
func (set MigrationSet) Apply(ctx context.Context, s Store, now time.Time) error {
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
	ms, err := set.Migrations()
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

// AppliedQuery reads the names of the migrations a database holds, in
// order: schema_migrations' read for a tool that opens a database file by
// itself (sqlite.Check, on a backup).
const AppliedQuery = `SELECT name FROM schema_migrations ORDER BY name`

// Admits checks that a database holding the migrations applied (by name)
// is one of set's service, from this version or an earlier one: it holds
// at least one migration, and every one is set's (a newer version's, or
// another service's, is not).
func (set MigrationSet) Admits(applied []string) error {
	ms, err := set.Migrations()
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, m := range ms {
		known[m.Name] = true
	}
	if len(applied) == 0 {
		return errors.New("it holds no migration")
	}
	for _, n := range applied {
		if !known[n] {
			return fmt.Errorf("it holds migration %s, which this version of Ballet does not know (a newer version's backup, or another service's)", n)
		}
	}
	return nil
}
