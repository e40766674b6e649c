package apitest_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/run"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
)

// TestHiddenLooksUnknown: on every route whose path names an organization,
// a project, an item, a question or a run, another organization's admin
// gets exactly the 404 that an entity which does not exist gets (the names
// aside). Each kind of entity is resolved in one place
// (server.Request.Org, Project, Item, Visible), so a handler cannot answer
// differently; this holds every route of the table to it.
func TestHiddenLooksUnknown(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		orgB := e.Org("globex")
		e.Project("acme", "ACME")
		e.Project("globex", "GLX")
		createItem(e, "ACME", map[string]any{"type": "task", "title": "Secret"})
		createItem(e, "ACME", map[string]any{"type": "task", "title": "Other secret"})
		var q struct{ ID string }
		e.Admin(201, "POST", "/api/v1/items/ACME-1/questions", map[string]any{"text": "?"}).JSON(t, &q)
		rn := queueRun(e, "ACME-1")
		other := e.RoleToken(orgB, "admin")
		known := map[string]string{"org": "acme", "project": "ACME", "item": "ACME-1", "blocker": "ACME-2", "id": q.ID, "run": rn.ID,
			"name": "default", "subject": "bob"}
		unknown := map[string]string{"org": "nope", "project": "NOPE", "item": "NOPE-1", "blocker": "NOPE-2", "id": transition.NewID(),
			"run": transition.NewID(), "name": "default", "subject": "bob"}
		back := strings.NewReplacer("nope", "acme", "NOPE", "ACME", unknown["id"], known["id"], unknown["run"], known["run"])
		param := regexp.MustCompile(`\{([a-z_]+)\}`)
		checked := 0
		for _, rt := range e.Core.API.Routes() {
			scoped := strings.Contains(rt.Path, "{org}") || strings.Contains(rt.Path, "{project}") || strings.Contains(rt.Path, "{item}") ||
				strings.Contains(rt.Path, "{run}") || strings.HasPrefix(rt.Path, "/api/v1/questions/")
			if !scoped || rt.Perm == run.PermRun || rt.Perm == run.PermRunner || rt.Perm == access.PlatformAdmin {
				continue // the run protocol answers 403 to every other credential
			}
			path := func(values map[string]string) string {
				return param.ReplaceAllStringFunc(rt.Path, func(p string) string { return values[p[1:len(p)-1]] })
			}
			var body any
			if rt.Request != nil && !rt.OptionalBody {
				body = map[string]any{}
			}
			hidden := e.Do(other, rt.Method, path(known), body)
			missing := e.Do(other, rt.Method, path(unknown), body)
			if hidden.Status != 404 || missing.Status != 404 || string(hidden.Body) != back.Replace(string(missing.Body)) {
				t.Errorf("%s %s as another organization's admin: %d %s; an unknown entity: %d %s",
					rt.Method, rt.Path, hidden.Status, hidden.Body, missing.Status, missing.Body)
			}
			checked++
		}
		if checked < 40 {
			t.Fatalf("only %d routes checked", checked)
		}
	})
}
