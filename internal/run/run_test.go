package run_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/runproto"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

var admin = event.Actor{Kind: event.ActorHuman, Sub: "bootstrap"}

// world is one store with a ticket, a flow on it, a runner token with a
// registered runner, and a run service on a fake clock.
type world struct {
	t       *testing.T
	ctx     context.Context
	st      store.Store
	fc      *clock.Fake
	applier *transition.Applier
	tr      *tracker.Service
	svc     *run.Service
	authn   *auth.Authenticator
	item    tracker.Item
	flowID  string
	step    int
	runnerP run.RunnerCaller
	runner  run.Runner
}

const grace = time.Minute

// hangGuard bounds every wait of these tests on a goroutine (a long poll,
// the sweeper, the fake clock's timers), so that a failing test ends with
// a message instead of hanging until the suite's timeout. It is not a
// speed claim: on the fake clock nothing here takes real time.
const hangGuard = 2 * time.Minute

// receive returns the next value from ch, failing the test with what after
// the hang guard.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangGuard):
		t.Fatalf("gave up waiting for %s", what)
		var zero T
		return zero
	}
}

// blockUntil is fk.BlockUntil(n) (a loop under test has gone to sleep on
// the fake clock), failing the test after the hang guard.
func blockUntil(t *testing.T, fk *clock.Fake, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() { fk.BlockUntil(n); close(done) }()
	receive(t, done, fmt.Sprintf("%d timers on the fake clock (%d pending)", n, fk.Waiters()))
}

