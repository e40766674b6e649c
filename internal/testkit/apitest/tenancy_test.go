package apitest_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/server"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestOpenAPIDocumentsEveryRoute: the document is built from the route
// table; nothing stored is read, so one engine is enough.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t, "sqlite")
	e := apitest.New(t, s)
	type schema struct {
		Ref                  string         `json:"$ref"`
		Properties           map[string]any `json:"properties"`
		AdditionalProperties *bool          `json:"additionalProperties"`
		OneOf                []struct{}     `json:"oneOf"`
		AnyOf                []schema       `json:"anyOf"`
		Discriminator        struct{ Mapping map[string]string }
	}
	type content map[string]struct{ Schema schema }
	var doc struct {
		OpenAPI string
		Paths   map[string]map[string]struct {
			Summary     string
			Permission  string `json:"x-permission"`
			RequestBody *struct{ Content content }
			Responses   map[string]struct{ Content content }
		}
		Components struct{ Schemas map[string]schema }
	}
	r := e.Must(200, "", "GET", "/api/v1/openapi.json", nil)
	r.JSON(t, &doc)
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	resolve := func(s schema) schema {
		for s.Ref != "" {
			s = doc.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
		}
		return s
	}
	n := 0
	for _, rt := range e.Core.API.Routes() {
		op, ok := doc.Paths[rt.Path][strings.ToLower(rt.Method)]
		if !ok {
			t.Errorf("%s %s is not documented", rt.Method, rt.Path)
			continue
		}
		n++
		if op.Summary == "" || op.Permission != string(rt.Perm) {
			t.Errorf("%s %s: summary %q, permission %q (route says %q)", rt.Method, rt.Path, op.Summary, op.Permission, rt.Perm)
		}
		if hasBody := rt.Request != nil || rt.RawBody != ""; (op.RequestBody != nil) != hasBody {
			t.Errorf("%s %s: request body documented %v, route has one %v", rt.Method, rt.Path, op.RequestBody != nil, hasBody)
		}
		// Every request schema forbids unknown fields, as the decoder does
		// (a raw body, or a protocol's own messages, are not decoded).
		if op.RequestBody != nil && rt.RawBody == "" && rt.Serve == nil {
			if rs := resolve(op.RequestBody.Content["application/json"].Schema); rs.AdditionalProperties == nil || *rs.AdditionalProperties {
				t.Errorf("%s %s: the request schema allows unknown fields", rt.Method, rt.Path)
			}
		}
		// Every route documents the errors any route can answer, with the
		// error body; a route with a body also 408 and 413.
		want := []string{"400", "401", "403", "404", "500", "503"}
		if rt.Request != nil || rt.RawBody != "" {
			want = append(want, "408", "413")
		}
		hasError := func(s schema) bool {
			for _, alt := range s.AnyOf { // a protocol's route: its own errors or the API's
				if resolve(alt).Properties["error"] != nil {
					return true
				}
			}
			return resolve(s).Properties["error"] != nil
		}
		for _, status := range want {
			if !hasError(op.Responses[status].Content["application/json"].Schema) {
				t.Errorf("%s %s: no error body documented for %s", rt.Method, rt.Path, status)
			}
		}
	}
	documented := 0
	for _, ops := range doc.Paths {
		documented += len(ops)
	}
	if documented != n {
		t.Errorf("%d operations documented, %d routes", documented, n)
	}
	// Every field of every schema is snake_case, as the API's JSON is.
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	for name, sc := range doc.Components.Schemas {
		for p := range sc.Properties {
			if !snake.MatchString(p) {
				t.Errorf("schema %s: field %q is not snake_case", name, p)
			}
		}
	}
	// One schema per event type of the catalogue; Event is one of them,
	// told apart by type.
	ev := doc.Components.Schemas["Event"]
	if len(ev.OneOf) != len(server.EventPayloads) || len(ev.Discriminator.Mapping) != len(server.EventPayloads) {
		t.Errorf("Event is one of %d schemas (mapping %d), the catalogue has %d types", len(ev.OneOf), len(ev.Discriminator.Mapping), len(server.EventPayloads))
	}
	for _, typ := range server.EventTypes() {
		v := doc.Components.Schemas["Event."+typ]
		if ref, _ := v.Properties["payload"].(map[string]any)["$ref"].(string); ref != "#/components/schemas/EventPayload."+typ {
			t.Errorf("Event.%s: payload %v", typ, v.Properties["payload"])
		}
		// A payload is a struct: its fields are named and closed.
		if p := resolve(doc.Components.Schemas["EventPayload."+typ]); p.AdditionalProperties == nil || *p.AdditionalProperties {
			t.Errorf("EventPayload.%s allows any field: make the payload a struct", typ)
		}
	}
}

