package needsme_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/needsme"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// principal is a person (or, with grant, a token).
type principal struct {
	sub   string
	admin bool
	grant *access.Grant
}

func (p principal) AccessSubject() string { return p.sub }
func (p principal) IsPlatformAdmin() bool { return p.admin }
func (p principal) TokenGrant() (access.Grant, bool) {
	if p.grant == nil {
		return access.Grant{}, false
	}
	return *p.grant, true
}

var platform = principal{sub: "root", admin: true}

// world writes the rows the read model joins, as their owners would.
type world struct {
	t        *testing.T
	s        store.Store
	clk      *clock.Fake
	svc      *needsme.Service
	orgs     map[string]string // slug → id
	projects map[string]string // key → id
	projOrg  map[string]string // key → org id
	n        map[string]int
}

func newWorld(t *testing.T, s store.Store) *world {
	clk := clock.NewFake(t0.Add(time.Hour))
	w := &world{t: t, s: s, clk: clk, orgs: map[string]string{}, projects: map[string]string{}, projOrg: map[string]string{}, n: map[string]int{}}
	w.svc = &needsme.Service{Store: s, Access: &access.Resolver{Store: s}, Flows: &flow.Service{Clock: clk}}
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

func (w *world) project(org, key string) {
	id := transition.NewID()
	w.projects[key], w.projOrg[key] = id, w.orgs[org]
	w.exec(`INSERT INTO projects (id, organization_id, key, name, merge_policy, required_approvals, required_checks, concurrency_limit,
ticket_types, paused, created_at, updated_at, version) VALUES (?, ?, ?, ?, 'human', 0, '[]', 0, '["task"]', 0, 0, 0, 1)`, id, w.orgs[org], key, key)
}

func (w *world) member(org, project, subject, role string) {
	pid := ""
	if project != "" {
		pid = w.projects[project]
	}
	w.exec(`INSERT INTO memberships (organization_id, project_id, subject, role, created_at, updated_at, version) VALUES (?, ?, ?, ?, 0, 0, 1)`,
		w.orgs[org], pid, subject, role)
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

// question asks on a new ticket, minutes after t0.
func (w *world) question(project, text string, minutes int, blocking, answered bool) string {
	key, id := w.item(project, "q: "+text)
	var answer, at any
	if answered {
		answer, at = "yes", t0.Add(2*time.Hour).UnixMilli()
	}
	w.exec(`INSERT INTO questions (id, organization_id, project_id, item_id, text, blocking, asked_by_kind, asked_by, asked_at, answer, answered_by,
answered_at, version) VALUES (?, ?, ?, ?, ?, ?, 'human', 'ann', ?, ?, ?, ?, 1)`, transition.NewID(), w.projOrg[project], w.projects[project], id,
		text, blocking, t0.Add(time.Duration(minutes)*time.Minute).UnixMilli(), answer, answer, at)
	return key
}

// flow writes a flow of a new ticket in a status and wait, updated
// minutes after t0, and returns the ticket's key and the flow's id.
func (w *world) flow(project, stage, status, waiting string, minutes int, runID string) (key, flowID string) {
	key, id := w.item(project, stage+" of "+project)
	flowID = transition.NewID()
	var run any
	if runID != "" {
		run = runID
	}
	at := t0.Add(time.Duration(minutes) * time.Minute).UnixMilli()
	w.exec(`INSERT INTO flows (id, organization_id, project_id, item_id, pipeline, pipeline_version, definition, stage, iteration, max_iterations,
step, status, waiting, run_id, outcome, report, started_at, updated_at, finished_at, version)
VALUES (?, ?, ?, ?, 'default', 0, '{}', ?, 1, 3, 1, ?, ?, ?, NULL, NULL, ?, ?, NULL, 1)`,
		flowID, w.projOrg[project], w.projects[project], id, stage, status, waiting, run, at, at)
	if runID != "" {
		w.exec(`INSERT INTO runs (id, organization_id, project_id, item_id, flow_id, stage, iteration, step, adapter, model, instructions, skills,
artifacts, status, blocking_question, input_tokens, output_tokens, cost_micros, cancel_requested, created_at, updated_at, version)
VALUES (?, ?, ?, ?, ?, ?, 1, 1, 'claude-code', 'm', 'i', '[]', '{}', 'queued', 0, 0, 0, 0, 0, ?, ?, 1)`,
			runID, w.projOrg[project], w.projects[project], id, flowID, stage, at, at)
	}
	return key, flowID
}

// event appends an event of the flow.
func (w *world) event(project, flowID, change string) {
	e := event.New(event.System, w.projOrg[project], w.projects[project], "flow", flowID, change, map[string]any{})
	e.ID, e.OccurredAt = transition.NewID(), w.clk.Now()
	ins := e.Insert()
	w.exec(ins.SQL, ins.Args...)
}

func (w *world) list(p access.Principal, limit int) needsme.List {
	w.t.Helper()
	l, err := w.svc.List(w.t.Context(), p, limit)
	if err != nil {
		w.t.Fatal(err)
	}
	return l
}

func keys(l needsme.List) []string {
	out := []string{}
	for _, e := range l.Items {
		out = append(out, e.Kind+" "+e.Item)
	}
	return out
}

// TestEveryKindOldestFirst: each kind of wait once, in whatever order the
// rows were written, comes oldest first (ties by ticket key), with its
// organization, project, ticket, title, stage and detail; what does not
// wait for a person (an answered or non-blocking question, a flow running
// with a runner on its way, one waiting for an answer or for checks, a
// finished one) is not there.
func TestEveryKindOldestFirst(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.project("acme", "ACME")
		long := strings.Repeat("é", 205)
		want := map[int]string{}
		want[9] = "question " + w.question("ACME", "Which database?\nWe have two.", 9, true, false)
		want[1] = "question " + w.question("ACME", long, 1, true, false)
		w.question("ACME", "answered", 0, true, true)
		w.question("ACME", "not blocking", 0, false, false)
		k, _ := w.flow("ACME", "triage", flow.StatusWaiting, flow.WaitApproval, 5, "")
		want[5] = "approval " + k
		k, _ = w.flow("ACME", "merge", flow.StatusWaiting, flow.WaitReview, 3, "")
		want[3] = "review " + k
		k, _ = w.flow("ACME", "merge", flow.StatusWaiting, flow.WaitMerge, 7, "")
		want[7] = "merge " + k
		k, _ = w.flow("ACME", "fix", flow.StatusWaiting, flow.WaitBudget, 2, "")
		want[2] = "budget " + k
		k, _ = w.flow("ACME", "fix", flow.StatusWaiting, flow.WaitPause, 8, "")
		want[8] = "pause " + k
		k, stuck := w.flow("ACME", "fix", flow.StatusWaiting, flow.WaitAnswer, 4, "")
		w.event("ACME", stuck, "stuck")
		want[4] = "stuck " + k
		_, resumed := w.flow("ACME", "fix", flow.StatusWaiting, flow.WaitAnswer, 0, "") // stuck, then answered: no longer
		w.event("ACME", resumed, "stuck")
		w.event("ACME", resumed, "answered")
		w.flow("ACME", "fix", flow.StatusWaiting, flow.WaitAnswer, 0, "")
		w.flow("ACME", "fix", flow.StatusWaiting, flow.WaitChecks, 0, "")
		w.flow("ACME", "fix", flow.StatusDone, "", 0, "")
		// A run queued 6 minutes after t0 is 54 minutes old at the clock's
		// now: past the unclaimed limit, no runner took it.
		k, _ = w.flow("ACME", "impl", flow.StatusRunning, flow.WaitRun, 6, transition.NewID())
		want[6] = "no_runner " + k
		// A run queued just now, with a live runner that has its adapter: on its way.
		w.flow("ACME", "impl", flow.StatusRunning, flow.WaitRun, 60, transition.NewID())
		w.exec(`INSERT INTO runners (id, name, token_id, labels, created_at, last_seen_at, version) VALUES (?, 'r1', 't', '{}', 0, ?, 1)`,
			transition.NewID(), w.clk.Now().UnixMilli())

		l := w.list(platform, needsme.DefaultLimit)
		var order []string
		for m := range 10 {
			if v, ok := want[m]; ok {
				order = append(order, v)
			}
		}
		if got := keys(l); !slices.Equal(got, order) || l.Truncated {
			t.Fatalf("needs-me:\n got %v (truncated %v)\nwant %v", got, l.Truncated, order)
		}
		for i, e := range l.Items {
			if e.Org != "acme" || e.Project != "ACME" || e.Title == "" || !strings.HasPrefix(e.Item, "ACME-") {
				t.Errorf("entry %d: %+v", i, e)
			}
			if e.Kind == needsme.KindQuestion {
				if e.Question == nil || e.Stage != "" || !strings.HasPrefix(e.Detail, "Blocking question: ") {
					t.Errorf("question entry %+v", e)
				}
			} else if e.Question != nil || e.Stage == "" || !strings.Contains(e.Detail, e.Stage) {
				t.Errorf("flow entry %+v", e)
			}
		}
		first := l.Items[0]
		if want := "Blocking question: " + strings.Repeat("é", 200) + "…"; first.Detail != want || first.Question.Text != long ||
			!first.Since.Equal(t0.Add(time.Minute)) {
			t.Errorf("a long question: %q since %v", first.Detail, first.Since)
		}
		if q := l.Items[len(l.Items)-1]; q.Detail != "Blocking question: Which database?…" || q.Question.ID == "" {
			t.Errorf("a question of two lines: %+v", q)
		}
		details := map[string]string{}
		for _, e := range l.Items {
			details[e.Kind] = e.Detail
		}
		// needsme.TicketKinds is every ticket's kind there is (the channels'
		// are TestFailingMailIsForPlatformAdmins' and
		// TestFailingWebhooksAreForTheirAdmins').
		if got, want := slices.Sorted(maps.Keys(details)), slices.Sorted(slices.Values(needsme.TicketKinds)); !slices.Equal(got, want) {
			t.Errorf("kinds listed %v, needsme.Kinds %v", got, want)
		}
		for kind, want := range map[string]string{
			needsme.KindApproval: "Stage triage waits for an approval",
			needsme.KindReview:   "The pull request of stage merge waits for a review",
			needsme.KindMerge:    "The pull request of stage merge waits for a person to merge it",
			needsme.KindBudget:   "Stage fix waits for budget: a spending limit is reached",
			needsme.KindPause:    "Stage fix waits while the project or the platform is paused",
			needsme.KindNoRunner: "No runner has taken the run of stage impl",
			needsme.KindStuck:    "Stuck at stage fix: answer its blocking question to run the stage again, or pause or cancel the ticket",
		} {
			if details[kind] != want {
				t.Errorf("%s: %q, want %q", kind, details[kind], want)
			}
		}
	})
}