func setup(t *testing.T, st store.Store) *world {
	t.Helper()
	ctx := context.Background()
	fc := clock.NewFake(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	a := &transition.Applier{Store: st, Clock: fc, Attempts: 100}
	ten := tenancy.New(st, a, fc, tenancy.Hooks{})
	tr := tracker.New(st, a, fc, ten, tracker.Hooks{})
	w := &world{t: t, ctx: ctx, st: st, fc: fc, applier: a, tr: tr, authn: auth.NewAuthenticator(st, fc, "run-tests-bootstrap-secret", nil, auth.OIDCConfig{})}
	w.svc = run.NewService(st, a, fc, tr, run.Config{Grace: grace, OnFinish: flow.OnRunFinished})
	o, err := ten.CreateOrganization(ctx, admin, tenancy.OrganizationInput{Slug: "acme", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.CreateProject(ctx, admin, o.ID, tenancy.ProjectInput{Key: "ACME", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	if w.item, err = tr.CreateItem(ctx, admin, p, tracker.ItemInput{Type: "task", Title: "Parser"}); err != nil {
		t.Fatal(err)
	}
	w.flowID = insertFlow(t, st, w.item, fc.Now())
	w.runnerP = w.runnerToken("runner-1")
	if w.runner, err = w.svc.RegisterRunner(ctx, w.runnerP, run.RunnerInput{Name: "host-1", Labels: map[string]string{"os": "linux"}}); err != nil {
		t.Fatal(err)
	}
	return w
}

// insertFlow writes a flows row directly (the flow engine is not needed
// for the runner protocol).
func insertFlow(t *testing.T, st store.Store, it tracker.Item, now time.Time) string {
	t.Helper()
	id := transition.NewID()
	_, err := st.Exec(context.Background(), store.Stmt(`INSERT INTO flows (id, organization_id, project_id, item_id, pipeline, pipeline_version,
definition, stage, iteration, max_iterations, step, status, waiting, run_id, outcome, report, started_at, updated_at, finished_at, version)
VALUES (?, ?, ?, ?, 'default', 0, '{}', 'implement', 1, 3, 1, 'running', 'run', NULL, NULL, NULL, ?, ?, NULL, 1)`,
		id, it.OrganizationID, it.ProjectID, it.ID, now.UnixMilli(), now.UnixMilli()))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// runnerToken issues a runner token and authenticates it: the caller of
// the runner protocol's routes, as the HTTP layer resolves it.
func (w *world) runnerToken(name string) run.RunnerCaller {
	w.t.Helper()
	secret, _, tr := auth.Issue(admin, auth.KindRunner, name, "", "", []string{auth.ScopeRunner}, nil, w.fc.Now())
	if err := w.applier.Apply(w.ctx, tr); err != nil {
		w.t.Fatal(err)
	}
	p := w.principal(secret)
	return run.RunnerCaller{TokenID: p.TokenID, Actor: p.Actor()}
}

func (w *world) principal(secret string) *auth.Principal {
	w.t.Helper()
	p, err := w.authn.Authenticate(w.ctx, "Bearer "+secret)
	if err != nil {
		w.t.Fatalf("authenticate: %v", err)
	}
	return p
}

// newRun creates the queued run of the flow's next step, as the flow
// engine does.
func (w *world) newRun() run.Run { return w.newRunOf("claude-code") }

// newRunOf is newRun for a stage of that adapter.
func (w *world) newRunOf(adapter string) run.Run {
	w.t.Helper()
	w.step++
	r := run.Run{ID: transition.NewID(), OrganizationID: w.item.OrganizationID, ProjectID: w.item.ProjectID, ItemID: w.item.ID,
		FlowID: w.flowID, Stage: "implement", Iteration: 1, Step: w.step, Adapter: adapter, Model: "sonnet",
		Instructions: "Implement it.", Skills: []string{"go"}, Artifacts: json.RawMessage(`{"ticket":{"key":"ACME-1"}}`)}
	now := w.fc.Now()
	if err := w.applier.Apply(w.ctx, new(run.Create(r, event.System, now))); err != nil {
		w.t.Fatal(err)
	}
	w.fc.Advance(time.Millisecond) // keep creation order distinct
	return w.get(r.ID)
}

func (w *world) get(id string) run.Run {
	w.t.Helper()
	r, err := w.svc.Get(w.ctx, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

func (w *world) lastSeq() int64 {
	w.t.Helper()
	n, err := event.LastSeq(w.ctx, w.st)
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

// expect runs op, checks its error code ("" for success) and that it
// wrote exactly the events named (in order), and returns them.
func (w *world) expect(name, wantCode string, wantTypes []string, op func() error) []event.Event {
	w.t.Helper()
	before := w.lastSeq()
	err := op()
	if code := codeOf(err); code != wantCode {
		w.t.Fatalf("%s: error %v (code %q), want code %q", name, err, code, wantCode)
	}
	evs, err := event.List(w.ctx, w.st, event.Filter{AfterSeq: before, Limit: 1000})
	if err != nil {
		w.t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Type)
	}
	if strings.Join(got, ",") != strings.Join(wantTypes, ",") {
		w.t.Fatalf("%s: events %v, want %v", name, got, wantTypes)
	}
	return evs
}

func codeOf(err error) string {
	if err == nil {
		return ""
	}
	return apperr.Code(err)
}

// lease leases a run for the world's runner without waiting.
func (w *world) lease() (run.Leased, *auth.Principal) {
	w.t.Helper()
	var l run.Leased
	w.expect("lease", "", []string{"run.started", "token.created"}, func() error {
		var ok bool
		var err error
		l, ok, err = w.svc.Lease(w.ctx, w.runnerP, w.runner.ID, 0, nil)
		if err == nil && !ok {
			err = errors.New("nothing leased")
		}
		return err
	})
	return l, w.principal(l.RunToken)
}

type jobRow struct {
	Kind, Payload, DedupeKey, Status string
}

func (w *world) finishedJobs() []jobRow {
	w.t.Helper()
	rows, err := w.st.Query(w.ctx, `SELECT kind, payload, dedupe_key, status FROM jobs WHERE kind = ? ORDER BY created_at, id`, flow.JobRunFinished)
	if err != nil {
		w.t.Fatal(err)
	}
	out := make([]jobRow, rows.Len())
	for i := range out {
		if err := rows.Scan(i, &out[i].Kind, &out[i].Payload, &out[i].DedupeKey, &out[i].Status); err != nil {
			w.t.Fatal(err)
		}
	}
	return out
}

// wantFinishedJob checks that exactly one flow.run_finished job exists
// for each run, with its payload and dedupe key.
func (w *world) wantFinishedJobs(runs ...run.Run) {
	w.t.Helper()
	jobs := w.finishedJobs()
	if len(jobs) != len(runs) {
		w.t.Fatalf("%d flow.run_finished jobs, want %d: %+v", len(jobs), len(runs), jobs)
	}
	for i, r := range runs {
		var p flow.RunFinishedArgs
		if err := json.Unmarshal([]byte(jobs[i].Payload), &p); err != nil {
			w.t.Fatal(err)
		}
		key := fmt.Sprintf("flow:%s:run_finished:%d", r.FlowID, r.Step)
		if p != (flow.RunFinishedArgs{FlowID: r.FlowID, RunID: r.ID, Step: r.Step}) || jobs[i].DedupeKey != key {
			w.t.Fatalf("job %d: %+v, want payload of run %s and key %s", i, jobs[i], r.ID, key)
		}
	}
}

func payloadOf(t *testing.T, e event.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Payload, &m); err != nil {
		t.Fatalf("payload of %s: %v", e.Type, err)
	}
	return m
}

func TestInsertIsIdempotentPerStep(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		r := w.newRun()
		if r.Status != run.StatusQueued || r.Item != w.item.Key || r.Version != 1 || r.Step != 1 || len(r.Skills) != 1 ||
			string(r.Artifacts) != `{"ticket":{"key":"ACME-1"}}` || r.StartedAt != nil || r.ExitStatus != nil {
			t.Fatalf("created %+v", r)
		}
		// Creating the step's run again (another id) conflicts: as a
		// guarded statement, the whole batch with its event is a lost race.
		again := r
		again.ID = transition.NewID()
		w.expect("again", apperr.Internal, nil, func() error {
			err := w.applier.Apply(w.ctx, new(run.Create(again, event.System, w.fc.Now())))
			if !errors.Is(err, store.ErrLostRace) {
				t.Fatalf("second insert: %v, want a lost race", err)
			}
			return err
		})
		got, ok, err := w.svc.ForFlowStep(w.ctx, w.flowID, 1)
		if err != nil || !ok || got.ID != r.ID {
			t.Fatalf("ForFlowStep: %v %v %+v", ok, err, got)
		}
		if _, ok, err := w.svc.ForFlowStep(w.ctx, w.flowID, 2); ok || err != nil {
			t.Fatalf("ForFlowStep of a step without a run: %v %v", ok, err)
		}
		if _, err := w.svc.Get(w.ctx, "nope"); codeOf(err) != apperr.NotFound {
			t.Fatalf("Get unknown: %v", err)
		}
		r2 := w.newRun()
		list, err := w.svc.List(w.ctx, w.item.ID)
		if err != nil || len(list) != 2 || list[0].ID != r.ID || list[1].ID != r2.ID {
			t.Fatalf("List: %v %+v", err, list)
		}
		// The JSON has exactly the documented fields.
		b, _ := json.Marshal(r)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if got := strings.Join(keys, ","); got != "adapter,artifacts,blocking_question,cancel_requested,created_at,error,exit_status,flow_id,id,instructions,item,item_id,iteration,model,organization_id,outcome,project_id,reason,report,runner_id,skills,stage,stage_model,status,step,updated_at,usage,version" {
			t.Fatalf("run fields: %s", got)
		}
	})
}

func TestLease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		first, second := w.newRun(), w.newRun()
		l, p := w.lease()
		r := l.Run
		if r.ID != first.ID || r.Status != run.StatusRunning || r.RunnerID != w.runner.ID || r.StartedAt == nil || r.HeartbeatAt == nil ||
			r.Version != 2 || !strings.HasPrefix(l.RunToken, auth.TokenPrefix) {
			t.Fatalf("leased %+v", l)
		}
		if got := w.get(r.ID); got.Status != run.StatusRunning || got.Version != 2 || !got.StartedAt.Equal(*r.StartedAt) || got.RunnerID != w.runner.ID {
			t.Fatalf("stored %+v", got)
		}
		// The run token: kind run, scoped to this run, in its organization.
		if p.TokenKind != auth.KindRun || len(p.Scopes) != 1 || p.Scopes[0] != "run:"+r.ID || p.OrgID != r.OrganizationID || p.Kind != event.ActorService {
			t.Fatalf("run token principal %+v", p)
		}
		// Oldest first; then nothing.
		l2, _ := w.lease()
		if l2.Run.ID != second.ID {
			t.Fatalf("second lease got %s, want %s", l2.Run.ID, second.ID)
		}
		w.expect("empty", "", nil, func() error {
			_, ok, err := w.svc.Lease(w.ctx, w.runnerP, w.runner.ID, 0, nil)
			if ok {
				t.Fatal("leased from an empty queue")
			}
			return err
		})
		// Only the token that registered a runner leases for it.
		other := w.runnerToken("runner-2")
		if _, _, err := w.svc.Lease(w.ctx, other, w.runner.ID, 0, nil); codeOf(err) != apperr.NotFound {
			t.Fatalf("lease for another token's runner: %v", err)
		}
	})
}

func TestConcurrentLeasesOneWins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		other := w.runnerToken("runner-2")
		rn2, err := w.svc.RegisterRunner(w.ctx, other, run.RunnerInput{Name: "host-2"})
		if err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 5; round++ {
			r := w.newRun()
			var wg sync.WaitGroup
			var mu sync.Mutex
			var won []run.Leased
			for _, c := range []struct {
				p  run.RunnerCaller
				id string
			}{{w.runnerP, w.runner.ID}, {other, rn2.ID}, {w.runnerP, w.runner.ID}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, ok, err := w.svc.Lease(w.ctx, c.p, c.id, 0, nil)
					if err != nil {
						t.Error(err)
					}
					if ok {
						mu.Lock()
						won = append(won, l)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if len(won) != 1 || won[0].Run.ID != r.ID {
				t.Fatalf("round %d: %d leases won, want 1", round, len(won))
			}
			evs, err := event.List(w.ctx, st, event.Filter{EntityType: "run", EntityID: r.ID})
			if err != nil || len(evs) != 2 || evs[1].Type != "run.started" {
				t.Fatalf("round %d: events %v %+v", round, err, evs)
			}
		}
	})
}

func TestLeaseLongPoll(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		type result struct {
			l   run.Leased
			ok  bool
			err error
		}
		wait := func(d time.Duration) chan result {
			ch := make(chan result, 1)
			go func() {
				l, ok, err := w.svc.Lease(w.ctx, w.runnerP, w.runner.ID, d, nil)
				ch <- result{l, ok, err}
			}()
			return ch
		}
		// Nothing comes: no run after the wait (on the fake clock).
		ch := wait(time.Second)
		for i := 0; i < 5; i++ {
			blockUntil(t, w.fc, 1)
			w.fc.Advance(run.DefaultPoll)
		}
		if res := receive(t, ch, "the empty long poll"); res.ok || res.err != nil {
			t.Fatalf("empty long poll: %+v", res)
		}
		if n := w.svc.Waiting(); n != 0 {
			t.Fatalf("%d leases waiting after the poll ended", n)
		}
		// A run created in this process wakes the poll at once (Notify),
		// without the clock moving.
		ch = wait(30 * time.Second)
		blockUntil(t, w.fc, 1)
		if n := w.svc.Waiting(); n != 1 {
			t.Fatalf("%d leases waiting, want the long poll", n)
		}
		r := w.newRunNoTick()
		w.svc.Notify()
		if res := receive(t, ch, "Notify to wake the long poll"); !res.ok || res.err != nil || res.l.Run.ID != r.ID {
			t.Fatalf("woken long poll: %+v", res)
		}
		// A run created elsewhere (no Notify) is found at the next poll.
		ch = wait(30 * time.Second)
		blockUntil(t, w.fc, 1)
		r = w.newRunNoTick()
		w.fc.Advance(run.DefaultPoll)
		if res := receive(t, ch, "the next poll"); !res.ok || res.l.Run.ID != r.ID {
			t.Fatalf("polled long poll: %+v", res)
		}
		// A cancelled request stops waiting.
		ctx, cancel := context.WithCancel(w.ctx)
		done := make(chan error, 1)
		go func() {
			_, _, err := w.svc.Lease(ctx, w.runnerP, w.runner.ID, 30*time.Second, nil)
			done <- err
		}()
		blockUntil(t, w.fc, 1)
		cancel()
		if err := receive(t, done, "the cancelled long poll"); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled long poll: %v", err)
		}
		if n := w.svc.Waiting(); n != 0 {
			t.Fatalf("%d leases waiting after the cancelled poll ended", n)
		}
		// A runner token revoked during the long poll gets no run: the
		// run stays queued.
		rp := w.runnerToken("runner-revoked")
		rn, err := w.svc.RegisterRunner(w.ctx, rp, run.RunnerInput{Name: "host-r"})
		if err != nil {
			t.Fatal(err)
		}
		revokedCh := make(chan result, 1)
		go func() {
			l, ok, err := w.svc.Lease(w.ctx, rp, rn.ID, 30*time.Second, nil)
			revokedCh <- result{l, ok, err}
		}()
		blockUntil(t, w.fc, 1)
		if _, err := st.Exec(w.ctx, store.Stmt(`UPDATE tokens SET revoked_at = ?, version = version + 1 WHERE id = ?`, w.fc.Now().UnixMilli(), rp.TokenID)); err != nil {
			t.Fatal(err)
		}
		r = w.newRunNoTick()
		w.svc.Notify()
		if res := receive(t, revokedCh, "the revoked runner's long poll"); res.ok || codeOf(res.err) != apperr.Unauthenticated {
			t.Fatalf("revoked runner's long poll: %+v", res)
		}
		if got := w.get(r.ID); got.Status != run.StatusQueued {
			t.Fatalf("run %s after a revoked runner's lease", got.Status)
		}
	})
}

