package apitest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestRenameOrganizationAPI: PATCH /orgs/{org} renames with the version
// read (409 with a stale one, the name unchanged); a slug other than the
// organization's is a 400 naming slug, its own slug is accepted; the
// rename is in the organization's history.
func TestRenameOrganizationAPI(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		var o struct {
			Name, Slug string
			Version    int64
		}
		e.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(t, &o)
		e.Admin(200, "PATCH", "/api/v1/orgs/acme", map[string]any{"version": o.Version, "name": "Acme Corp", "slug": "acme"}).JSON(t, &o)
		if o.Name != "Acme Corp" || o.Slug != "acme" {
			t.Fatalf("renamed: %+v", o)
		}
		if r := e.Admin(409, "PATCH", "/api/v1/orgs/acme", map[string]any{"version": o.Version - 1, "name": "Stale"}); r.ErrorCode() != "conflict" {
			t.Fatalf("stale rename: %s", r.Body)
		}
		r := e.Admin(400, "PATCH", "/api/v1/orgs/acme", map[string]any{"version": o.Version, "name": "Acme", "slug": "acme-corp"})
		if !strings.Contains(string(r.Body), `"slug"`) || !strings.Contains(string(r.Body), "never changes") {
			t.Fatalf("a slug change: %s", r.Body)
		}
		e.Admin(400, "PATCH", "/api/v1/orgs/acme", map[string]any{"version": o.Version, "name": "Acme", "owner": "x"})
		var got struct{ Name string }
		e.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(t, &got)
		if got.Name != "Acme Corp" {
			t.Fatalf("after the refused patches the name is %q", got.Name)
		}
		var hist struct {
			Events []struct {
				Type    string
				Payload struct {
					Changes struct{ Name string }
				}
			}
		}
		e.Admin(200, "GET", "/api/v1/orgs/acme/events?limit=1000", nil).JSON(t, &hist)
		last := hist.Events[len(hist.Events)-1]
		if last.Type != "organization.updated" || last.Payload.Changes.Name != "Acme Corp" {
			t.Fatalf("the organization's last event: %+v", last)
		}
	})
}

// TestDrainRunnerAPI: a drained runner is no runner for the flow waiting
// for a run (attention no_runner); its lease answers 204 while the run
// waits, and the run stays queued; undrained, the same lease takes it. A
// registration again does not lift the drain. An unknown runner is 404.
func TestDrainRunnerAPI(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		tok := runnerToken(e, "drained")
		id := registerRunner(e, tok, "host-1")
		key := createTask(e, "ACME")
		queued := queueRun(e, key)
		// The flow waits for this run: with the only runner drained, no
		// runner could take it (attention no_runner, at once).
		if _, err := s.Exec(context.Background(), store.Stmt(`UPDATE flows SET run_id = ? WHERE item_id = ?`, queued.ID, queued.ItemID)); err != nil {
			t.Fatal(err)
		}
		attention := func() string {
			var it struct{ Flow struct{ Attention string } }
			e.Admin(200, "GET", "/api/v1/items/"+key, nil).JSON(t, &it)
			return it.Flow.Attention
		}
		if a := attention(); a != "" {
			t.Fatalf("attention %q before the drain", a)
		}

		var rn struct {
			Drained   bool   `json:"drained"`
			DrainedBy string `json:"drained_by"`
		}
		e.Admin(200, "POST", "/api/v1/runners/"+id+"/drain", nil).JSON(t, &rn)
		if !rn.Drained || rn.DrainedBy == "" {
			t.Fatalf("drained runner %+v", rn)
		}
		if a := attention(); a != "no_runner" {
			t.Fatalf("attention %q with the only runner drained, want no_runner", a)
		}
		registerRunner(e, tok, "host-1")
		e.Must(204, tok, "POST", "/api/v1/runners/"+id+"/lease", map[string]any{})
		var r struct{ Status string }
		e.Admin(200, "GET", "/api/v1/runs/"+queued.ID, nil).JSON(t, &r)
		if r.Status != "queued" {
			t.Fatalf("the run is %s after a drained runner's lease, want queued", r.Status)
		}
		var back map[string]any
		e.Admin(200, "POST", "/api/v1/runners/"+id+"/undrain", nil).JSON(t, &back)
		if _, by := back["drained_by"]; back["drained"] != false || by {
			t.Fatalf("undrained runner %v", back)
		}
		var l struct{ Run struct{ ID string } }
		e.Must(200, tok, "POST", "/api/v1/runners/"+id+"/lease", map[string]any{}).JSON(t, &l)
		if l.Run.ID != queued.ID {
			t.Fatalf("leased %q after the undrain, want %s", l.Run.ID, queued.ID)
		}
		e.Admin(404, "POST", "/api/v1/runners/no-such-runner/drain", nil)
	})
}
