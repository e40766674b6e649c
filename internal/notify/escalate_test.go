package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// registry collects job handlers: the test runs due jobs itself.
type registry map[string]job.Handler

func (r registry) Handle(kind string, h job.Handler) { r[kind] = h }

// escWorld is a world on a fake clock whose jobs (the flow engine's and
// the escalation job) the test runs when they are due, as the orchestrator
// would.
type escWorld struct {
	*world
	clk      *clock.Fake
	handlers registry
}

var start = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func newEscWorld(t *testing.T, s store.Store) *escWorld {
	t.Helper()
	clk := clock.NewFake(start)
	w := &escWorld{world: newWorldOn(t, s, clk), clk: clk, handlers: registry{}}
	w.Core.Notifier.Register(w.handlers)
	w.Core.Flows.Register(w.handlers)
	return w
}

// runDue runs every pending job of kind due now, once each, as the
// orchestrator does: a snoozed job is due again later. It returns how many
// finished (not snoozed).
func (w *escWorld) runDue(kind string) int {
	w.T.Helper()
	ctx := context.Background()
	rows, err := w.Store.Query(ctx, `SELECT id, payload, COALESCE(dedupe_key, '') FROM jobs WHERE status = 'pending' AND kind = ? AND run_at <= ?
ORDER BY run_at, id`, kind, w.clk.Now().UnixMilli())
	if err != nil {
		w.T.Fatal(err)
	}
	done := 0
	for i := range rows.Len() {
		j := &job.Job{Kind: kind, Attempt: 1, MaxAttempts: 20}
		var payload string
		if err := rows.Scan(i, &j.ID, &payload, &j.DedupeKey); err != nil {
			w.T.Fatal(err)
		}
		j.Payload = []byte(payload)
		err := w.handlers[kind](ctx, j)
		if d, ok := job.SnoozedFor(err); ok {
			w.exec(`UPDATE jobs SET run_at = ? WHERE id = ?`, w.clk.Now().Add(d).UnixMilli(), j.ID)
			continue
		}
		if err != nil {
			w.T.Fatalf("%s %s: %v", kind, payload, err)
		}
		w.exec(`UPDATE jobs SET status = 'done' WHERE id = ?`, j.ID)
		done++
	}
	return done
}

func (w *escWorld) exec(q string, args ...any) {
	w.T.Helper()
	if _, err := w.Store.Exec(context.Background(), store.Stmt(q, args...)); err != nil {
		w.T.Fatalf("%s: %v", q, err)
	}
}

// escalationDue is when the pending escalation job is due (zero: none).
func (w *escWorld) escalationDue() time.Time {
	w.T.Helper()
	rows, err := w.Store.Query(context.Background(), `SELECT run_at FROM jobs WHERE kind = ? AND status = 'pending'`, notify.JobEscalate)
	if err != nil {
		w.T.Fatal(err)
	}
	if rows.Len() > 1 {
		w.T.Fatalf("%d pending escalation jobs, want at most one", rows.Len())
	}
	if rows.Len() == 0 {
		return time.Time{}
	}
	var ms int64
	_ = rows.Scan(0, &ms)
	return time.UnixMilli(ms).UTC()
}

// causesOf lists person's notifications as "<cause> <ticket>", newest
// first.
func (w *escWorld) causesOf(person string) []string {
	w.T.Helper()
	var out []string
	for _, n := range w.inbox(person).Notifications {
		out = append(out, n.Cause+" "+n.Item)
	}
	return out
}

type question struct {
	ID          string
	Answer      *string
	EscalatedAt *time.Time `json:"escalated_at"`
}

func (w *escWorld) questions(key string) []question {
	w.T.Helper()
	var qs struct{ Questions []question }
	w.Admin(200, "GET", "/api/v1/items/"+key+"/questions", nil).JSON(w.T, &qs)
	return qs.Questions
}

