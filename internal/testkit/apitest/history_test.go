package apitest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/server"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/mailtest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestEveryEventTypeHasAHistory walks the event catalogue: a world that
// writes an event of every type, then every event it wrote must be
// returned by some history endpoint (an item's, a project's, an
// organization's, the platform's, a runner's, a token's). A new event type
// that this world does not write fails here: add it, and its history is
// checked too.
func TestEveryEventTypeHasAHistory(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		mp := mailtest.Start(t)
		w := newFlowWorld(t, s, func(c *config.Config) {
			c.Knowledge.Wait.Duration = time.Millisecond
			// Waits escalate, and a queued run lacks a runner, at once.
			c.Notify.EscalateAfter.Duration = time.Millisecond
			c.Runs.UnclaimedAfter.Duration = time.Millisecond
			c.Notify.AllowPrivateTargets = true // the webhook's receiver is on 127.0.0.1
		}, withMail(mp))
		writeEveryEventType(t, w)
		writeMailEvents(t, w, mp)

		ctx := context.Background()
		var all []event.Event // every event, page by page: the world writes more than a page
		for after := int64(0); ; {
			page, err := event.List(ctx, s, event.Filter{AfterSeq: after, Limit: event.MaxLimit})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, page...)
			if len(page) < event.MaxLimit {
				break
			}
			after = page[len(page)-1].Seq
		}
		written := map[string]bool{}
		for _, e := range all {
			written[e.Type] = true
		}
		for _, typ := range server.EventTypes() {
			if !written[typ] {
				t.Errorf("this world writes no %s event: make it write one, so that its history is checked", typ)
			}
		}

		// Every history that can hold the events written, read whole.
		seen := map[string]bool{}
		read := func(path string) {
			t.Helper()
			for after := int64(0); ; {
				var page server.EventPage
				w.Admin(200, "GET", fmt.Sprintf("%s?after=%d&limit=1000", path, after), nil).JSON(t, &page)
				for _, e := range page.Events {
					seen[e.ID] = true
				}
				if len(page.Events) < 1000 {
					return
				}
				after = page.LastSeq
			}
		}
		paths := []string{"/api/v1/platform/events"}
		for _, e := range all {
			if e.OrganizationID != "" {
				paths = append(paths, "/api/v1/orgs/"+e.OrganizationID+"/events")
			}
			if e.ProjectID != "" {
				paths = append(paths, "/api/v1/projects/"+e.ProjectID+"/events")
			}
			switch e.EntityType {
			case "ticket", "epic":
				paths = append(paths, "/api/v1/items/"+e.EntityID+"/events")
			case "runner":
				paths = append(paths, "/api/v1/runners/"+e.EntityID+"/events")
			case "token":
				paths = append(paths, "/api/v1/tokens/"+e.EntityID+"/events")
			}
		}
		slices.Sort(paths)
		for _, p := range slices.Compact(paths) {
			read(p)
		}
		for _, e := range all {
			if !seen[e.ID] {
				t.Errorf("no history returns the event %d %s of %s %s (organization %q, project %q)",
					e.Seq, e.Type, e.EntityType, e.EntityID, e.OrganizationID, e.ProjectID)
			}
		}
	})
}

