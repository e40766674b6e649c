package reconcile_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/reconcile"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/storetest"
)

// TestNoRunnerAttention: an agent stage whose run no runner leases is
// running, waiting for the run, and so never listed by ?status=waiting. Once
// the run has been queued for [runs] unclaimed_after (2m) on the flow
// engine's clock, the flow's JSON says "attention": "no_runner", the
// ?attention=no_runner listing has it, ballet_flows_attention counts it and
// the reconciler logs it — once, not at every pass. It all clears when a
// runner leases the run.
func TestNoRunnerAttention(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, reconcile.Config{})
		w.Core.Flows.Clock = w.clk // runs are queued, and attention derived, on the fake clock
		key := w.ticket("task")
		w.drain() // stage implement: its run waits for a runner

		type view struct{ Ticket, Status, Waiting, Attention string }
		flowJSON := func() (view, string) {
			t.Helper()
			r := w.Admin(200, "GET", "/api/v1/items/"+key+"/flow", nil)
			var v view
			r.JSON(t, &v)
			return v, string(r.Body)
		}
		list := func(query string) []view {
			t.Helper()
			var l struct{ Flows []view }
			w.Admin(200, "GET", "/api/v1/projects/ACME/flows?"+query, nil).JSON(t, &l)
			return l.Flows
		}
		gauge := func() float64 {
			t.Helper()
			mfs, err := w.Core.Registry.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() == "ballet_flows_attention" {
					for _, m := range mf.GetMetric() {
						if m.GetLabel()[0].GetValue() == "no_runner" {
							return m.GetGauge().GetValue()
						}
					}
				}
			}
			t.Fatal(`no ballet_flows_attention{attention="no_runner"}`)
			return 0
		}
		logged := func() int { return strings.Count(w.logs.String(), "flow needs attention") }
		none := func(when string) {
			t.Helper()
			v, body := flowJSON()
			if v.Status != "running" || v.Waiting != "run" || strings.Contains(body, `"attention"`) {
				t.Fatalf("%s: flow %s", when, body)
			}
			if l := list("attention=no_runner"); len(l) != 0 {
				t.Fatalf("%s: ?attention=no_runner lists %v", when, l)
			}
			if g := gauge(); g != 0 {
				t.Fatalf("%s: ballet_flows_attention{attention=\"no_runner\"} = %v", when, g)
			}
		}

		w.clk.Advance(2*time.Minute - time.Millisecond)
		none("just before unclaimed_after")
		w.pass()
		if n := logged(); n != 0 {
			t.Fatalf("logged %d times before the flow needed attention", n)
		}

		w.clk.Advance(time.Millisecond)
		if v, body := flowJSON(); v.Attention != "no_runner" || v.Status != "running" || v.Waiting != "run" {
			t.Fatalf("after unclaimed_after: flow %s", body)
		}
		if l := list("attention=no_runner"); len(l) != 1 || l[0].Ticket != key || l[0].Attention != "no_runner" {
			t.Fatalf("?attention=no_runner lists %v", l)
		}
		if l := list("status=running"); len(l) != 1 || l[0].Attention != "no_runner" {
			t.Fatalf("?status=running lists %v", l)
		}
		if l := list("status=waiting"); len(l) != 0 {
			t.Fatalf("?status=waiting lists %v", l)
		}
		if g := gauge(); g != 1 {
			t.Fatalf("ballet_flows_attention{attention=\"no_runner\"} = %v, want 1", g)
		}
		seq := w.seq()
		for range 3 {
			w.pass()
			w.clk.Advance(time.Minute)
		}
		if n := logged(); n != 1 {
			t.Fatalf("three passes logged the flow needing attention %d times, want once:\n%s", n, w.logs)
		}
		if !strings.Contains(w.logs.String(), fmt.Sprintf("ticket=%s", key)) {
			t.Fatalf("the log line does not name the ticket:\n%s", w.logs)
		}
		if evs := w.events(seq); len(evs) != 0 {
			t.Fatalf("noting attention wrote events: %v", evs)
		}

		w.lease(key)
		if v, body := flowJSON(); v.Waiting != "run" || strings.Contains(body, `"attention"`) {
			t.Fatalf("after a runner leased the run: flow %s", body)
		}
		if l := list("attention=no_runner"); len(l) != 0 {
			t.Fatalf("after the lease, ?attention=no_runner lists %v", l)
		}
		if g := gauge(); g != 0 {
			t.Fatalf("after the lease, ballet_flows_attention{attention=\"no_runner\"} = %v", g)
		}
		w.pass()
		if n := logged(); n != 1 {
			t.Fatalf("logged %d times, want once", n)
		}

		r := w.Admin(400, "GET", "/api/v1/projects/ACME/flows?attention=lonely", nil)
		if !strings.Contains(string(r.Body), `"field":"attention"`) {
			t.Fatalf("?attention=lonely: %s", r.Body)
		}
	})
}
