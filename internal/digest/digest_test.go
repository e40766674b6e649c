package digest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/budget"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/digest"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/needsme"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/testkit/hang"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/tracker"
	"github.com/ballet/ballet/internal/transition"
)

// t0 is a Sunday noon in UTC: the default period closes at midnight UTC.
var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

const base = "https://ballet.example"

// world writes the rows a digest reads, as their owners would.
type world struct {
	t        *testing.T
	s        store.Store
	clk      *clock.Fake
	applier  *transition.Applier
	builder  *digest.Builder
	orgs     map[string]string // slug → id
	projects map[string]string // key → id
	projOrg  map[string]string // key → org id
	n        map[string]int
}

func newWorld(t *testing.T, s store.Store) *world {
	clk := clock.NewFake(t0)
	w := &world{t: t, s: s, clk: clk, orgs: map[string]string{}, projects: map[string]string{}, projOrg: map[string]string{}, n: map[string]int{}}
	w.applier = &transition.Applier{Store: s, Clock: clk}
	res := &access.Resolver{Store: s}
	ten := &tenancy.Service{Store: s, Applier: w.applier, Clock: clk}
	w.builder = &digest.Builder{Store: s, Access: res, Needs: &needsme.Service{Store: s, Access: res, Flows: &flow.Service{Clock: clk}},
		Items: tracker.New(s, w.applier, clk, ten, tracker.Hooks{}), Projects: ten, Spend: &budget.Service{Store: s, Clock: clk}, BaseURL: base}
	return w
}

func (w *world) exec(sql string, args ...any) {
	w.t.Helper()
	if _, err := w.s.Exec(w.t.Context(), store.Stmt(sql, args...)); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) org(slug string) {
	id := transition.NewID()
	w.orgs[slug] = id
	w.exec(`INSERT INTO organizations (id, slug, name, created_at, updated_at, version) VALUES (?, ?, ?, 0, 0, 1)`, id, slug, slug)
}

func (w *world) project(org, key string, perDay any) {
	id := transition.NewID()
	w.projects[key], w.projOrg[key] = id, w.orgs[org]
	w.exec(`INSERT INTO projects (id, organization_id, key, name, merge_policy, required_approvals, required_checks, concurrency_limit,
ticket_types, paused, budget_day_micros, created_at, updated_at, version) VALUES (?, ?, ?, ?, 'human', 0, '[]', 0, '["task"]', 0, ?, 0, 0, 1)`,
		id, w.orgs[org], key, "Project "+key, perDay)
}

func (w *world) member(org, project, subject, role string) {
	pid := ""
	if project != "" {
		pid = w.projects[project]
	}
	w.exec(`INSERT INTO memberships (organization_id, project_id, subject, role, created_at, updated_at, version) VALUES (?, ?, ?, ?, 0, 0, 1)`,
		w.orgs[org], pid, subject, role)
}

// settings gives a person a confirmed address and a digest choice, saved
// long ago.
func (w *world) settings(subject, choice string, hour any, zone string) {
	w.exec(`INSERT INTO notification_settings (subject, email, email_source, email_confirmed_at, digest, digest_hour, time_zone, updated_at, version)
VALUES (?, ?, 'entered', 1, ?, ?, ?, 0, 1)`, subject, subject+"@example.com", choice, hour, zone)
}

// item writes a ticket of the project and returns its key and id.
func (w *world) item(project, title string) (key, id string) {
	w.n[project]++
	key, id = fmt.Sprintf("%s-%d", project, w.n[project]), transition.NewID()
	w.exec(`INSERT INTO items (id, organization_id, project_id, number, key, type, title, description, acceptance_criteria, state, created_by,
created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, 'task', ?, '', '', 'in_progress', 'ann', 0, 0, 1)`,
		id, w.projOrg[project], w.projects[project], w.n[project], key, title)
	return key, id
}

// question opens a blocking question on a new ticket at at.
func (w *world) question(project string, at time.Time) string {
	key, id := w.item(project, "asks")
	w.exec(`INSERT INTO questions (id, organization_id, project_id, item_id, text, blocking, asked_by_kind, asked_by, asked_at, version)
VALUES (?, ?, ?, ?, 'Which database?', 1, 'human', 'bob', ?, 1)`, transition.NewID(), w.projOrg[project], w.projects[project], id, at.UnixMilli())
	return key
}