func TestTenancyLifecycle(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		orgID := e.Org("acme")
		e.Admin(409, "POST", "/api/v1/orgs", map[string]any{"slug": "acme", "name": "Again"})
		var o map[string]any
		e.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(t, &o)
		if o["id"] != orgID || o["slug"] != "acme" {
			t.Fatalf("org %v", o)
		}
		e.Admin(200, "GET", "/api/v1/orgs/"+orgID, nil) // by id too

		var p map[string]any
		e.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{
			"key": "ACME", "name": "Acme", "repository": map[string]any{"forge": "gitea", "url": "https://git.example/acme/app"},
			"merge_policy":      map[string]any{"mode": "auto", "required_approvals": 1, "required_checks": []string{"ci"}},
			"concurrency_limit": 3, "budgets": map[string]any{"per_ticket_usd": 2.5, "per_day_usd": 40},
		}).JSON(t, &p)
		if p["key"] != "ACME" || p["repository"].(map[string]any)["default_branch"] != "main" || p["paused"] != false ||
			p["budgets"].(map[string]any)["per_ticket_usd"] != 2.5 || fmt.Sprint(p["ticket_types"]) != "[task bug docs]" {
			t.Fatalf("project %v", p)
		}
		e.Admin(409, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "dup"})
		e.Admin(200, "GET", "/api/v1/projects/"+p["id"].(string), nil)

		// Optimistic update: the version read; a stale one is a 409.
		var up map[string]any
		e.Admin(200, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": 1, "paused": true, "repository": nil}).JSON(t, &up)
		if up["version"] != 2.0 || up["paused"] != true || up["repository"] != nil {
			t.Fatalf("updated %v", up)
		}
		r := e.Admin(409, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": 1, "name": "stale"})
		if r.ErrorCode() != "conflict" {
			t.Fatalf("stale update: %s", r.Body)
		}
		var got map[string]any
		e.Admin(200, "GET", "/api/v1/projects/ACME", nil).JSON(t, &got)
		if got["name"] != "Acme" || got["version"] != 2.0 {
			t.Fatalf("a refused update changed the project: %v", got)
		}

		// Members: set, change, last-admin protection, remove.
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/alice", map[string]any{"role": "admin"})
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/alice", map[string]any{"role": "admin"}) // idempotent
		r = e.Admin(409, "PUT", "/api/v1/orgs/acme/members/alice", map[string]any{"role": "viewer"})
		if !strings.Contains(string(r.Body), "last admin") {
			t.Fatalf("last admin demoted: %s", r.Body)
		}
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/bob", map[string]any{"role": "admin"})
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/alice", map[string]any{"role": "viewer"})
		e.Admin(200, "PUT", "/api/v1/projects/ACME/members/alice", map[string]any{"role": "member"})
		var ms struct{ Members []map[string]any }
		e.Admin(200, "GET", "/api/v1/orgs/acme/members", nil).JSON(t, &ms)
		if len(ms.Members) != 2 {
			t.Fatalf("members %v", ms.Members)
		}
		e.Admin(204, "DELETE", "/api/v1/orgs/acme/members/alice", nil)
		e.Admin(404, "DELETE", "/api/v1/orgs/acme/members/alice", nil)

		// Platform kill switch.
		var pl map[string]any
		e.Admin(200, "POST", "/api/v1/platform/pause", nil).JSON(t, &pl)
		if pl["paused"] != true {
			t.Fatalf("platform %v", pl)
		}
		e.Admin(200, "POST", "/api/v1/platform/pause", nil) // already paused: no change
		e.Admin(200, "POST", "/api/v1/platform/resume", nil)

		// Exactly one event per change, carrying the actor.
		rows, err := s.Query(t.Context(), `SELECT type, actor_kind, actor_sub FROM events ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for i := range rows.Len() {
			var typ, kind, sub string
			_ = rows.Scan(i, &typ, &kind, &sub)
			types = append(types, typ)
			if kind != "human" || sub != "bootstrap" {
				t.Fatalf("event %s by %s/%s", typ, kind, sub)
			}
		}
		want := "[organization.created project.created project.updated member.role_set member.role_set member.role_set member.role_set member.removed platform.paused platform.resumed]"
		if fmt.Sprint(types) != want {
			t.Fatalf("events %v\nwant   %s", types, want)
		}
	})
}

func TestBadInputIsRejectedClearly(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s, func(c *config.Config) { c.HTTP.MaxBodyBytes = 4096 })
		e.Org("acme")
		cases := []struct {
			method, path string
			body         any
			status       int
			want         string
		}{
			{"POST", "/api/v1/orgs", `{"slug":"ok-org","name":"x","extra":1}`, 400, `"field":"extra","message":"unknown field"`},
			{"POST", "/api/v1/orgs", `{"slug":7,"name":"x"}`, 400, `"field":"slug","message":"must be a string, not number"`},
			{"POST", "/api/v1/orgs", `{"slug":"ok-org"`, 400, "malformed JSON"},
			{"POST", "/api/v1/orgs", ``, 400, "request body is empty"},
			{"POST", "/api/v1/orgs", `{"slug":"a","name":"x"} {}`, 400, "exactly one JSON object"},
			{"POST", "/api/v1/orgs", `[1,2]`, 400, "must be a JSON object"},
			{"POST", "/api/v1/orgs", `{"slug":"Not Valid","name":""}`, 400, `"field":"name"`},
			{"POST", "/api/v1/orgs", `{"slug":"0190f5a2-7b1c-7d2e-8f3a-4b5c6d7e8f90","name":"x"}`, 400, `has the shape of an id (a UUID); a slug must not look like one"}]`},
			{"POST", "/api/v1/orgs", `{"slug":"x","name":"` + strings.Repeat("a", 5000) + `"}`, 413, "exceeds 4096 bytes"},
			{"POST", "/api/v1/orgs/acme/projects", `{"key":"acme","name":"x"}`, 400, `"field":"key"`},
			{"POST", "/api/v1/orgs/acme/projects", `{"key":"OK","name":"x","repository":{"forge":"svn","url":"x","default_branch":"main","credentials_ref":""}}`, 400, `"field":"repository.forge"`},
			{"POST", "/api/v1/orgs/acme/projects", `{"key":"OK","name":"x","concurrency_limit":-1,"ticket_types":["epic","bug","bug"]}`, 400, `"field":"ticket_types[0]"`},
			{"POST", "/api/v1/orgs/acme/projects", `{"key":"OK","name":"x","budgets":{"per_ticket_usd":-5,"per_day_usd":null}}`, 400, `"field":"budgets.per_ticket_usd"`},
			{"POST", "/api/v1/orgs/nope/projects", `{"key":"OK","name":"x"}`, 404, "not found"},
			{"PATCH", "/api/v1/projects/NOPE", `{"version":1}`, 404, "not found"},
			{"PUT", "/api/v1/orgs/acme/members/carol", `{"role":"owner"}`, 400, `"field":"role"`},
			{"PATCH", "/api/v1/platform", `{"version":1,"concurrency_limit":-3}`, 400, `"field":"concurrency_limit"`},
			{"GET", "/api/v1/orgs/acme", nil, 200, `"slug":"acme"`},
		}
		for _, c := range cases {
			r := e.Do(apitest.BootstrapToken, c.method, c.path, c.body)
			if r.Status != c.status || !strings.Contains(string(r.Body), c.want) {
				t.Errorf("%s %s %.60v: %d %s; want %d containing %s", c.method, c.path, c.body, r.Status, r.Body, c.status, c.want)
			}
		}
		// Several problems are listed at once.
		r := e.Admin(400, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "x", "name": "", "concurrency_limit": 5000})
		var body struct {
			Error struct{ Details []struct{ Field string } }
		}
		r.JSON(t, &body)
		if len(body.Error.Details) != 3 {
			t.Fatalf("want 3 problems listed: %s", r.Body)
		}
		if strings.Contains(e.Logs(), "level=ERROR") {
			t.Fatalf("bad input logged as an internal error:\n%s", e.Logs())
		}
		// Unauthenticated and malformed credentials.
		for h, msg := range map[string]string{
			"":                      "missing Authorization",
			"Basic abc":             `must be \"Bearer <token>\"`,
			"Bearer ":               `must be \"Bearer <token>\"`,
			"Bearer nonsense":       "unknown credential",
			"Bearer ballet_unknown": "unknown token",
			"Bearer a.b.c":          "no OIDC issuer is configured",
		} {
			req, _ := http.NewRequest("GET", e.URL+"/api/v1/orgs", nil)
			if h != "" {
				req.Header.Set("Authorization", h)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 401 || !strings.Contains(string(b), msg) || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("Authorization %q: %d %s, want 401 with %q", h, resp.StatusCode, b, msg)
			}
		}
	})
}

func TestBootstrapTokenIsGeneratedOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		dir := t.TempDir()
		file := filepath.Join(dir, "data", "bootstrap-token")
		var tokens []string
		for range 2 {
			e := apitest.New(t, s, func(c *config.Config) { c.Auth.BootstrapToken = ""; c.Auth.BootstrapTokenFile = file })
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := os.Stat(file)
			if fi.Mode().Perm() != 0o600 {
				t.Fatalf("bootstrap token file mode %v", fi.Mode().Perm())
			}
			tok := strings.TrimSpace(string(b))
			tokens = append(tokens, tok)
			e.Must(201, tok, "POST", "/api/v1/orgs", map[string]any{"slug": fmt.Sprintf("org-%d", len(tokens)), "name": "x"})
			if strings.Contains(e.Logs(), tok) {
				t.Fatal("the bootstrap token was logged")
			}
			if len(tokens) == 1 && !strings.Contains(e.Logs(), file) {
				t.Fatalf("where the token is was not logged:\n%s", e.Logs())
			}
		}
		if tokens[0] != tokens[1] {
			t.Fatal("a second start generated another token")
		}
	})
}

func TestConcurrentProjectUpdatesOneWins(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		var wg sync.WaitGroup
		statuses := make([]int, 6)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = e.Do(apitest.BootstrapToken, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": 1, "name": fmt.Sprintf("n%d", i)}).Status
			}()
		}
		wg.Wait()
		ok := 0
		for _, st := range statuses {
			switch st {
			case 200:
				ok++
			case 409:
			default:
				t.Fatalf("status %d", st)
			}
		}
		if ok != 1 {
			t.Fatalf("%d concurrent updates of version 1 succeeded: %v", ok, statuses)
		}
	})
}
