package knowledge_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/knowledge"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// BenchmarkSave: saves per second, one writer after the other on distinct
// entries (each save: guarded update, version row, index update, event).
func BenchmarkSave(b *testing.B) {
	for _, engine := range storetest.Engines {
		b.Run(engine, func(b *testing.B) {
			s := storetest.OpenWith(b, engine, knowledge.Migrations)
			k := knowledge.New(s, nil)
			seed(b, k, "acme", 0, 100)
			ctx := context.Background()
			versions := make([]int64, 100)
			for i := range versions {
				versions[i] = 1
			}
			i := 0
			start := time.Now()
			for b.Loop() {
				n := i % 100
				in := corpusEntry(n + 1000*(i/100+1))
				e, err := k.Save(ctx, ann, "acme", "default", fmt.Sprintf("notes/%05d", n), versions[n], in.Content)
				if err != nil {
					b.Fatal(err)
				}
				versions[n] = e.Version
				i++
			}
			b.ReportMetric(float64(i)/time.Since(start).Seconds(), "saves/s")
		})
	}
}

// BenchmarkSearch: search latency percentiles over a corpus of 10,000 and
// 100,000 entries, the default limit of 20, for two kinds of two-word
// queries: "common" (two of the team's frequent words: thousands of
// matches to rank) and "mixed" (a frequent word and a rarer one); and the
// search index's bytes per entry.
func BenchmarkSearch(b *testing.B) {
	for _, c := range []struct {
		engine string
		n      int
	}{{"sqlite", 10_000}, {"sqlite", 100_000}, {"rqlite", 10_000}} {
		b.Run(fmt.Sprintf("%s/%d", c.engine, c.n), func(b *testing.B) {
			s := storetest.OpenWith(b, c.engine, knowledge.Migrations)
			k := knowledge.New(s, nil)
			seed(b, k, "acme", 0, c.n)
			ctx := context.Background()
			for _, kind := range []string{"common", "mixed"} {
				b.Run(kind, func(b *testing.B) {
					var took []time.Duration
					i := 0
					for b.Loop() {
						q := vocabulary[i%len(words)] + " " + vocabulary[(i*7+3)%len(words)]
						if kind == "mixed" {
							q = vocabulary[i%len(words)] + " " + vocabulary[len(words)+(i*37)%1000]
						}
						t := time.Now()
						if _, err := k.Search(ctx, "acme", knowledge.Query{Text: q}); err != nil {
							b.Fatal(err)
						}
						took = append(took, time.Since(t))
						i++
					}
					slices.Sort(took)
					b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
					b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
				})
			}
			if c.engine == "sqlite" {
				b.Run("index", func(b *testing.B) {
					for b.Loop() {
					}
					b.ReportMetric(indexBytes(b, s)/float64(c.n), "index-B/entry")
					b.ReportMetric(fileBytes(b, s)/float64(c.n), "db-B/entry")
				})
			}
		})
	}
}

// fileBytes is the size of the whole database (SQLite's dbstat).
func fileBytes(b *testing.B, s store.Store) float64 {
	rows, err := s.Query(context.Background(), `SELECT COALESCE(SUM(pgsize), 0) FROM dbstat`)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	if err := rows.Scan(0, &n); err != nil {
		b.Fatal(err)
	}
	return float64(n)
}

// indexBytes is the size of the search index's tables (SQLite's dbstat).
func indexBytes(b *testing.B, s store.Store) float64 {
	rows, err := s.Query(context.Background(), `SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name LIKE 'entry_search%'`)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	if err := rows.Scan(0, &n); err != nil {
		b.Fatal(err)
	}
	return float64(n)
}