// A blocking question still open after escalate_after (4h) reaches the
// project's admins, once: not before, not the person it waits on (its
// assignee, here an admin herself), not a member; the question shows when
// it was escalated. A duplicate job and a restarted notifier escalate
// nothing more.
func TestABlockingQuestionEscalatesToTheAdminsOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newEscWorld(t, s)
		n := w.Core.Notifier
		key := w.ticket("alice", "carol")
		w.ask("bob", key)
		if made := w.pass(n); made != 1 {
			t.Fatalf("the question made %d notifications, want 1 (carol's)", made)
		}
		if due := w.escalationDue(); !due.Equal(start.Add(notify.Recheck)) {
			t.Fatalf("the escalation job is due at %v, want %s after the question (%v)", due, notify.Recheck, start.Add(notify.Recheck))
		}
		for w.clk.Now().Before(start.Add(4*time.Hour - notify.Recheck)) {
			w.clk.Advance(notify.Recheck)
			if ran := w.runDue(notify.JobEscalate); ran != 0 {
				t.Fatalf("%d escalation jobs finished %s after the question, before escalate_after", ran, w.clk.Now().Sub(start))
			}
		}
		w.clk.Advance(notify.Recheck - time.Millisecond)
		if ran := w.runDue(notify.JobEscalate); ran != 0 || countEvents(t, s, "question.escalated") != 0 {
			t.Fatalf("%d escalation jobs ran before escalate_after", ran)
		}
		w.clk.Advance(time.Millisecond)
		if ran := w.runDue(notify.JobEscalate); ran != 1 {
			t.Fatalf("%d escalation jobs ran at escalate_after, want 1", ran)
		}
		if got := countEvents(t, s, "question.escalated"); got != 1 {
			t.Fatalf("%d question.escalated events, want 1", got)
		}
		if made := w.pass(n); made != 1 {
			t.Fatalf("the escalation made %d notifications, want 1 (dave's)", made)
		}
		in := w.inbox("dave")
		if len(in.Notifications) != 1 {
			t.Fatalf("dave's inbox: %+v", in)
		}
		got := in.Notifications[0]
		if got.Cause != notify.CauseQuestionEscalated || got.Item != key || got.Link != "/items/"+key+"#questions" ||
			!strings.HasPrefix(got.Text, "Unanswered for 4h0m0s: Which database?") {
			t.Errorf("dave's escalation: %+v", got)
		}
		for person, want := range map[string]string{"carol": "question.opened " + key, "alice": "", "bob": ""} {
			if c := strings.Join(w.causesOf(person), ","); c != want {
				t.Errorf("%s's notifications: %q, want %q (an escalation is for the admins, over the assignee's head)", person, c, want)
			}
		}
		qs := w.questions(key)
		if len(qs) != 1 || qs[0].EscalatedAt == nil || !qs[0].EscalatedAt.Equal(start.Add(4*time.Hour)) {
			t.Errorf("the question's escalated_at: %+v, want %v", qs, start.Add(4*time.Hour))
		}

		// The same wait's job again (the notifier deciding the question
		// again after a crash, say), and a restarted notifier: nothing more.
		spec := job.New(notify.EscalateArgs{Question: qs[0].ID, Since: start})
		ins, err := spec.Insert("dup-"+qs[0].ID, w.clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		w.exec(ins.SQL, ins.Args...)
		if ran := w.runDue(notify.JobEscalate); ran != 1 {
			t.Fatalf("the duplicate job: %d ran", ran)
		}
		w.clk.Advance(24 * time.Hour)
		if got := countEvents(t, s, "question.escalated"); got != 1 {
			t.Errorf("%d question.escalated events after a duplicate job, want 1", got)
		}
		if made := w.pass(fresh(w.world)); made != 0 {
			t.Errorf("a restarted notifier made %d notifications", made)
		}
	})
}

// An answered question is not escalated; nor is a non-blocking one
// (which schedules nothing).
func TestAnAnsweredQuestionIsNotEscalated(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newEscWorld(t, s)
		key := w.ticket("alice", "")
		w.ask("carol", key)
		w.pass(w.Core.Notifier)
		w.Must(201, w.tokens["carol"], "POST", "/api/v1/items/"+key+"/questions", map[string]any{"text": "fyi", "blocking": false})
		w.pass(w.Core.Notifier)
		qs := w.questions(key)
		w.clk.Advance(time.Hour)
		w.Must(200, w.tokens["alice"], "POST", "/api/v1/questions/"+qs[0].ID+"/answer", map[string]any{"answer": "Postgres"})
		w.clk.Advance(3 * time.Hour)
		if ran := w.runDue(notify.JobEscalate); ran != 1 {
			t.Fatalf("%d escalation jobs ran, want 1 (the blocking question's; the other schedules none)", ran)
		}
		if got := countEvents(t, s, "question.escalated"); got != 0 {
			t.Errorf("an answered question was escalated (%d events)", got)
		}
		if made := w.pass(w.Core.Notifier); made != 0 {
			t.Errorf("%d notifications after an answered question's due time", made)
		}
		if q := w.questions(key); q[0].EscalatedAt != nil || q[1].EscalatedAt != nil {
			t.Errorf("questions: %+v, want none escalated", q)
		}
	})
}

