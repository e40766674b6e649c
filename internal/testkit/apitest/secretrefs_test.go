package apitest_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestSecretRefsNeverNameBalletsOwn: an organization admin cannot point a
// project's repository.credentials_ref or webhook_secret_ref at one of
// Ballet's own credentials (the bootstrap token's variable, the Knowledge
// service token's, a model provider's key, Ballet's own files, /proc) —
// not even when the platform's [secrets] allow lets every variable and
// every file be named — nor at anything outside the allow-list: creating
// or changing the project is a 400 naming the field, and the project is
// left as it was. A reference the allow-list makes referable is saved.
func TestSecretRefsNeverNameBalletsOwn(t *testing.T) {
	t.Parallel()
	for _, allow := range [][]string{{apitest.SecretsAllow}, {"env:*", "file:/*"}} {
		t.Run(strings.Join(allow, ","), func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, s store.Store) {
				var tokenFile string
				e := apitest.New(t, s, func(cfg *config.Config) {
					cfg.Secrets.Allow = allow
					cfg.Runner.PassEnv = []string{"ACME_SESSION_KEY"}
					tokenFile = cfg.Auth.BootstrapTokenFile
				})
				org := e.Org("acme")
				asAdmin := e.RoleToken(org, "admin")
				e.Project("acme", "ACME")
				refused := []string{
					"env:BALLET_BOOTSTRAP_TOKEN", "env:BALLET_KNOWLEDGE_TOKEN", "env:ballet_runner_token",
					"env:ANTHROPIC_API_KEY", "env:OPENAI_API_KEY", "env:ACME_SESSION_KEY",
					"file:" + tokenFile, "file:" + filepath.Dir(tokenFile) + "/other", "file:/proc/self/environ", "file:/dev/stdin",
				}
				if allow[0] == apitest.SecretsAllow {
					refused = append(refused, "env:GITEA_TOKEN", "file:/etc/ballet/forge/acme") // outside the allow-list
				}
				repo := func(field, ref string) map[string]any {
					return map[string]any{"forge": "gitea", "url": "https://gitea.example.com/acme/app", field: ref}
				}
				for _, ref := range refused {
					for _, field := range []string{"credentials_ref", "webhook_secret_ref"} {
						for _, req := range []struct {
							method, path string
							body         map[string]any
						}{
							{"POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "EVIL", "name": "Evil", "repository": repo(field, ref)}},
							{"PATCH", "/api/v1/projects/ACME", map[string]any{"version": 1, "repository": repo(field, ref)}},
						} {
							r := e.Do(asAdmin, req.method, req.path, req.body)
							want := fmt.Sprintf(`"field":"repository.%s"`, field)
							if r.Status != 400 || !strings.Contains(string(r.Body), want) || !strings.Contains(string(r.Body), "refused") {
								t.Errorf("%s %s = %s: %d %s; want 400 naming repository.%s, refused", req.method, field, ref, r.Status, r.Body, field)
							}
							if strings.Contains(string(r.Body), apitest.BootstrapToken) || strings.Contains(string(r.Body), apitest.ServiceToken) {
								t.Errorf("%s %s = %s: the answer holds a credential: %s", req.method, field, ref, r.Body)
							}
						}
					}
				}
				// Nothing was saved: the project is still version 1, EVIL does not exist.
				if r := e.Do(asAdmin, "GET", "/api/v1/projects/ACME", nil); !strings.Contains(string(r.Body), `"version":1`) {
					t.Errorf("the project changed: %s", r.Body)
				}
				e.Must(404, asAdmin, "GET", "/api/v1/projects/EVIL", nil)

				// A reference the allow-list makes referable is saved, on both fields.
				e.Must(200, asAdmin, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": 1, "repository": map[string]any{
					"forge": "gitea", "url": "https://gitea.example.com/acme/app",
					"credentials_ref": "env:ACME_FORGE", "webhook_secret_ref": "env:ACME_HOOK"}})
				e.Must(201, asAdmin, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "GOOD", "name": "Good",
					"repository": repo("credentials_ref", "env:ACME_FORGE")})
			})
		})
	}
}
