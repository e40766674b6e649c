package retention_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/retention"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	day            = 24 * time.Hour
	logsKept       = 30 * day
	jobsKept       = 7 * day
	sessKept       = day
	notesKept      = 90 * day
	deliveriesKept = 30 * day
	runnerTTL      = day
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// world is a database seeded with rows on both sides of every retention.
type world struct {
	t     testing.TB
	s     store.Store
	clk   *clock.Fake
	runs  *run.Service
	batch []store.Statement
	n     int
}

func (w *world) add(sql string, args ...any) { w.batch = append(w.batch, store.Stmt(sql, args...)) }

func (w *world) write() {
	w.t.Helper()
	if _, err := w.s.Exec(context.Background(), w.batch...); err != nil {
		w.t.Fatal(err)
	}
	w.batch = nil
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// run adds a run finished at fin (nil: running) with chunks log chunks.
func (w *world) run(id string, fin *time.Time, chunks int) {
	w.n++
	status, f := "running", any(nil)
	if fin != nil {
		status, f = "succeeded", ms(*fin)
	}
	w.add(`INSERT INTO runs (id, organization_id, project_id, item_id, flow_id, stage, iteration, step, adapter, model, instructions,
skills, artifacts, status, runner_id, token_id, outcome, report, blocking_question, exit_status, error, input_tokens, output_tokens,
cost_micros, cancel_requested, created_at, started_at, heartbeat_at, finished_at, updated_at, version)
VALUES (?, 'O', 'P', 'I', 'F', 'build', 1, ?, 'claude-code', '', '', '[]', '{}', ?, 'busy', NULL, NULL, NULL, 0, NULL, NULL, 0, 0, 0, 0, 0, 0, 0, ?, 0, 2)`,
		id, w.n, status, f)
	for i := range chunks {
		w.add(`INSERT INTO run_logs (run_id, start, size, truncated, data) VALUES (?, ?, 4, 0, 'bG9nCg==')`, id, 4*i)
	}
}

func (w *world) job(id, status string, fin time.Time) {
	var f any
	if status == "done" || status == "dead" {
		f = ms(fin)
	}
	w.add(`INSERT INTO jobs (id, kind, payload, status, run_at, attempt, max_attempts, dedupe_key, created_at, updated_at, finished_at)
VALUES (?, 'test.kind', '{}', ?, 0, 0, 1, NULL, 0, 0, ?)`, id, status, f)
}

func (w *world) session(id string, expires time.Time, ended *time.Time) {
	var e any
	if ended != nil {
		e = ms(*ended)
	}
	w.add(`INSERT INTO sessions (id, hash, source, subject, kind, name, platform_admin, token_id, source_hash, created_at, expires_at,
last_seen_at, ended_at, version) VALUES (?, ?, 'bootstrap', 'bootstrap', 'human', 'n', 1, NULL, NULL, 0, ?, 0, ?, 1)`,
		id, "h-"+id, ms(expires), e)
}

func (w *world) notification(id string, read *time.Time, mail string) {
	var r any
	if read != nil {
		r = ms(*read)
	}
	w.n++
	w.add(`INSERT INTO notifications (id, recipient, cause, event_id, event_seq, organization_id, project_id, item_id, item_key, title,
text, link, created_at, read_at, version) VALUES (?, 'alice', 'question.opened', ?, ?, 'O', 'P', 'I', 'P-1', 't', 'x', '/', 0, ?, 1)`,
		id, "e-"+id, w.n, r)
	if mail != "" {
		w.add(`INSERT INTO mail_deliveries (notification_id, recipient, cause, item_key, message_id, status, created_at, updated_at, version)
VALUES (?, 'alice', 'question.opened', 'P-1', ?, ?, 0, 0, 1)`, id, "m-"+id, mail)
	}
}

func (w *world) delivery(id, status string, ended time.Time) {
	w.n++
	w.add(`INSERT INTO webhook_deliveries (id, webhook_id, organization_id, project_id, cause, item_key, event_id, event_seq, payload, status,
attempts, started_at, created_at, updated_at, version) VALUES (?, 'W', 'O', 'P', 'question.opened', 'P-1', ?, ?, '{}', ?, 1, 0, 0, ?, 1)`,
		id, "e-"+id, w.n, status, ms(ended))
}

func (w *world) digest(id, subject, status string, written time.Time) {
	w.add(`INSERT INTO digests (id, subject, period_key, period_at, since_at, from_seq, to_seq, status, needs, finished, failures, created_at, version)
VALUES (?, ?, ?, ?, 0, 0, 0, ?, 0, 0, 0, ?, 1)`, id, subject, written.UTC().Format(time.RFC3339Nano), ms(written), status, ms(written))
}

func (w *world) runner(id string, seen time.Time) {
	w.add(`INSERT INTO runners (id, name, token_id, labels, created_at, last_seen_at, version) VALUES (?, ?, 't', '{}', 0, ?, 1)`, id, id, ms(seen))
}

func at(t time.Time) *time.Time { return &t }

func (w *world) ids(sql string) string {
	w.t.Helper()
	rows, err := w.s.Query(context.Background(), sql)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for i := range rows.Len() {
		var id string
		if err := rows.Scan(i, &id); err != nil {
			w.t.Fatal(err)
		}
		out = append(out, id)
	}
	return strings.Join(out, " ")
}

// seed writes rows just past and just within every retention, and those no
// retention may touch.
func seed(t testing.TB, s store.Store) *world {
	clk := clock.NewFake(now)
	w := &world{t: t, s: s, clk: clk}
	w.runs = run.NewService(s, &transition.Applier{Store: s, Clock: clk}, clk, nil, run.Config{LogRetention: logsKept})
	w.add(`INSERT INTO events (id, occurred_at, organization_id, project_id, entity_type, entity_id, type, actor_kind, payload)
VALUES ('ev1', 0, 'O', 'P', 'run', 'old', 'run.finished', 'system', '{}')`)
	w.add(`INSERT INTO organizations (id, slug, name, created_at, updated_at, version) VALUES ('O', 'o', 'O', 0, 0, 1)`)
	w.add(`INSERT INTO projects (id, organization_id, key, name, merge_policy, required_approvals, required_checks, concurrency_limit,
ticket_types, paused, created_at, updated_at, version) VALUES ('P', 'O', 'P', 'P', 'manual', 0, '[]', 0, '[]', 0, 0, 0, 1)`)
	w.add(`INSERT INTO items (id, organization_id, project_id, number, key, type, title, description, acceptance_criteria, epic_id, state,
created_by, created_at, updated_at, version) VALUES ('I', 'O', 'P', 1, 'P-1', 'task', 't', '', '', NULL, 'in_progress', 'test', 0, 0, 1)`)
	w.add(`INSERT INTO flows (id, organization_id, project_id, item_id, pipeline, pipeline_version, definition, stage, iteration,
max_iterations, step, status, waiting, run_id, outcome, report, outcome_stage, pull_request, started_at, updated_at, finished_at, version)
VALUES ('F', 'O', 'P', 'I', 'default', 0, '{}', 'build', 1, 3, 1, 'running', NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 1)`)
	w.run("old", at(now.Add(-logsKept-time.Millisecond)), 7) // past by a millisecond: its 7 chunks go
	w.run("older", at(now.Add(-2*logsKept)), 0)              // no log: only marked
	w.run("recent", at(now.Add(-logsKept+time.Minute)), 3)   // within: kept
	w.run("running", nil, 5)                                 // running: kept
	w.job("j-done-old", "done", now.Add(-jobsKept-time.Second))
	w.job("j-dead-old", "dead", now.Add(-jobsKept-time.Hour))
	w.job("j-done-new", "done", now.Add(-jobsKept+time.Second))
	w.job("j-pending", "pending", time.Time{})
	w.job("j-running", "running", time.Time{})
	w.session("s-expired-old", now.Add(-sessKept-time.Second), nil)
	w.session("s-ended-old", now.Add(time.Hour), at(now.Add(-sessKept-time.Second)))
	w.session("s-expired-new", now.Add(-sessKept+time.Second), nil)
	w.session("s-live", now.Add(time.Hour), nil)
	w.notification("n-read-old", at(now.Add(-notesKept-time.Second)), "")
	w.notification("n-read-old-sent", at(now.Add(-notesKept-time.Second)), "sent")
	w.notification("n-read-old-mailing", at(now.Add(-notesKept-time.Second)), "retrying")
	w.notification("n-read-new", at(now.Add(-notesKept+time.Second)), "")
	w.notification("n-unread", nil, "pending")
	w.delivery("d-sent-old", "succeeded", now.Add(-deliveriesKept-time.Second))
	w.delivery("d-failed-old", "failed", now.Add(-deliveriesKept-time.Hour))
	w.delivery("d-skipped-old", "skipped", now.Add(-deliveriesKept-time.Second))
	w.delivery("d-retrying-old", "pending", now.Add(-deliveriesKept-time.Hour)) // still to be sent
	w.delivery("d-sent-new", "succeeded", now.Add(-deliveriesKept+time.Second))
	w.digest("g-alice-old", "alice", "sent", now.Add(-deliveriesKept-48*time.Hour))
	w.digest("g-alice-old-empty", "alice", "empty", now.Add(-deliveriesKept-24*time.Hour))
	w.digest("g-alice-new", "alice", "sent", now.Add(-deliveriesKept+time.Hour))
	w.digest("g-bob-latest", "bob", "sent", now.Add(-deliveriesKept-24*time.Hour)) // old, but bob's latest
	w.digest("g-carol-pending", "carol", "pending", now.Add(-deliveriesKept-48*time.Hour))
	w.digest("g-carol-latest", "carol", "failed", now.Add(-deliveriesKept-24*time.Hour))
	w.runner("gone", now.Add(-runnerTTL-time.Second))
	w.runner("busy", now.Add(-runnerTTL-time.Second)) // holds the running run
	w.runner("seen", now.Add(-runnerTTL+time.Second))
	w.write()
	return w
}

// Retention deletes exactly what is past each kind's retention and
// nothing else, on every engine: the logs of recent and running runs, jobs
// not finished or finished recently, live sessions, unread notifications
// and those whose mail is still to go, runners seen lately or running
// something, and every event stay. Small batches give the same result; a
// second sweep deletes nothing.
func TestRetentionDeletesWhatIsOldAndNothingElse(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := seed(t, s)
		reg := prometheus.NewRegistry()
		metrics := retention.NewMetrics(reg)
		r := retention.New(s, w.clk, nil, w.runs, retention.Config{RunLogs: logsKept, Jobs: jobsKept, Sessions: sessKept,
			Notifications: notesKept, Deliveries: deliveriesKept, Runners: runnerTTL, Batch: 2, Metrics: metrics})
		events := storetest.Count(t, s, `SELECT COUNT(*) FROM events`)
		rep, more, err := r.Sweep(t.Context())
		if err != nil || more {
			t.Fatalf("sweep: %v (more %v)", err, more)
		}
		want := retention.Report{retention.KindRunLogs: 7, retention.KindJobs: 2, retention.KindSessions: 2,
			retention.KindNotifications: 2, retention.KindWebhooks: 3, retention.KindDigests: 2, retention.KindRunners: 1}
		if fmt.Sprint(rep) != fmt.Sprint(want) {
			t.Fatalf("deleted %v, want %v", rep, want)
		}
		for kind, n := range want {
			if got := deletedMetric(t, reg, kind); got != float64(n) {
				t.Errorf("ballet_retention_deleted_total{kind=%q} = %v, want %d", kind, got, n)
			}
		}
		checks := []struct{ what, sql, want string }{
			{"logs kept", `SELECT DISTINCT run_id FROM run_logs ORDER BY run_id`, "recent running"},
			{"logs marked deleted", `SELECT id FROM runs WHERE log_deleted_at IS NOT NULL ORDER BY id`, "old older"},
			{"runs kept", `SELECT id FROM runs ORDER BY id`, "old older recent running"},
			{"jobs kept", `SELECT id FROM jobs ORDER BY id`, "j-done-new j-pending j-running"},
			{"sessions kept", `SELECT id FROM sessions ORDER BY id`, "s-expired-new s-live"},
			{"notifications kept", `SELECT id FROM notifications ORDER BY id`, "n-read-new n-read-old-mailing n-unread"},
			{"mail kept", `SELECT notification_id FROM mail_deliveries ORDER BY notification_id`, "n-read-old-mailing n-unread"},
			{"webhook deliveries kept", `SELECT id FROM webhook_deliveries ORDER BY id`, "d-retrying-old d-sent-new"},
			{"digests kept", `SELECT id FROM digests ORDER BY id`, "g-alice-new g-bob-latest g-carol-latest g-carol-pending"},
			{"runners kept", `SELECT id FROM runners ORDER BY id`, "busy seen"},
		}
		for _, c := range checks {
			if got := w.ids(c.sql); got != c.want {
				t.Errorf("%s: %q, want %q", c.what, got, c.want)
			}
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM events WHERE type != 'runner.removed'`); n != events {
			t.Errorf("events: %d, want the %d there were (retention deletes none)", n, events)
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM events WHERE type = 'runner.removed' AND entity_id = 'gone'`); n != 1 {
			t.Errorf("runner.removed events for the gone runner: %d, want 1", n)
		}
		again, _, err := r.Sweep(t.Context())
		if err != nil || len(again) != 0 {
			t.Fatalf("a second sweep deleted %v (%v)", again, err)
		}
	})
}

