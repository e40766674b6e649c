package failuretest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ballet/ballet/internal/forge/gitforge"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/rqlite"
	"github.com/ballet/ballet/internal/store/sqlite"
)

// Collecting: once everything has stopped, the end state is read from the
// database (snapshot), the bare repository (merges) and the harness's own
// records of what it killed and when (outages), for the checks.

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
	Reason                                   string // an interrupted run's reason
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
	RunAt, Attempt, Expiries                     int64 // Expiries: its claims in a row whose lease ran out
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
	q(`SELECT id, flow_id, item_id, stage, status, COALESCE(error, ''), COALESCE(reason, ''), iteration, step, version, COALESCE(started_at, 0),
COALESCE(heartbeat_at, 0), COALESCE(finished_at, 0) FROM runs ORDER BY created_at, id`, func(r *store.Rows, i int) error {
		var x dbRun
		err := r.Scan(i, &x.ID, &x.FlowID, &x.ItemID, &x.Stage, &x.Status, &x.Error, &x.Reason, &x.Iteration, &x.Step, &x.Version, &x.StartedAt,
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
	q(`SELECT id, kind, status, payload, COALESCE(dedupe_key, ''), COALESCE(last_error, ''), run_at, attempt, expiries, created_at,
COALESCE(finished_at, 0) FROM jobs WHERE status IN ('pending', 'running', 'dead') ORDER BY created_at, id`, func(r *store.Rows, i int) error {
		var j dbJob
		err := r.Scan(i, &j.ID, &j.Kind, &j.Status, &j.Payload, &j.Dedupe, &j.LastError, &j.RunAt, &j.Attempt, &j.Expiries, &j.CreatedAt, &j.FinishedAt)
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
// collect reads the end state (the database, the repository) and what the
// harness recorded (kills, outages, jobs that lost each attempt to a Core
// kill), and writes the event log to events.txt in the logs.
func (s *suite) collect() (snapshot, merges) {
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
		if s.killedEachClaim(j) {
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
	return sn, mg
}
