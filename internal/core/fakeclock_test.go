package core_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestWholeCoreTimesAStageOutOnAFakeClock runs a whole Core (Core.Run: HTTP,
// feed, the leader's orchestrator, scheduler, reconciler and sweeper) on a
// fake clock. The scheduler starts a ready ticket, a runner leases the run
// of its first stage (an agent stage with the default timeout, two hours)
// and heartbeats every minute of fake time; once the clock passes the
// timeout, the stage times out (spec pipelines.md "Recovery and stuck
// stages"): the flow is flagged stuck, the ticket waits for an answer and
// the runner is asked to stop — after two fake hours, without waiting them.
func TestWholeCoreTimesAStageOutOnAFakeClock(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fk := clock.NewFake(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
		repo := apitest.NewGitRepo(t)
		dir := t.TempDir()
		e := apitest.RunOn(t, s, fk, func(c *config.Config) {
			c.Storage.Path = dir + "/core.db" // the git mirror cache lives next to it
			// On rqlite the leader's lease must outlast a step of the clock
			// (a minute), or it steps down at every step.
			c.Leader.TTL.Duration, c.Leader.Renew.Duration = time.Hour, 10*time.Minute
		})
		e.Org("acme")
		e.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme",
			"repository": map[string]any{"forge": "git", "url": repo.Bare, "default_branch": "main"}})
		runner := e.NewRunner("r1")
		var it struct{ Key string }
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "slow work",
			"acceptance_criteria": "it works", "state": "ready"}).JSON(t, &it)

		// No clock step: the scheduler, nudged by the commit, starts the
		// flow; the orchestrator enters its first stage; the run's creation
		// wakes the runner's long poll.
		leased := runner.MustLease()
		if leased.Item != it.Key {
			t.Fatalf("leased a run of %s, want %s", leased.Item, it.Key)
		}
		heartbeat := func() bool {
			var hb struct{ Cancelled bool }
			e.Must(200, runner.Token, "POST", "/api/v1/runs/"+leased.ID+"/heartbeat", nil).JSON(t, &hb)
			return hb.Cancelled
		}
		flow := func() (status, waiting string) {
			var f struct{ Status, Waiting string }
			e.Admin(200, "GET", "/api/v1/items/"+it.Key+"/flow", nil).JSON(t, &f)
			return f.Status, f.Waiting
		}

		// A runner's minute-by-minute heartbeats up to a minute before the
		// timeout: the run is alive (the sweeper's grace is two minutes) and
		// the stage still running.
		started := fk.Now()
		for fk.Now().Sub(started) < pipeline.DefaultTimeout-time.Minute {
			fk.Advance(time.Minute)
			if heartbeat() {
				t.Fatalf("the run was cancelled after %v, before its stage's timeout", fk.Now().Sub(started))
			}
		}
		if st, _ := flow(); st != "running" {
			t.Fatalf("flow is %s a minute before the timeout, want running", st)
		}

		// Past the timeout: the stage times out. The clock moves on a second
		// per look, as time would, so that every loop that went to sleep on it
		// wakes whenever it went to sleep.
		fk.Advance(time.Minute)
		apitest.Await(t, "the stage to time out", func() bool {
			fk.Advance(time.Second)
			st, w := flow()
			return st == "waiting" && w == "answer"
		})
		if !heartbeat() {
			t.Error("the runner was not asked to stop the timed-out run")
		}
		var item struct{ State string }
		e.Admin(200, "GET", "/api/v1/items/"+it.Key, nil).JSON(t, &item)
		if item.State != "waiting_for_answer" {
			t.Errorf("ticket is %s, want waiting_for_answer", item.State)
		}
		var evs struct {
			Events []struct {
				Type    string
				Payload struct{ Reason string }
			}
		}
		e.Admin(200, "GET", "/api/v1/items/"+it.Key+"/events?limit=1000", nil).JSON(t, &evs)
		stuck := ""
		for _, ev := range evs.Events {
			if ev.Type == "flow.stuck" {
				stuck = ev.Payload.Reason
			}
		}
		if want := "ran longer than its timeout of 2h0m0s"; !strings.Contains(stuck, want) {
			t.Errorf("flow.stuck reason %q, want one saying %q", stuck, want)
		}
		if took := fk.Now().Sub(started); took < pipeline.DefaultTimeout {
			t.Errorf("timed out after %v on Core's clock, before the stage's timeout", took)
		}
	})
}

// TestShutdownClosesWhatOutlastsItsGrace: when Core stops, requests in
// flight may finish within the shutdown grace on Core's clock; a
// connection still busy then (a runner's lease long poll waits a minute) is
// closed, and Core says so, instead of the error being dropped and the
// request left running.
func TestShutdownClosesWhatOutlastsItsGrace(t *testing.T) {
	t.Parallel()
	fk := clock.NewFake(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	e := apitest.RunOn(t, storetest.Open(t, "sqlite"), fk)
	runner := e.NewRunner("r1")
	held := make(chan error, 1)
	go func() {
		req, err := http.NewRequest("POST", e.URL+"/api/v1/runners/"+runner.ID+"/lease", strings.NewReader(`{"wait_seconds":60}`))
		if err != nil {
			held <- err
			return
		}
		req.Header.Set("Authorization", "Bearer "+runner.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %s", resp.Status)
		}
		held <- err
	}()
	apitest.Await(t, "the lease to wait", func() bool { return e.Core.Runs.Waiting() == 1 })
	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop() }()
	// Core's clock moves on, a second per look: past the grace (10 s),
	// long before the lease's minute is up.
	var err error
	apitest.Await(t, "the held lease to end", func() bool {
		fk.Advance(time.Second)
		select {
		case err = <-held:
			return true
		default:
			return false
		}
	})
	if err == nil || strings.HasPrefix(err.Error(), "answered") {
		t.Fatalf("the held lease ended with %v; want its connection closed after the shutdown grace", err)
	}
	if err := apitest.Receive(t, stopped, "Core to stop"); err != nil {
		t.Errorf("Core stopped with %v", err)
	}
	if !strings.Contains(e.Logs(), "closing their connections") {
		t.Errorf("Core did not log that it closed the connections left:\n%s", e.Logs())
	}
}
