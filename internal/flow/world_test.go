package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/tracker"
)

// world is a whole Core over a real store whose orchestrator does not run:
// the test runs each flow job itself (step) and then checks what the
// handler left — the flow, its events, the jobs it queued, the ticket and
// the run. The flow engine runs on a fake clock, the merge stage on a
// scripted forge.
type world struct {
	*apitest.Env
	t        *testing.T
	s        store.Store
	clk      *clock.Fake
	handlers registry
	forge    *scriptForge
	runner   *apitest.Runner
	n        int
}

// newWorld builds a world with org acme and project ACME, whose pipelines
// are given by ticket type (nil: none saved).
func newWorld(t *testing.T, s store.Store, pipelines map[string]map[string]any) *world {
	t.Helper()
	return newWorldOn(t, s, pipelines, false)
}

// newWorldOn is newWorld with, when whole is set, all of Core on the fake
// clock (the runs' leases too), not only the flow engine.
func newWorldOn(t *testing.T, s store.Store, pipelines map[string]map[string]any, whole bool) *world {
	t.Helper()
	clk := clock.NewFake(time.Now().UTC().Truncate(time.Millisecond))
	var e *apitest.Env
	if whole {
		e = apitest.NewOn(t, s, clk)
	} else {
		e = apitest.New(t, s)
	}
	w := &world{Env: e, t: t, s: s, clk: clk, handlers: registry{}, forge: &scriptForge{}}
	e.Core.Flows.Clock = w.clk
	e.UseForge(w.forge)
	e.Core.Flows.Register(w.handlers)
	e.Org("acme")
	e.Project("acme", "ACME")
	for typ, def := range pipelines {
		e.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/"+typ, map[string]any{"version": 0, "definition": def})
	}
	w.runner = e.NewRunner("r1")
	return w
}

// ticket creates a ready ticket of a type and starts its flow (its enter
// job is pending, nothing ran yet). It returns the ticket's key.
func (w *world) ticket(typ string) string {
	w.t.Helper()
	w.n++
	var it struct{ Key string }
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": typ, "title": fmt.Sprintf("ticket %d", w.n),
		"acceptance_criteria": "it works", "state": "ready"}).JSON(w.t, &it)
	w.Admin(200, "POST", "/api/v1/items/"+it.Key+"/flow/start", nil)
	return it.Key
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

func (w *world) run(id string) run.Run {
	w.t.Helper()
	r, err := w.Core.Runs.Get(context.Background(), id)
	if err != nil {
		w.t.Fatalf("run %s: %v", id, err)
	}
	return r
}

func (w *world) exec(q string, args ...any) {
	w.t.Helper()
	if _, err := w.s.Exec(context.Background(), store.Stmt(q, args...)); err != nil {
		w.t.Fatalf("%s: %v", q, err)
	}
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

// pendingJob is a pending job as stored.
type pendingJob struct {
	ID, Kind, Dedupe string
	Payload          map[string]any
	RunAt            time.Time
}

// pending lists the pending jobs whose payload names flow f or its ticket,
// oldest first (f nil: every pending job).
func (w *world) pending(f *flow.Flow) []pendingJob {
	w.t.Helper()
	rows, err := w.s.Query(context.Background(), `SELECT id, kind, COALESCE(dedupe_key, ''), payload, run_at FROM jobs
WHERE status = 'pending' ORDER BY created_at, id`)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []pendingJob
	for i := range rows.Len() {
		var j pendingJob
		var payload string
		var runAt int64
		if err := rows.Scan(i, &j.ID, &j.Kind, &j.Dedupe, &payload, &runAt); err != nil {
			w.t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(payload), &j.Payload); err != nil {
			w.t.Fatal(err)
		}
		j.RunAt = time.UnixMilli(runAt).UTC()
		if f == nil || j.Payload["flow_id"] == f.ID || j.Payload["item_id"] == f.ItemID {
			out = append(out, j)
		}
	}
	return out
}

// jobKeys lists the kinds and dedupe keys of jobs.
func jobKeys(jobs []pendingJob) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.Kind+" "+j.Dedupe)
	}
	return out
}

// step runs the pending job of a kind that belongs to key's flow (key "":
// the only pending job of that kind), as the orchestrator would, marks it
// done (pending again when it snoozed) and returns the handler's error.
func (w *world) step(kind, key string) error {
	w.t.Helper()
	var f *flow.Flow
	if key != "" {
		fl := w.flow(key)
		f = &fl
	}
	var found []pendingJob
	for _, j := range w.pending(f) {
		if j.Kind == kind {
			found = append(found, j)
		}
	}
	if len(found) != 1 {
		w.t.Fatalf("%d pending %s jobs of %q, want 1: %v", len(found), kind, key, jobKeys(w.pending(nil)))
	}
	return w.runJob(found[0])
}

// mustStep is step for a handler that must succeed (or snooze).
func (w *world) mustStep(kind, key string) {
	w.t.Helper()
	if err := w.step(kind, key); err != nil && !job.IsSnooze(err) {
		w.t.Fatalf("%s of %s: %v", kind, key, err)
	}
}

