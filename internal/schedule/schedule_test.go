package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/schedule"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

var start = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// The flow engine is the starter Core wires in.
var _ schedule.Starter = (*flow.Service)(nil)

// world is a whole Core over a real store (its job orchestrator does not
// run, so a started flow stays 'running' at its first stage) with an
// organization "acme", a project ACME on a repository, and a scheduler on
// a fake clock whose starter is the real flow.Service.
type world struct {
	*apitest.Env
	fc  *clock.Fake
	sch *schedule.Scheduler
	n   int
}

func newWorld(t *testing.T, s store.Store, cfg schedule.Config) *world {
	t.Helper()
	e := apitest.New(t, s)
	e.Org("acme")
	e.Project("acme", "ACME")
	fc := clock.NewFake(start)
	return &world{Env: e, fc: fc, sch: schedule.New(s, fc, nil, e.Core.Flows, cfg)}
}

// item creates an item in project and returns its key. Its created_at is
// set to w.n seconds after the epoch.
func (w *world) item(project, typ, state string, extra map[string]any) string {
	w.T.Helper()
	w.n++
	body := map[string]any{"type": typ, "title": fmt.Sprintf("item %d", w.n), "state": state}
	for k, v := range extra {
		body[k] = v
	}
	var it struct{ Key string }
	w.Admin(201, "POST", "/api/v1/projects/"+project+"/items", body).JSON(w.T, &it)
	// Items created within one millisecond would tie on created_at: make
	// the creation order exact.
	w.exec(`UPDATE items SET created_at = ? WHERE key = ?`, int64(w.n)*1000, it.Key)
	return it.Key
}

// ready creates a ready task in project.
func (w *world) ready(project string) string { return w.item(project, "task", "ready", nil) }

// move changes an item's state as a user.
func (w *world) move(key, state string) {
	w.T.Helper()
	var it struct{ Version int64 }
	w.Admin(200, "GET", "/api/v1/items/"+key, nil).JSON(w.T, &it)
	w.Admin(200, "PATCH", "/api/v1/items/"+key, map[string]any{"version": it.Version, "state": state})
}

// patchProject changes project settings.
func (w *world) patchProject(key string, body map[string]any) {
	w.T.Helper()
	var p struct{ Version int64 }
	w.Admin(200, "GET", "/api/v1/projects/"+key, nil).JSON(w.T, &p)
	body["version"] = p.Version
	w.Admin(200, "PATCH", "/api/v1/projects/"+key, body)
}

// setPlatformLimit sets the platform row's concurrency_limit.
func (w *world) setPlatformLimit(n int) {
	w.T.Helper()
	var p struct{ Version int64 }
	w.Admin(200, "GET", "/api/v1/platform", nil).JSON(w.T, &p)
	w.Admin(200, "PATCH", "/api/v1/platform", map[string]any{"version": p.Version, "concurrency_limit": n})
}

// flows counts the flows of an item (every flow ever started).
func (w *world) flows(key string) int {
	w.T.Helper()
	rows, err := w.Store.Query(context.Background(), `SELECT COUNT(*) FROM flows f JOIN items i ON i.id = f.item_id WHERE i.key = ?`, key)
	if err != nil {
		w.T.Fatal(err)
	}
	var n int
	if err := rows.Scan(0, &n); err != nil {
		w.T.Fatal(err)
	}
	return n
}

// exec runs SQL on the store: tests put flows into states that otherwise
// take runs and forges to reach.
func (w *world) exec(sql string, args ...any) {
	w.T.Helper()
	if _, err := w.Store.Exec(context.Background(), store.Stmt(sql, args...)); err != nil {
		w.T.Fatal(err)
	}
}

// setFlow puts the item's active flow into a status: ('waiting',
// 'approval') does not occupy a slot, ('running', 'checks') does, and a
// terminal status frees it.
func (w *world) setFlow(key, status, waiting string) {
	w.T.Helper()
	var wait any
	if waiting != "" {
		wait = waiting
	}
	w.exec(`UPDATE flows SET status = ?, waiting = ?, version = version + 1
WHERE status IN ('running', 'waiting') AND item_id = (SELECT id FROM items WHERE key = ?)`, status, wait, key)
}

// pass runs one pass and fails the test on errors.
func (w *world) pass() schedule.Result {
	w.T.Helper()
	res, err := w.sch.Pass(context.Background())
	if err != nil {
		w.T.Fatal(err)
	}
	if len(res.Errors) > 0 {
		w.T.Fatalf("pass: %v", res.Errors)
	}
	return res
}

