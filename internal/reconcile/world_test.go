package reconcile_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/reconcile"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/tracker"
)

// world is a whole Core over a real store whose orchestrator does not run:
// the test runs the flow engine's jobs itself (drain), breaks things with
// SQL and runs reconciler passes on a fake clock.
type world struct {
	*apitest.Env
	t        *testing.T
	s        store.Store
	clk      *clock.Fake
	reg      *prometheus.Registry
	metrics  *reconcile.Metrics
	logs     *syncBuffer
	rec      *reconcile.Reconciler
	handlers registry
	runner   *apitest.Runner
	n        int
}

// registry collects the flow engine's job handlers.
type registry map[string]job.Handler

func (r registry) Handle(kind string, h job.Handler) { r[kind] = h }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

const slack = 5 * time.Minute

// setup builds the world: org acme, project ACME (plain git), the
// template pipeline for tasks and a merge-only pipeline for bugs, a runner,
// and a reconciler. Every reconciler of the world records into one set of
// metrics.
func setup(t *testing.T, s store.Store, cfg reconcile.Config) *world {
	t.Helper()
	e := apitest.New(t, s)
	w := &world{Env: e, t: t, s: s, clk: clock.NewFake(time.Now()), reg: prometheus.NewRegistry(), logs: &syncBuffer{}, handlers: registry{}}
	e.Core.Flows.Register(w.handlers)
	e.Org("acme")
	e.Project("acme", "ACME")
	e.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/bug", map[string]any{"version": 0, "definition": map[string]any{
		"stages": []any{map[string]any{"id": "integrate", "kind": "platform", "action": "merge"}}}})
	w.runner = e.NewRunner("r1")
	w.metrics = reconcile.NewMetrics(w.reg)
	w.rec = w.reconciler(cfg)
	return w
}

// reconciler returns another reconciler on the world (slack defaults to
// the tests' slack).
func (w *world) reconciler(cfg reconcile.Config) *reconcile.Reconciler {
	if cfg.Slack == 0 {
		cfg.Slack = slack
	}
	cfg.Metrics = w.metrics
	log := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return reconcile.New(w.s, w.clk, log, w.Core.Flows, w.Core.Runs, cfg)
}

// ticket creates a ready ticket of a type and starts its flow (the enter
// job is pending; nothing ran yet). It returns the ticket's key.
func (w *world) ticket(typ string) string {
	w.t.Helper()
	w.n++
	var it struct{ Key string }
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": typ, "title": fmt.Sprintf("ticket %d", w.n),
		"acceptance_criteria": "it works", "state": "ready"}).JSON(w.t, &it)
	w.Admin(200, "POST", "/api/v1/items/"+it.Key+"/flow/start", nil)
	return it.Key
}

// drain runs every due pending job of the given kinds (default: the flow
// steps that need no forge) through the flow engine's handlers, as the
// orchestrator would, until none is left.
func (w *world) drain(kinds ...string) {
	w.t.Helper()
	if len(kinds) == 0 {
		kinds = []string{flow.JobEnter, "flow.run_finished", flow.JobResume, flow.JobStop}
	}
	ctx := context.Background()
	for {
		q := `SELECT id, kind, payload, max_attempts, COALESCE(dedupe_key, '') FROM jobs WHERE status = 'pending' AND run_at <= ? AND kind IN (?`
		args := []any{time.Now().Add(time.Second).UnixMilli(), kinds[0]}
		for _, k := range kinds[1:] {
			q += ", ?"
			args = append(args, k)
		}
		rows, err := w.s.Query(ctx, q+`) ORDER BY created_at, id LIMIT 1`, args...)
		if err != nil {
			w.t.Fatal(err)
		}
		if rows.Len() == 0 {
			return
		}
		j := &job.Job{Attempt: 1}
		var payload string
		if err := rows.Scan(0, &j.ID, &j.Kind, &payload, &j.MaxAttempts, &j.DedupeKey); err != nil {
			w.t.Fatal(err)
		}
		j.Payload = []byte(payload)
		w.exec(`UPDATE jobs SET status = 'running', attempt = 1 WHERE id = ?`, j.ID)
		if err := w.handlers[j.Kind](ctx, j); err != nil {
			w.t.Fatalf("%s %s: %v", j.Kind, payload, err)
		}
		w.exec(`UPDATE jobs SET status = 'done' WHERE id = ?`, j.ID)
	}
}

