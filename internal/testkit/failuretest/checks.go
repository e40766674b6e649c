package failuretest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/forge/gitforge"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/runner/proc"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/rqlite"
	"github.com/ballet/ballet/internal/store/sqlite"
)

type dbEvent struct {
	Seq                  int64
	EntityType, EntityID string
	Type                 string
	Payload              string
}

type dbFlow struct {
	ID, ItemID, Status, Waiting, Stage string
	Step                               int
	Iteration                          int
	Version                            int64
	StartedAt                          int64
	PullRequest                        string // JSON, "" when none was recorded
}

type dbRun struct {
	ID, FlowID, ItemID, Stage, Status, Error string
	Iteration, Step                          int
	Version                                  int64
	StartedAt, HeartbeatAt, FinishedAt       int64 // unix ms, 0 when not set
}

type dbItem struct {
	ID, Key, Type, State string
	Version, Number      int64
	EpicID               string
}

type dbJob struct {
	ID, Kind, Status, Payload, Dedupe, LastError string
	RunAt, Attempt                               int64
	CreatedAt, FinishedAt                        int64 // Unix ms; FinishedAt 0 while not finished
}

// snapshot is the end state, read from the database.
type snapshot struct {
	events   []dbEvent
	flows    []dbFlow
	runs     []dbRun
	items    []dbItem
	blockers [][2]string // item id, blocker id
	jobs     []dbJob
	versions []dbVersion // other tracked entities
}

// dbVersion is the version of a row of another tracked table.
type dbVersion struct {
	Table, ID string
	Version   int64
}

// versionedTables are the other tables whose every change bumps the
// version with one event (liveness pings bump neither).
var versionedTables = []string{"organizations", "projects", "runners", "tokens", "questions"}

func (s *suite) openDB(ctx context.Context) (store.Store, error) {
	if s.o.Engine == "rqlite" {
		return rqlite.Open(ctx, rqlite.Options{URLs: strings.Split(s.dbAddr, ","), Consistency: "strong"})
	}
	return sqlite.Open(ctx, s.dbAddr)
}