// newRunNoTick is newRun without moving the fake clock (a long poll is
// waiting on it).
func (w *world) newRunNoTick() run.Run {
	w.t.Helper()
	w.step++
	r := run.Run{ID: transition.NewID(), OrganizationID: w.item.OrganizationID, ProjectID: w.item.ProjectID, ItemID: w.item.ID,
		FlowID: w.flowID, Stage: "implement", Iteration: 1, Step: w.step, Adapter: "claude-code"}
	if err := w.applier.Apply(w.ctx, new(run.Create(r, event.System, w.fc.Now()))); err != nil {
		w.t.Fatal(err)
	}
	return r
}

func TestHeartbeatAndCancel(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		// A queued run is cancelled at once, with its job.
		queued := w.newRun()
		cancel := func(name string, r run.Run, want string) {
			t.Helper()
			cancel, ok := w.svc.Cancel(r, "the ticket was paused", w.fc.Now())
			if want == "" {
				if ok || len(cancel.Guarded) != 0 || len(cancel.Events) != 0 {
					t.Fatalf("%s: cancel of a run that needs none: %+v", name, cancel)
				}
				return
			}
			w.expect(name, "", []string{want}, func() error {
				return w.applier.Apply(w.ctx, &cancel)
			})
		}
		cancel("cancel queued", queued, "run.cancelled")
		got := w.get(queued.ID)
		if got.Status != run.StatusCancelled || got.FinishedAt == nil || got.Error != "the ticket was paused" {
			t.Fatalf("cancelled queued run %+v", got)
		}
		w.wantFinishedJobs(queued)
		cancel("cancel cancelled", got, "")
		// A stale read loses its race.
		stale, _ := w.svc.Cancel(queued, "again", w.fc.Now())
		if err := w.applier.Apply(w.ctx, &stale); !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("stale cancel: %v", err)
		}

		w.newRun()
		l, _ := w.lease()
		w.fc.Advance(10 * time.Second)
		var hb runproto.HeartbeatReply
		w.expect("heartbeat", "", nil, func() (err error) {
			hb, err = w.svc.Heartbeat(w.ctx, w.get(l.Run.ID))
			return err
		})
		r := w.get(l.Run.ID)
		if hb.Cancelled || !r.HeartbeatAt.Equal(w.fc.Now().Truncate(time.Millisecond)) || r.Version != l.Run.Version {
			t.Fatalf("after heartbeat %+v: %+v (a heartbeat bumps no version)", hb, r)
		}
		// A running run gets cancel_requested; its next heartbeat says so.
		cancel("cancel running", r, "run.cancel_requested")
		if r = w.get(r.ID); !r.CancelRequested || r.Status != run.StatusRunning {
			t.Fatalf("cancel requested %+v", r)
		}
		cancel("cancel requested twice", r, "")
		if hb, err := w.svc.Heartbeat(w.ctx, w.get(r.ID)); err != nil || !hb.Cancelled {
			t.Fatalf("heartbeat after cancel: %+v %v", hb, err)
		}
		// Its session's tools are closed: a report is refused, at every
		// door (the rule is the domain's).
		w.expect("report after cancel", apperr.Conflict, nil, func() error {
			_, err := w.svc.Report(w.ctx, r.ID, run.ReportInput{Outcome: "done", Summary: "All done"})
			return err
		})
		// The runner then finishes it as cancelled, whatever the session
		// said.
		var fin run.Run
		w.expect("finish", "", []string{"run.finished", "token.revoked"}, func() (err error) {
			fin, err = w.svc.Finish(w.ctx, w.runnerP.Actor, r.ID, run.FinishInput{ExitStatus: ptr(0)})
			return err
		})
		if fin.Status != run.StatusCancelled || fin.Error != "the ticket was paused" || fin.Outcome != "" {
			t.Fatalf("finished %+v", fin)
		}
		w.wantFinishedJobs(queued, r)
		// The runner heartbeat records the runner, without an event.
		w.fc.Advance(time.Second)
		w.expect("runner heartbeat", "", nil, func() error {
			rn, err := w.svc.RunnerHeartbeat(w.ctx, w.runnerP, w.runner.ID, run.HeartbeatInput{})
			if err == nil && !rn.LastSeenAt.Equal(w.fc.Now().Truncate(time.Millisecond)) {
				t.Errorf("runner last seen %v, want %v", rn.LastSeenAt, w.fc.Now())
			}
			return err
		})
		if _, err := w.svc.RunnerHeartbeat(w.ctx, w.runnerToken("runner-3"), w.runner.ID, run.HeartbeatInput{}); codeOf(err) != apperr.NotFound {
			t.Fatalf("heartbeat for another token's runner: %v", err)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func TestReport(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		w.newRun()
		l, _ := w.lease()
		id := l.Run.ID
		for _, c := range []struct {
			in    run.ReportInput
			field string
		}{
			{run.ReportInput{Outcome: "maybe", Summary: "x"}, "outcome"},
			{run.ReportInput{Outcome: "done", Summary: "  "}, "summary"},
			{run.ReportInput{Outcome: "done", Summary: strings.Repeat("x", run.MaxReport+1)}, "summary"},
			{run.ReportInput{Outcome: "done", Summary: "\xff"}, "summary"},
		} {
			_, err := w.svc.Report(w.ctx, id, c.in)
			var ae *apperr.Error
			if !errors.As(err, &ae) || ae.Code != apperr.Invalid || ae.FieldErrors()[0].Field != c.field {
				t.Fatalf("report %q: %v, want a problem with %s", c.in.Outcome, err, c.field)
			}
		}
		evs := w.expect("report", "", []string{"run.reported"}, func() error {
			r, err := w.svc.Report(w.ctx, id, run.ReportInput{Outcome: "blocked", Summary: "Needs a decision"})
			if err == nil && (r.Outcome != "blocked" || r.Report != "Needs a decision" || r.Version != 3) {
				t.Errorf("reported %+v", r)
			}
			return err
		})
		if e := evs[0]; e.ActorKind != event.ActorService || e.ActorSub != "run:"+id || e.ActingFor != "" || e.EntityID != id ||
			payloadOf(t, e)["outcome"] != "blocked" {
			t.Fatalf("reported event %+v", e)
		}
		w.expect("same report", "", nil, func() error {
			_, err := w.svc.Report(w.ctx, id, run.ReportInput{Outcome: "blocked", Summary: "Needs a decision"})
			return err
		})
		w.expect("other report", apperr.Conflict, nil, func() error {
			_, err := w.svc.Report(w.ctx, id, run.ReportInput{Outcome: "done", Summary: "Needs a decision"})
			return err
		})
		if r := w.get(id); r.Outcome != "blocked" || r.Version != 3 {
			t.Fatalf("after the repeats %+v", r)
		}
	})
}