// flow writes a flow of a new ticket and returns the ticket's key and the
// flow's id.
func (w *world) flow(project, title, status, waiting string, at time.Time) (key, flowID string) {
	key, id := w.item(project, title)
	flowID = transition.NewID()
	w.exec(`INSERT INTO flows (id, organization_id, project_id, item_id, pipeline, pipeline_version, definition, stage, iteration, max_iterations,
step, status, waiting, started_at, updated_at, version) VALUES (?, ?, ?, ?, 'default', 0, '{}', 'merge', 1, 3, 1, ?, ?, ?, ?, 1)`,
		flowID, w.projOrg[project], w.projects[project], id, status, waiting, at.UnixMilli(), at.UnixMilli())
	return key, flowID
}

// emit appends an event of an entity of the project.
func (w *world) emit(project, entityID string, p event.Payload) int64 {
	w.t.Helper()
	e := event.Of(event.System, w.projOrg[project], w.projects[project], entityID, p)
	e.ID, e.OccurredAt = transition.NewID(), w.clk.Now()
	ins := e.Insert()
	w.exec(ins.SQL, ins.Args...)
	seq, err := event.LastSeq(w.t.Context(), w.s)
	if err != nil {
		w.t.Fatal(err)
	}
	return seq
}

// run records a finished run of a ticket of the project costing micros.
func (w *world) run(project string, micros int64, finished time.Time) {
	_, flowID := w.flow(project, "run", flow.StatusRunning, flow.WaitRun, finished)
	var id string
	r, err := w.s.Query(w.t.Context(), `SELECT item_id FROM flows WHERE id = ?`, flowID)
	if err != nil || r.Scan(0, &id) != nil {
		w.t.Fatal(err)
	}
	w.exec(`INSERT INTO runs (id, organization_id, project_id, item_id, flow_id, stage, iteration, step, adapter, model, instructions, skills,
artifacts, status, blocking_question, input_tokens, output_tokens, cost_micros, cancel_requested, created_at, updated_at, finished_at, version)
VALUES (?, ?, ?, ?, ?, 'impl', 1, 1, 'claude-code', 'm', 'i', '[]', '{}', 'succeeded', 0, 10, 20, ?, 0, ?, ?, ?, 1)`,
		transition.NewID(), w.projOrg[project], w.projects[project], id, flowID, micros, finished.UnixMilli(), finished.UnixMilli(),
		finished.UnixMilli())
}

func (w *world) head() int64 {
	seq, err := event.LastSeq(w.t.Context(), w.s)
	if err != nil {
		w.t.Fatal(err)
	}
	return seq
}

type person string

func (p person) AccessSubject() string            { return string(p) }
func (p person) IsPlatformAdmin() bool            { return false }
func (p person) TokenGrant() (access.Grant, bool) { return access.Grant{}, false }

func done() tracker.TicketStateChanged {
	return tracker.TicketStateChanged{From: tracker.StateInProgress, To: tracker.StateDone}
}