func (s *suite) read(ctx context.Context) snapshot {
	t := s.t
	db, err := s.openDB(ctx)
	if err != nil {
		t.Fatalf("open the database: %v", err)
	}
	defer db.Close()
	q := func(sql string, scan func(rows *store.Rows, i int) error) {
		rows, err := db.Query(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		for i := range rows.Len() {
			if err := scan(rows, i); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
	}
	var sn snapshot
	q(`SELECT seq, entity_type, entity_id, type, payload FROM events ORDER BY seq`, func(r *store.Rows, i int) error {
		var e dbEvent
		err := r.Scan(i, &e.Seq, &e.EntityType, &e.EntityID, &e.Type, &e.Payload)
		sn.events = append(sn.events, e)
		return err
	})
	q(`SELECT id, item_id, status, COALESCE(waiting, ''), stage, step, iteration, version, started_at, COALESCE(pull_request, '')
FROM flows ORDER BY started_at, id`, func(r *store.Rows, i int) error {
		var f dbFlow
		err := r.Scan(i, &f.ID, &f.ItemID, &f.Status, &f.Waiting, &f.Stage, &f.Step, &f.Iteration, &f.Version, &f.StartedAt, &f.PullRequest)
		sn.flows = append(sn.flows, f)
		return err
	})
	q(`SELECT id, flow_id, item_id, stage, status, COALESCE(error, ''), iteration, step, version, COALESCE(started_at, 0),
COALESCE(heartbeat_at, 0), COALESCE(finished_at, 0) FROM runs ORDER BY created_at, id`, func(r *store.Rows, i int) error {
		var x dbRun
		err := r.Scan(i, &x.ID, &x.FlowID, &x.ItemID, &x.Stage, &x.Status, &x.Error, &x.Iteration, &x.Step, &x.Version, &x.StartedAt,
			&x.HeartbeatAt, &x.FinishedAt)
		sn.runs = append(sn.runs, x)
		return err
	})
	q(`SELECT id, key, type, state, version, number, COALESCE(epic_id, '') FROM items ORDER BY number`, func(r *store.Rows, i int) error {
		var it dbItem
		err := r.Scan(i, &it.ID, &it.Key, &it.Type, &it.State, &it.Version, &it.Number, &it.EpicID)
		sn.items = append(sn.items, it)
		return err
	})
	q(`SELECT item_id, blocker_id FROM blockers`, func(r *store.Rows, i int) error {
		var e [2]string
		err := r.Scan(i, &e[0], &e[1])
		sn.blockers = append(sn.blockers, e)
		return err
	})
	q(`SELECT id, kind, status, payload, COALESCE(dedupe_key, ''), COALESCE(last_error, ''), run_at, attempt, created_at,
COALESCE(finished_at, 0) FROM jobs WHERE status IN ('pending', 'running', 'dead') ORDER BY created_at, id`, func(r *store.Rows, i int) error {
		var j dbJob
		err := r.Scan(i, &j.ID, &j.Kind, &j.Status, &j.Payload, &j.Dedupe, &j.LastError, &j.RunAt, &j.Attempt, &j.CreatedAt, &j.FinishedAt)
		sn.jobs = append(sn.jobs, j)
		return err
	})
	for _, tbl := range versionedTables {
		q(`SELECT id, version FROM `+tbl, func(r *store.Rows, i int) error {
			v := dbVersion{Table: tbl}
			err := r.Scan(i, &v.ID, &v.Version)
			sn.versions = append(sn.versions, v)
			return err
		})
	}
	return sn
}

type payload struct {
	Stage     string `json:"stage"`
	Iteration int    `json:"iteration"`
	Step      int    `json:"step"`
	Run       string `json:"run"`
	Waiting   string `json:"waiting"`
	Outcome   string `json:"outcome"`
	Reason    string `json:"reason"`
	Ticket    string `json:"ticket"`
	To        string `json:"to"`
	State     string `json:"state"`
}

func (e dbEvent) p() payload {
	var p payload
	_ = json.Unmarshal([]byte(e.Payload), &p)
	return p
}

func (e dbEvent) String() string {
	pl := e.Payload
	if len(pl) > 300 {
		pl = pl[:300] + "…"
	}
	return fmt.Sprintf("seq %d %s %s/%s %s", e.Seq, e.Type, e.EntityType, e.EntityID, pl)
}

// merges is what the repository says about the merges of ticket branches.
type merges struct {
	human  map[string]int      // merge commits "merge ballet/KEY" of the harness's humans, by ticket key
	ballet map[string][]string // heads of ballet/KEY that Ballet merged (gitforge.MergeSubject), by ticket key
	heads  map[string]string   // the head of each ballet/KEY branch
}

// readMerges reads main's history and the ticket branches of the bare
// repository.
func readMerges(bare string) (merges, error) {
	m := merges{human: map[string]int{}, ballet: map[string][]string{}, heads: map[string]string{}}
	log, err := gitOut(bare, "log", "--first-parent", "--format=%P%x09%s", "main")
	if err != nil {
		return m, err
	}
	for _, l := range strings.Split(log, "\n") {
		parents, subject, _ := strings.Cut(l, "\t")
		if key, ok := strings.CutPrefix(subject, "merge ballet/"); ok {
			m.human[key]++
		}
		if rest, ok := strings.CutPrefix(subject, "ballet: merge ballet/"); ok {
			key, sha, _ := strings.Cut(rest, " at ")
			if p := strings.Fields(parents); len(p) != 2 || p[1] != sha || gitforge.MergeSubject("ballet/"+key, sha) != subject {
				return m, fmt.Errorf("a merge commit by Ballet that is not one: %q (parents %s)", subject, parents)
			}
			m.ballet[key] = append(m.ballet[key], sha)
		}
	}
	refs, err := gitOut(bare, "for-each-ref", "--format=%(refname:lstrip=3) %(objectname)", "refs/heads/ballet/")
	if err != nil {
		return m, err
	}
	for _, l := range strings.Split(refs, "\n") {
		if key, sha, ok := strings.Cut(l, " "); ok {
			m.heads[key] = sha
		}
	}
	return m, nil
}

// check reads the end state from the database and records every problem
// found; the summary counts come from it too.
func (s *suite) check() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sn := s.read(ctx)
	mg, err := readMerges(s.repo.Bare)
	if err != nil {
		s.t.Fatal(err)
	}
	s.runnerKills, s.outages = s.runner.record()
	s.outages = append(append(s.outages, s.core.coreOutages()...), s.leaders...)
	if s.agents != nil {
		_, kills, outages, _, _ := s.agents.snapshot()
		s.agentKills = kills
		s.outages = append(s.outages, outages...)
	}
	s.killedJobs = map[string]dbJob{}
	for _, j := range sn.jobs {
		if s.killedEachAttempt(j) {
			s.killedJobs[flowOfJob(j)] = j
		}
	}
	pending := map[string]int{}
	for _, j := range sn.jobs {
		pending[j.Kind+"/"+j.Status]++
	}
	s.logf("jobs left: %v", pending)
	if f, err := os.Create(filepath.Join(s.dir, "events.txt")); err == nil {
		for _, e := range sn.events {
			fmt.Fprintln(f, e)
		}
		f.Close()
	}
	problems := s.analyze(sn, mg)
	if s.agents != nil {
		problems = append(problems, s.checkAgents(sn)...)
	}
	if s.gitea != nil {
		problems = append(problems, s.checkOnGitea(sn)...)
	}
	return problems
}

// analyze checks the end state; mg is what the repository says about
// merges.
func (s *suite) analyze(sn snapshot, mg merges) []string {
	s.sum.Runs, s.sum.Events = len(sn.runs), len(sn.events)
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	dup := func(format string, args ...any) {
		s.sum.Duplicates++
		bad("DUPLICATE: "+format, args...)
	}

	byEntity := map[string][]dbEvent{}
	for _, e := range sn.events {
		byEntity[e.EntityID] = append(byEntity[e.EntityID], e)
	}
	dump := func(entityID string) string {
		var b strings.Builder
		for _, e := range byEntity[entityID] {
			b.WriteString("\n      " + e.String())
		}
		return b.String()
	}

	// Every payload matches its type's schema in the OpenAPI document.
	if s.doc != nil {
		for _, e := range sn.events {
			if err := s.doc.Payload(e.Type, []byte(e.Payload)); err != nil {
				bad("EVENT SCHEMA: seq %d: %v", e.Seq, err)
			}
		}
	}

	// seq: strictly increasing from 1, no gaps, over the whole log.
	for i, e := range sn.events {
		if e.Seq != int64(i+1) {
			var around []string
			for j := max(i-3, 0); j < min(i+3, len(sn.events)); j++ {
				around = append(around, sn.events[j].String())
			}
			bad("event seq gap: the %d-th event has seq %d:\n      %s", i+1, e.Seq, strings.Join(around, "\n      "))
			break
		}
	}

	itemByID := map[string]dbItem{}
	itemByKey := map[string]dbItem{}
	for _, it := range sn.items {
		itemByID[it.ID], itemByKey[it.Key] = it, it
	}
	// Flows: no duplicate transition (type, flow, step); no two identical
	// waits in a row; one flow.* event per version.
	once := map[string]bool{"flow.started": true, "flow.stage_started": true, "flow.stage_finished": true, "flow.done": true,
		"flow.failed": true, "flow.resumed": true, "flow.stuck": true, "flow.stopped": true}
	latest := map[string]dbFlow{} // by item id
	flowByID := map[string]dbFlow{}
	for _, f := range sn.flows {
		flowByID[f.ID] = f
		if l, ok := latest[f.ItemID]; !ok || f.StartedAt >= l.StartedAt {
			latest[f.ItemID] = f
		}
		seen := map[string]int64{}
		flowEvents := 0
		var lastWait string
		for _, e := range byEntity[f.ID] {
			if !strings.HasPrefix(e.Type, "flow.") {
				continue
			}
			flowEvents++
			p := e.p()
			if once[e.Type] {
				k := fmt.Sprintf("%s@%d", e.Type, p.Step)
				if first, ok := seen[k]; ok {
					dup("flow %s of %s: %s twice (seq %d and %d):%s", f.ID, itemByID[f.ItemID].Key, k, first, e.Seq, dump(f.ID))
				}
				seen[k] = e.Seq
			}
			w := ""
			if e.Type == "flow.waiting" {
				w = fmt.Sprintf("%d/%s", p.Step, p.Waiting)
				if w == lastWait {
					dup("flow %s of %s: flow.waiting %s twice in a row (seq %d):%s", f.ID, itemByID[f.ItemID].Key, w, e.Seq, dump(f.ID))
				}
			}
			lastWait = w
		}
		// The row is inserted at version 1 with flow.started, and every
		// update bumps the version with exactly one flow.* event.
		if int64(flowEvents) != f.Version {
			bad("flow %s of %s: version %d but %d flow.* events (each change must have exactly one):%s", f.ID, itemByID[f.ItemID].Key,
				f.Version, flowEvents, dump(f.ID))
		}
		if f.Status == "running" {
			bad("flow %s of %s still running at the end (stage %s, waiting %q)", f.ID, itemByID[f.ItemID].Key, f.Stage, f.Waiting)
		}
	}

	// Runs: at most one per (flow, step), created once, one run.* event per
	// version, each the run of its flow.stage_started; none left open.
	startedRun := map[string]string{} // "flow/step" → run id of flow.stage_started
	for _, e := range sn.events {
		if e.Type == "flow.stage_started" {
			if p := e.p(); p.Run != "" {
				startedRun[fmt.Sprintf("%s/%d", e.EntityID, p.Step)] = p.Run
			}
		}
	}
	perStep := map[string][]dbRun{}
	runsByStep := map[string]dbRun{} // "flow/step" → its (last) run
	for _, r := range sn.runs {
		k := fmt.Sprintf("%s/%d", r.FlowID, r.Step)
		perStep[k] = append(perStep[k], r)
		runsByStep[k] = r
		created, runEvents := 0, 0
		for _, e := range byEntity[r.ID] {
			if e.EntityType != "run" {
				continue
			}
			runEvents++
			if e.Type == "run.created" {
				created++
			}
		}
		key := itemByID[r.ItemID].Key
		if created != 1 {
			dup("run %s of %s (%s step %d): %d run.created events:%s", r.ID, key, r.Stage, r.Step, created, dump(r.ID))
		}
		if int64(runEvents) != r.Version {
			bad("run %s of %s: version %d but %d run.* events:%s", r.ID, key, r.Version, runEvents, dump(r.ID))
		}
		if startedRun[k] != r.ID {
			bad("run %s of %s (%s step %d) is not the run of its flow.stage_started (%q)", r.ID, key, r.Stage, r.Step, startedRun[k])
		}
		if r.Status == "queued" || r.Status == "running" {
			bad("run %s of %s (%s step %d) is still %s at the end", r.ID, key, r.Stage, r.Step, r.Status)
		}
	}
	for k, rs := range perStep {
		if len(rs) > 1 {
			dup("%d runs for flow step %s: %+v", len(rs), k, rs)
		}
	}
	// One active run per flow: each run of a flow started after the one
	// before it had finished.
	lastRun := map[string]dbRun{} // by flow, in creation order
	for _, r := range sn.runs {
		if p, ok := lastRun[r.FlowID]; ok && r.StartedAt != 0 && (p.FinishedAt == 0 || r.StartedAt < p.FinishedAt) {
			dup("runs %s (%s step %d) and %s (%s step %d) of %s ran at once", p.ID, p.Stage, p.Step, r.ID, r.Stage, r.Step,
				itemByID[r.ItemID].Key)
		}
		lastRun[r.FlowID] = r
	}

	// Items: one event per version (blocker changes do not bump it), and
	// the state the last event says.
	for _, it := range sn.items {
		n := 0
		state := ""
		for _, e := range byEntity[it.ID] {
			if e.EntityID != it.ID || strings.Contains(e.Type, ".blocker_") {
				continue
			}
			n++
			switch {
			case strings.HasSuffix(e.Type, ".created"):
				state = e.p().State
			case strings.HasSuffix(e.Type, ".state_changed"):
				state = e.p().To
			}
		}
		if int64(n) != it.Version {
			bad("item %s: version %d but %d events:%s", it.Key, it.Version, n, dump(it.ID))
		}
		if state != it.State {
			bad("item %s is %s but its events say %s:%s", it.Key, it.State, state, dump(it.ID))
		}
	}

	for _, v := range sn.versions {
		if n := len(byEntity[v.ID]); int64(n) != v.Version {
			bad("%s row %s: version %d but %d events:%s", v.Table, v.ID, v.Version, n, dump(v.ID))
		}
	}

	// Merges: each branch merged at most once, by Ballet or by a human;
	// every done ticket merged exactly once (done means the merge stage saw
	// it merged): an ACME ticket by Ballet, at its branch's head, a HUM
	// ticket by a human.
	for k, n := range mg.human {
		s.sum.HumanMerge += n
		if n > 1 {
			dup("branch ballet/%s merged %d times by humans", k, n)
		}
	}
	for k, heads := range mg.ballet {
		s.sum.BalletMerge += len(heads)
		if len(heads) > 1 {
			dup("branch ballet/%s merged %d times by Ballet (heads %v)", k, len(heads), heads)
		}
		if mg.human[k] > 0 {
			dup("branch ballet/%s merged by Ballet and by a human", k)
		}
	}
	for _, a := range s.anomalies {
		dup("%s", a)
	}

	// Tickets: done, escalated, or held behind an escalated blocker.
	blockedBy := map[string][]string{}
	for _, b := range sn.blockers {
		blockedBy[b[0]] = append(blockedBy[b[0]], b[1])
	}
	final := map[string]string{} // item id → done / escalated
	for _, it := range sn.items {
		f, ok := latest[it.ID]
		switch {
		case it.Type == "epic" || !ok:
		case f.Status == "done" && it.State == "done":
			final[it.ID] = "done"
		case (f.Status == "waiting" && f.Waiting == "answer" && it.State == "waiting_for_answer") || (f.Status == "failed" && it.State == "paused"):
			final[it.ID] = "escalated"
		}
	}
	openBlockers := func(it dbItem) []string {
		var out []string
		ids := append([]string(nil), blockedBy[it.ID]...)
		if it.EpicID != "" {
			ids = append(ids, blockedBy[it.EpicID]...)
		}
		for _, id := range ids {
			if st := itemByID[id].State; st != "done" && st != "cancelled" {
				out = append(out, id)
			}
		}
		return out
	}
	var heldFn func(it dbItem, seen map[string]bool) bool
	heldFn = func(it dbItem, seen map[string]bool) bool {
		if seen[it.ID] || it.State != "ready" {
			return false
		}
		seen[it.ID] = true
		if _, started := latest[it.ID]; started {
			return false
		}
		for _, id := range openBlockers(it) {
			if final[id] == "escalated" || heldFn(itemByID[id], seen) {
				return true
			}
		}
		return false
	}
	var lost []string
	for _, it := range sn.items {
		if it.Type == "epic" {
			continue
		}
		switch {
		case final[it.ID] == "done":
			s.sum.Done++
			if s.hit[it.Key] {
				s.sum.Resumed++
			}
			byBallet, byHuman := mg.ballet[it.Key], mg.human[it.Key]
			switch projectOf(it.Key) {
			case BalletMerges, Agents:
				if len(byBallet) != 1 || byHuman != 0 || byBallet[0] != mg.heads[it.Key] {
					bad("%s is done but Ballet merged its branch %d times (heads %v; the branch is at %s) and humans %d times: "+
						"want exactly one merge by Ballet, of the branch's head:%s", it.Key, len(byBallet), byBallet, mg.heads[it.Key], byHuman, dump(latest[it.ID].ID))
				}
			case OnGitea: // on Gitea, not in the bare repository: checkOnGitea
				if len(byBallet)+byHuman != 0 {
					bad("%s is on Gitea, but its branch was merged in the bare repository", it.Key)
				}
			default:
				if byHuman != 1 || len(byBallet) != 0 {
					bad("%s is done but its branch was merged %d times by humans and %d times by Ballet (the merge policy is manual: "+
						"the merge stage must see exactly one human merge):%s", it.Key, byHuman, len(byBallet), dump(latest[it.ID].ID))
				}
			}
			if projectOf(it.Key) == Agents {
				s.sum.AgentDone++
			} else if Escalates(it.Number) {
				bad("%s is done, but the runner reported its first stage blocked, which must raise a question", it.Key)
			}
			causes, left := s.offScript(it, latest[it.ID], byEntity[latest[it.ID].ID], runsByStep)
			s.sum.Detours += len(causes) + len(left)
			if len(left) > 0 {
				s.sum.UnexplainedDetours += len(left)
				bad("UNEXPLAINED DETOUR of %s (done in the end): %s — a stage may end off the script only when a kill cost its run:%s",
					it.Key, strings.Join(left, "; "), dump(latest[it.ID].ID))
			}
		case final[it.ID] == "escalated":
			s.sum.Escalated++
			f := latest[it.ID]
			why, unexplained := s.explain(it, f, byEntity[f.ID], runsByStep)
			if unexplained != "" {
				bad("UNEXPLAINED ESCALATION of %s (flow %s/%s at stage %s): %s — only a scripted escalation or a run that a kill "+
					"cost may escalate a ticket:%s", it.Key, f.Status, f.Waiting, f.Stage, unexplained, dump(f.ID))
			} else {
				if s.sum.Explained == nil {
					s.sum.Explained = map[string]int{}
				}
				s.sum.Explained[why]++
			}
		case heldFn(it, map[string]bool{}):
			s.sum.Held++
		default:
			f, ok := latest[it.ID]
			ev := ""
			if ok {
				ev = dump(f.ID)
			}
			var ob []string
			for _, id := range openBlockers(it) {
				ob = append(ob, itemByID[id].Key+"="+itemByID[id].State)
			}
			lost = append(lost, fmt.Sprintf("%s: ticket %s, open blockers %v, flow %+v (started %v)%s%s", it.Key, it.State, ob, f, ok, ev, dump(it.ID)))
		}
	}
	if len(lost) > 0 {
		bad("LOST TICKETS (neither done nor escalated nor behind an escalated blocker):\n    %s", strings.Join(lost, "\n    "))
	}

	// Blocker order: a ticket started only after all its blockers (and its
	// epic's) were done.
	doneAt := map[string]int64{}
	startedAt := map[string]int64{}
	for _, e := range sn.events {
		switch e.Type {
		case "ticket.state_changed":
			if e.p().To == "done" {
				doneAt[e.EntityID] = e.Seq
			}
		case "flow.started":
			if f, ok := flowByID[e.EntityID]; ok {
				if _, seen := startedAt[f.ItemID]; !seen {
					startedAt[f.ItemID] = e.Seq
				}
			}
		}
	}
	for _, it := range sn.items {
		at, ok := startedAt[it.ID]
		if !ok {
			continue
		}
		ids := append([]string(nil), blockedBy[it.ID]...)
		if it.EpicID != "" {
			ids = append(ids, blockedBy[it.EpicID]...)
		}
		for _, id := range ids {
			if d, ok := doneAt[id]; !ok || d > at {
				bad("%s started (seq %d) before its blocker %s was done (seq %d, 0 = never)", it.Key, at, itemByID[id].Key, d)
			}
		}
	}

	var evidence string
	s.sum.MaxRunningAtStart, evidence = maxRunningAtStart(sn.events, s.o.Limit, func(flowID string) string {
		return projectOf(itemByID[flowByID[flowID].ItemID].Key)
	})
	if evidence != "" {
		s.logf("concurrency: %s", evidence)
		s.t.Logf("failure suite (%s): concurrency limit %d: %s", s.o.Engine, s.o.Limit, evidence)
	}

	// Jobs: nothing pending or running without a reason, nothing dead.
	for _, j := range sn.jobs {
		var p struct {
			FlowID string `json:"flow_id"`
		}
		_ = json.Unmarshal([]byte(j.Payload), &p)
		f := flowByID[p.FlowID]
		switch {
		case j.Status == "dead" && s.killedEachAttempt(j):
			// Core was killed during each of its attempts: the orchestrator
			// gave up, and the reconciler flagged the flow (checked below).
			s.logf("job %s %s is dead: Core was killed during each of its %d attempts (%s)", j.ID, j.Kind, j.Attempt, j.LastError)
		case j.Status == "dead":
			bad("job %s %s is dead after %d attempts: %s (payload %s, flow status %s/%s)", j.ID, j.Kind, j.Attempt, j.LastError, j.Payload, f.Status, f.Waiting)
		case j.Kind == "flow.timeout" && j.Status == "pending":
			// the stage timeout's timer: a no-op when it fires after the stage
		case j.Kind == "flow.merge" && j.Status == "pending" && (f.Waiting == "merge" || f.Waiting == "checks" || f.Waiting == "review"):
			// a snoozed merge check of a flow still waiting for the merge
		default:
			bad("job %s %s is %s without a reason (run_at %s, payload %s, flow status %s/%s, last error %q)", j.ID, j.Kind, j.Status,
				time.UnixMilli(j.RunAt).UTC().Format(time.RFC3339), j.Payload, f.Status, f.Waiting, j.LastError)
		}
	}
	s.sum.Kills = s.sum.FaultKills + s.sum.RandomKills + s.sum.RunnerKills + s.sum.LeaderKills
	sort.Strings(s.sum.NotFired)
	return problems
}

// explain says why an escalated ticket escalated (why), or what is left
// unexplained. A ticket may escalate only when
//
//   - it was scripted to: the runner reported its first agent stage blocked
//     in iteration 1 (Escalates), or
//   - every stage of its flow that ended otherwise than the script says was
//     cost by a kill: its run was in flight at a runner kill (the runner's
//     own log says which), or it failed as silent ("runner silent for …")
//     while Core, the runner or the rqlite leader was down (an outage
//     overlapping the run's silence, from its last heartbeat to its end).
//
// Anything else — a stage that failed for no reason the harness caused, a
// flow flagged stuck, a human stage that was not approved — is unexplained.
func (s *suite) explain(it dbItem, f dbFlow, events []dbEvent, runsByStep map[string]dbRun) (why, unexplained string) {
	var last dbEvent
	for _, e := range events {
		if e.EntityType == "flow" {
			last = e
		}
	}
	p := last.p()
	if projectOf(it.Key) != Agents && last.Type == "flow.waiting" && p.Waiting == "answer" && p.Outcome == "blocked" &&
		(p.Stage == "implement" || p.Stage == "fix") && p.Iteration == 1 && Escalates(it.Number) {
		return "scripted", ""
	}
	if last.Type == "flow.stuck" {
		if j, ok := s.killedJobs[f.ID]; ok && strings.Contains(p.Reason, "lease expired") {
			return fmt.Sprintf("Core killed during each of the %d attempts of %s", j.Attempt, j.Kind), ""
		}
		return "", "the flow was flagged stuck: " + p.Reason
	}
	causes, left := s.offScript(it, f, events, runsByStep)
	switch {
	case len(left) > 0:
		return "", strings.Join(left, "; ")
	case len(causes) == 0:
		return "", fmt.Sprintf("every stage ended as scripted, yet the flow escalated (%s %s)", last.Type, last.Payload)
	}
	sort.Strings(causes)
	return strings.Join(slices.Compact(causes), "+"), ""
}

// killedEachAttempt reports whether dead job j lost every attempt to a
// Core kill: its last attempt's lease expired (its holder died), and Core
// went down at least as many times as it had attempts while it lived. The
// orchestrator then rightly gives up (a job that crashes its holder every
// time must not run for ever) and the reconciler flags the flow: that is
// an escalation the kills cost, not a product bug.
func (s *suite) killedEachAttempt(j dbJob) bool {
	if j.Status != "dead" || !strings.HasPrefix(j.LastError, "lease expired") || j.FinishedAt == 0 {
		return false
	}
	from, to := time.UnixMilli(j.CreatedAt), time.UnixMilli(j.FinishedAt)
	downs := 0
	for _, o := range s.outages {
		if o.What == "core" && !o.From.Before(from) && !o.From.After(to) {
			downs++
		}
	}
	return int64(downs) >= j.Attempt
}

// flowOfJob is the flow a job's payload names ("" for none).
func flowOfJob(j dbJob) string {
	var p struct {
		FlowID string `json:"flow_id"`
	}
	_ = json.Unmarshal([]byte(j.Payload), &p)
	return p.FlowID
}

// offScript looks at every stage of a flow that ended otherwise than the
// script says: causes lists the kills that explain them (see runCause),
// left the ones nothing explains.
func (s *suite) offScript(it dbItem, f dbFlow, events []dbEvent, runsByStep map[string]dbRun) (causes, left []string) {
	for _, e := range events {
		p := e.p()
		switch {
		case e.Type == "flow.stage_finished", e.Type == "flow.failed", e.Type == "flow.done":
		case e.Type == "flow.waiting" && p.Waiting == "answer" && p.Outcome != "":
		default:
			continue
		}
		want := scripted(it.Key, it.Number, p.Stage, p.Iteration)
		if projectOf(it.Key) == OnGitea && p.Stage == "integrate" && s.ciFailedIter[it.Key] == p.Iteration {
			want = pipeline.OutcomeFailed // the harness's CI failed the head
		}
		if p.Outcome == want {
			continue
		}
		r, ok := runsByStep[fmt.Sprintf("%s/%d", f.ID, p.Step)]
		cause := ""
		if ok {
			cause = s.runCause(r, projectOf(it.Key) == Agents)
		}
		what := fmt.Sprintf("stage %s (iteration %d, step %d) ended %s, the script says %s", p.Stage, p.Iteration, p.Step, p.Outcome, want)
		switch {
		case !ok:
			left = append(left, what+" (no run)")
		case cause == "":
			left = append(left, fmt.Sprintf("%s; its run %s is %s (%s) and no kill explains it", what, r.ID, r.Status, r.Error))
		default:
			causes = append(causes, cause)
		}
	}
	return causes, left
}

// scripted is the outcome a stage ends with when nothing interferes: the
// test runner's Outcome for agent stages, done for the human stages (the
// harness approves), for the merge and for every stage of an agent ticket
// (the fake model's scenarios report done; the ask scenario's question
// ends its session without an outcome).
func scripted(key string, number int64, stage string, iteration int) string {
	if projectOf(key) == Agents {
		return "done"
	}
	switch stage {
	case "implement", "review", "verify", "fix", "check":
		return Outcome(number, stage, iteration)
	}
	return "done"
}

// runCause says which kill cost a run ("" when none did): it was in flight
// at a runner kill, or it failed as silent while something was down; a run
// of an agent ticket also when the harness killed its agent CLI, or when
// it failed as Core's absence makes a session fail (coreGone) while Core,
// the real runner or the rqlite leader was down.
func (s *suite) runCause(r dbRun, agents bool) string {
	for _, k := range s.runnerKills {
		if slices.Contains(k.Runs, r.ID) {
			return "runner killed mid-run"
		}
	}
	if agents {
		for _, k := range s.agentKills {
			if slices.Contains(k.Runs, r.ID) {
				return "agent runner killed mid-run"
			}
		}
		if s.agents != nil {
			if sessions, _, _, _, _ := s.agents.snapshot(); slices.ContainsFunc(sessions, func(ss agentSession) bool {
				return ss.Run == r.ID && ss.Killed == "agent"
			}) {
				return "agent CLI killed mid-run"
			}
		}
		if r.Status == "failed" && coreGone(r.Error) && r.StartedAt != 0 && r.FinishedAt != 0 {
			for _, o := range s.outages {
				if o.What != "runner" && o.overlaps(time.UnixMilli(r.StartedAt), time.UnixMilli(r.FinishedAt)) { // not the test runner's
					return "in flight while " + o.What + " was down"
				}
			}
		}
	}
	if r.Status != "failed" || !strings.HasPrefix(r.Error, "runner silent for") {
		return ""
	}
	from := r.HeartbeatAt
	if from == 0 {
		from = r.StartedAt
	}
	for _, o := range s.outages {
		if o.overlaps(time.UnixMilli(from), time.UnixMilli(r.FinishedAt)) {
			return "silent while " + o.What + " was down"
		}
	}
	return ""
}

// coreGone reports whether a session's error is one that Core's absence
// causes: the CLI could not reach Core's MCP endpoint at its start, or an
// MCP call failed and the session ended without its report, or Core failed
// the run for a heartbeat it could not take.
func coreGone(err string) bool {
	return strings.Contains(err, "the session ended without submit_report") || strings.Contains(err, "could not connect to Core's MCP endpoint") ||
		strings.HasPrefix(err, "runner silent for")
}

// maxRunningAtStart replays the flow events and returns the most flows of
// one project (projectOf a flow id) that were running (occupying a slot)
// when another flow of that project started, with evidence for every start
// at or above limit: the running flows and the event that made each run.
// It is reported, not asserted: the scheduler reads the limits without
// locking them, and a human's approval makes a waiting flow run again
// whatever the limit.
func maxRunningAtStart(events []dbEvent, limit int, projectOf func(flowID string) string) (int, string) {
	running := map[string]map[string]dbEvent{} // project → flow → the event that made it run
	most := 0
	var b strings.Builder
	for _, e := range events {
		if e.EntityType != "flow" {
			continue
		}
		p := projectOf(e.EntityID)
		if running[p] == nil {
			running[p] = map[string]dbEvent{}
		}
		run := running[p]
		switch e.Type {
		case "flow.started":
			most = max(most, len(run))
			if limit > 0 && len(run) >= limit {
				fmt.Fprintf(&b, "\n  %d flows of %s running at %s:", len(run), p, e)
				var ids []string
				for id := range run {
					ids = append(ids, id)
				}
				sort.Slice(ids, func(i, j int) bool { return run[ids[i]].Seq < run[ids[j]].Seq })
				for _, id := range ids {
					fmt.Fprintf(&b, "\n      since %s", run[id])
				}
			}
			run[e.EntityID] = e
		case "flow.stage_started", "flow.waiting":
			if w := e.p().Waiting; w == "run" || w == "checks" || w == "" {
				if _, ok := run[e.EntityID]; !ok {
					run[e.EntityID] = e
				}
			} else {
				delete(run, e.EntityID)
			}
		case "flow.stage_finished", "flow.resumed":
			if _, ok := run[e.EntityID]; !ok {
				run[e.EntityID] = e
			}
		default: // done, failed, stopped, stuck
			delete(run, e.EntityID)
		}
	}
	return most, b.String()
}

// checkAgents checks what the real runner's log and the process table say
// about the agent tickets: no run leased twice, never two sessions of one
// ticket at once, every session killed mid-work after a checkpoint
// followed (when its stage ran again) by a session that began from that
// checkpoint, and no agent process left (orphans: alive after their
// runner's death, found by a start's sweep, or alive now that the runner
// has stopped).
func (s *suite) checkAgents(sn snapshot) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	dup := func(format string, args ...any) {
		s.sum.Duplicates++
		bad("DUPLICATE: "+format, args...)
	}
	sessions, kills, _, twice, swept := s.agents.snapshot()
	for _, run := range twice {
		dup("run %s was leased twice by the real runner", run)
	}
	// Every start of the runner but the last ended with a kill.
	killedAt := map[int]time.Time{}
	for i, k := range kills {
		killedAt[i+1] = k.At
	}
	ends := map[string]time.Time{} // ticket → when its last session's CLI ended
	last := map[string]string{}    // ticket → its last session's run
	for _, ss := range sessions {
		if ss.Restored {
			s.sum.CheckpointsRestored++
		}
		if ss.Started.IsZero() {
			continue
		}
		s.sum.AgentSessions++
		if end, ok := ends[ss.Ticket]; ok && ss.Started.Before(end) {
			dup("%s: the session of run %s started while that of run %s still ran", ss.Ticket, ss.Run, last[ss.Ticket])
		}
		end := ss.Ended
		if end.IsZero() {
			end = killedAt[ss.Start] // its runner died with it
		}
		ends[ss.Ticket], last[ss.Ticket] = end, ss.Run
	}
	status := map[string]string{}
	for _, r := range sn.runs {
		status[r.ID] = r.Status
	}
	for i, ss := range sessions {
		if ss.Killed == "" || ss.Checkpoints == 0 || status[ss.Run] == "succeeded" {
			continue
		}
		for _, next := range sessions[i+1:] {
			if next.Ticket != ss.Ticket || next.Stage != ss.Stage || next.Started.IsZero() {
				continue
			}
			if !next.Restored {
				bad("CHECKPOINT: %s %s: the session of run %s was killed mid-work (its %s) after %d checkpoints, but the stage's next session "+
					"(run %s) did not begin from the checkpoint", ss.Ticket, ss.Stage, ss.Run, ss.Killed, ss.Checkpoints, next.Run)
			}
			break
		}
	}
	keyOf := map[string]string{}
	for _, it := range sn.items {
		keyOf[it.ID] = it.Key
	}
	for _, r := range sn.runs {
		if projectOf(keyOf[r.ItemID]) != Agents {
			continue
		}
		for _, p := range proc.Find(r.ID) {
			s.orphans = append(s.orphans, fmt.Sprintf("run %s of %s (%s): pid %d (group %d) alive after the runner stopped",
				r.ID, keyOf[r.ItemID], r.Stage, p.PID, p.PGID))
		}
	}
	for _, id := range swept {
		s.orphans = append(s.orphans, fmt.Sprintf("session %s: the runner's start-up sweep killed what it left", id))
	}
	s.sum.Orphans = len(s.orphans)
	for _, o := range s.orphans {
		bad("ORPHAN agent process: %s", o)
	}
	return problems
}