// TestTruncatedKeepsTheOldest: with more waiting than the limit — in both
// queries, interleaved in time — the list keeps the oldest, in order, and
// says it is truncated; at exactly the limit it is whole.
func TestTruncatedKeepsTheOldest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.project("acme", "ACME")
		var all []string // by age
		for m := 20; m >= 1; m-- {
			var k string
			if m%2 == 0 {
				k = "question " + w.question("ACME", fmt.Sprintf("q%d", m), m, true, false)
			} else {
				kk, _ := w.flow("ACME", "triage", flow.StatusWaiting, flow.WaitApproval, m, "")
				k = "approval " + kk
			}
			all = append([]string{k}, all...)
		}
		for _, limit := range []int{1, 3, 8, 19, 20, 21} {
			l := w.list(platform, limit)
			n := min(limit, len(all))
			if got := keys(l); !slices.Equal(got, all[:n]) || l.Truncated != (limit < len(all)) {
				t.Errorf("limit %d: %v (truncated %v), want the %d oldest %v (truncated %v)", limit, got, l.Truncated, n, all[:n], limit < len(all))
			}
		}
		// Twelve of the same age, older than the rest: by project key,
		// then ticket number (TIE-2 before TIE-10), whichever query they
		// come from.
		w.project("acme", "TIE")
		var ties []string
		for i := 1; i <= 12; i++ {
			if i%2 == 1 {
				ties = append(ties, "question "+w.question("TIE", "tie", -5, true, false))
			} else {
				k, _ := w.flow("TIE", "triage", flow.StatusWaiting, flow.WaitApproval, -5, "")
				ties = append(ties, "approval "+k)
			}
		}
		if got := keys(w.list(platform, 5)); !slices.Equal(got, ties[:5]) {
			t.Errorf("ties at the same age, limit 5: %v, want %v", got, ties[:5])
		}
		if got := keys(w.list(platform, 12)); !slices.Equal(got, ties) {
			t.Errorf("ties at the same age, limit 12: %v, want %v", got, ties)
		}
	})
}