// TestContent: a digest lists, per project the person may read now, what
// needs them (oldest wait first; the project with the oldest wait first),
// what finished (a ticket done, a pull request merged, with its page),
// what failed or got stuck, and the spend today against the daily budget
// and in the period — only from the events in its range, and nothing of a
// project the person lost access to or of another organization.
func TestContent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.org("other")
		w.project("acme", "ACME", int64(10_000_000))
		w.project("acme", "ZED", nil)
		w.project("acme", "SIDE", nil)
		w.project("other", "OTH", nil)
		for _, p := range []string{"ACME", "ZED", "SIDE"} {
			w.member("acme", p, "ann", access.Member)
		}
		w.member("other", "", "bob", access.Admin)

		_, early := w.item("ACME", "done before the period")
		from := w.emit("ACME", early, done())

		// Needs: a question in ACME, an approval in ACME, and an older
		// question in ZED; SIDE's and OTH's are not ann's.
		q := w.question("ACME", t0.Add(-3*time.Hour))
		approval, _ := w.flow("ACME", "approve me", flow.StatusWaiting, flow.WaitApproval, t0.Add(-2*time.Hour))
		zed := w.question("ZED", t0.Add(-5*time.Hour))
		w.question("SIDE", t0.Add(-6*time.Hour))
		w.question("OTH", t0.Add(-7*time.Hour))

		// What finished and what failed in the period.
		doneKey, doneID := w.item("ACME", "shipped")
		w.emit("ACME", doneID, done())
		mergedKey, merged := w.flow("ACME", "merged", flow.StatusDone, "", t0)
		pos := flow.Position{Stage: "merge", Iteration: 1, Step: 3}
		w.emit("ACME", merged, flow.StageStarted{Position: pos, Kind: pipeline.KindPlatform, Waiting: flow.WaitChecks})
		w.emit("ACME", merged, flow.FlowWaiting{Position: pos, Waiting: flow.WaitReview, PullRequest: &forge.PullRequest{Number: 7, URL: "https://forge.example/pr/7"}})
		w.emit("ACME", merged, flow.FlowDone{Position: pos, Outcome: pipeline.OutcomeDone, Report: "merged"})
		agentKey, agent := w.flow("ACME", "agent stage done", flow.StatusRunning, flow.WaitRun, t0)
		impl := flow.Position{Stage: "impl", Iteration: 1, Step: 2}
		w.emit("ACME", agent, flow.StageStarted{Position: impl, Kind: pipeline.KindAgent, Waiting: flow.WaitRun})
		w.emit("ACME", agent, flow.StageFinished{Position: impl, Outcome: pipeline.OutcomeDone, Next: "merge"})
		failedKey, failed := w.flow("ACME", "broke", flow.StatusFailed, "", t0)
		w.emit("ACME", failed, flow.FlowFailed{Position: impl, Outcome: pipeline.OutcomeFailed, Report: "the tests fail"})
		stuckKey, stuck := w.flow("ACME", "lost", flow.StatusWaiting, flow.WaitAnswer, t0)
		w.emit("ACME", stuck, flow.FlowStuck{Position: impl, Waiting: flow.WaitAnswer, Reason: "the run was lost"})
		_, side := w.item("SIDE", "side done")
		w.emit("SIDE", side, done())
		_, oth := w.item("OTH", "other org done")
		w.emit("OTH", oth, done())
		to := w.head()
		_, late := w.item("ACME", "done after the digest's range")
		w.emit("ACME", late, done())

		w.run("ACME", 1_500_000, t0.Add(-time.Hour))
		w.run("ACME", 2_000_000, t0.Add(-30*time.Hour)) // yesterday, before the period
		w.run("OTH", 9_000_000, t0.Add(-time.Hour))

		// ann loses SIDE.
		w.exec(`DELETE FROM memberships WHERE project_id = ? AND subject = 'ann'`, w.projects["SIDE"])

		d, err := w.builder.Build(t.Context(), person("ann"), from, to, t0.Add(-12*time.Hour), t0)
		if err != nil {
			t.Fatal(err)
		}
		var projects []string
		for _, p := range d.Projects {
			projects = append(projects, p.Project)
		}
		if !slices.Equal(projects, []string{"ZED", "ACME"}) {
			t.Fatalf("projects %v, want ZED (the oldest wait) then ACME", projects)
		}
		z, a := d.Projects[0], d.Projects[1]
		if len(z.Needs) != 1 || z.Needs[0].Item != zed || z.Name != "Project ZED" || z.Spend.PerDay != nil {
			t.Errorf("ZED: %+v", z)
		}
		var needs []string
		for _, n := range a.Needs {
			needs = append(needs, n.Kind+" "+n.Item+" "+n.Link)
		}
		wantNeeds := []string{"question " + q + " " + base + "/items/" + q + "#questions", "approval " + approval + " " + base + "/items/" + approval + "#flow",
			"stuck " + stuckKey + " " + base + "/items/" + stuckKey + "#questions"} // the stuck flow needs ann too, the newest wait
		if !slices.Equal(needs, wantNeeds) {
			t.Errorf("ACME needs\n got %v\nwant %v", needs, wantNeeds)
		}
		var fin []string
		for _, f := range a.Finished {
			fin = append(fin, f.Kind+" "+f.Item+" "+f.Link+" "+f.PullRequest)
		}
		wantFin := []string{"ticket_done " + doneKey + " " + base + "/items/" + doneKey + " ",
			"pull_request_merged " + mergedKey + " " + base + "/items/" + mergedKey + "#flow https://forge.example/pr/7"}
		if !slices.Equal(fin, wantFin) {
			t.Errorf("ACME finished\n got %v\nwant %v (not %s, an agent stage)", fin, wantFin, agentKey)
		}
		var fail []string
		for _, f := range a.Failures {
			fail = append(fail, f.Kind+" "+f.Item+" "+f.Reason)
		}
		wantFail := []string{"flow_failed " + failedKey + " the tests fail", "flow_stuck " + stuckKey + " the run was lost"}
		if !slices.Equal(fail, wantFail) {
			t.Errorf("ACME failures\n got %v\nwant %v", fail, wantFail)
		}
		if a.Spend.Today != 1_500_000 || a.Spend.Period != 1_500_000 || a.Spend.Runs != 1 || a.Spend.PerDay == nil || a.Spend.PerDay.Micros() != 10_000_000 {
			t.Errorf("ACME spend %+v", a.Spend)
		}
		if d.Needs != 4 || d.Finished != 2 || d.Failures != 2 || d.Empty || d.Subject != "Ballet digest — 4 need you, 2 done, 2 failed or stuck" {
			t.Errorf("digest counts: needs %d finished %d failures %d empty %v subject %q", d.Needs, d.Finished, d.Failures, d.Empty, d.Subject)
		}
		b, _ := json.Marshal(d)
		for _, leak := range []string{"SIDE", "OTH", "other org", "done before", "after the digest"} {
			if strings.Contains(string(b), leak) {
				t.Errorf("the digest holds %q: %s", leak, b)
			}
		}
		text, html := digest.Text(d), must(digest.HTML(d))
		for _, want := range []string{base + "/items/" + q + "#questions", "https://forge.example/pr/7", "the tests fail", "$1.50 today of $10.00 a day"} {
			if !strings.Contains(text, want) || !strings.Contains(html, want) {
				t.Errorf("the text or the HTML lacks %q:\n%s\n%s", want, text, html)
			}
		}
		if strings.Index(text, zed) > strings.Index(text, q) {
			t.Errorf("the text lists ACME before ZED:\n%s", text)
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// capture is a Mailer that keeps what it is given.
type capture struct {
	mu   sync.Mutex
	sent []digest.Message
	fail error
}

func (c *capture) Send(_ context.Context, m digest.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return c.fail
	}
	c.sent = append(c.sent, m)
	return nil
}