func TestAskQuestion(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		w.newRun()
		l, _ := w.lease()
		id := l.Run.ID
		evs := w.expect("not blocking", "", []string{"question.asked"}, func() error {
			q, err := w.svc.AskQuestion(w.ctx, id, "FYI: which style?", false)
			if err == nil && (q.ItemID != w.item.ID || q.Blocking || q.AskedBy != (tracker.ActorRef{Kind: "service", Subject: "run:" + id})) {
				t.Errorf("asked %+v", q)
			}
			return err
		})
		if evs[0].ActorSub != "run:"+id || evs[0].ActingFor != "" {
			t.Fatalf("question event actor %+v", evs[0])
		}
		if r := w.get(id); r.BlockingQuestion {
			t.Fatal("a non-blocking question flagged the run")
		}
		w.expect("blocking", "", []string{"run.question_asked", "question.asked"}, func() error {
			q, err := w.svc.AskQuestion(w.ctx, id, "Which database?", true)
			if err == nil && !q.Blocking {
				t.Errorf("asked %+v", q)
			}
			return err
		})
		if r := w.get(id); !r.BlockingQuestion {
			t.Fatal("a blocking question did not flag the run")
		}
		w.expect("blocking again", "", []string{"question.asked"}, func() error {
			_, err := w.svc.AskQuestion(w.ctx, id, "And the schema?", true)
			return err
		})
		if n, err := w.tr.OpenBlockingQuestions(w.ctx, w.item.ID); err != nil || n != 2 {
			t.Fatalf("open blocking questions: %d %v", n, err)
		}
		w.expect("blank", apperr.Invalid, nil, func() error {
			_, err := w.svc.AskQuestion(w.ctx, id, " ", true)
			return err
		})
		w.expect("too long", apperr.Invalid, nil, func() error {
			_, err := w.svc.AskQuestion(w.ctx, id, strings.Repeat("x", tracker.MaxQuestionText+1), false)
			return err
		})
	})
}