// TestOnlyWhatTheCallerMayRead: an organization's member sees its
// organization's waits, a project override only that project's, a token
// only its organization's (none with a scope without tracker.read), and a
// principal with no role nothing; another organization's never.
func TestOnlyWhatTheCallerMayRead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.org("globex")
		w.project("acme", "ACME")
		w.project("acme", "OPS")
		w.project("globex", "GLX")
		acme := "question " + w.question("ACME", "acme's", 1, true, false)
		ops := "question " + w.question("OPS", "ops'", 2, true, false)
		glx := "question " + w.question("GLX", "globex's", 3, true, false)
		w.member("acme", "", "ann", "viewer")
		w.member("acme", "OPS", "pam", "member")
		w.member("globex", "", "gus", "admin")
		w.member("globex", "", "zed", "viewer")
		w.member("acme", "OPS", "zed", "viewer")
		for _, c := range []struct {
			name string
			p    access.Principal
			want []string
		}{
			{"platform admin", platform, []string{acme, ops, glx}},
			{"acme's viewer", principal{sub: "ann"}, []string{acme, ops}},
			{"OPS' member only", principal{sub: "pam"}, []string{ops}},
			{"globex's admin", principal{sub: "gus"}, []string{glx}},
			{"globex's viewer and OPS' viewer", principal{sub: "zed"}, []string{ops, glx}},
			{"nobody", principal{sub: "nobody"}, []string{}},
			{"acme's token", principal{sub: "tok", grant: &access.Grant{OrgID: w.orgs["acme"], Role: "viewer"}}, []string{acme, ops}},
			{"a token without tracker.read", principal{sub: "tok", grant: &access.Grant{OrgID: w.orgs["acme"], Role: "viewer",
				Scopes: []string{"run:x"}}}, []string{}},
		} {
			if got := keys(w.list(c.p, 10)); !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
	})
}

