package flow_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// hookSecret sets a fresh environment variable of Core holding a webhook
// secret and returns its name and the secret.
func hookSecret(t *testing.T) (name, secret string) {
	name = "ACME_TEST_HOOK_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	secret = uuid.NewString()
	os.Setenv(name, secret)
	t.Cleanup(func() { os.Unsetenv(name) })
	return name, secret
}

// deliver posts a webhook delivery as a forge would (sig "": unsigned)
// and returns the status and body.
func (w *world) deliver(path, event, sigHeader, sig string, body []byte) (int, string) {
	w.t.Helper()
	req, err := http.NewRequest("POST", w.URL+path, bytes.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if event != "" {
		req.Header.Set("X-Gitea-Event", event)
		req.Header.Set("X-GitHub-Event", event)
	}
	if sig != "" {
		req.Header.Set(sigHeader, sig)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mergeRunAt is when the pending merge check of key's flow is due.
func (w *world) mergeRunAt(key string) time.Time {
	w.t.Helper()
	f := w.flow(key)
	for _, j := range w.pending(&f) {
		if j.Kind == flow.JobMerge {
			return j.RunAt
		}
	}
	w.t.Fatalf("%s has no pending merge check", key)
	return time.Time{}
}

// TestWebhooksWakeMergeChecks: a signed delivery of each relevant event
// makes the merge check of exactly the flows waiting for the pull request
// it names due now (202), and changes nothing else; other events,
// deliveries naming nothing waiting, and GitHub's ping answer 204. Unsigned,
// wrongly signed, other projects' and unknown projects' deliveries are
// 401 alike; a forge other than the project's is 404.
func TestWebhooksWakeMergeChecks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, map[string]map[string]any{"bug": mergePipeline})
		envA, secretA := hookSecret(t)
		envB, secretB := hookSecret(t)
		w.patchProject(map[string]any{"repository": map[string]any{"forge": "gitea", "url": "https://gitea.example.com/acme/app.git",
			"webhook_secret_ref": "env:" + envA}})
		w.Org("globex")
		w.Admin(201, "POST", "/api/v1/orgs/globex/projects", map[string]any{"key": "GLX", "name": "Globex",
			"repository": map[string]any{"forge": "github", "url": "https://github.com/globex/app", "webhook_secret_ref": "env:" + envB}})
		w.Admin(201, "POST", "/api/v1/orgs/globex/projects", map[string]any{"key": "NOHOOK", "name": "No hooks",
			"repository": map[string]any{"forge": "gitea", "url": "https://gitea.example.com/globex/x"}})

		// Two tickets wait in their merge stage, each with its pull request.
		w.forge.set(func(f *scriptForge) { f.st = openPR; f.number = 7 })
		a := w.toShip()
		w.check(a, 5*time.Second)
		w.forge.set(func(f *scriptForge) { f.st.HeadSHA = "head-b"; f.number = 8 })
		b := w.toShip()
		w.check(b, 5*time.Second)
		later := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
		w.exec(`UPDATE jobs SET run_at = ? WHERE status = 'pending' AND kind = ?`, later.UnixMilli(), flow.JobMerge) // snoozed

		const path = "/api/v1/hooks/gitea/ACME"
		sig := func(body string) string { return forge.Sign(forge.KindGitea, []byte(body), secretA) }
		wakes := func(event, body string, want int, woken ...string) {
			t.Helper()
			seq, before := w.seq(), w.snapshot()
			status, answer := w.deliver(path, event, "X-Gitea-Signature", sig(body), []byte(body))
			if status != want {
				t.Fatalf("%s %s: %d %s, want %d", event, body, status, answer, want)
			}
			wantTypes(t, w.since(seq))
			for _, key := range []string{a, b} {
				due := !w.mergeRunAt(key).After(time.Now())
				if due != strings.Contains(strings.Join(woken, ","), key) {
					t.Fatalf("%s %s: the check of %s due now: %v (woken %v)", event, body, key, due, woken)
				}
			}
			if w.snapshot() != before {
				t.Fatalf("%s: a delivery changed more than a run time", event)
			}
			w.exec(`UPDATE jobs SET run_at = ? WHERE status = 'pending' AND kind = ?`, later.UnixMilli(), flow.JobMerge)
		}
		wakes("pull_request", `{"number":7,"pull_request":{"number":7,"head":{"ref":"ballet/`+a+`","sha":"head-1"}}}`, 202, a)
		wakes("pull_request_review_approved", `{"number":8,"pull_request":{"number":8,"head":{"ref":"ballet/`+b+`","sha":"head-b"}}}`, 202, b)
		wakes("pull_request_sync", `{"number":8}`, 202, b)
		wakes("status", `{"sha":"head-1","commit":{"id":"head-1"},"context":"ci","state":"success"}`, 202, a)
		wakes("status", `{"sha":"other","branches":[{"name":"ballet/`+b+`"}]}`, 202, b)
		wakes("pull_request", `{"number":99,"pull_request":{"number":99,"head":{"ref":"feature","sha":"x"}}}`, 204)
		wakes("push", `{"ref":"refs/heads/main"}`, 204)
		if status, _ := w.deliver(path, "pull_request", "X-Gitea-Signature", sig(`{}`), []byte(`{}`)); status != 400 {
			t.Fatalf("a pull_request naming nothing: %d", status)
		}

		// Refused alike: unsigned, wrong signature, another project's secret,
		// an unknown project, a project without webhooks.
		body := `{"number":7}`
		for _, c := range []struct{ name, path, header, sig string }{
			{"unsigned", path, "X-Gitea-Signature", ""},
			{"wrongly signed", path, "X-Gitea-Signature", forge.Sign(forge.KindGitea, []byte(body), "guess")},
			{"the other project's secret", path, "X-Gitea-Signature", forge.Sign(forge.KindGitea, []byte(body), secretB)},
			{"an unknown project", "/api/v1/hooks/gitea/NOPE", "X-Gitea-Signature", forge.Sign(forge.KindGitea, []byte(body), secretA)},
			{"no webhooks", "/api/v1/hooks/gitea/NOHOOK", "X-Gitea-Signature", forge.Sign(forge.KindGitea, []byte(body), secretA)},
			{"ACME's secret for GLX", "/api/v1/hooks/github/GLX", "X-Hub-Signature-256", forge.Sign(forge.KindGitHub, []byte(body), secretA)},
		} {
			status, answer := w.deliver(c.path, "pull_request", c.header, c.sig, []byte(body))
			if status != 401 {
				t.Errorf("%s: %d %s, want 401", c.name, status, answer)
			}
			if c.sig == "" && !strings.Contains(answer, "X-Gitea-Signature is missing") {
				t.Errorf("%s: %s", c.name, answer)
			}
		}
		unknown, _ := w.deliver("/api/v1/hooks/gitea/NOPE", "pull_request", "X-Gitea-Signature", "00", []byte(body))
		known, _ := w.deliver("/api/v1/hooks/gitea/NOHOOK", "pull_request", "X-Gitea-Signature", "00", []byte(body))
		if unknown != known {
			t.Errorf("an unknown project answers %d, one without webhooks %d", unknown, known)
		}
		// GitHub: its ping, and a project on another forge than the path's.
		ghPath := "/api/v1/hooks/github/GLX"
		if status, answer := w.deliver(ghPath, "ping", "X-Hub-Signature-256", forge.Sign(forge.KindGitHub, []byte(`{"zen":"x"}`), secretB), []byte(`{"zen":"x"}`)); status != 204 {
			t.Errorf("ping: %d %s", status, answer)
		}
		if status, answer := w.deliver("/api/v1/hooks/github/ACME", "pull_request", "X-Hub-Signature-256", forge.Sign(forge.KindGitHub, []byte(body), secretA), []byte(body)); status != 404 ||
			!strings.Contains(answer, "on gitea, not github") {
			t.Errorf("the wrong forge: %d %s", status, answer)
		}
		if status, _ := w.deliver("/api/v1/hooks/gitlab/ACME", "pull_request", "X-Gitea-Signature", sig(body), []byte(body)); status != 404 {
			t.Errorf("gitlab: %d", status)
		}
		big := `{"number":7,"x":"` + strings.Repeat("x", 1<<20) + `"}`
		if status, _ := w.deliver(path, "pull_request", "X-Gitea-Signature", sig(big), []byte(big)); status != 413 {
			t.Errorf("a body over 1 MiB: %d", status)
		}
		// GLX's flows are another project's: ACME's delivery never wakes them
		// (checked above: only a and b, ACME's, were ever due).
	})
}
