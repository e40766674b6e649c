package retention_test

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/retention"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// BenchmarkSweep measures how fast a sweep deletes on SQLite — 20,000
// finished jobs and 200 old runs' logs of 100 chunks (20,000 chunks) —
// in batches of DefaultBatch, while a writer commits one small row after
// another; it reports rows deleted per second and the writer's longest
// commit meanwhile. BALLET_RETENTION_BATCH sets another batch size.
func BenchmarkSweep(b *testing.B) {
	const jobs, runs, chunks = 20000, 200, 100
	benchBatch, _ := strconv.Atoi(os.Getenv("BALLET_RETENTION_BATCH")) // 0: DefaultBatch
	for range b.N {
		b.StopTimer()
		s := storetest.Open(b, "sqlite")
		w := seed(b, s)
		for i := range jobs {
			w.job(fmt.Sprintf("jb-%d", i), "done", now.Add(-jobsKept-time.Hour))
			if len(w.batch) == 1000 {
				w.write()
			}
		}
		for i := range runs {
			w.run(fmt.Sprintf("rb-%d", i), at(now.Add(-logsKept-time.Hour)), chunks)
			w.write()
		}
		w.write()
		r := retention.New(s, w.clk, nil, w.runs, retention.Config{RunLogs: logsKept, Jobs: jobsKept, MaxBatches: 1 << 20, Batch: benchBatch})
		stop := make(chan struct{})
		var worst atomic.Int64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				if _, err := s.Exec(b.Context(), store.Stmt(`INSERT INTO jobs (id, kind, payload, status, run_at, attempt, max_attempts,
created_at, updated_at) VALUES (?, 'bench.write', '{}', 'pending', 0, 0, 1, 0, 0)`, fmt.Sprintf("w-%d", i))); err != nil {
					b.Error(err)
					return
				}
				if d := time.Since(start).Nanoseconds(); d > worst.Load() {
					worst.Store(d)
				}
			}
		}()
		b.StartTimer()
		start := time.Now()
		rep, more, err := r.Sweep(b.Context())
		took := time.Since(start)
		b.StopTimer()
		close(stop)
		wg.Wait()
		if err != nil || more || rep[retention.KindJobs] < jobs || rep[retention.KindRunLogs] < runs*chunks {
			b.Fatalf("sweep: %v, more %v, %v", rep, more, err)
		}
		n := rep[retention.KindJobs] + rep[retention.KindRunLogs]
		b.ReportMetric(float64(n)/took.Seconds(), "rows/s")
		b.ReportMetric(float64(worst.Load())/1e6, "max-write-ms")
	}
}