func (w *world) exec(q string, args ...any) int64 {
	w.t.Helper()
	res, err := w.s.Exec(context.Background(), store.Stmt(q, args...))
	if err != nil {
		w.t.Fatalf("%s: %v", q, err)
	}
	return res[0].RowsAffected
}

func (w *world) count(q string, args ...any) int64 {
	w.t.Helper()
	rows, err := w.s.Query(context.Background(), q, args...)
	if err != nil {
		w.t.Fatalf("%s: %v", q, err)
	}
	var n int64
	if err := rows.Scan(0, &n); err != nil {
		w.t.Fatal(err)
	}
	return n
}

func (w *world) item(key string) tracker.Item {
	w.t.Helper()
	it, err := w.Core.Tracker.FindItem(context.Background(), key)
	if err != nil {
		w.t.Fatal(err)
	}
	return it
}

func (w *world) flow(key string) flow.Flow {
	w.t.Helper()
	f, ok, err := w.Core.Flows.Latest(context.Background(), w.item(key).ID)
	if err != nil || !ok {
		w.t.Fatalf("flow of %s: %v", key, err)
	}
	return f
}

// jobStatus is the status of the pending or running job with a dedupe key,
// else of the newest ("" if none).
func (w *world) jobStatus(key string) string {
	w.t.Helper()
	rows, err := w.s.Query(context.Background(), `SELECT status FROM jobs WHERE dedupe_key = ?
ORDER BY status IN ('pending', 'running') DESC, created_at DESC, id DESC LIMIT 1`, key)
	if err != nil {
		w.t.Fatal(err)
	}
	if rows.Len() == 0 {
		return ""
	}
	var st string
	_ = rows.Scan(0, &st)
	return st
}

// lease leases the next run and checks it is key's.
func (w *world) lease(key string) apitest.LeasedRun {
	w.t.Helper()
	r := w.runner.MustLease()
	if r.Item != key {
		w.t.Fatalf("leased a run of %s, want %s", r.Item, key)
	}
	return r
}

// waitingForAnswer brings key's fresh flow to waiting for an answer: its
// session asks a blocking question and ends.
func (w *world) waitingForAnswer(key string) {
	w.t.Helper()
	w.drain()
	r := w.lease(key)
	w.runner.Ask(r, "which way?", true)
	w.runner.Complete(r, "done", "asked")
	w.drain()
	if f := w.flow(key); f.Waiting != flow.WaitAnswer {
		w.t.Fatalf("%s: flow %s/%s, want waiting for an answer", key, f.Status, f.Waiting)
	}
}

// answer answers key's open blocking questions through the API.
func (w *world) answer(key string) {
	w.t.Helper()
	var qs struct {
		Questions []struct {
			ID       string
			Blocking bool
			Answer   *string
		}
	}
	w.Admin(200, "GET", "/api/v1/items/"+key+"/questions", nil).JSON(w.t, &qs)
	for _, q := range qs.Questions {
		if q.Blocking && q.Answer == nil {
			w.Admin(200, "POST", "/api/v1/questions/"+q.ID+"/answer", map[string]any{"answer": "go on"})
		}
	}
}

func (w *world) seq() int64 { return w.count(`SELECT COALESCE(MAX(seq), 0) FROM events`) }

// events counts the event types recorded after seq.
func (w *world) events(after int64) map[string]int {
	w.t.Helper()
	rows, err := w.s.Query(context.Background(), `SELECT type FROM events WHERE seq > ?`, after)
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]int{}
	for i := range rows.Len() {
		var typ string
		_ = rows.Scan(i, &typ)
		out[typ]++
	}
	return out
}