// Two Core instances running the same due escalation at once escalate
// once: the second batch's guard (not escalated yet) loses.
func TestTwoInstancesEscalateOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newEscWorld(t, s)
		key := w.ticket("alice", "")
		w.ask("carol", key)
		w.pass(w.Core.Notifier)
		id := w.questions(key)[0].ID
		w.clk.Advance(4 * time.Hour)
		payload := []byte(`{"question":"` + id + `","since":"` + start.Format(time.RFC3339) + `"}`)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 4 {
			h := registry{}
			fresh(w.world).Register(h)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- h[notify.JobEscalate](context.Background(), &job.Job{Kind: notify.JobEscalate, Payload: payload, Attempt: 1})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil && !errors.Is(err, store.ErrLostRace) {
				t.Errorf("an instance's escalation: %v", err)
			}
		}
		if got := countEvents(t, s, "question.escalated"); got != 1 {
			t.Errorf("%d question.escalated events from four instances, want 1", got)
		}
		if made := w.pass(w.Core.Notifier); made != 2 {
			t.Errorf("%d escalation notifications, want 2 (carol and dave, once each)", made)
		}
	})
}

// A project's own escalate_after: a shorter one escalates sooner; made
// longer meanwhile, the due job waits (snoozes) until the new time; made
// shorter, the waits already open follow it within notify.Recheck. Bad
// values are a 400 naming the field; null puts the platform's back.
func TestAProjectsEscalateAfter(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newEscWorld(t, s)
		patch := func(want int, notify any) map[string]any {
			t.Helper()
			var p struct{ Version int64 }
			w.Admin(200, "GET", "/api/v1/projects/ACME", nil).JSON(t, &p)
			return w.Admin(want, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": p.Version, "notify": notify}).Map(t)
		}
		for _, bad := range []any{"30s", "721h", "soon", "", 3600} {
			r := patch(400, map[string]any{"escalate_after": bad})
			if !strings.Contains(toJSON(t, r), `"notify.escalate_after"`) {
				t.Errorf("escalate_after %v: %v, want a 400 naming notify.escalate_after", bad, r)
			}
		}
		if r := patch(400, map[string]any{"escalate_before": "1h"}); !strings.Contains(toJSON(t, r), "escalate_before") {
			t.Errorf("an unknown field: %v", r)
		}
		p := patch(200, map[string]any{"escalate_after": "1h"})
		if got := p["notify"].(map[string]any)["escalate_after"]; got != "1h" {
			t.Fatalf("the project's notify: %v", p["notify"])
		}
		key := w.ticket("alice", "")
		w.ask("carol", key)
		w.pass(w.Core.Notifier)
		patch(200, map[string]any{"escalate_after": "3h"})
		w.clk.Advance(time.Hour)
		if ran := w.runDue(notify.JobEscalate); ran != 0 || countEvents(t, s, "question.escalated") != 0 {
			t.Fatalf("escalated after 1h though the project now says 3h (%d ran)", ran)
		}
		w.clk.Advance(2*time.Hour - time.Millisecond)
		if ran := w.runDue(notify.JobEscalate); ran != 0 || countEvents(t, s, "question.escalated") != 0 {
			t.Fatalf("escalated before the project's 3h (%d ran)", ran)
		}
		w.clk.Advance(time.Millisecond)
		if ran := w.runDue(notify.JobEscalate); ran != 1 || countEvents(t, s, "question.escalated") != 1 {
			t.Fatalf("not escalated at the project's 3h (%d ran)", ran)
		}

		// Made shorter while a question waits: it follows within Recheck.
		asked := w.clk.Now()
		w.ask("carol", key)
		w.pass(w.Core.Notifier)
		patch(200, map[string]any{"escalate_after": "5m"})
		w.clk.Advance(notify.Recheck)
		if ran := w.runDue(notify.JobEscalate); ran != 1 || countEvents(t, s, "question.escalated") != 2 {
			t.Fatalf("a question asked under 3h, the project now at 5m: not escalated %s later (%d ran)", w.clk.Now().Sub(asked), ran)
		}
		if p := patch(200, nil); p["notify"].(map[string]any)["escalate_after"] != nil {
			t.Errorf("notify null: %v, want the platform's (escalate_after null)", p["notify"])
		}
	})
}