// A deleted log answers 410 with a message naming the retention; so does
// a log past the retention that no sweep has reached yet, and its
// transcript; a recent run's log reads as before.
func TestADeletedLogIsGone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := seed(t, s)
		get := func(id string) run.Run {
			r, err := w.runs.Get(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		gone := func(what string, err error, wantText string) {
			t.Helper()
			var ae *apperr.Error
			if !errors.As(err, &ae) || ae.Code != apperr.Gone || !strings.Contains(ae.Message, wantText) {
				t.Fatalf("%s: %v, want 410 gone saying %q", what, err, wantText)
			}
		}
		_, err := w.runs.ReadLog(t.Context(), get("old"), 0)
		gone("a log past the retention, not swept yet", err, "logs are kept for 720h0m0s after their run ends ([retention] run_logs)")
		_, err = w.runs.Transcript(t.Context(), get("old"))
		gone("its transcript", err, "[retention] run_logs")
		page, err := w.runs.ReadLog(t.Context(), get("recent"), 0)
		if err != nil || page.Data != "log\nlog\nlog\n" {
			t.Fatalf("a recent run's log: %q, %v", page.Data, err)
		}
		r := retention.New(s, w.clk, nil, w.runs, retention.Config{RunLogs: logsKept})
		if _, _, err := r.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
		// A service that keeps logs longer now: the marker still says gone.
		longer := run.NewService(s, &transition.Applier{Store: s, Clock: w.clk}, w.clk, nil, run.Config{LogRetention: 10 * logsKept})
		_, err = longer.ReadLog(t.Context(), get("old"), 0)
		gone("a deleted log", err, "was deleted on 2026-12-01T12:00:00Z")
	})
}