func TestFinish(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		var finished []run.Run
		finish := func(report bool, in run.FinishInput, wantStatus, wantErr string) run.Run {
			t.Helper()
			w.newRun()
			l, _ := w.lease()
			if report {
				if _, err := w.svc.Report(w.ctx, l.Run.ID, run.ReportInput{Outcome: "done", Summary: "Implemented"}); err != nil {
					t.Fatal(err)
				}
			}
			var r run.Run
			evs := w.expect("finish", "", []string{"run.finished", "token.revoked"}, func() (err error) {
				r, err = w.svc.Finish(w.ctx, w.runnerP.Actor, l.Run.ID, in)
				return err
			})
			if r.Status != wantStatus || r.Error != wantErr || r.FinishedAt == nil || *r.ExitStatus != *in.ExitStatus {
				t.Fatalf("finished %+v, want %s %q", r, wantStatus, wantErr)
			}
			if got := w.get(r.ID); got.Status != r.Status || got.Error != r.Error || got.Usage != r.Usage || got.Version != r.Version ||
				!got.FinishedAt.Equal(*r.FinishedAt) {
				t.Fatalf("stored %+v, returned %+v", got, r)
			}
			pl := payloadOf(t, evs[0])
			if pl["status"] != wantStatus || evs[0].ActorSub != w.runnerP.Actor.Sub {
				t.Fatalf("finish events %+v %v", evs, pl)
			}
			// The session has ended: its run token is revoked. The
			// runner's finish again changes nothing and answers the
			// finished run.
			if _, err := w.authn.Authenticate(w.ctx, "Bearer "+l.RunToken); apperr.Code(err) != apperr.Unauthenticated {
				t.Fatalf("run token after finish: %v", err)
			}
			w.expect("finish again", "", nil, func() error {
				again, err := w.svc.Finish(w.ctx, w.runnerP.Actor, l.Run.ID, run.FinishInput{ExitStatus: ptr(3)})
				if err == nil && (again.Status != r.Status || again.Version != r.Version || again.Usage != r.Usage) {
					t.Errorf("duplicate finish returned %+v", again)
				}
				return err
			})
			for what, call := range map[string]func() error{
				"report": func() error {
					_, err := w.svc.Report(w.ctx, l.Run.ID, run.ReportInput{Outcome: "done", Summary: "again"})
					return err
				},
				"question": func() error { _, err := w.svc.AskQuestion(w.ctx, l.Run.ID, "Still there?", false); return err },
				"running":  func() error { _, err := w.svc.SessionRun(w.ctx, l.Run.ID); return err },
			} {
				w.expect(what+" after finish", apperr.Conflict, nil, call)
			}
			w.expect("heartbeat after finish", apperr.Conflict, nil, func() error {
				_, err := w.svc.Heartbeat(w.ctx, w.get(l.Run.ID))
				return err
			})
			finished = append(finished, r)
			w.wantFinishedJobs(finished...)
			return r
		}
		usage := runproto.Usage{InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 5000, CacheWriteTokens: 700, CostUSD: 0.0421}
		ok := finish(true, run.FinishInput{ExitStatus: ptr(0), Usage: &usage}, run.StatusSucceeded, "")
		if ok.Usage != usage || ok.Outcome != "done" {
			t.Fatalf("succeeded %+v", ok)
		}
		finish(false, run.FinishInput{ExitStatus: ptr(0)}, run.StatusFailed, "the session ended without a report")
		finish(true, run.FinishInput{ExitStatus: ptr(137)}, run.StatusFailed, "the session exited with status 137")
		finish(false, run.FinishInput{ExitStatus: ptr(1), Error: "claude: rate limited"}, run.StatusFailed, "claude: rate limited")

		// Bad input names the field.
		w.newRun()
		l, _ := w.lease()
		for _, c := range []struct {
			in    run.FinishInput
			field string
		}{
			{run.FinishInput{}, "exit_status"},
			{run.FinishInput{ExitStatus: ptr(0), Usage: &runproto.Usage{InputTokens: -1}}, "usage.input_tokens"},
			{run.FinishInput{ExitStatus: ptr(0), Usage: &runproto.Usage{OutputTokens: -1}}, "usage.output_tokens"},
			{run.FinishInput{ExitStatus: ptr(0), Usage: &runproto.Usage{CacheReadTokens: -1}}, "usage.cache_read_tokens"},
			{run.FinishInput{ExitStatus: ptr(0), Usage: &runproto.Usage{CacheWriteTokens: -1}}, "usage.cache_write_tokens"},
			{run.FinishInput{ExitStatus: ptr(0), Usage: &runproto.Usage{CostUSD: math.NaN()}}, "usage.cost_usd"},
			{run.FinishInput{ExitStatus: ptr(0), Usage: &runproto.Usage{CostUSD: -0.5}}, "usage.cost_usd"},
			{run.FinishInput{ExitStatus: ptr(0), Usage: &runproto.Usage{CostUSD: math.Inf(1)}}, "usage.cost_usd"},
			{run.FinishInput{ExitStatus: ptr(0), Error: strings.Repeat("e", runproto.MaxError+1)}, "error"},
		} {
			_, err := w.svc.Finish(w.ctx, w.runnerP.Actor, l.Run.ID, c.in)
			var ae *apperr.Error
			if !errors.As(err, &ae) || ae.Code != apperr.Invalid || ae.FieldErrors()[0].Field != c.field {
				t.Fatalf("finish %+v: %v, want a problem with %s", c.in, err, c.field)
			}
		}
		if r := w.get(l.Run.ID); r.Status != run.StatusRunning {
			t.Fatalf("bad finishes changed the run: %+v", r)
		}
	})
}

