package apitest_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestSecretRefsStayWithTheirOrganization: with a pattern that names the
// organization ({org}) beside a shared one matching the same files,
// acme's admin cannot save globex's forge credential or webhook secret as
// a project's reference (400 naming the field), while globex saves it;
// and a reference to globex's secret that acme's project holds anyway
// (saved before the rule) is refused at use: a delivery signed with
// globex's secret is not accepted for acme's project.
func TestSecretRefsStayWithTheirOrganization(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		dir := t.TempDir()
		for _, org := range []string{"acme", "globex"} {
			if err := os.MkdirAll(filepath.Join(dir, org), 0o700); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"token", "hook"} {
				if err := os.WriteFile(filepath.Join(dir, org, f), []byte(org+"-"+f+"-secret-0123456789"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		e := apitest.New(t, s, func(cfg *config.Config) {
			cfg.Secrets.Allow = []string{"file:" + dir + "/*/*", "file:" + dir + "/{org}/*"}
		})
		acme, globex := e.Org("acme"), e.Org("globex")
		asAcme, asGlobex := e.RoleToken(acme, "admin"), e.RoleToken(globex, "admin")
		e.Project("acme", "ACME")
		repo := func(field, ref string) map[string]any {
			return map[string]any{"forge": "gitea", "url": "https://evil.example.com/acme/app", field: ref}
		}
		for field, ref := range map[string]string{"credentials_ref": "file:" + dir + "/globex/token", "webhook_secret_ref": "file:" + dir + "/globex/hook"} {
			for _, req := range []struct {
				method, path string
				body         map[string]any
			}{
				{"POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "EVIL", "name": "Evil", "repository": repo(field, ref)}},
				{"PATCH", "/api/v1/projects/ACME", map[string]any{"version": 1, "repository": repo(field, ref)}},
			} {
				r := e.Do(asAcme, req.method, req.path, req.body)
				if r.Status != 400 || !strings.Contains(string(r.Body), `"field":"repository.`+field+`"`) || !strings.Contains(string(r.Body), "globex") {
					t.Errorf("acme %s %s = %s: %d %s; want 400 naming repository.%s", req.method, field, ref, r.Status, r.Body, field)
				}
			}
			e.Must(201, asGlobex, "POST", "/api/v1/orgs/globex/projects", map[string]any{"key": "GX" + strings.ToUpper(field[:1]), "name": "Globex",
				"repository": repo(field, ref)})
		}
		e.Must(200, asAcme, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": 1, "repository": map[string]any{
			"forge": "gitea", "url": "https://gitea.example.com/acme/app", "credentials_ref": "file:" + dir + "/acme/token", "webhook_secret_ref": "file:" + dir + "/acme/hook"}})

		// At use: acme's project holds globex's webhook secret's reference
		// (written as an older Ballet let it be saved).
		if _, err := e.Store.Exec(context.Background(), store.Stmt(`UPDATE projects SET repo_webhook_secret_ref = ? WHERE key = 'ACME'`, "file:"+dir+"/globex/hook")); err != nil {
			t.Fatal(err)
		}
		body := []byte(`{"action":"opened","number":1,"pull_request":{"number":1}}`)
		req, err := http.NewRequest("POST", e.URL+"/api/v1/hooks/gitea/ACME", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Gitea-Event", "pull_request")
		req.Header.Set("X-Gitea-Signature", giteaSignature("globex-hook-secret-0123456789", body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("a delivery signed with globex's secret for acme's project: %d, want 401", resp.StatusCode)
		}
	})
}