// A sweep stops at its bound of batches per kind and tells there is
// more; the job runs again and finishes the rest.
func TestASweepStopsAtItsBound(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := seed(t, s)
		for i := range 9 {
			w.job(fmt.Sprintf("j-bulk-%d", i), "done", now.Add(-jobsKept-time.Minute))
		}
		w.write()
		r := retention.New(s, w.clk, nil, w.runs, retention.Config{Jobs: jobsKept, Batch: 2, MaxBatches: 3})
		rep, more, err := r.Sweep(t.Context())
		if err != nil || !more || rep[retention.KindJobs] != 6 {
			t.Fatalf("first sweep: %v, more %v, %v; want 6 jobs and more", rep, more, err)
		}
		rep, more, err = r.Sweep(t.Context())
		if err != nil || more || rep[retention.KindJobs] != 5 {
			t.Fatalf("second sweep: %v, more %v, %v; want the last 5 jobs", rep, more, err)
		}
	})
}

// deletedMetric reads ballet_retention_deleted_total{kind} from reg.
func deletedMetric(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "ballet_retention_deleted_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no ballet_retention_deleted_total{kind=%q}", kind)
	return 0
}

// Every read of a sweep walks an index, never a whole table (SQLite's
// plan): the tables it reads grow, which is why it runs.
func TestSweepReadsUseIndexes(t *testing.T) {
	s := storetest.Open(t, "sqlite")
	c := ms(now)
	for _, q := range []struct {
		name, sql string
		args      []any
	}{
		{"runs with old logs", `SELECT id FROM runs WHERE finished_at IS NOT NULL AND log_deleted_at IS NULL AND finished_at < ?
ORDER BY finished_at LIMIT ?`, []any{c, 50}},
		{"a run's last chunks", `SELECT start FROM run_logs WHERE run_id = ? ORDER BY start DESC LIMIT ?`, []any{"r", 501}},
		{"finished jobs", `SELECT id FROM jobs INDEXED BY jobs_finished WHERE status IN ('done', 'dead') AND finished_at < ? ORDER BY finished_at LIMIT ?`, []any{c, 500}},
		{"expired sessions", `SELECT id FROM sessions WHERE expires_at < ? ORDER BY expires_at LIMIT ?`, []any{c, 500}},
		{"ended sessions", `SELECT id FROM sessions WHERE ended_at < ? ORDER BY ended_at LIMIT ?`, []any{c, 500}},
		{"read notifications", `SELECT id FROM notifications WHERE read_at < ? AND NOT EXISTS (SELECT 1 FROM mail_deliveries d
WHERE d.notification_id = notifications.id AND d.status IN ('pending', 'retrying')) ORDER BY read_at LIMIT ?`, []any{c, 500}},
		{"ended webhook deliveries", `SELECT id FROM webhook_deliveries WHERE status != 'pending' AND updated_at < ? ORDER BY updated_at LIMIT ?`, []any{c, 500}},
		{"old digests", `SELECT id FROM digests WHERE status != 'pending' AND created_at < ? AND EXISTS (SELECT 1 FROM digests n
WHERE n.subject = digests.subject AND n.period_at > digests.period_at) ORDER BY created_at LIMIT ?`, []any{c, 500}},
	} {
		storetest.NoTableScan(t, s, q.name, q.sql, q.args...)
	}
}