func (w *world) digester() *digest.Digester {
	return (&digest.Digester{Store: w.s, Applier: w.applier, Clock: w.clk, Builder: w.builder, Every: 24 * time.Hour}).Init()
}

func (w *world) pass(g *digest.Digester) int {
	w.t.Helper()
	_, n, err := g.Pass(w.t.Context())
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

// rows lists a person's digests: period status from–to.
func (w *world) rows(subject string) []string {
	w.t.Helper()
	r, err := w.s.Query(w.t.Context(), `SELECT period_key, status, from_seq, to_seq FROM digests WHERE subject = ? ORDER BY period_at`, subject)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for i := range r.Len() {
		var key, status string
		var from, to int64
		if err := r.Scan(i, &key, &status, &from, &to); err != nil {
			w.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s %d-%d", key, status, from, to))
	}
	return out
}

func (w *world) count(sql string, args ...any) int64 { return storetest.Count(w.t, w.s, sql, args...) }

// TestNothingHappenedNothingSent: a period in which nothing needs the
// person, finished or failed is recorded (the period advances, with its
// event) but no job mails it; the next period with something in it is.
func TestNothingHappenedNothingSent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.project("acme", "ACME", nil)
		w.member("acme", "", "ann", access.Member)
		w.settings("ann", digest.ChoicePeriod, nil, "UTC")
		_, quiet := w.item("ACME", "not done")
		w.emit("ACME", quiet, tracker.TicketStateChanged{From: tracker.StateReady, To: tracker.StateInProgress})
		g := w.digester()
		if n := w.pass(g); n != 1 {
			t.Fatalf("first pass wrote %d digests, want 1 (the period that closed at midnight)", n)
		}
		if got := w.rows("ann"); len(got) != 1 || !strings.Contains(got[0], "2026-12-06T00:00:00Z empty") {
			t.Fatalf("digests %v, want one empty", got)
		}
		if n := w.count(`SELECT COUNT(*) FROM jobs WHERE kind = 'digest.send'`); n != 0 {
			t.Fatalf("%d mail jobs for an empty digest", n)
		}
		if n := w.count(`SELECT COUNT(*) FROM events WHERE type = 'digest.created'`); n != 1 {
			t.Fatalf("%d digest.created events, want 1", n)
		}
		if n := w.pass(g); n != 0 {
			t.Fatalf("a second pass in the same period wrote %d", n)
		}
		w.clk.Advance(24 * time.Hour)
		_, shipped := w.item("ACME", "shipped")
		w.emit("ACME", shipped, done())
		if n := w.pass(g); n != 1 {
			t.Fatalf("the next period wrote %d digests, want 1", n)
		}
		got := w.rows("ann")
		if len(got) != 2 || !strings.Contains(got[1], "2026-12-07T00:00:00Z pending") {
			t.Fatalf("digests %v", got)
		}
		var firstTo int64
		fmt.Sscanf(got[0][strings.LastIndex(got[0], "-")+1:], "%d", &firstTo)
		if !strings.Contains(got[1], fmt.Sprintf(" %d-", firstTo)) {
			t.Errorf("the second digest does not start where the first ended: %v", got)
		}
		if n := w.count(`SELECT COUNT(*) FROM jobs WHERE kind = 'digest.send'`); n != 1 {
			t.Fatalf("%d mail jobs, want 1", n)
		}
	})
}

