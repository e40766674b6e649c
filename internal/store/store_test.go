package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

func TestBatchIsAtomic(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		if _, err := s.Exec(ctx, store.Stmt(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`)); err != nil {
			t.Fatal(err)
		}
		_, err := s.Exec(ctx,
			store.Stmt(`INSERT INTO t (id, v) VALUES (?, ?)`, 1, "a"),
			store.Stmt(`INSERT INTO t (id, v) VALUES (?, ?)`, 2, "b"),
			store.Stmt(`INSERT INTO t (id, v) VALUES (?, ?)`, 1, "dup"),
		)
		var se *store.SQLError
		if !errors.As(err, &se) || se.Index != 2 {
			t.Fatalf("want SQLError at statement 2, got %v", err)
		}
		if !errors.Is(err, store.ErrUnique) || !store.UniqueOn(err, "t.id") {
			t.Fatalf("want a unique violation on t.id, got %v", err)
		}
		if errors.Is(err, store.ErrLostRace) {
			t.Fatalf("a unique violation was mistaken for a lost race: %v", err)
		}
		rows, err := s.Query(ctx, `SELECT COUNT(*) FROM t`)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := rows.Scan(0, &n); err != nil || n != 0 {
			t.Fatalf("a failed batch left %d rows (err %v)", n, err)
		}
		// The store is still usable and reports rows affected, 0 included.
		res, err := s.Exec(ctx,
			store.Stmt(`INSERT INTO t (id, v) VALUES (?, ?)`, 1, "a"),
			store.Stmt(`UPDATE t SET v = ? WHERE id = ?`, "x", 99),
			store.Stmt(`UPDATE t SET v = ? WHERE id = ?`, "y", 1),
		)
		if err != nil {
			t.Fatal(err)
		}
		if got := []int64{res[0].RowsAffected, res[1].RowsAffected, res[2].RowsAffected}; got[0] != 1 || got[1] != 0 || got[2] != 1 {
			t.Fatalf("rows affected %v, want [1 0 1]", got)
		}
	})
}

func TestGuardErrorIsALostRace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		_, err := s.Exec(ctx,
			store.Stmt(`UPDATE jobs SET attempt = 1 WHERE id = ?`, "missing"),
			store.Stmt(`INSERT INTO race_guard (lost) SELECT 1 WHERE changes() = 0`),
		)
		if !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("want ErrLostRace, got %v", err)
		}
		if errors.Is(err, store.ErrUnique) {
			t.Fatalf("lost race mistaken for a unique violation")
		}
		_, err = s.Exec(ctx, store.Stmt(`INSERT INTO nowhere VALUES (1)`))
		if err == nil || errors.Is(err, store.ErrLostRace) || errors.Is(err, store.ErrUnique) {
			t.Fatalf("a missing table must be neither a lost race nor a unique violation: %v", err)
		}
	})
}

func TestValuesRoundTrip(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		if _, err := s.Exec(ctx,
			store.Stmt(`CREATE TABLE v (i INTEGER, f REAL, s TEXT, n TEXT)`),
			store.Stmt(`INSERT INTO v VALUES (?, ?, ?, ?)`, int64(9007199254740993), 1.5, "héllo ✓ \"q\"", nil),
		); err != nil {
			t.Fatal(err)
		}
		rows, err := s.Query(ctx, `SELECT i, f, s, n FROM v`)
		if err != nil {
			t.Fatal(err)
		}
		var i int64
		var f float64
		var str, n string
		if err := rows.Scan(0, &i, &f, &str, &n); err != nil {
			t.Fatal(err)
		}
		if i != 9007199254740993 || f != 1.5 || str != "héllo ✓ \"q\"" || n != "" {
			t.Fatalf("got %d %v %q %q", i, f, str, n)
		}
		if rows.Values[0][3] != nil {
			t.Fatalf("NULL came back as %#v", rows.Values[0][3])
		}
	})
}

func TestMigrateIsIdempotent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		// storetest.Open already migrated once.
		if err := store.Migrate(ctx, s, testNow); err != nil {
			t.Fatalf("second migrate: %v", err)
		}
		ms, err := store.Migrations()
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.Query(ctx, `SELECT name FROM schema_migrations ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		if rows.Len() != len(ms) {
			t.Fatalf("%d migrations recorded, %d embedded", rows.Len(), len(ms))
		}
		for i, m := range ms {
			var name string
			if err := rows.Scan(i, &name); err != nil {
				t.Fatal(err)
			}
			if name != m.Name {
				t.Fatalf("migration %d recorded as %q, want %q", i, name, m.Name)
			}
		}
	})
}