// ballet_db_size_bytes is the database's size on every engine: more
// than its empty schema, and growing with what is written;
// ballet_db_free_bytes is the part deletes freed, which the size keeps.
func TestDatabaseSize(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		empty, _, err := retention.Size(t.Context(), s)
		if err != nil || empty < 4096 {
			t.Fatalf("size of the empty schema: %d, %v", empty, err)
		}
		seed(t, s)
		w := &world{t: t, s: s}
		for i := range 400 {
			w.job(fmt.Sprintf("j-size-%d", i), "pending", time.Time{})
		}
		w.write()
		grown, free, err := retention.Size(t.Context(), s)
		if err != nil || grown <= empty || free >= grown {
			t.Fatalf("size after 400 jobs: %d (was %d), %d free, %v", grown, empty, free, err)
		}
		if _, err := s.Exec(t.Context(), store.Stmt(`DELETE FROM jobs WHERE id LIKE 'j-size-%'`)); err != nil {
			t.Fatal(err)
		}
		after, freed, err := retention.Size(t.Context(), s)
		if err != nil || after != grown || freed <= free {
			t.Fatalf("after deleting the 400 jobs: size %d (was %d), free %d (was %d), %v; want the same size, more free", after, grown, freed, free, err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(retention.NewSizeCollector(s))
		families, err := reg.Gather()
		got := map[string]float64{}
		for _, f := range families {
			got[f.GetName()] = f.GetMetric()[0].GetGauge().GetValue()
		}
		if err != nil || got["ballet_db_size_bytes"] != float64(after) || got["ballet_db_free_bytes"] != float64(freed) {
			t.Fatalf("metrics %v, %v; want size %d and free %d", got, err, after, freed)
		}
	})
}