// expect runs a pass and checks which tickets it started, in order (and
// that it tried no other: alone, a scheduler has no conflicts).
func (w *world) expect(want ...string) {
	w.T.Helper()
	res := w.pass()
	if !slices.Equal(res.Started, want) || res.Conflicts != 0 {
		w.T.Fatalf("pass started %v with %d conflicts, want %v", res.Started, res.Conflicts, want)
	}
}

func TestRunnable(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, schedule.Config{})
		w.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "NOREPO", "name": "No repository"})
		w.Project("acme", "PAUSED")
		w.patchProject("PAUSED", map[string]any{"paused": true})

		backlog := w.item("ACME", "task", "backlog", nil)
		epic := w.item("ACME", "epic", "ready", nil)
		noRepo := w.ready("NOREPO")
		paused := w.ready("PAUSED")
		cancelled := w.ready("ACME")
		w.move(cancelled, "cancelled")
		w.expect()

		ok := w.ready("ACME")
		w.expect(ok)
		w.expect() // in progress now: not again

		// Paused and made ready again while its flow has not stopped yet:
		// it waits for the flow to end, then starts a second one.
		w.move(ok, "paused")
		w.move(ok, "ready")
		w.expect()
		w.setFlow(ok, "stopped", "")
		w.expect(ok)
		if n := w.flows(ok); n != 2 {
			t.Fatalf("%s has %d flows, want 2", ok, n)
		}

		w.move(backlog, "ready")
		w.patchProject("NOREPO", map[string]any{"repository": map[string]any{"forge": "git", "url": "/srv/git/norepo.git"}})
		w.patchProject("PAUSED", map[string]any{"paused": false})
		w.expect(backlog, noRepo, paused)
		for _, k := range []string{epic, cancelled} {
			if n := w.flows(k); n != 0 {
				t.Errorf("%s has %d flows, want none", k, n)
			}
		}

		// The kill switch: nothing starts.
		w.Admin(200, "POST", "/api/v1/platform/pause", nil)
		later := w.ready("ACME")
		if res := w.pass(); !res.Paused || len(res.Started) > 0 {
			t.Fatalf("paused platform: pass %+v", res)
		}
		w.Admin(200, "POST", "/api/v1/platform/resume", nil)
		w.expect(later)
	})
}

func TestBlockers(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, schedule.Config{})
		w.Project("acme", "OTHER")
		block := func(item, blocker string) {
			w.Admin(201, "POST", "/api/v1/items/"+item+"/blockers/"+blocker, nil)
		}

		// Blocked by an open ticket (of another project) until it is cancelled.
		blocker := w.item("OTHER", "task", "backlog", nil)
		blocked := w.ready("ACME")
		block(blocked, blocker)
		w.expect()
		w.move(blocker, "cancelled")
		w.expect(blocked)

		// Blocked through its epic: the epic's blocker is an epic that is
		// in progress, then done.
		gate := w.item("OTHER", "epic", "ready", nil)
		w.move(gate, "in_progress")
		epic := w.item("ACME", "epic", "ready", nil)
		child := w.item("ACME", "task", "ready", map[string]any{"epic": epic})
		block(epic, gate)
		w.expect()
		w.move(gate, "done")
		w.expect(child)

		// A done blocker does not block; removing an open blocker unblocks.
		open := w.item("OTHER", "task", "ready", nil)
		two := w.ready("ACME")
		block(two, gate)
		block(two, open)
		w.expect(open) // the blocker itself is runnable, the blocked one is not
		w.Admin(204, "DELETE", "/api/v1/items/"+two+"/blockers/"+open, nil)
		w.expect(two)
	})
}

func TestOldestFirst(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, schedule.Config{PlatformLimit: 1})
		w.Project("acme", "OTHER")
		a, b, c := w.ready("ACME"), w.ready("OTHER"), w.ready("ACME")
		// Created in the order c, b, a; d shares a's time and comes after it
		// by number.
		d := w.ready("ACME")
		for key, at := range map[string]int64{c: 1000, b: 2000, a: 3000, d: 3000} {
			w.exec(`UPDATE items SET created_at = ? WHERE key = ?`, at, key)
		}
		for _, want := range []string{c, b, a, d} {
			w.expect(want)
			w.expect() // the one slot is taken
			w.setFlow(want, "done", "")
		}
	})
}

// TestProviderWaitFreesItsSlot: a flow waiting for the provider (a rate
// limit on its stage's credential) holds no slot: other work starts.
func TestProviderWaitFreesItsSlot(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, schedule.Config{})
		w.patchProject("ACME", map[string]any{"concurrency_limit": 1})
		a1, a2 := w.ready("ACME"), w.ready("ACME")
		w.expect(a1)
		w.expect()
		w.setFlow(a1, "waiting", "provider")
		w.expect(a2)
		w.expect()
	})
}

