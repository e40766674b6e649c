package run_test

import (
	"math"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestUsageIsAlwaysCounted: what a runner reports a session consumed is
// counted whatever became of the run. Reports are a running total, each
// figure the larger of what was recorded and what is reported (a repeat or
// a late, smaller report changes nothing); a finish merges its usage the
// same way; a run Core ended without its runner (swept silent) still
// counts the usage its runner's late finish carries (run.usage_recorded),
// as does a cancelled one. Numbers beyond their bounds are a 400 naming
// the field: a token count of 2^63 − 1 never reaches a sum.
func TestUsageIsAlwaysCounted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		w.newRun()
		l, _ := w.lease()
		id := l.Run.ID
		report := func(name string, u runproto.Usage, want []string) run.Run {
			t.Helper()
			var r run.Run
			w.expect(name, "", want, func() (err error) {
				r, err = w.svc.RecordUsage(w.ctx, w.runnerP.Actor, id, u)
				return err
			})
			return r
		}
		r := report("first report", runproto.Usage{InputTokens: 100, OutputTokens: 10, CostUSD: 0.01}, []string{"run.usage_recorded"})
		if r.Usage != (runproto.Usage{InputTokens: 100, OutputTokens: 10, CostUSD: 0.01}) || w.get(id).Usage != r.Usage {
			t.Fatalf("after the first report: %+v, stored %+v", r.Usage, w.get(id).Usage)
		}
		report("the same again", runproto.Usage{InputTokens: 100, OutputTokens: 10, CostUSD: 0.01}, nil)
		r = report("a late smaller one", runproto.Usage{InputTokens: 50, OutputTokens: 20, CostUSD: 0.005}, []string{"run.usage_recorded"})
		if r.Usage != (runproto.Usage{InputTokens: 100, OutputTokens: 20, CostUSD: 0.01}) {
			t.Fatalf("merged: %+v", r.Usage)
		}
		// The finish without usage keeps what was reported.
		fin, err := w.svc.Finish(w.ctx, w.runnerP.Actor, id, run.FinishInput{ExitStatus: ptr(137)})
		if err != nil || fin.Usage != r.Usage || w.get(id).Usage != r.Usage {
			t.Fatalf("finish after a report: %+v %v", fin, err)
		}
		// After the finish, a report still counts.
		if r = report("after the finish", runproto.Usage{InputTokens: 300, CostUSD: 0.03}, []string{"run.usage_recorded"}); r.Usage.CostUSD != 0.03 ||
			r.Status != run.StatusFailed {
			t.Fatalf("after the finish: %+v", r)
		}

		// A run swept silent: the runner's late finish still counts its
		// usage, and changes nothing else.
		w.newRun()
		l2, _ := w.lease()
		w.fc.Advance(grace + time.Second)
		if n, err := w.svc.SweepSilent(w.ctx); err != nil || n != 1 {
			t.Fatalf("sweep: %d %v", n, err)
		}
		swept := w.get(l2.Run.ID)
		late := runproto.Usage{InputTokens: 5000, OutputTokens: 700, CostUSD: 1.25}
		var got run.Run
		w.expect("late finish", "", []string{"run.usage_recorded"}, func() (err error) {
			got, err = w.svc.Finish(w.ctx, w.runnerP.Actor, l2.Run.ID, run.FinishInput{ExitStatus: ptr(0), Usage: &late})
			return err
		})
		if s := w.get(l2.Run.ID); got.Usage != late || s.Usage != late || s.Status != run.StatusInterrupted || s.Reason != run.ReasonRunnerLost || s.Error != swept.Error ||
			s.ExitStatus != nil {
			t.Fatalf("the late finish of a swept run: %+v, stored %+v", got, s)
		}

		// A queued run has no session: nothing to report.
		q := w.newRun()
		w.expect("queued", apperr.Conflict, nil, func() error {
			_, err := w.svc.RecordUsage(w.ctx, w.runnerP.Actor, q.ID, late)
			return err
		})

		// Bounds, named.
		for _, c := range []struct {
			u     runproto.Usage
			field string
		}{
			{runproto.Usage{InputTokens: math.MaxInt64}, "input_tokens"},
			{runproto.Usage{OutputTokens: 1_000_000_000_001}, "output_tokens"},
			{runproto.Usage{CacheReadTokens: -1}, "cache_read_tokens"},
			{runproto.Usage{CacheWriteTokens: math.MaxInt64}, "cache_write_tokens"},
			{runproto.Usage{CostUSD: 1_000_000.01}, "cost_usd"},
			{runproto.Usage{CostUSD: math.NaN()}, "cost_usd"},
			{runproto.Usage{CostUSD: math.Inf(1)}, "cost_usd"},
		} {
			w.expect(c.field, apperr.Invalid, nil, func() error {
				_, err := w.svc.RecordUsage(w.ctx, w.runnerP.Actor, id, c.u)
				if f := fieldOf(err); f != c.field {
					t.Errorf("usage %+v: field %q, want %q (%v)", c.u, f, c.field, err)
				}
				return err
			})
			w.expect("finish "+c.field, apperr.Invalid, nil, func() error {
				_, err := w.svc.Finish(w.ctx, w.runnerP.Actor, id, run.FinishInput{ExitStatus: ptr(0), Usage: &c.u})
				if f := fieldOf(err); f != "usage."+c.field {
					t.Errorf("finish usage %+v: field %q, want usage.%q (%v)", c.u, f, c.field, err)
				}
				return err
			})
		}
	})
}