// TestHeld: the runner protocol's run routes are the runner's whose
// runner leased the run, found by its token (Held): another runner token
// finds no run, nor a run that was never leased. Who may call which
// route (the run token, the agent session's, none of the runner's) is the
// HTTP layer's, tested in apitest.
func TestHeld(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		w.newRun()
		w.newRun()
		a, _ := w.lease()
		queued := w.newRun()
		if r, err := w.svc.Held(w.ctx, w.runnerP, a.Run.ID); err != nil || r.ID != a.Run.ID {
			t.Fatalf("the runner's own run: %+v %v", r, err)
		}
		// A second runner of the same token holds its runs too.
		rn2, err := w.svc.RegisterRunner(w.ctx, w.runnerP, run.RunnerInput{Name: "host-1b"})
		if err != nil || rn2.TokenID != w.runnerP.TokenID || rn2.ID == w.runner.ID || len(rn2.Labels) != 0 {
			t.Fatalf("second runner %+v %v", rn2, err)
		}
		other := w.runnerToken("runner-2")
		for name, id := range map[string]string{"another token's run": a.Run.ID, "a queued run": queued.ID, "no run": "nope"} {
			if _, err := w.svc.Held(w.ctx, other, id); codeOf(err) != apperr.NotFound {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if _, err := w.svc.Held(w.ctx, w.runnerP, queued.ID); codeOf(err) != apperr.NotFound {
			t.Fatalf("a queued run for the runner token: %v", err)
		}
		// Runner registration input.
		for _, in := range []run.RunnerInput{{Name: " "}, {Name: strings.Repeat("n", run.MaxRunnerName+1)},
			{Name: "ok", Labels: map[string]string{"Bad Key": "x"}}, {Name: "ok", Labels: map[string]string{"k": strings.Repeat("v", 201)}}} {
			if _, err := w.svc.RegisterRunner(w.ctx, w.runnerP, in); codeOf(err) != apperr.Invalid {
				t.Fatalf("register %+v: %v", in, err)
			}
		}
	})
}