func TestLimits(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, schedule.Config{PlatformLimit: 3})
		w.Project("acme", "OTHER")
		w.patchProject("ACME", map[string]any{"concurrency_limit": 2})
		a1, a2, a3, a4 := w.ready("ACME"), w.ready("ACME"), w.ready("ACME"), w.ready("ACME")
		o1, o2, o3 := w.ready("OTHER"), w.ready("OTHER"), w.ready("OTHER")

		// ACME takes 2 (its limit), OTHER the third platform slot.
		w.expect(a1, a2, o1)
		w.expect()

		// A flow waiting for a human frees its slot; one waiting for checks
		// does not.
		w.setFlow(a1, "waiting", "approval")
		w.setFlow(a2, "running", "checks")
		w.expect(a3) // ACME 2 of 2 (a2, a3); platform 3 of 3 (a2, a3, o1)
		w.setFlow(o1, "waiting", "review")
		w.expect(o2) // ACME is full: OTHER takes the platform slot
		w.setFlow(o2, "waiting", "answer")
		w.expect(o3) // platform 3 of 3 (a2, a3, o3)

		// The platform row's limit wins over the configured one.
		o4 := w.ready("OTHER")
		w.expect()
		w.setPlatformLimit(5)
		w.expect(o4) // platform 4 of 5; ACME still full
		w.setPlatformLimit(1)
		w.setFlow(a2, "done", "")
		w.expect() // platform 3 of 1 (a3, o3, o4), though ACME has a slot for a4
		w.setFlow(a3, "failed", "")
		w.setFlow(o3, "stopped", "")
		w.setFlow(o4, "done", "")
		w.expect(a4)
		w.expect()
	})
}

// run starts the scheduler's loop until the test ends.
func (w *world) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.sch.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); apitest.Receive(t, done, "the scheduler to stop") })
}

// TestLoop: Run passes at once, then at once on a nudge, and otherwise only
// when the interval has passed on its clock. The starter records the fake
// time of each start and the metrics count the passes, so a pass that ran
// before the interval (or any extra pass) shows.
func TestLoop(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, schedule.Config{})
		type started struct {
			key string
			at  time.Time
		}
		starts := make(chan started, 16)
		reg := prometheus.NewRegistry()
		w.sch = schedule.New(s, w.fc, nil, schedule.StarterFunc(func(ctx context.Context, actor event.Actor, ref string) (flow.Flow, error) {
			it, err := w.Core.Tracker.FindItem(ctx, ref)
			if err != nil {
				return flow.Flow{}, err
			}
			starts <- started{it.Key, w.fc.Now()}
			return w.Core.Flows.Start(ctx, actor, ref)
		}), schedule.Config{Interval: time.Minute, Metrics: schedule.NewMetrics(reg)})
		expectStart := func(what, key string, at time.Time) {
			t.Helper()
			select {
			case got := <-starts:
				if got.key != key || !got.at.Equal(at) {
					t.Fatalf("%s started %s at %v, want %s at %v", what, got.key, got.at, key, at)
				}
			case <-time.After(apitest.HangGuard):
				t.Fatalf("%s started nothing", what)
			}
		}

		first := w.ready("ACME")
		w.run(t)
		expectStart("the first pass", first, start)

		// A nudge runs a pass at once, without the clock moving.
		nudged := w.ready("ACME")
		w.sch.Nudge()
		expectStart("the nudged pass", nudged, start)

		// Without a nudge, nothing starts until the interval passes: the
		// ticket made ready while the loop sleeps is started by the pass
		// that the clock wakes, at +1m.
		apitest.BlockUntil(t, w.fc, 1) // the nudged pass is over; the loop sleeps
		polled := w.ready("ACME")
		w.fc.Advance(time.Minute)
		expectStart("the interval pass", polled, start.Add(time.Minute))
		apitest.BlockUntil(t, w.fc, 1) // that pass is over; the loop sleeps again
		if n := metrics(t, reg)["ballet_scheduler_pass_seconds"]; n != 3 {
			t.Fatalf("%v passes, want 3: at start, on the nudge, at the interval", n)
		}
		for _, k := range []string{first, nudged, polled} {
			if n := w.flows(k); n != 1 {
				t.Fatalf("%s has %d flows, want 1", k, n)
			}
		}

		// Nudges coalesce and never block.
		for range 100 {
			w.sch.Nudge()
		}
	})
}

func TestTwoSchedulersStartEachTicketOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, schedule.Config{})
		other := apitest.New(t, s) // a second Core instance on the same database
		var keys []string
		for range 12 {
			keys = append(keys, w.ready("ACME"))
		}
		schedulers := []*schedule.Scheduler{w.sch, schedule.New(s, w.fc, nil, other.Core.Flows, schedule.Config{})}
		var started, conflicts atomic.Int64
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				for range 3 {
					res, err := schedulers[i%2].Pass(context.Background())
					if err != nil || len(res.Errors) > 0 {
						t.Errorf("pass: %v %v", err, res.Errors)
						return
					}
					started.Add(int64(len(res.Started)))
					conflicts.Add(int64(res.Conflicts))
				}
			})
		}
		wg.Wait()
		if started.Load() != int64(len(keys)) {
			t.Errorf("started %d times, want %d", started.Load(), len(keys))
		}
		for _, k := range keys {
			if n := w.flows(k); n != 1 {
				t.Errorf("%s has %d flows, want 1", k, n)
			}
		}
		t.Logf("conflicts skipped: %d", conflicts.Load())
	})
}

func TestSkippedStarts(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, schedule.Config{})
		w.patchProject("ACME", map[string]any{"concurrency_limit": 1})
		taken, broken, next := w.ready("ACME"), w.ready("ACME"), w.ready("ACME")
		person := event.Actor{Kind: event.ActorHuman, Sub: "alice"}
		var calls []string
		sch := schedule.New(s, w.fc, nil, schedule.StarterFunc(func(ctx context.Context, actor event.Actor, ref string) (flow.Flow, error) {
			it, err := w.Core.Tracker.FindItem(ctx, ref)
			if err != nil {
				return flow.Flow{}, err
			}
			calls = append(calls, it.Key)
			switch it.Key {
			case taken: // a person starts it between the pass's read and its start …
				if _, err := w.Core.Flows.Start(ctx, person, ref); err != nil {
					return flow.Flow{}, err
				}
				_, err := w.Core.Flows.Start(ctx, actor, ref) // … so this one conflicts
				return flow.Flow{}, err
			case broken:
				return flow.Flow{}, errors.New("the pipeline cannot be resolved")
			}
			return w.Core.Flows.Start(ctx, actor, ref)
		}), schedule.Config{})

		// taken conflicts and occupies the project's one slot: the pass
		// reads again and finds no slot.
		res, err := sch.Pass(context.Background())
		if err != nil || res.Conflicts != 1 || len(res.Started) != 0 || len(res.Errors) != 0 {
			t.Fatalf("pass: %+v, %v", res, err)
		}
		// Free the slot: broken fails, and does not hold back next.
		w.setFlow(taken, "done", "")
		res, err = sch.Pass(context.Background())
		if err != nil || res.Conflicts != 0 || !slices.Equal(res.Started, []string{next}) || len(res.Errors) != 1 {
			t.Fatalf("pass: %+v, %v", res, err)
		}
		if want := []string{taken, broken, next}; !slices.Equal(calls, want) {
			t.Fatalf("starter calls %v, want %v", calls, want)
		}
		if w.flows(taken) != 1 || w.flows(broken) != 0 || w.flows(next) != 1 {
			t.Fatalf("flows: taken %d, broken %d, next %d", w.flows(taken), w.flows(broken), w.flows(next))
		}
	})
}

func TestWakes(t *testing.T) {
	for _, typ := range []string{"ticket.state_changed", "epic.state_changed", "ticket.created", "ticket.updated",
		"ticket.blocker_removed", "epic.blocker_removed", "project.updated", "platform.resumed", "platform.updated",
		"flow.done", "flow.failed", "flow.stopped", "flow.waiting", "flow.stuck", "flow.stage_started"} {
		if !schedule.Wakes(typ) {
			t.Errorf("Wakes(%q) = false", typ)
		}
	}
	for _, typ := range []string{"ticket.blocker_added", "epic.created", "epic.updated", "run.created", "question.asked",
		"project.created", "token.created", "pipeline.published", "flowers",
		"flow.started", "flow.stage_finished", "flow.resumed"} { // these never free a slot
		if schedule.Wakes(typ) {
			t.Errorf("Wakes(%q) = true", typ)
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		reg := prometheus.NewRegistry()
		w := newWorld(t, s, schedule.Config{Metrics: schedule.NewMetrics(reg)})
		w.ready("ACME")
		w.ready("ACME")
		w.pass()
		w.pass()
		if got := metrics(t, reg); got["ballet_scheduler_starts_total"] != 2 || got["ballet_scheduler_pass_seconds"] != 2 {
			t.Fatalf("metrics %v", got)
		}
	})
}

// metrics returns each counter's value and each histogram's sample count
// by name.
func metrics(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				got[mf.GetName()] = c.GetValue()
			}
			if h := m.GetHistogram(); h != nil {
				got[mf.GetName()] = float64(h.GetSampleCount())
			}
		}
	}
	return got
}
