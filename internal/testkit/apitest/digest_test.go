package apitest_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestMyDigest: GET /api/v1/me/digest answers the caller's own current
// digest — what needs them in the projects they may read, nothing of
// another organization — as JSON, and as an HTML page with ?format=html or
// when Accept prefers text/html; another format is a 400, no credential a
// 401.
func TestMyDigest(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		acme, other := e.Org("acme"), e.Org("other")
		e.Project("acme", "ACME")
		e.Project("other", "OTH")
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/ann", map[string]any{"role": "member"})
		e.Admin(200, "PUT", "/api/v1/orgs/other/members/bob", map[string]any{"role": "member"})
		ann, bob := e.TokenFor("ann", acme, "member"), e.TokenFor("bob", other, "member")
		ask := func(project, text string) string {
			var it struct{ Key string }
			e.Admin(201, "POST", "/api/v1/projects/"+project+"/items", map[string]any{"type": "task", "title": "needs " + text}).JSON(t, &it)
			e.Admin(201, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": text, "blocking": true})
			return it.Key
		}
		mine, theirs := ask("ACME", "Which database?"), ask("OTH", "Secret plans?")

		type digest struct {
			Subject  string
			Needs    int
			Empty    bool
			Projects []struct {
				Org, Project, Name string
				Needs              []struct{ Kind, Item, Link string }
			}
		}
		var d digest
		r := e.Must(200, ann, "GET", "/api/v1/me/digest", nil)
		r.JSON(t, &d)
		if d.Needs != 1 || d.Empty || len(d.Projects) != 1 || d.Projects[0].Project != "ACME" || d.Projects[0].Name != "Project ACME" ||
			len(d.Projects[0].Needs) != 1 || d.Projects[0].Needs[0].Item != mine || d.Projects[0].Needs[0].Kind != "question" ||
			!strings.HasPrefix(d.Projects[0].Needs[0].Link, "http") || !strings.HasSuffix(d.Projects[0].Needs[0].Link, "/items/"+mine+"#questions") ||
			d.Subject != "Ballet digest — 1 needs you" {
			t.Fatalf("ann's digest: %s", r.Body)
		}
		if strings.Contains(string(r.Body), theirs) || strings.Contains(string(r.Body), "OTH") {
			t.Errorf("ann's digest shows the other organization: %s", r.Body)
		}
		r = e.Must(200, bob, "GET", "/api/v1/me/digest?format=json", nil)
		if !strings.Contains(string(r.Body), theirs) || strings.Contains(string(r.Body), mine) {
			t.Errorf("bob's digest: %s", r.Body)
		}

		r = e.Must(200, ann, "GET", "/api/v1/me/digest?format=html", nil)
		page := string(r.Body)
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("?format=html answers %q", ct)
		}
		if !strings.Contains(page, "<!doctype html>") || !strings.Contains(page, "/items/"+mine+`#questions">`+mine+"</a>") ||
			!strings.Contains(page, "Ballet digest — 1 needs you") || strings.Contains(page, theirs) {
			t.Errorf("the page:\n%s", page)
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script") {
			t.Errorf("the page's policy: %q", csp)
		}

		req, _ := http.NewRequest("GET", e.URL+"/api/v1/me/digest", nil)
		req.Header.Set("Authorization", "Bearer "+ann)
		req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), mine) {
			t.Errorf("Accept text/html: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}

		if r := e.Do(ann, "GET", "/api/v1/me/digest?format=xml", nil); r.Status != 400 || !strings.Contains(string(r.Body), "format") {
			t.Errorf("?format=xml: %d %s", r.Status, r.Body)
		}
		if r := e.Do("", "GET", "/api/v1/me/digest", nil); r.Status != 401 {
			t.Errorf("no credential: %d %s", r.Status, r.Body)
		}
	})
}
