package store_test

import (
	"context"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestMigrationsKeepColumnsAndIndexes applies Core's migrations one at a
// time and checks that none loses a column or an index of a table that
// outlives it, unless it says so (DROP INDEX, DROP COLUMN, DROP TABLE
// without creating the table again). A migration that rebuilds a table
// (SQLite cannot change a CHECK constraint) copies a fixed list of
// columns: a column an earlier migration added, forgotten in that list,
// would be dropped with its data.
func TestMigrationsKeepColumnsAndIndexes(t *testing.T) {
	// An empty set: the store starts without Core's schema.
	storetest.EachWith(t, store.MigrationSet{FS: fstest.MapFS{}}, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		names, err := fs.Glob(store.CoreMigrations.FS, "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		files := fstest.MapFS{}
		var before schema
		for _, n := range names {
			b, err := fs.ReadFile(store.CoreMigrations.FS, n)
			if err != nil {
				t.Fatal(err)
			}
			files[n] = &fstest.MapFile{Data: b}
			if err := (store.MigrationSet{FS: files}).Apply(ctx, s, time.Now()); err != nil {
				t.Fatalf("apply %s: %v", n, err)
			}
			after := readSchema(t, s)
			src := strings.ToLower(string(b))
			for table, cols := range before.columns {
				now, kept := after.columns[table]
				if !kept {
					if !strings.Contains(src, "drop table "+table) {
						t.Errorf("%s: table %s is gone without a DROP TABLE", n, table)
					}
					continue
				}
				for _, c := range cols {
					if !slices.Contains(now, c) && !regexp.MustCompile(`drop column\s+`+c+`\b`).MatchString(src) {
						t.Errorf("%s: table %s lost its column %s (a rebuild that does not copy it?)", n, table, c)
					}
				}
			}
			for idx, table := range before.indexes {
				if _, ok := after.indexes[idx]; !ok && after.columns[table] != nil && !strings.Contains(src, "drop index "+idx) {
					t.Errorf("%s: table %s lost its index %s (a rebuild that does not create it again?)", n, table, idx)
				}
			}
			before = after
		}
	})
}

// schema is the tables' columns and the named indexes (by table) of a
// database.
type schema struct {
	columns map[string][]string
	indexes map[string]string
}

func readSchema(t *testing.T, s store.Store) schema {
	t.Helper()
	ctx := context.Background()
	sc := schema{columns: map[string][]string{}, indexes: map[string]string{}}
	rows, err := s.Query(ctx, `SELECT type, name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index') AND sql IS NOT NULL AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for i := range rows.Len() {
		var typ, name, table string
		if err := rows.Scan(i, &typ, &name, &table); err != nil {
			t.Fatal(err)
		}
		if typ == "index" {
			sc.indexes[name] = table
		} else {
			tables = append(tables, name)
		}
	}
	for _, table := range tables {
		cols, err := s.Query(ctx, `SELECT name FROM pragma_table_info(?)`, table)
		if err != nil {
			t.Fatal(err)
		}
		for i := range cols.Len() {
			var c string
			if err := cols.Scan(i, &c); err != nil {
				t.Fatal(err)
			}
			sc.columns[table] = append(sc.columns[table], strings.ToLower(c))
		}
	}
	return sc
}