// snapshot hashes everything a repair may change.
func (w *world) snapshot() string {
	w.t.Helper()
	h := sha256.New()
	for _, q := range []string{
		`SELECT seq, type, entity_id FROM events ORDER BY seq`,
		`SELECT id, stage, step, status, COALESCE(waiting, ''), COALESCE(run_id, ''), version FROM flows ORDER BY id`,
		`SELECT id, status, cancel_requested, version FROM runs ORDER BY id`,
		`SELECT id, state, version FROM items ORDER BY id`,
		`SELECT id, COALESCE(answer, ''), version FROM questions ORDER BY id`,
		`SELECT id, kind, COALESCE(dedupe_key, ''), status FROM jobs ORDER BY id`,
	} {
		rows, err := w.s.Query(context.Background(), q)
		if err != nil {
			w.t.Fatal(err)
		}
		fmt.Fprint(h, rows.Values)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// metric reads ballet_reconciler_repairs_total{rule}.
func (w *world) metric(rule string) float64 {
	w.t.Helper()
	mfs, err := w.reg.Gather()
	if err != nil {
		w.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ballet_reconciler_repairs_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "rule" && l.GetValue() == rule {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	w.t.Fatalf("no ballet_reconciler_repairs_total{rule=%q}", rule)
	return 0
}

// passes counts the observations of ballet_reconciler_pass_seconds.
func (w *world) passes() uint64 {
	w.t.Helper()
	mfs, err := w.reg.Gather()
	if err != nil {
		w.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "ballet_reconciler_pass_seconds" {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// pass runs one pass, which must succeed.
func (w *world) pass() reconcile.Report {
	w.t.Helper()
	rep, err := w.rec.Pass(context.Background())
	if err != nil {
		w.t.Fatalf("pass: %v", err)
	}
	return rep
}

// repair runs a pass that must report want, and then a second pass that
// must repair and change nothing. It returns the events of the first pass
// and checks that the metrics counted its repairs.
func (w *world) repair(want reconcile.Report) map[string]int {
	w.t.Helper()
	before := map[string]float64{}
	for _, rule := range reconcile.Rules {
		before[rule] = w.metric(rule)
	}
	seq := w.seq()
	if got := w.pass(); got != want {
		w.t.Fatalf("pass repaired %+v, want %+v", got, want)
	}
	evs := w.events(seq)
	got := map[string]float64{}
	for _, rule := range reconcile.Rules {
		got[rule] = w.metric(rule) - before[rule]
	}
	wantMetric := map[string]float64{reconcile.RuleStopped: float64(want.Stopped), reconcile.RuleStalled: float64(want.Stalled),
		reconcile.RuleRequeued: float64(want.Requeued), reconcile.RuleDead: float64(want.Dead),
		reconcile.RuleOrphaned: float64(want.Orphaned), reconcile.RuleReleased: float64(want.Released)}
	for rule, n := range wantMetric {
		if got[rule] != n {
			w.t.Fatalf("ballet_reconciler_repairs_total{rule=%q} rose by %v, want %v", rule, got[rule], n)
		}
	}
	snap := w.snapshot()
	if again := w.pass(); again != (reconcile.Report{}) {
		w.t.Fatalf("a second pass repaired %+v", again)
	}
	if w.snapshot() != snap {
		w.t.Fatal("a second pass changed something")
	}
	return evs
}

// wantEvents checks event counts (types not named must not occur).
func (w *world) wantEvents(got map[string]int, want map[string]int) {
	w.t.Helper()
	for typ, n := range want {
		if got[typ] != n {
			w.t.Errorf("%d %s events, want %d (all: %v)", got[typ], typ, n, got)
		}
	}
	for typ := range got {
		if _, ok := want[typ]; !ok {
			w.t.Errorf("unexpected %s events (all: %v)", typ, got)
		}
	}
}