// TestFirstDigestAfterChoosing: a person who just chose a digest (or
// confirmed their address) gets their first at the next boundary, not at
// once for the period that closed before; it covers that period.
func TestFirstDigestAfterChoosing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.project("acme", "ACME", nil)
		w.member("acme", "", "ann", access.Member)
		w.settings("ann", digest.ChoicePeriod, nil, "UTC")
		w.exec(`UPDATE notification_settings SET updated_at = ? WHERE subject = 'ann'`, w.clk.Now().UnixMilli())
		_, id := w.item("ACME", "shipped")
		w.emit("ACME", id, done())
		g := w.digester()
		if n := w.pass(g); n != 0 {
			t.Fatalf("a digest at once: %v", w.rows("ann"))
		}
		w.clk.Advance(12 * time.Hour)
		if n := w.pass(g); n != 1 {
			t.Fatalf("at midnight %d digests, want 1", n)
		}
		if got := w.rows("ann"); len(got) != 1 || !strings.HasPrefix(got[0], "2026-12-07T00:00:00Z pending 0-") {
			t.Errorf("the first digest: %v", got)
		}
	})
}

// TestExactlyOnceRacing: two digesters (two Core instances) passing at
// once write one digest per person and period, one job, one event.
func TestExactlyOnceRacing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.project("acme", "ACME", nil)
		for i := range 5 {
			sub := fmt.Sprintf("p%d", i)
			w.member("acme", "", sub, access.Member)
			w.settings(sub, digest.ChoicePeriod, nil, "UTC")
		}
		_, id := w.item("ACME", "shipped")
		w.emit("ACME", id, done())
		for round := range 3 {
			a, b := w.digester(), w.digester()
			var wg sync.WaitGroup
			var na, nb int
			wg.Go(func() { _, na, _ = a.Pass(t.Context()) })
			wg.Go(func() { _, nb, _ = b.Pass(t.Context()) })
			wg.Wait()
			if round == 0 && na+nb != 5 {
				t.Errorf("the two wrote %d + %d digests, want 5 in all", na, nb)
			}
			if round > 0 && na+nb != 0 {
				t.Errorf("round %d wrote %d + %d", round, na, nb)
			}
		}
		if n := w.count(`SELECT COUNT(*) FROM digests`); n != 5 {
			t.Errorf("%d digests, want 5", n)
		}
		if n := w.count(`SELECT COUNT(*) FROM jobs WHERE kind = 'digest.send'`); n != 5 {
			t.Errorf("%d mail jobs, want 5", n)
		}
		if n := w.count(`SELECT COUNT(*) FROM events WHERE type = 'digest.created'`); n != 5 {
			t.Errorf("%d digest.created events, want 5", n)
		}
	})
}

