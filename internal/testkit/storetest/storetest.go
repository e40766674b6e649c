// Package storetest runs tests against every storage engine: a real SQLite
// file and a real rqlite node. Every storage and flow test uses Each, so the
// same suite passes on both engines (like River's driver tests). A missing
// rqlite fails the test; BALLET_SKIP_RQLITE=1 skips it (see rqlitetest).
package storetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/rqlite"
	"github.com/ballet/ballet/internal/store/sqlite"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
)

// Engines lists the engine names Each runs.
var Engines = []string{"sqlite", "rqlite"}

// EnginesEnv narrows Each to a comma-separated subset of Engines, e.g.
// "sqlite" for a mutation run (make mutation), where a test run per mutant
// must be quick. Tests that start rqlite themselves are not affected.
const EnginesEnv = "BALLET_ENGINES"

// Each runs fn once per engine as a parallel subtest, each on a fresh
// database migrated to Core's schema.
func Each(t *testing.T, fn func(t *testing.T, s store.Store)) {
	t.Helper()
	EachWith(t, store.CoreMigrations, fn)
}

// EachWith is Each for another service's schema (the Knowledge service's).
func EachWith(t *testing.T, set store.MigrationSet, fn func(t *testing.T, s store.Store)) {
	t.Helper()
	engines, err := selected(os.Getenv(EnginesEnv))
	if err != nil {
		t.Fatal(err)
	}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			fn(t, OpenWith(t, engine, set))
		})
	}
}

// selected returns the engines named by a BALLET_ENGINES value, all of
// them if it is empty.
func selected(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return Engines, nil
	}
	var out []string
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(Engines, name) {
			return nil, fmt.Errorf("%s=%q: unknown engine %q (use a comma-separated subset of %s)",
				EnginesEnv, v, name, strings.Join(Engines, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// Open returns a fresh store of the named engine migrated to Core's
// schema, closed when the test ends.
func Open(t testing.TB, engine string) store.Store {
	t.Helper()
	return OpenWith(t, engine, store.CoreMigrations)
}

// OpenWith is Open for another service's schema.
func OpenWith(t testing.TB, engine string, set store.MigrationSet) store.Store {
	t.Helper()
	ctx := context.Background()
	var s store.Store
	switch engine {
	case "sqlite":
		db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "core.db"))
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		s = db
	case "rqlite":
		c := rqlitetest.Start(t, 1)
		db, err := rqlite.Open(ctx, rqlite.Options{URLs: c.URLs()})
		if err != nil {
			t.Fatalf("open rqlite: %v", err)
		}
		s = db
	default:
		t.Fatalf("unknown engine %q", engine)
	}
	t.Cleanup(func() { s.Close() })
	if err := set.Apply(ctx, s, time.Now()); err != nil {
		t.Fatalf("migrate %s: %v", engine, err)
	}
	return s
}

// Address names another connection to the same database as s (for a child
// process, or a second Core instance): it returns the engine and the
// address, a file path for SQLite or the node URLs for rqlite.
func Address(t testing.TB, s store.Store) (engine, addr string) {
	t.Helper()
	switch db := s.(type) {
	case *sqlite.Store:
		return "sqlite", db.Path()
	case *rqlite.Store:
		return "rqlite", strings.Join(db.URLs(), ",")
	}
	t.Fatalf("unknown store %T", s)
	return "", ""
}

// OpenAddress opens a store from Address's result, without migrating. A
// SQLite file is opened shared (sqlite.OpenShared): the test holds it too.
func OpenAddress(ctx context.Context, engine, addr string) (store.Store, error) {
	if engine == "rqlite" {
		return rqlite.Open(ctx, rqlite.Options{URLs: strings.Split(addr, ",")})
	}
	return sqlite.OpenShared(ctx, addr)
}

// NoTableScan fails t when SQLite's plan for the query (named name in the
// messages) scans a whole table: a SCAN step that uses no index. A constant
// row and a table-valued function (json_each over the caller's list) are
// not tables. s is a SQLite store (Open(t, "sqlite")).
func NoTableScan(t testing.TB, s store.Store, name, sql string, args ...any) {
	t.Helper()
	rows, err := s.Query(context.Background(), "EXPLAIN QUERY PLAN "+sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var plan []string
	for i := range rows.Len() {
		plan = append(plan, fmt.Sprint(rows.Values[i][len(rows.Values[i])-1]))
	}
	t.Logf("%s:\n  %s", name, strings.Join(plan, "\n  "))
	for _, step := range plan {
		if strings.HasPrefix(step, "SCAN ") && !strings.Contains(step, "USING") &&
			!strings.HasPrefix(step, "SCAN CONSTANT ROW") && !strings.Contains(step, "VIRTUAL TABLE") {
			t.Errorf("%s scans a table: %s", name, step)
		}
	}
}

// Count runs a query whose first column is a count (SELECT COUNT(*) …) on
// s and returns it, failing t on an error.
func Count(t testing.TB, s store.Store, sql string, args ...any) int64 {
	t.Helper()
	rows, err := s.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := rows.Scan(0, &n); err != nil {
		t.Fatal(err)
	}
	return n
}
