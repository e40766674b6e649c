package job_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/hang"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// TestMetricsCountEveryResult: ballet_jobs_total counts each finished run
// by kind and result (done, retry, dead, snooze), ballet_job_duration_seconds
// observes every run, and ballet_jobs_running follows the handlers. (A
// handler's run is counted before Running drops: the waits below rely on
// it.)
func TestMetricsCountEveryResult(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, job.Config{})
		reg := prometheus.NewRegistry()
		w.o = job.NewOrchestrator(s, w.fc, slog.New(slog.NewTextHandler(io.Discard, nil)), job.Config{Poll: time.Second}, "test-1", job.NewMetrics(reg))
		w.a.Subscribe(transition.WakeOnJobs(w.o.Notify))
		started, hold := make(chan struct{}), make(chan struct{})
		var flaky, poll atomic.Int32
		w.o.Handle("hold", func(ctx context.Context, _ *job.Job) error {
			close(started)
			select {
			case <-hold:
			case <-ctx.Done(): // the test failed and stops
			}
			return nil
		})
		w.o.Handle("ok", func(context.Context, *job.Job) error { return nil })
		w.o.Handle("bad", func(context.Context, *job.Job) error { return job.Permanent(errors.New("bad input")) })
		w.o.Handle("flaky", func(context.Context, *job.Job) error {
			if flaky.Add(1) == 1 {
				return errors.New("try again")
			}
			return nil
		})
		w.o.Handle("poll", func(context.Context, *job.Job) error {
			if poll.Add(1) == 1 {
				return job.Snooze(time.Minute)
			}
			return nil
		})
		w.run(t, w.o)
		w.settle(t)

		w.enqueue(t, job.Spec{Kind: "hold"})
		hang.Recv(t, started, "the handler started")
		if n := gauge(t, reg, "ballet_jobs_running"); n != 1 { // set before the handler starts
			t.Fatalf("ballet_jobs_running %v while a handler runs, want 1", n)
		}
		close(hold)
		hang.WaitFor(t, "ballet_jobs_running 0 once it returned", func() bool { return gauge(t, reg, "ballet_jobs_running") == 0 })

		w.enqueue(t, job.Spec{Kind: "ok"}, job.Spec{Kind: "bad"}, job.Spec{Kind: "flaky"}, job.Spec{Kind: "poll"})
		hang.WaitFor(t, "the first runs recorded", func() bool {
			return w.jobs(t, "ok")[0].status == job.StatusDone && w.jobs(t, "bad")[0].status == job.StatusDead &&
				w.jobs(t, "flaky")[0].status == job.StatusPending && w.jobs(t, "flaky")[0].attempt == 1 &&
				w.jobs(t, "poll")[0].status == job.StatusPending && poll.Load() == 1 && w.o.Running() == 0
		})
		w.settle(t)
		w.advance(time.Minute) // past the retry's backoff (2 s) and the snooze
		hang.WaitFor(t, "the second runs done", func() bool {
			return w.jobs(t, "flaky")[0].status == job.StatusDone && w.jobs(t, "poll")[0].status == job.StatusDone && w.o.Running() == 0
		})
		hang.WaitFor(t, "ballet_jobs_running 0", func() bool { return gauge(t, reg, "ballet_jobs_running") == 0 })

		for _, c := range []struct {
			kind, result string
			want         float64
		}{
			{"hold", "done", 1}, {"ok", "done", 1}, {"bad", "dead", 1}, {"bad", "done", 0},
			{"flaky", "retry", 1}, {"flaky", "done", 1}, {"poll", "snooze", 1}, {"poll", "done", 1}, {"poll", "retry", 0},
		} {
			if n := counted(t, reg, c.kind, c.result); n != c.want {
				t.Errorf("ballet_jobs_total{kind=%q,result=%q} = %v, want %v", c.kind, c.result, n, c.want)
			}
		}
		for kind, want := range map[string]uint64{"hold": 1, "ok": 1, "bad": 1, "flaky": 2, "poll": 2} {
			if n := observed(t, reg, kind); n != want {
				t.Errorf("ballet_job_duration_seconds{kind=%q} has %d observations, want %d", kind, n, want)
			}
		}
	})
}

// gauge returns the value of an unlabelled gauge in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// observed returns how many runs of kind ballet_job_duration_seconds holds.
func observed(t *testing.T, reg *prometheus.Registry, kind string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ballet_job_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}