// agentsHappened says what the agent tickets should have gone through and
// did not: a kill of the agent CLI and of the real runner while a session
// of each agent stage was mid-work, a session that began from its
// checkpoint, a ticket done (merged by Ballet), a question answered.
func (s *suite) agentsHappened() []string {
	var missing []string
	for _, k := range s.agentPlan {
		missing = append(missing, k.Kind+"@"+k.Stage)
	}
	if len(missing) == 0 && s.sum.CheckpointsRestored > 0 && s.sum.AgentDone > 0 && s.sum.Answers > 0 {
		return nil
	}
	return []string{fmt.Sprintf("HARNESS: too little happened to the agent tickets to trust this run: kills not made (no session of the "+
		"stage was mid-work in time): %v; %d sessions began from a checkpoint (≥ 1), %d agent tickets done (≥ 1), %d rounds of answers (≥ 1)",
		missing, s.sum.CheckpointsRestored, s.sum.AgentDone, s.sum.Answers)}
}

// checkOnGitea reads what Gitea says at the end (every pull request,
// main's history and the branches, fetched) and checks it against the
// tickets of OnGitea in the database (checkGitea).
func (s *suite) checkOnGitea(sn snapshot) []string {
	prs := s.gitea.pulls(s.t)
	dir := filepath.Join(s.dir, "gitea-end.git")
	if _, err := gitOut(s.dir, "init", "-q", "--bare", dir); err != nil {
		s.t.Fatal(err)
	}
	if _, err := gitOut(dir, "fetch", "-q", s.gitea.pushURL, "+refs/heads/*:refs/heads/*"); err != nil {
		s.t.Fatal(err)
	}
	log, err := gitOut(dir, "log", "--first-parent", "--format=%P%x09%s", "main")
	if err != nil {
		s.t.Fatal(err)
	}
	end := giteaEnd{prs: prs, main: mergedOnMain(log, prs), heads: map[string]string{}}
	refs, err := gitOut(dir, "for-each-ref", "--format=%(refname:lstrip=3) %(objectname)", "refs/heads/ballet/")
	if err != nil {
		s.t.Fatal(err)
	}
	for _, l := range strings.Split(refs, "\n") {
		if key, sha, ok := strings.Cut(l, " "); ok {
			end.heads[key] = sha
		}
	}
	latest := map[string]dbFlow{} // by item id
	for _, f := range sn.flows {
		if l, ok := latest[f.ItemID]; !ok || f.StartedAt >= l.StartedAt {
			latest[f.ItemID] = f
		}
	}
	var tickets []giteaTicket
	for _, it := range sn.items {
		if projectOf(it.Key) != OnGitea || it.Type == "epic" {
			continue
		}
		f, ok := latest[it.ID]
		t := giteaTicket{Key: it.Key, Done: ok && f.Status == "done" && it.State == "done"}
		if ok && f.Status == "waiting" && f.Waiting == "answer" {
			for _, j := range sn.jobs {
				if j.Kind == "flow.merge" && flowOfJob(j) == f.ID && s.killedEachAttempt(j) {
					t.MergeGaveUp = true
				}
			}
		}
		// What Ballet decided on: the pull request its flow recorded last
		// (a flow.waiting of the merge stage), or the flow row's.
		for _, e := range sn.events {
			if ok && e.EntityID == f.ID {
				var p struct {
					PullRequest *recordedPR `json:"pull_request"`
				}
				if json.Unmarshal([]byte(e.Payload), &p) == nil && p.PullRequest != nil {
					t.Recorded = p.PullRequest
				}
			}
		}
		if ok && t.Recorded == nil && f.PullRequest != "" {
			t.Recorded = &recordedPR{}
			if err := json.Unmarshal([]byte(f.PullRequest), t.Recorded); err != nil {
				s.t.Fatalf("flow %s: pull_request %q: %v", f.ID, f.PullRequest, err)
			}
		}
		tickets = append(tickets, t)
	}
	fig, problems := checkGitea(end, tickets)
	s.sum.GiteaPRs, s.sum.GiteaMerges, s.sum.DuplicatePRs, s.sum.DoubleMerges = fig.PRs, fig.Merges, fig.DuplicatePRs, fig.DoubleMerges
	s.sum.Duplicates += fig.DuplicatePRs + fig.DoubleMerges
	s.logf("gitea at the end: %d pull requests, %d merged; main's merges by ticket %v", fig.PRs, fig.Merges, end.main)
	return problems
}