// writeEveryEventType makes the world write an event of every type of the
// catalogue, through the API as people and runners would (and the
// reconciler's runner removal, on a clock a day ahead).
func writeEveryEventType(t *testing.T, w *flowWorld) {
	t.Helper()
	ctx := context.Background()
	// organization.created, project.created: the world's.
	var p struct{ Version int64 }
	w.Admin(200, "GET", "/api/v1/projects/ACME", nil).JSON(t, &p)
	w.Admin(200, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": p.Version, "concurrency_limit": 5})
	var org struct{ Version int64 }
	w.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(t, &org)
	w.Admin(200, "PATCH", "/api/v1/orgs/acme", map[string]any{"version": org.Version, "name": "Acme Corp"})
	w.Admin(200, "PUT", "/api/v1/orgs/acme/members/alice", map[string]any{"role": "member"})
	w.Admin(204, "DELETE", "/api/v1/orgs/acme/members/alice", nil)
	var pl struct{ Version int64 }
	w.Admin(200, "GET", "/api/v1/platform", nil).JSON(t, &pl)
	w.Admin(200, "PATCH", "/api/v1/platform", map[string]any{"version": pl.Version, "concurrency_limit": 50})
	w.Admin(200, "POST", "/api/v1/platform/pause", nil)
	w.Admin(200, "POST", "/api/v1/platform/resume", nil)

	// A platform admin drains the world's runner and puts it back.
	w.Admin(200, "POST", "/api/v1/runners/"+w.runner.ID+"/drain", nil)
	w.Admin(200, "POST", "/api/v1/runners/"+w.runner.ID+"/undrain", nil)

	// Skills, tokens, a browser session.
	w.Admin(201, "POST", "/api/v1/projects/ACME/skills", map[string]any{"name": "go", "content": "v1"})
	w.Admin(200, "PUT", "/api/v1/projects/ACME/skills/go", map[string]any{"version": 1, "content": "v2"})
	w.Admin(204, "DELETE", "/api/v1/projects/ACME/skills/go", nil)
	var tk struct{ ID, Token string }
	w.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "ci", "organization": "acme", "role": "member"}).JSON(t, &tk)
	b := w.Browser("")
	b.SignIn(tk.Token)
	b.Must(204, "DELETE", "/api/v1/session", nil)
	w.Admin(204, "DELETE", "/api/v1/tokens/"+tk.ID, nil)

	// Items, blockers, questions.
	var epic struct {
		Key     string
		Version int64
	}
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "epic", "title": "Parser"}).JSON(t, &epic)
	w.Admin(200, "PATCH", "/api/v1/items/"+epic.Key, map[string]any{"version": epic.Version, "title": "The parser"})
	w.Admin(200, "PATCH", "/api/v1/items/"+epic.Key, map[string]any{"version": epic.Version + 1, "state": "ready"})
	other := w.ticket("task")
	var it struct {
		Key     string
		Version int64
	}
	w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "idle"}).JSON(t, &it)
	w.Admin(200, "PATCH", "/api/v1/items/"+it.Key, map[string]any{"version": it.Version, "title": "still idle"})
	w.Admin(201, "POST", "/api/v1/items/"+epic.Key+"/blockers/"+it.Key, nil)
	w.Admin(204, "DELETE", "/api/v1/items/"+epic.Key+"/blockers/"+it.Key, nil)
	w.Admin(201, "POST", "/api/v1/items/"+it.Key+"/blockers/"+other, nil)
	w.Admin(204, "DELETE", "/api/v1/items/"+it.Key+"/blockers/"+other, nil)
	var q struct{ ID string }
	w.Admin(201, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": "why?", "blocking": false}).JSON(t, &q)
	w.Admin(200, "POST", "/api/v1/questions/"+q.ID+"/answer", map[string]any{"answer": "because"})

	// Pipelines: bugs are approved by a person, then fixed; docs read a
	// knowledge entry that no service holds (the flow is flagged stuck).
	w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/bug", map[string]any{"version": 0, "definition": map[string]any{
		"stages": []any{
			map[string]any{"id": "triage", "kind": "human", "next": map[string]any{"failed": "$failed"}},
			map[string]any{"id": "fix", "kind": "agent", "instructions": "Fix it.", "next": map[string]any{"done": "$done", "failed": "$failed"}},
		}}})
	w.Admin(200, "PUT", "/api/v1/projects/ACME/pipelines/docs", map[string]any{"version": 0, "definition": map[string]any{
		"stages": []any{map[string]any{"id": "write", "kind": "agent", "instructions": "Write.", "knowledge": []string{"conventions/docs"}}}}})

	// A flow that waits for an answer, resumes and is done.
	done := w.ticket("bug")
	w.Admin(200, "POST", "/api/v1/items/"+done+"/flow/start", nil)
	w.await(done, "approval", func(f flowView) bool { return f.Waiting == "approval" })
	w.Admin(200, "POST", "/api/v1/items/"+done+"/flow/approve", nil)
	// Its first session is interrupted by its runner's drain (run.finished
	// with a reason): the stage runs again in the same iteration.
	drained := w.leaseStage(done, "fix", 1)
	w.Must(200, w.runner.Token, "POST", "/api/v1/runs/"+drained.ID+"/finish", map[string]any{"exit_status": 143,
		"error": "the runner was stopped and its drain time (1m0s) ran out", "interrupted": "runner_drain"})
	// Its second is refused by the provider (run.finished with retry_at):
	// the flow waits for the provider (flow.waiting with until), then runs
	// the stage again.
	limited := w.leaseStage(done, "fix", 1)
	w.Must(200, w.runner.Token, "POST", "/api/v1/runs/"+limited.ID+"/finish", map[string]any{"exit_status": 1,
		"error": "429 rate_limit_error", "interrupted": "provider_limit", "retry_at": time.Now().UTC().Add(50 * time.Millisecond).Format(time.RFC3339Nano)})
	r := w.leaseStage(done, "fix", 1)
	w.Must(200, w.runner.Token, "POST", "/api/v1/runs/"+r.ID+"/usage", map[string]any{"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.01})
	w.runner.Ask(r, "Which database?", true)
	w.runner.Complete(r, "done", "asked")
	w.await(done, "answer", func(f flowView) bool { return f.Waiting == "answer" })
	w.answerOpen(done, "SQLite")
	w.runner.Complete(w.leaseStage(done, "fix", 1), "done", "fixed")
	w.await(done, "done", func(f flowView) bool { return f.Status == "done" })

	// A flow that fails (rejected), one flagged stuck.
	failed := w.ticket("bug")
	w.Admin(200, "POST", "/api/v1/items/"+failed+"/flow/start", nil)
	w.await(failed, "approval", func(f flowView) bool { return f.Waiting == "approval" })
	w.Admin(200, "POST", "/api/v1/items/"+failed+"/flow/reject", map[string]any{"comment": "not a bug"})
	w.await(failed, "failed", func(f flowView) bool { return f.Status == "failed" })
	stuck := w.ticket("docs")
	w.Admin(200, "POST", "/api/v1/items/"+stuck+"/flow/start", nil)
	w.await(stuck, "the flag", func(f flowView) bool { return f.Waiting == "answer" })

	// Stopped flows: one whose run a runner holds (its cancellation is
	// requested), one whose run is still queued (cancelled at once).
	for _, leased := range []bool{true, false} {
		key := w.ticket("task")
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil)
		if leased {
			w.leaseStage(key, "implement", 1)
		} else {
			w.await(key, "its run", func(f flowView) bool { return f.Run != "" })
		}
		var cur struct{ Version int64 }
		w.Admin(200, "GET", "/api/v1/items/"+key, nil).JSON(t, &cur)
		w.Admin(200, "PATCH", "/api/v1/items/"+key, map[string]any{"version": cur.Version, "state": "paused"})
		w.await(key, "stopped", func(f flowView) bool { return f.Status == "stopped" })
	}

	// An approval left waiting (and the stuck flow's question): escalated
	// once the notifier has seen them (escalate_after is 1ms here). A
	// flow whose run no runner takes: the reconciler records it. A
	// subscription, ended.
	waiting := w.ticket("bug")
	w.Admin(200, "POST", "/api/v1/items/"+waiting+"/flow/start", nil)
	w.await(waiting, "approval", func(f flowView) bool { return f.Waiting == "approval" })
	unclaimed := w.ticket("task")
	w.Admin(200, "POST", "/api/v1/items/"+unclaimed+"/flow/start", nil)
	w.await(unclaimed, "its run", func(f flowView) bool { return f.Run != "" })
	if _, err := w.Core.Reconciler.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	w.Admin(200, "PUT", "/api/v1/items/"+waiting+"/subscription", nil)
	w.Admin(204, "DELETE", "/api/v1/items/"+waiting+"/subscription", nil)

	// Notifications: the bootstrap admin created the tickets, so it hears
	// of their approvals and questions; it marks them read.
	if made, err := w.Core.Notifier.Pass(ctx); err != nil || made == 0 {
		t.Fatalf("the notifier made %d notifications: %v", made, err)
	}
	w.Admin(200, "POST", "/api/v1/me/notifications/inbox/read", nil)
	for _, typ := range []string{"question.escalated", "flow.approval_escalated"} {
		deadline := time.Now().Add(apitest.HangGuard)
		for storetest.Count(t, w.Store, `SELECT COUNT(*) FROM events WHERE type = ?`, typ) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no %s: the escalation jobs did not run", typ)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	writeDigestEvents(t, w)

	writeWebhookEvents(t, w)

	// A runner that drains, then is gone for longer than the retention.
	gone := w.NewRunner("gone")
	w.Must(200, gone.Token, "POST", "/api/v1/runners/"+gone.ID+"/heartbeat", map[string]any{"draining": true})
	day := w.Core.Config.RunnerRetention()
	if _, err := w.Core.Runs.RemoveGoneRunners(ctx, time.Now().Add(day), day); err != nil {
		t.Fatal(err)
	}
}

// TestPlatformHistoryKeepsEachEntitysAuthorization: the platform's history
// has the kill switch for everyone who can read the platform, but a
// runner's registration, a browser session and a platform token only for
// platform admins (for anyone else they are not there at all).
func TestPlatformHistoryKeepsEachEntitysAuthorization(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		member := e.RoleToken(e.Org("acme"), "member")
		e.NewRunner("r1")
		var tk struct{ Token string }
		e.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "platform", "role": "platform_admin"}).JSON(t, &tk)
		b := e.Browser("")
		b.SignIn(tk.Token)
		e.Admin(200, "POST", "/api/v1/platform/pause", nil)
		e.Admin(200, "POST", "/api/v1/platform/resume", nil)
		types := func(token string) []string {
			t.Helper()
			var page server.EventPage
			e.Must(200, token, "GET", "/api/v1/platform/events", nil).JSON(t, &page)
			var out []string
			for _, ev := range page.Events {
				out = append(out, ev.Type)
			}
			slices.Sort(out)
			return slices.Compact(out)
		}
		if got, want := types(member), []string{"platform.paused", "platform.resumed"}; !slices.Equal(got, want) {
			t.Errorf("a member reads %v in the platform's history, want %v", got, want)
		}
		got := types(tk.Token)
		for _, want := range []string{"platform.paused", "runner.registered", "session.started", "token.created"} {
			if !slices.Contains(got, want) {
				t.Errorf("a platform admin reads %v in the platform's history, without %s", got, want)
			}
		}
	})
}