// TestTruncatedWhenOneQueryHasEveryRow: when every wait is a question (or
// every one a flow), that one query alone holds more rows than the limit:
// the list still has the limit's oldest and says it is truncated; at
// exactly the limit it is whole.
func TestTruncatedWhenOneQueryHasEveryRow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.project("acme", "QS")
		w.project("acme", "FS")
		var qs, fs []string
		for m := range 4 {
			qs = append(qs, "question "+w.question("QS", fmt.Sprintf("q%d", m), m, true, false))
		}
		for m := range 4 {
			k, _ := w.flow("FS", "triage", flow.StatusWaiting, flow.WaitApproval, 10+m, "")
			fs = append(fs, "approval "+k)
		}
		ann := principal{sub: "ann"}
		w.member("acme", "QS", "ann", "viewer")
		for _, c := range []struct {
			name string
			p    access.Principal
			want []string
		}{{"questions", ann, qs}, {"flows", principal{sub: "fay"}, fs}} {
			if c.name == "flows" {
				w.member("acme", "FS", "fay", "viewer")
			}
			if l := w.list(c.p, 3); !slices.Equal(keys(l), c.want[:3]) || !l.Truncated {
				t.Errorf("%s, limit 3: %v (truncated %v), want %v truncated", c.name, keys(l), l.Truncated, c.want[:3])
			}
			if l := w.list(c.p, 4); !slices.Equal(keys(l), c.want) || l.Truncated {
				t.Errorf("%s, limit 4: %v (truncated %v), want %v whole", c.name, keys(l), l.Truncated, c.want)
			}
		}
	})
}

// TestFinishedFlowsDoNotWaitWhateverTheirWait: a flow that is done, failed
// or stopped is not listed even if its last wait (approval, review, merge)
// is still on its row.
func TestFinishedFlowsDoNotWaitWhateverTheirWait(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.project("acme", "ACME")
		for _, st := range []string{flow.StatusDone, flow.StatusFailed, flow.StatusStopped, flow.StatusRunning} {
			w.flow("ACME", "triage", st, flow.WaitApproval, 1, "")
			w.flow("ACME", "merge", st, flow.WaitMerge, 1, "")
		}
		if l := w.list(platform, 10); len(l.Items) != 0 {
			t.Errorf("finished or running flows listed: %v", keys(l))
		}
	})
}

// TestAQuestionOfExactly200CharactersIsWhole: the detail cuts a question's
// first line after 200 characters; one of exactly 200 is whole, without "…".
func TestAQuestionOfExactly200CharactersIsWhole(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s)
		w.org("acme")
		w.project("acme", "ACME")
		text := strings.Repeat("é", 200)
		w.question("ACME", text, 1, true, false)
		if l := w.list(platform, 10); len(l.Items) != 1 || l.Items[0].Detail != "Blocking question: "+text {
			t.Errorf("a question of 200 characters: %+v", l.Items)
		}
	})
}
