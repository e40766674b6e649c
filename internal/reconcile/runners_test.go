package reconcile_test

import (
	"testing"
	"time"

	"github.com/ballet/ballet/internal/reconcile"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// Rule 6: a runner not seen for longer than [runs] runner_retention that
// runs nothing is removed, with its event runner.removed, once; a runner
// that still holds a running run stays, and so does every runner while
// the retention is 0.
func TestRemovesRunnersGoneLongerThanTheRetention(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		const retention = 24 * time.Hour
		w := setup(t, s, reconcile.Config{RunnerRetention: retention})
		gone := w.NewRunner("gone")
		busy := w.ticket("task")
		w.drain()
		w.lease(busy) // the world's runner holds busy's run

		removed := func(when string, want int) {
			t.Helper()
			seq, before := w.seq(), w.metric(reconcile.RuleRemoved)
			rep, err := w.rec.Pass(t.Context())
			if err != nil || rep.Removed != want || w.events(seq)["runner.removed"] != want || w.metric(reconcile.RuleRemoved)-before != float64(want) {
				t.Fatalf("%s: removed %d runners (%v), events %v, want %d", when, rep.Removed, err, w.events(seq), want)
			}
		}
		w.clk.Advance(retention - time.Minute) // the world's clock started a moment before the runners registered
		removed("not gone long enough yet", 0)
		w.clk.Advance(2 * time.Minute)
		keep := w.reconciler(reconcile.Config{}) // retention 0: keeps every runner
		if rep, err := keep.Pass(t.Context()); err != nil || rep.Removed != 0 {
			t.Fatalf("a pass without a retention removed %d runners (%v)", rep.Removed, err)
		}
		removed("gone longer than the retention", 1)
		removed("once", 0)
		if n := w.count(`SELECT COUNT(*) FROM runners WHERE id = ?`, gone.ID); n != 0 {
			t.Fatalf("the gone runner is still listed")
		}
		if n := w.count(`SELECT COUNT(*) FROM runners WHERE id = ?`, w.runner.ID); n != 1 {
			t.Fatalf("the runner holding a running run was removed")
		}
	})
}