// An approval still waiting after escalate_after reaches the project's
// admins, not its assignee; the flow shows it escalated until the approval
// comes. An approval given in time is not escalated.
func TestAnApprovalEscalates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newEscWorld(t, s)
		w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/bug", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{map[string]any{"id": "review", "kind": "human"}}}})
		started := func() string {
			var it struct{ Key string }
			w.Must(201, w.tokens["alice"], "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "bug", "title": "a bug",
				"acceptance_criteria": "it works", "state": "ready", "assignee": "bob"}).JSON(t, &it)
			w.Admin(200, "POST", "/api/v1/items/"+it.Key+"/flow/start", nil)
			w.runDue(flow.JobEnter)
			return it.Key
		}
		type view struct {
			Waiting     string
			EscalatedAt *time.Time `json:"escalated_at"`
		}
		flowOf := func(key string) view {
			var v view
			w.Admin(200, "GET", "/api/v1/items/"+key+"/flow", nil).JSON(t, &v)
			return v
		}
		late, early := started(), started()
		if v := flowOf(late); v.Waiting != "approval" {
			t.Fatalf("flow of %s: %+v, want waiting for an approval", late, v)
		}
		w.pass(w.Core.Notifier)
		w.clk.Advance(time.Hour)
		// An escalation decided before the approval came commits nothing.
		stale := escalation(t, w, early)
		w.Must(200, w.tokens["carol"], "POST", "/api/v1/items/"+early+"/flow/approve", nil)
		if err := w.Core.Applier.Apply(context.Background(), &stale); !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("an escalation decided before the approval: %v, want a lost race", err)
		}
		w.clk.Advance(3 * time.Hour)
		// Two decided on one read (two instances): the second loses.
		a, b := escalation(t, w, late), escalation(t, w, late)
		if err := w.Core.Applier.Apply(context.Background(), &a); err != nil {
			t.Fatal(err)
		}
		if err := w.Core.Applier.Apply(context.Background(), &b); !errors.Is(err, store.ErrLostRace) {
			t.Fatalf("a second escalation on the same read: %v, want a lost race", err)
		}
		if ran := w.runDue(notify.JobEscalate); ran != 2 {
			t.Fatalf("%d escalation jobs ran, want 2", ran)
		}
		if got := countEvents(t, s, "flow.approval_escalated"); got != 1 {
			t.Fatalf("%d flow.approval_escalated events, want 1 (the approval given in time is not escalated)", got)
		}
		if v := flowOf(late); v.EscalatedAt == nil || !v.EscalatedAt.Equal(start.Add(4*time.Hour)) {
			t.Errorf("the waiting flow: %+v, want escalated_at 4h after it began waiting", v)
		}
		w.pass(w.Core.Notifier)
		for person, want := range map[string]string{
			"bob": "approval.waiting " + early + ",approval.waiting " + late, "carol": notify.CauseQuestionEscalated + " " + late,
			"dave": notify.CauseQuestionEscalated + " " + late, "alice": "ticket.done " + early,
		} {
			if got := strings.Join(w.causesOf(person), ","); got != want {
				t.Errorf("%s's notifications: %q, want %q", person, got, want)
			}
		}
		w.Must(200, w.tokens["carol"], "POST", "/api/v1/items/"+late+"/flow/approve", nil)
		if v := flowOf(late); v.EscalatedAt != nil {
			t.Errorf("after the approval, the flow still shows escalated: %+v", v)
		}
	})
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// escalation decides escalating the approval key's flow waits for now, on
// a fresh read.
func escalation(t *testing.T, w *escWorld, key string) transition.Transition {
	t.Helper()
	ctx := context.Background()
	it, err := w.Core.Tracker.FindItem(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	f, ok, err := w.Core.Flows.Latest(ctx, it.ID)
	if err != nil || !ok {
		t.Fatalf("flow of %s: %v", key, err)
	}
	tr, ok := flow.EscalateApproval(notify.Actor, f, key, f.Step, start, 4*time.Hour, w.clk.Now())
	if !ok {
		t.Fatalf("%s's flow (%s/%s) has no approval to escalate", key, f.Status, f.Waiting)
	}
	return tr
}