// TestPeriodsCrossedDuringARestart: Core down across three boundaries
// writes one digest when it is back, covering everything since the last
// one; a new digester (the restarted Core) reads where the last ended.
func TestPeriodsCrossedDuringARestart(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.project("acme", "ACME", nil)
		w.member("acme", "", "ann", access.Member)
		w.settings("ann", digest.ChoicePeriod, nil, "UTC")
		_, a := w.item("ACME", "first")
		w.emit("ACME", a, done())
		w.pass(w.digester())
		// Down: three midnights pass, and things finish meanwhile.
		for range 3 {
			w.clk.Advance(24 * time.Hour)
			_, id := w.item("ACME", "meanwhile")
			w.emit("ACME", id, done())
		}
		if n := w.pass(w.digester()); n != 1 {
			t.Fatalf("after the restart %d digests, want 1", n)
		}
		got := w.rows("ann")
		if len(got) != 2 || !strings.HasPrefix(got[1], "2026-12-09T00:00:00Z pending") {
			t.Fatalf("digests %v", got)
		}
		r, err := s.Query(t.Context(), `SELECT id, from_seq, to_seq FROM digests WHERE subject = 'ann' ORDER BY period_at DESC LIMIT 1`)
		if err != nil {
			t.Fatal(err)
		}
		var id string
		var from, to int64
		if err := r.Scan(0, &id, &from, &to); err != nil {
			t.Fatal(err)
		}
		d, err := w.builder.Build(t.Context(), person("ann"), from, to, t0, w.clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if d.Finished != 3 {
			t.Errorf("the digest after the restart lists %d finished, want the 3 since the last", d.Finished)
		}
	})
}

// TestWeeklyAndHourInAZone: a weekly person gets one digest a week on
// Monday; a person at 9h in Berlin gets theirs at 9h local time across the
// DST change (08:00 UTC, then 07:00 UTC); off gets none.
func TestWeeklyAndHourInAZone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.clk = clock.NewFake(time.Date(2026, 3, 26, 12, 0, 0, 0, time.UTC)) // a Thursday
		w.applier.Clock = w.clk
		w.org("acme")
		w.project("acme", "ACME", nil)
		for _, p := range []string{"week", "nine", "off"} {
			w.member("acme", "", p, access.Member)
		}
		w.settings("week", digest.ChoiceWeekly, nil, "UTC")
		w.settings("nine", digest.ChoicePeriod, 9, "Europe/Berlin")
		w.settings("off", digest.ChoiceOff, nil, "UTC")
		g := w.digester()
		for range 6 * 24 { // hour by hour to the next Wednesday
			w.pass(g)
			w.clk.Advance(time.Hour)
		}
		var nine []string
		for _, r := range w.rows("nine") {
			nine = append(nine, r[:len("2026-03-27T08:00:00Z")])
		}
		want := []string{"2026-03-26T08:00:00Z", "2026-03-27T08:00:00Z", "2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z", "2026-03-30T07:00:00Z",
			"2026-03-31T07:00:00Z", "2026-04-01T07:00:00Z"}
		if !slices.Equal(nine, want) {
			t.Errorf("9h Berlin\n got %v\nwant %v", nine, want)
		}
		var week []string
		for _, r := range w.rows("week") {
			week = append(week, r[:len("2026-03-27T08:00:00Z")])
		}
		if !slices.Equal(week, []string{"2026-03-23T00:00:00Z", "2026-03-30T00:00:00Z"}) {
			t.Errorf("weekly: %v", week)
		}
		if got := w.rows("off"); len(got) != 0 {
			t.Errorf("off: %v", got)
		}
	})
}

