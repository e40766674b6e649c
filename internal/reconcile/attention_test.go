package reconcile_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/reconcile"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestNoRunnerAttention: an agent stage whose run no runner leases is
// running, waiting for the run, and so never listed by ?status=waiting. Once
// the run has been queued for [runs] unclaimed_after (2m) on the flow
// engine's clock, the flow's JSON says "attention": "no_runner", the
// ?attention=no_runner listing has it, ballet_flows_attention counts it and
// the reconciler logs it and records flow.runner_missing — once, not at
// every pass. It all clears when a runner leases the run.
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
		if evs := w.events(seq); len(evs) != 1 || evs["flow.runner_missing"] != 1 {
			t.Fatalf("noting attention wrote events %v, want one flow.runner_missing", evs)
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

// TestNoRunnerAttentionAdapter: no_runner also comes at once, without
// waiting for unclaimed_after, while no live runner could lease the run —
// none alive (a heartbeat within [runs] grace, on the flow engine's clock)
// that neither drains nor has a problem and registered the stage's adapter
// (claude-code) — and goes when one comes. Runners come and go on the fake
// clock (their heartbeats are written at its time).
func TestNoRunnerAttentionAdapter(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, reconcile.Config{})
		w.Core.Flows.Clock = w.clk
		w.Core.Flows.UnclaimedAfter = time.Hour // only the new rule speaks
		key := w.ticket("task")
		w.drain()
		beat := func(id string) { // a heartbeat at the fake clock's time
			t.Helper()
			if _, err := s.Exec(t.Context(), store.Stmt(`UPDATE runners SET last_seen_at = ? WHERE id = ?`, w.clk.Now().UnixMilli(), id)); err != nil {
				t.Fatal(err)
			}
		}
		register := func(name string, adapters ...string) (token, id string) {
			t.Helper()
			var tk struct{ Token string }
			w.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": name, "kind": "runner"}).JSON(t, &tk)
			var list []any
			for _, a := range adapters {
				list = append(list, map[string]any{"name": a, "version": "1"})
			}
			var rn struct{ ID string }
			w.Must(201, tk.Token, "POST", "/api/v1/runners", map[string]any{"name": name, "adapters": list}).JSON(t, &rn)
			beat(rn.ID)
			return tk.Token, rn.ID
		}
		want := func(when, attention string) {
			t.Helper()
			var v struct{ Attention string }
			w.Admin(200, "GET", "/api/v1/items/"+key+"/flow", nil).JSON(t, &v)
			var l struct{ Flows []any }
			w.Admin(200, "GET", "/api/v1/projects/ACME/flows?attention=no_runner", nil).JSON(t, &l)
			if v.Attention != attention || (len(l.Flows) == 1) != (attention != "") {
				t.Fatalf("%s: attention %q, listed %d, want %q", when, v.Attention, len(l.Flows), attention)
			}
		}
		// The world's runner (both adapters) reports a problem.
		w.Must(200, w.runner.Token, "POST", "/api/v1/runners/"+w.runner.ID+"/heartbeat", map[string]any{"problem": "claude is not installed"})
		want("only a runner with a problem", "no_runner")
		register("oc", "opencode")
		want("only an opencode runner", "no_runner")
		ccToken, cc := register("cc", "claude-code")
		want("a claude-code runner came", "")
		w.clk.Advance(2*time.Minute + time.Millisecond) // [runs] grace
		want("the claude-code runner went silent", "no_runner")
		beat(cc)
		want("it came back", "")
		w.Must(200, ccToken, "POST", "/api/v1/runners/"+cc+"/heartbeat", map[string]any{"draining": true})
		want("it drains", "no_runner")
		w.Must(200, ccToken, "POST", "/api/v1/runners/"+cc+"/heartbeat", map[string]any{})
		want("it stopped draining", "")
	})
}

// TestRunnerMissingOncePerRun: flow.runner_missing is recorded once per run
// no runner takes — not at every pass, nor by another reconciler (another
// instance, or this one restarted) — and again when, after a runner took
// it, the flow waits in vain for its next run. The notifier tells the
// project's admins (runner.missing), not its members.
func TestRunnerMissingOncePerRun(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := setup(t, s, reconcile.Config{})
		w.Core.Flows.Clock = w.clk
		w.Admin(200, "PUT", "/api/v1/orgs/acme/members/carol", map[string]any{"role": "admin"})
		w.Admin(200, "PUT", "/api/v1/orgs/acme/members/alice", map[string]any{"role": "member"})
		key := w.ticket("task")
		w.drain()
		missing := func() int64 { return w.count(`SELECT COUNT(*) FROM events WHERE type = 'flow.runner_missing'`) }
		notified := func(who string) int64 {
			t.Helper()
			if _, err := w.Core.Notifier.Pass(t.Context()); err != nil {
				t.Fatal(err)
			}
			return w.count(`SELECT COUNT(*) FROM notifications WHERE recipient = ? AND cause = 'runner.missing'`, who)
		}
		w.pass()
		if got := missing(); got != 0 {
			t.Fatalf("%d flow.runner_missing before unclaimed_after", got)
		}
		w.clk.Advance(2 * time.Minute)
		// Recorded twice on one read (two instances at once): once.
		f := w.flow(key)
		if ok, err := w.Core.Flows.NoteRunnerMissing(t.Context(), f, key); !ok || err != nil {
			t.Fatalf("the first record: %v, %v", ok, err)
		}
		if ok, err := w.Core.Flows.NoteRunnerMissing(t.Context(), f, key); ok || err != nil {
			t.Fatalf("the second record on the same read: %v, %v; want none", ok, err)
		}
		for range 3 {
			w.pass()
			w.clk.Advance(time.Minute)
		}
		if _, err := w.reconciler(reconcile.Config{}).Pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := missing(); got != 1 {
			t.Fatalf("%d flow.runner_missing after two records and four passes of two reconcilers, want 1", got)
		}
		if c, a := notified("carol"), notified("alice"); c != 1 || a != 0 {
			t.Fatalf("runner.missing notifications: carol (admin) %d, alice (member) %d; want 1 and 0", c, a)
		}

		first := w.lease(key)
		w.pass()
		w.runner.Ask(first, "which way?", true)
		w.runner.Complete(first, "done", "asked")
		w.drain()
		w.answer(key)
		w.drain()
		if f := w.flow(key); f.RunID == "" || f.RunID == first.ID || f.Waiting != flow.WaitRun {
			t.Fatalf("after the answer: flow %s/%s run %q, want a new run waiting", f.Status, f.Waiting, f.RunID)
		}
		w.pass()
		w.clk.Advance(2 * time.Minute)
		w.pass()
		w.pass()
		if got := missing(); got != 2 {
			t.Fatalf("%d flow.runner_missing, want 2: one per run no runner took", got)
		}
		if c := notified("carol"); c != 2 {
			t.Errorf("carol has %d runner.missing notifications, want 2", c)
		}
	})
}