func TestSweepSilent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st store.Store) {
		w := setup(t, st)
		w.newRun()
		w.newRun()
		silent, _ := w.lease()
		alive, _ := w.lease()
		queued := w.newRun()
		ctx, cancel := context.WithCancel(w.ctx)
		done := make(chan struct{})
		go func() {
			w.svc.RunSweeper(ctx)
			close(done)
		}()
		defer func() {
			cancel()
			receive(t, done, "the sweeper to stop")
		}()
		// Sweeps every grace/4; the live run heartbeats at each. Three
		// sweeps find nothing older than the grace period.
		round := func() {
			t.Helper()
			blockUntil(t, w.fc, 1)
			if _, err := w.svc.Heartbeat(w.ctx, w.get(alive.Run.ID)); err != nil {
				t.Fatal(err)
			}
			w.fc.Advance(grace / 4)
			blockUntil(t, w.fc, 1) // that sweep has run
		}
		for i := 0; i < 3; i++ {
			round()
		}
		if r := w.get(silent.Run.ID); r.Status != run.StatusRunning {
			t.Fatalf("swept within the grace period: %+v", r)
		}
		before := w.lastSeq()
		round()
		r := w.get(silent.Run.ID)
		if r.Status != run.StatusInterrupted || r.Reason != run.ReasonRunnerLost ||
			!strings.HasPrefix(r.Error, "runner silent for 1m0s (no heartbeat since ") || r.FinishedAt == nil {
			t.Fatalf("silent run %+v", r)
		}
		evs, err := event.List(w.ctx, st, event.Filter{AfterSeq: before})
		if err != nil || len(evs) != 2 || evs[0].Type != "run.finished" || evs[0].ActorKind != event.ActorSystem || evs[1].Type != "token.revoked" {
			t.Fatalf("sweep events %v %+v", err, evs)
		}
		if _, err := w.authn.Authenticate(w.ctx, "Bearer "+silent.RunToken); codeOf(err) != apperr.Unauthenticated {
			t.Fatalf("silent run's token: %v", err)
		}
		if r := w.get(alive.Run.ID); r.Status != run.StatusRunning {
			t.Fatalf("live run swept: %+v", r)
		}
		if r := w.get(queued.ID); r.Status != run.StatusQueued {
			t.Fatalf("queued run swept: %+v", r)
		}
		w.wantFinishedJobs(r)
		// Sweeping again finds nothing more.
		if n, err := w.svc.SweepSilent(w.ctx); n != 0 || err != nil {
			t.Fatalf("second sweep: %d %v", n, err)
		}
	})
}