func (w *world) runJob(pj pendingJob) error {
	w.t.Helper()
	payload, _ := json.Marshal(pj.Payload)
	j := &job.Job{ID: pj.ID, Kind: pj.Kind, Payload: payload, Attempt: 1, MaxAttempts: 20, DedupeKey: pj.Dedupe}
	w.exec(`UPDATE jobs SET status = 'running', attempt = 1 WHERE id = ?`, j.ID)
	h, ok := w.handlers[j.Kind]
	if !ok {
		w.t.Fatalf("no handler for %s", j.Kind)
	}
	err := h(context.Background(), j)
	status := "done"
	if job.IsSnooze(err) {
		status = "pending" // it checks again later
	}
	w.exec(`UPDATE jobs SET status = ? WHERE id = ?`, status, j.ID)
	return err
}

// replay runs a job again that was queued for an earlier step (as a late
// duplicate would run): it must change nothing.
func (w *world) replay(kind string, payload map[string]any) {
	w.t.Helper()
	before, seq := w.snapshot(), w.seq()
	b, _ := json.Marshal(payload)
	if err := w.handlers[kind](context.Background(), &job.Job{ID: "replay", Kind: kind, Payload: b, Attempt: 1, MaxAttempts: 20}); err != nil &&
		!job.IsSnooze(err) {
		w.t.Fatalf("%s %v replayed: %v", kind, payload, err)
	}
	if got := w.since(seq); len(got) != 0 || w.snapshot() != before {
		w.t.Fatalf("%s %v replayed changed something: events %v", kind, payload, got)
	}
}