// TestSend: the job mails a pending digest to the confirmed address (text
// and HTML with links, a stable Message-ID) and records digest.sent; run
// again it sends nothing. Without a confirmed address it is skipped; a
// mail server that refuses until the last attempt makes it failed.
func TestSend(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.project("acme", "ACME", nil)
		for _, p := range []string{"ann", "bob", "cat"} {
			w.member("acme", "", p, access.Member)
			w.settings(p, digest.ChoicePeriod, nil, "UTC")
		}
		key, id := w.item("ACME", "shipped")
		w.emit("ACME", id, done())
		w.pass(w.digester())
		mail := &capture{}
		snd := &digest.Sender{Store: s, Applier: w.applier, Clock: w.clk, Builder: w.builder, Mailer: mail, MessageDomain: "ballet.example",
			Unsubscribe: func(_ context.Context, sub string) (string, error) { return base + "/unsubscribe/" + sub, nil }}
		reg := registry{}
		snd.Register(reg)
		ids := map[string]string{}
		r, err := s.Query(t.Context(), `SELECT subject, id FROM digests`)
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.Len() {
			var sub, did string
			_ = r.Scan(i, &sub, &did)
			ids[sub] = did
		}
		run := func(sub string, attempt int) error {
			payload, _ := json.Marshal(digest.SendArgs{Digest: ids[sub]})
			return reg["digest.send"](t.Context(), &job.Job{Kind: "digest.send", Payload: payload, Attempt: attempt, Failures: attempt - 1, MaxAttempts: 3})
		}
		if err := run("ann", 1); err != nil {
			t.Fatal(err)
		}
		if err := run("ann", 2); err != nil { // a repeat: already sent
			t.Fatal(err)
		}
		if len(mail.sent) != 1 {
			t.Fatalf("%d mails, want 1", len(mail.sent))
		}
		m := mail.sent[0]
		if m.To != "ann@example.com" || m.Subject != "Ballet digest — 1 done" || m.MessageID != "<digest-"+ids["ann"]+"@ballet.example>" ||
			m.Unsubscribe != base+"/unsubscribe/ann" || !strings.Contains(m.Text, base+"/items/"+key) || !strings.Contains(m.HTML, `href="`+base+"/items/"+key+`"`) {
			t.Errorf("mail %+v", m)
		}
		// bob's address is gone before the job runs.
		w.exec(`UPDATE notification_settings SET email_confirmed_at = NULL WHERE subject = 'bob'`)
		if err := run("bob", 1); err != nil {
			t.Fatal(err)
		}
		mail.fail = fmt.Errorf("421 try later")
		if err := run("cat", 2); err == nil {
			t.Fatal("a refused mail is no error")
		}
		if got := w.rows("cat"); !strings.Contains(got[0], "pending") {
			t.Errorf("cat after a refused attempt: %v", got)
		}
		if err := run("cat", 3); err == nil {
			t.Fatal("a refused last attempt is no error")
		}
		for sub, want := range map[string]string{"ann": "sent", "bob": "skipped", "cat": "failed"} {
			if got := w.rows(sub); len(got) != 1 || !strings.Contains(got[0], " "+want+" ") {
				t.Errorf("%s: %v, want %s", sub, got, want)
			}
		}
		for typ, want := range map[string]int64{"digest.sent": 1, "digest.failed": 2} {
			if n := w.count(`SELECT COUNT(*) FROM events WHERE type = ?`, typ); n != want {
				t.Errorf("%d %s events, want %d", n, typ, want)
			}
		}
	})
}

// registry keeps the handlers registered.
type registry map[string]job.Handler

func (r registry) Handle(kind string, h job.Handler) { r[kind] = h }

// TestRunWakesAtTheBoundary: the leader's loop, on a fake clock, writes a
// person's digest when their period closes — not before — without a nudge
// or a poll in between (its poll interval here is longer than the period).
func TestRunWakesAtTheBoundary(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.project("acme", "ACME", nil)
		w.member("acme", "", "ann", access.Member)
		w.settings("ann", digest.ChoicePeriod, nil, "UTC")
		g := w.digester()
		g.Interval = 48 * time.Hour
		ctx, cancel := context.WithCancel(t.Context())
		stopped := make(chan struct{})
		go func() { g.Run(ctx); close(stopped) }()
		defer func() { cancel(); hang.Recv(t, stopped, "the digester to stop") }()
		hang.BlockUntil(t, w.clk, 1, "the first pass")
		if got := w.rows("ann"); len(got) != 1 {
			t.Fatalf("after the first pass: %v", got)
		}
		w.clk.Advance(12*time.Hour - time.Minute) // 23:59
		hang.BlockUntil(t, w.clk, 1, "the loop to sleep again")
		if got := w.rows("ann"); len(got) != 1 {
			t.Fatalf("before midnight: %v", got)
		}
		w.clk.Advance(time.Minute) // midnight: the period closes
		hang.BlockUntil(t, w.clk, 1, "the pass at midnight")
		if got := w.rows("ann"); len(got) != 2 || !strings.HasPrefix(got[1], "2026-12-07T00:00:00Z") {
			t.Fatalf("at midnight: %v", got)
		}
	})
}

