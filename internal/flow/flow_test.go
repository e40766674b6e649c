package flow_test

import (
	"context"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestLegacyPullRequestIsMigrated: a flow's pull request stored with Go's
// field names (before forge.PullRequest had JSON tags) reads back whole
// after the migration, head commit included.
func TestLegacyPullRequestIsMigrated(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		var it struct{ Key string }
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t", "state": "ready"}).JSON(t, &it)
		e.Admin(200, "POST", "/api/v1/items/"+it.Key+"/flow/start", nil)
		rows, err := s.Query(ctx, `SELECT id FROM flows`)
		if err != nil {
			t.Fatal(err)
		}
		var id string
		if err := rows.Scan(0, &id); err != nil {
			t.Fatal(err)
		}
		legacy := `{"Number":7,"URL":"https://git.example/acme/pulls/7","Branch":"ballet/ACME-1","Base":"main","HeadSHA":"ab00614bbf2063d3e4ceffd138e91e572ceee8cc"}`
		if _, err := s.Exec(ctx, store.Stmt(`UPDATE flows SET pull_request = ? WHERE id = ?`, legacy, id),
			store.Stmt(`DELETE FROM schema_migrations WHERE name = '0009_pull_request_json'`)); err != nil {
			t.Fatal(err)
		}
		if err := store.Migrate(ctx, s, time.Now()); err != nil {
			t.Fatal(err)
		}
		f, err := e.Core.Flows.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := forge.PullRequest{Number: 7, URL: "https://git.example/acme/pulls/7", Branch: "ballet/ACME-1", Base: "main",
			HeadSHA: "ab00614bbf2063d3e4ceffd138e91e572ceee8cc"}
		if f.PullRequest == nil || *f.PullRequest != want {
			t.Fatalf("pull request %+v, want %+v", f.PullRequest, want)
		}
	})
}
