package apitest_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/knowledge"
	knowledgeclient "github.com/ballet/ballet/internal/knowledge/client"
	"github.com/ballet/ballet/internal/knowledge/service"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestKnowledgeServiceBehindCore: the real Knowledge service, on its own
// store, behind the real Core (its proxy and its introspection), on both
// engines: people keep and find entries through Core with Core's tokens
// and roles, an entry's slashes survive the proxy, one organization sees
// nothing of another's, and Core's own client (the MCP tools' and the
// stages') reads with the service credential.
func TestKnowledgeServiceBehindCore(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		var handler atomic.Pointer[http.Handler]
		ks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
		t.Cleanup(ks.Close)
		e := apitest.New(t, s, func(c *config.Config) { c.Knowledge.URL = ks.URL })
		cfg := config.KnowledgeDefault()
		cfg.Knowledge.Core, cfg.Knowledge.ServiceToken = e.URL, apitest.ServiceToken
		kclock := clock.NewFake(time.Now())
		srv, err := service.Open(t.Context(), service.Options{Config: cfg, Clock: kclock,
			Store: storetest.OpenWith(t, s.Engine(), knowledge.Migrations)})
		if err != nil {
			t.Fatal(err)
		}
		h := srv.Handler()
		handler.Store(&h)

		acme, globex := e.Org("acme"), e.Org("globex")
		member, viewer, stranger := e.RoleToken(acme, "member"), e.RoleToken(acme, "viewer"), e.RoleToken(globex, "admin")
		const k = "/api/v1/knowledge/orgs/acme"
		e.Must(201, member, "POST", k+"/spaces/default/entries", map[string]any{"slug": "guides/deploy", "title": "Deploying",
			"body": "Roll back with make rollback.", "tags": []string{"ops"}})
		var entry struct {
			Version   int64  `json:"version"`
			UpdatedBy string `json:"updated_by"`
		}
		e.Must(200, viewer, "GET", k+"/spaces/default/entries/guides%2Fdeploy", nil).JSON(t, &entry)
		if entry.Version != 1 || entry.UpdatedBy == "" {
			t.Fatalf("entry through Core: %+v", entry)
		}
		e.Must(200, member, "PUT", k+"/spaces/default/entries/guides%2Fdeploy", map[string]any{"version": 1, "title": "Deploying",
			"body": "Roll back with make rollback, then tell the channel.", "tags": []string{"ops"}})
		e.Must(409, member, "PUT", k+"/spaces/default/entries/guides%2Fdeploy", map[string]any{"version": 1, "title": "x", "body": "y"})
		e.Must(403, viewer, "PUT", k+"/spaces/default/entries/guides%2Fdeploy", map[string]any{"version": 2, "title": "x", "body": "y"})
		e.Must(403, member, "POST", k+"/spaces", map[string]any{"slug": "ops"})
		var found struct {
			Results []struct{ Slug, Snippet string }
		}
		e.Must(200, viewer, "GET", k+"/search?q=channel&tag=ops", nil).JSON(t, &found)
		if len(found.Results) != 1 || found.Results[0].Slug != "guides/deploy" || found.Results[0].Snippet == "" {
			t.Fatalf("search through Core: %+v", found)
		}
		e.Must(404, stranger, "GET", k+"/spaces", nil)
		e.Must(404, stranger, "GET", k+"/search?q=channel", nil)
		e.Must(401, "not-a-token", "GET", k+"/spaces", nil)

		// Core's client, with the service credential: reads, scoped by the path.
		c, err := knowledgeclient.New(knowledgeclient.Options{URL: ks.URL, Token: apitest.ServiceToken})
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Entry(t.Context(), "acme", "", "guides/deploy", 1)
		if err != nil || got.Version != 1 || got.Body != "Roll back with make rollback." {
			t.Fatalf("the client reads version 1: %+v %v", got, err)
		}
		res, err := c.Search(t.Context(), "acme", knowledgeclient.Query{Text: "rollback"})
		if err != nil || len(res) != 1 {
			t.Fatalf("the client searches: %+v %v", res, err)
		}
		if res, err := c.Search(t.Context(), "globex", knowledgeclient.Query{Text: "rollback"}); err != nil || len(res) != 0 {
			t.Fatalf("globex's search finds acme's entry: %+v %v", res, err)
		}

	})
}