// failingHook writes a hook of the organization (project "" for its own)
// whose one delivery, begun at at, is being retried after a 500.
func (w *world) failingHook(org, project string, at time.Time) string {
	id, pid := transition.NewID(), ""
	if project != "" {
		pid = w.projects[project]
	}
	w.exec(`INSERT INTO webhooks (id, organization_id, project_id, url, events, format, active, secret, created_by, created_at, updated_at, version)
VALUES (?, ?, ?, 'https://hooks.example.com/in/s3cr3t', '["*"]', 'standard', 1, 'c2VjcmV0', 'ann', 0, 0, 1)`, id, w.orgs[org], pid)
	w.exec(`INSERT INTO webhook_deliveries (id, webhook_id, organization_id, project_id, cause, item_key, event_id, event_seq, payload, status,
attempts, http_status, error, started_at, last_attempt_at, created_at, updated_at, version)
VALUES (?, ?, ?, ?, 'question.opened', 'X-1', ?, 1, '{}', 'pending', 2, 500, 'HTTP 500', ?, ?, ?, ?, 1)`,
		transition.NewID(), id, w.orgs[org], pid, transition.NewID(), at.UnixMilli(), at.UnixMilli(), at.UnixMilli(), at.UnixMilli())
	return id
}

// TestFailingChannelsInTheDigest: a failing hook is in the digest of the
// admins of its organization or project — apart from the projects, with a
// link to where it is managed — and counts as something that needs them,
// so the digest is not empty; a member's digest has none of it.
func TestFailingChannelsInTheDigest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.project("acme", "ACME", nil)
		w.member("acme", "", "ann", access.Admin)
		w.member("acme", "", "mel", access.Member)
		orgHook := w.failingHook("acme", "", t0.Add(-2*time.Hour))
		projHook := w.failingHook("acme", "ACME", t0.Add(-time.Hour))
		head := w.head()
		d, err := w.builder.Build(t.Context(), person("ann"), head, head, t0.Add(-24*time.Hour), t0)
		if err != nil {
			t.Fatal(err)
		}
		want := []digest.DigestChannel{
			{Kind: needsme.KindWebhookFailing, Org: "acme", Webhook: orgHook, Title: "Webhook to hooks.example.com", Since: t0.Add(-2 * time.Hour),
				Detail: "Its deliveries fail and are being retried — HTTP 500", Link: base + "/orgs#webhooks-acme"},
			{Kind: needsme.KindWebhookFailing, Org: "acme", Project: "ACME", Webhook: projHook, Title: "Webhook to hooks.example.com",
				Since: t0.Add(-time.Hour), Detail: "Its deliveries fail and are being retried — HTTP 500", Link: base + "/projects/ACME/settings#webhooks"},
		}
		if !slices.Equal(d.Channels, want) || d.Needs != 2 || d.Empty || len(d.Projects) != 0 || d.Subject != "Ballet digest — 2 need you" {
			t.Errorf("ann's digest: channels %+v, needs %d, empty %v, projects %+v, subject %q", d.Channels, d.Needs, d.Empty, d.Projects, d.Subject)
		}
		if text := digest.Text(d); !strings.Contains(text, base+"/orgs#webhooks-acme") || strings.Contains(text, "s3cr3t") {
			t.Errorf("ann's digest text:\n%s", text)
		}
		d, err = w.builder.Build(t.Context(), person("mel"), head, head, t0.Add(-24*time.Hour), t0)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Channels) != 0 || !d.Empty {
			t.Errorf("mel's digest: %+v", d)
		}
	})
}
