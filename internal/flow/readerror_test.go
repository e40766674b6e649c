package flow_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/job"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// failingReads wraps a store: while armed, every query whose SQL contains
// the armed fragment fails, as a read does when the database is away.
type failingReads struct {
	store.Store
	mu       sync.Mutex
	fragment string
}

var errRead = errors.New("injected read failure")

func (f *failingReads) arm(fragment string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fragment = fragment
}

func (f *failingReads) Query(ctx context.Context, sql string, args ...any) (*store.Rows, error) {
	f.mu.Lock()
	fail := f.fragment != "" && strings.Contains(sql, f.fragment)
	f.mu.Unlock()
	if fail {
		return nil, errRead
	}
	return f.Store.Query(ctx, sql, args...)
}

// Fragments of the reads the handlers make.
const (
	readLatestFlow   = `FROM flows WHERE item_id = ?`
	readOpenQuestion = `FROM questions WHERE item_id = ? AND blocking = 1`
	readPlatform     = `FROM platform WHERE id = 1`
)

// TestReadErrorsFailTheJob: a handler whose read fails returns the error
// (the job retries with backoff) instead of taking it for "nothing to do",
// which would mark the job done and leave the flow to the reconciler. Each
// handler is then run with the store healthy again and does its step.
func TestReadErrorsFailTheJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		fs := &failingReads{Store: s}
		repo := apitest.NewGitRepo(t)
		dir := t.TempDir()
		e := apitest.New(t, fs, func(c *config.Config) { c.Storage.Path = dir + "/core.db" })
		reg := registry{}
		e.Core.Flows.Register(reg)
		e.Org("acme")
		e.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme",
			"repository": map[string]any{"forge": "git", "url": repo.Bare}})
		e.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/default", map[string]any{"version": 0, "definition": map[string]any{
			"stages": []any{
				map[string]any{"id": "triage", "kind": "human"},
				map[string]any{"id": "fix", "kind": "agent"},
			}}})
		var it struct{ Key string }
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t", "state": "ready"}).JSON(t, &it)

		// pending returns the pending job of a kind.
		pending := func(kind string) *job.Job {
			t.Helper()
			rows, err := s.Query(ctx, `SELECT id, payload, max_attempts FROM jobs WHERE status = 'pending' AND kind = ? ORDER BY created_at, id LIMIT 1`, kind)
			if err != nil || rows.Len() != 1 {
				t.Fatalf("no pending %s job (%v)", kind, err)
			}
			j := &job.Job{Kind: kind, Attempt: 1}
			var payload string
			if err := rows.Scan(0, &j.ID, &payload, &j.MaxAttempts); err != nil {
				t.Fatal(err)
			}
			j.Payload = []byte(payload)
			return j
		}
		// run runs the pending job of a kind with the store healthy and
		// marks it done.
		run := func(kind string) {
			t.Helper()
			j := pending(kind)
			if err := reg[kind](ctx, j); err != nil && !job.IsSnooze(err) {
				t.Fatalf("%s: %v", kind, err)
			}
			if _, err := s.Exec(ctx, store.Stmt(`UPDATE jobs SET status = 'done' WHERE id = ?`, j.ID)); err != nil {
				t.Fatal(err)
			}
		}
		// failsOn runs the pending job of a kind while the read fails: it
		// must return that error.
		failsOn := func(kind, fragment string) {
			t.Helper()
			fs.arm(fragment)
			err := reg[kind](ctx, pending(kind))
			fs.arm("")
			if !errors.Is(err, errRead) {
				t.Errorf("%s with a failing read (%s): got %v, want the read's error", kind, fragment, err)
			}
		}
		flowState := func() (status, waiting string) {
			var f struct{ Status, Waiting string }
			e.Admin(200, "GET", "/api/v1/items/"+it.Key+"/flow", nil).JSON(t, &f)
			return f.Status, f.Waiting
		}

		e.Admin(200, "POST", "/api/v1/items/"+it.Key+"/flow/start", nil)
		run("flow.enter") // triage waits for an approval
		e.Admin(200, "POST", "/api/v1/items/"+it.Key+"/flow/reject", nil)
		var qs struct{ Questions []struct{ ID string } }
		e.Admin(200, "GET", "/api/v1/items/"+it.Key+"/questions", nil).JSON(t, &qs)
		e.Admin(200, "POST", "/api/v1/questions/"+qs.Questions[0].ID+"/answer", map[string]any{"answer": "again"})

		failsOn("flow.resume", readLatestFlow)
		failsOn("flow.resume", readOpenQuestion)
		run("flow.resume")
		if st, w := flowState(); st != "running" || w != "" {
			t.Fatalf("after the resume: %s/%s", st, w)
		}
		run("flow.enter")
		e.Admin(200, "POST", "/api/v1/items/"+it.Key+"/flow/approve", nil)
		run("flow.enter") // fix: an agent run waits for a runner

		e.Admin(200, "POST", "/api/v1/platform/pause", nil)
		failsOn("flow.kill", readPlatform)
		run("flow.kill")
		if st, w := flowState(); st != "waiting" || w != "pause" {
			t.Fatalf("after the kill switch: %s/%s", st, w)
		}

		e.Admin(200, "POST", "/api/v1/platform/resume", nil)
		failsOn("flow.release", readPlatform)
		run("flow.release")
		if st, w := flowState(); st != "running" || w != "" {
			t.Fatalf("after the release: %s/%s", st, w)
		}

		var item struct{ Version int64 }
		e.Admin(200, "GET", "/api/v1/items/"+it.Key, nil).JSON(t, &item)
		e.Admin(200, "PATCH", "/api/v1/items/"+it.Key, map[string]any{"version": item.Version, "state": "paused"})
		failsOn("flow.stop", readLatestFlow)
		run("flow.stop")
		if st, _ := flowState(); st != "stopped" {
			t.Fatalf("after the stop: %s", st)
		}
	})
}