// snapshot renders what a step may change.
func (w *world) snapshot() string {
	w.t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT id, stage, iteration, step, status, COALESCE(waiting, ''), COALESCE(run_id, ''), version FROM flows ORDER BY id`,
		`SELECT id, status, cancel_requested, version FROM runs ORDER BY id`,
		`SELECT id, state, version FROM items ORDER BY id`,
		`SELECT id, kind, COALESCE(dedupe_key, ''), status FROM jobs WHERE status = 'pending' ORDER BY id`,
	} {
		rows, err := w.s.Query(context.Background(), q)
		if err != nil {
			w.t.Fatal(err)
		}
		fmt.Fprintln(&b, rows.Values)
	}
	return b.String()
}

func (w *world) seq() int64 { return w.count(`SELECT COALESCE(MAX(seq), 0) FROM events`) }

// ev is a recorded event.
type ev struct {
	Type, EntityID, ActorKind, ActorSub string
	P                                   map[string]any
}

// since returns the events recorded after seq, in order.
func (w *world) since(seq int64) []ev {
	w.t.Helper()
	rows, err := w.s.Query(context.Background(), `SELECT type, entity_id, actor_kind, COALESCE(actor_sub, ''), payload FROM events
WHERE seq > ? ORDER BY seq`, seq)
	if err != nil {
		w.t.Fatal(err)
	}
	out := make([]ev, rows.Len())
	for i := range out {
		var payload string
		if err := rows.Scan(i, &out[i].Type, &out[i].EntityID, &out[i].ActorKind, &out[i].ActorSub, &payload); err != nil {
			w.t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(payload), &out[i].P); err != nil {
			w.t.Fatal(err)
		}
	}
	return out
}

// types lists the events' types.
func types(evs []ev) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// wantTypes fails unless the events are exactly these types, in order.
func wantTypes(t *testing.T, evs []ev, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if got := types(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// wantPayload fails unless the event's payload holds these values (JSON
// numbers compare as float64: pass ints, they are converted; nil: the key
// is absent).
func wantPayload(t *testing.T, e ev, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if n, ok := v.(int); ok {
			v = float64(n)
		}
		if got := e.P[k]; !reflect.DeepEqual(got, v) {
			t.Errorf("%s payload %s = %#v, want %#v (payload %v)", e.Type, k, got, v, e.P)
		}
	}
}

// state is where a flow stands, compactly: stage, iteration, step, status
// and waiting.
func state(f flow.Flow) string {
	return fmt.Sprintf("%s it=%d step=%d %s/%s", f.Stage, f.Iteration, f.Step, f.Status, f.Waiting)
}

// wantFlow fails unless key's flow stands where want says (see state).
func (w *world) wantFlow(key, want string) flow.Flow {
	w.t.Helper()
	f := w.flow(key)
	if got := state(f); got != want {
		w.t.Fatalf("%s: flow %s, want %s", key, got, want)
	}
	return f
}

func (w *world) wantTicket(key, want string) {
	w.t.Helper()
	if got := w.item(key).State; got != want {
		w.t.Fatalf("%s is %s, want %s", key, got, want)
	}
}

// lease leases the next run and checks it is key's, at stage and iteration.
func (w *world) lease(key, stage string, iteration int) apitest.LeasedRun {
	w.t.Helper()
	r := w.runner.MustLease()
	if r.Item != key || r.Stage != stage || r.Iteration != iteration {
		w.t.Fatalf("leased %s %s iteration %d, want %s %s iteration %d", r.Item, r.Stage, r.Iteration, key, stage, iteration)
	}
	return r
}

// patchProject changes project ACME (at the version it has).
func (w *world) patchProject(change map[string]any) {
	w.t.Helper()
	var p struct{ Version int64 }
	w.Admin(200, "GET", "/api/v1/projects/ACME", nil).JSON(w.t, &p)
	change["version"] = p.Version
	w.Admin(200, "PATCH", "/api/v1/projects/ACME", change)
}

// setTicket moves a ticket to a state through the API.
func (w *world) setTicket(key, state string) {
	w.t.Helper()
	w.Admin(200, "PATCH", "/api/v1/items/"+key, map[string]any{"version": w.item(key).Version, "state": state})
}

// openQuestions lists the texts of key's open blocking questions.
func (w *world) openQuestions(key string) []string {
	w.t.Helper()
	qs, err := w.Core.Tracker.ListQuestions(context.Background(), w.item(key).ID)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, q := range qs {
		if q.Blocking && q.Answer == nil {
			out = append(out, q.Text)
		}
	}
	return out
}

// answerAll answers key's open blocking questions.
func (w *world) answerAll(key string) {
	w.t.Helper()
	qs, err := w.Core.Tracker.ListQuestions(context.Background(), w.item(key).ID)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, q := range qs {
		if q.Blocking && q.Answer == nil {
			w.Admin(200, "POST", "/api/v1/questions/"+q.ID+"/answer", map[string]any{"answer": "go on"})
		}
	}
}

// scriptForge is a forge whose answers the test sets: the branch is
// pushed or not, the pull request's state, whether Ballet can merge and
// whether a merge goes through, and errors of its calls. It records every
// call.
type scriptForge struct {
	mu        sync.Mutex
	notPushed bool
	st        forge.State
	canMerge  bool
	mergeErr  error
	ensureErr error // EnsurePullRequest's error
	stateErr  error // State's error
	closeErr  error
	number    int      // the pull request Ensure finds (0: 7)
	ensures   int      // EnsurePullRequest calls
	titles    []string // the title and body of each EnsurePullRequest call
	bodies    []string
	repos     []forge.Repo        // the repository of every call
	states    []forge.PullRequest // the pull request each State call was given
	merges    []forge.PullRequest // Merge calls
	closes    []forge.PullRequest // Close calls
}

func (f *scriptForge) set(fn func(f *scriptForge)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// zero forgets every answer and call (under set).
func (f *scriptForge) zero() {
	f.notPushed, f.st, f.canMerge, f.mergeErr, f.ensureErr, f.stateErr, f.closeErr, f.number = false, forge.State{}, false, nil, nil, nil, nil, 0
	f.ensures, f.titles, f.bodies, f.repos, f.states, f.merges, f.closes = 0, nil, nil, nil, nil, nil, nil
}

func (f *scriptForge) EnsurePullRequest(ctx context.Context, repo forge.Repo, branch, title, body string) (forge.PullRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ensures++
	f.titles, f.bodies, f.repos = append(f.titles, title), append(f.bodies, body), append(f.repos, repo)
	if f.notPushed {
		return forge.PullRequest{}, fmt.Errorf("%w: %s", forge.ErrBranchNotPushed, branch)
	}
	if f.ensureErr != nil {
		return forge.PullRequest{}, f.ensureErr
	}
	n := f.number
	if n == 0 {
		n = 7
	}
	return forge.PullRequest{Number: n, URL: fmt.Sprintf("https://forge.invalid/pr/%d", n), Branch: branch, Base: repo.DefaultBranch, HeadSHA: "ensured"}, nil
}

func (f *scriptForge) State(ctx context.Context, repo forge.Repo, pr forge.PullRequest) (forge.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states, f.repos = append(f.states, pr), append(f.repos, repo)
	if f.stateErr != nil {
		return forge.State{}, f.stateErr
	}
	st := f.st
	st.Branch, st.Base = pr.Branch, pr.Base
	return st, nil
}

func (f *scriptForge) Merge(ctx context.Context, repo forge.Repo, pr forge.PullRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.merges, f.repos = append(f.merges, pr), append(f.repos, repo)
	return f.mergeErr
}

// Close records the call; closing twice is no error, as on every forge.
func (f *scriptForge) Close(ctx context.Context, repo forge.Repo, pr forge.PullRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closes, f.repos = append(f.closes, pr), append(f.repos, repo)
	return f.closeErr
}

func (f *scriptForge) CanMerge() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.canMerge
}

func (f *scriptForge) mergeCalls() []forge.PullRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]forge.PullRequest(nil), f.merges...)
}

func (f *scriptForge) stateCalls() []forge.PullRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]forge.PullRequest(nil), f.states...)
}

// calls returns how often Ensure, State, Merge and Close were called.
func (f *scriptForge) calls() (ensures, states, merges, closes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ensures, len(f.states), len(f.merges), len(f.closes)
}
