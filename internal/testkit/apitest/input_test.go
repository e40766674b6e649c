package apitest_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestControlCharactersAreRefused: NUL, ESC and the other control
// characters are refused in every text a client stores, with 400 naming the
// field (package text); multi-line texts keep their line feeds and tabs.
// Nothing of it is stored.
func TestControlCharactersAreRefused(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		key := w.ticket("task")
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil)
		run := w.leaseStage(key, "implement", 1)
		var q struct{ ID string }
		w.Admin(201, "POST", "/api/v1/items/"+key+"/questions", map[string]any{"text": "Which\n\tport?"}).JSON(t, &q)
		var tok struct{ Token string }
		w.Admin(201, "POST", "/api/v1/tokens", map[string]any{"name": "rn", "kind": "runner"}).JSON(t, &tok)

		const esc, nul = "\x1b[2J", "\x00"
		admin := apitest.BootstrapToken
		cases := []struct {
			token, method, path string
			body                any
			field               string
		}{
			{admin, "POST", "/api/v1/orgs", map[string]any{"slug": "ctl-org", "name": "Evil" + esc}, "name"},
			{admin, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "CTL", "name": "a\nb"}, "name"},
			{admin, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": 1, "merge_policy": map[string]any{"mode": "manual", "required_checks": []string{"ci" + nul}}}, "merge_policy.required_checks[0]"},
			{admin, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t" + esc}, "title"},
			{admin, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t\u2028u"}, "title"},
			{admin, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t", "description": "d" + nul}, "description"},
			{admin, "PATCH", "/api/v1/items/" + key, map[string]any{"version": 2, "acceptance_criteria": "a\rb"}, "acceptance_criteria"},
			{admin, "PUT", "/api/v1/orgs/acme/members/al%1Bice", map[string]any{"role": "member"}, "subject"},
			{admin, "PUT", "/api/v1/projects/ACME/members/bob%00", map[string]any{"role": "member"}, "subject"},
			{admin, "POST", "/api/v1/items/" + key + "/questions", map[string]any{"text": "q" + esc}, "text"},
			{admin, "POST", "/api/v1/questions/" + q.ID + "/answer", map[string]any{"answer": "a" + nul}, "answer"},
			{admin, "POST", "/api/v1/projects/ACME/skills", map[string]any{"name": "go", "description": "d\x07", "content": "c"}, "description"},
			{admin, "POST", "/api/v1/projects/ACME/skills", map[string]any{"name": "go", "content": "c\u009b31m"}, "content"},
			{admin, "POST", "/api/v1/tokens", map[string]any{"name": "ci" + esc, "kind": "runner"}, "name"},
			{tok.Token, "POST", "/api/v1/runners", map[string]any{"name": "r" + nul}, "name"},
			{tok.Token, "POST", "/api/v1/runners", map[string]any{"name": "r", "labels": map[string]string{"os": "linux\n"}}, "labels.os"},
			{run.Token, "POST", "/api/v1/runs/" + run.ID + "/report", map[string]any{"outcome": "done", "summary": "ok" + esc}, "summary"},
			{run.Token, "POST", "/api/v1/runs/" + run.ID + "/questions", map[string]any{"text": "q" + nul}, "text"},
			{w.runner.Token, "POST", "/api/v1/runs/" + run.ID + "/finish", map[string]any{"exit_status": 1, "error": "boom" + esc}, "error"},
			{admin, "POST", "/api/v1/items/" + key + "/flow/approve", map[string]any{"comment": "fine" + esc}, "comment"},
		}
		for _, c := range cases {
			r := w.Do(c.token, c.method, c.path, c.body)
			if r.Status != 400 || !strings.Contains(string(r.Body), `"field":"`+c.field+`"`) ||
				!strings.Contains(string(r.Body), "control character") && !strings.Contains(string(r.Body), "line break U+2028") {
				t.Errorf("%s %s %v: %d %s; want 400 naming %s", c.method, c.path, c.body, r.Status, r.Body, c.field)
			}
		}
		// Nothing was stored: the only event text with ESC or NUL would
		// have come from a refused request.
		rows, err := s.Query(t.Context(), `SELECT COUNT(*) FROM events WHERE instr(payload, char(27)) > 0 OR instr(payload, '\u001b') > 0`)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := rows.Scan(0, &n); err != nil || n != 0 {
			t.Fatalf("%d events hold ESC (%v)", n, err)
		}
		// Multi-line texts keep line feeds and tabs; the run goes on.
		w.runner.Complete(run, "done", "Implemented.\n\n\t- one\n\t- two")
		w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "ok ✓", "description": "line 1\n\tline 2"})
	})
}

// TestBudgetsAreExact: budgets are kept in millionths of a dollar, so an
// amount that is not a whole number of millionths is refused (1e-9 used to
// be answered as sent and stored as 0, 0.0000015 stored as 0.000002), and
// what is kept is answered exactly.
func TestBudgetsAreExact(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		for _, c := range []struct{ body, field, want string }{
			{`{"version":1,"budgets":{"per_ticket_usd":1e-9,"per_day_usd":null}}`, "budgets.per_ticket_usd", "1e-9 is not a whole number of millionths of a dollar"},
			{`{"version":1,"budgets":{"per_ticket_usd":null,"per_day_usd":0.0000015}}`, "budgets.per_day_usd", "0.0000015 is not a whole number of millionths"},
			{`{"version":1,"budgets":{"per_ticket_usd":-0.5,"per_day_usd":null}}`, "budgets.per_ticket_usd", "negative"},
			{`{"version":1,"budgets":{"per_ticket_usd":1e400,"per_day_usd":null}}`, "budgets.per_ticket_usd", "more than 1000000 US dollars"},
			{`{"version":1,"budgets":{"per_ticket_usd":"5","per_day_usd":null}}`, "budgets.per_ticket_usd", "must be a number of US dollars"},
		} {
			r := e.Do(apitest.BootstrapToken, "PATCH", "/api/v1/projects/ACME", c.body)
			if r.Status != 400 || !strings.Contains(string(r.Body), `"field":"`+c.field+`"`) || !strings.Contains(string(r.Body), c.want) {
				t.Errorf("%s: %d %s; want 400 naming %s: %s", c.body, r.Status, r.Body, c.field, c.want)
			}
		}
		const want = `"budgets":{"per_ticket_usd":0.000001,"per_day_usd":123456.789012}`
		r := e.Admin(200, "PATCH", "/api/v1/projects/ACME", `{"version":1,"budgets":{"per_ticket_usd":1e-6,"per_day_usd":123456.789012}}`)
		if !strings.Contains(string(r.Body), want) {
			t.Fatalf("answered %s, want %s", r.Body, want)
		}
		if r := e.Admin(200, "GET", "/api/v1/projects/ACME", nil); !strings.Contains(string(r.Body), want) {
			t.Fatalf("read back %s, want %s", r.Body, want)
		}
		if r := e.Admin(200, "GET", "/api/v1/projects/ACME/budget", nil); !strings.Contains(string(r.Body), `"limit_usd":123456.789012,"spent_usd":0,"remaining_usd":123456.789012`) {
			t.Fatalf("budget %s", r.Body)
		}
	})
}

// with returns m with one more field.
func with(m map[string]any, k string, v any) map[string]any { m[k] = v; return m }

// TestRepositorySettingsGitWouldExecute: a repository location or default
// branch that git would execute or read as an option is refused when saved;
// one stored directly in the database, past the API, still makes git run
// nothing when the merge stage reaches it.
func TestRepositorySettingsGitWouldExecute(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newFlowWorld(t, s)
		marker := filepath.Join(t.TempDir(), "pwned")
		repo := func(forge, url, branch, creds string) map[string]any {
			return map[string]any{"forge": forge, "url": url, "default_branch": branch, "credentials_ref": creds}
		}
		cases := []struct {
			repo  map[string]any
			field string
		}{
			{repo("git", "-oProxyCommand=touch "+marker, "main", ""), "repository.url"},
			{repo("git", "ext::sh -c touch% "+marker, "main", ""), "repository.url"},
			{repo("git", "/srv/a.git\x00--upload-pack=x", "main", ""), "repository.url"},
			{repo("git", "ssh://-oProxyCommand=x/a.git", "main", ""), "repository.url"},
			{repo("git", "git://example.com/a.git", "main", ""), "repository.url"},
			{repo("git", "relative/a.git", "main", ""), "repository.url"},
			{repo("gitea", "https://user:token@gitea.example.com/acme/app", "main", ""), "repository.url"},
			{repo("github", "/srv/a.git", "main", ""), "repository.url"},
			{repo("git", "/srv/a.git", "--upload-pack=touch "+marker, ""), "repository.default_branch"},
			{repo("git", "/srv/a.git", "main..x", ""), "repository.default_branch"},
			{repo("git", "/srv/a.git", "HEAD", ""), "repository.default_branch"},
			{repo("git", "/srv/a.git", "main", "vault:acme"), "repository.credentials_ref"},
			{repo("git", "/srv/a.git", "main", "env:NOT-A-NAME"), "repository.credentials_ref"},
			{repo("gitea", "https://gitea.example.com/acme", "main", ""), "repository.url"},
			{repo("github", "https://github.com/", "main", ""), "repository.url"},
			{with(repo("github", "https://github.com/acme/app", "main", ""), "api_url", "https://u:p@api.example.com"), "repository.api_url"},
			{with(repo("gitea", "https://gitea.example.com/acme/app", "main", ""), "api_url", "ftp://gitea.example.com/api"), "repository.api_url"},
			{with(repo("git", "/srv/a.git", "main", ""), "api_url", "https://gitea.example.com/api/v1"), "repository.api_url"},
			{with(repo("gitea", "https://gitea.example.com/acme/app", "main", ""), "webhook_secret_ref", "s3cret"), "repository.webhook_secret_ref"},
			{with(repo("gitea", "https://gitea.example.com/acme/app", "main", ""), "webhook_secret_ref", "vault:x"), "repository.webhook_secret_ref"},
		}
		for _, c := range cases {
			for _, req := range []struct {
				method, path string
				body         map[string]any
			}{
				{"POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "EVIL", "name": "Evil", "repository": c.repo}},
				{"PATCH", "/api/v1/projects/ACME", map[string]any{"version": 1, "repository": c.repo}},
			} {
				r := w.Do(apitest.BootstrapToken, req.method, req.path, req.body)
				if r.Status != 400 || !strings.Contains(string(r.Body), `"field":"`+c.field+`"`) {
					t.Errorf("%s %v: %d %s; want 400 naming %s", req.method, c.repo, r.Status, r.Body, c.field)
				}
			}
		}
		// Settings git accepts are saved.
		w.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "SSH", "name": "Over ssh",
			"repository": repo("git", "git@git.example.com:acme/app.git", "release/1.x", "env:ACME_GIT_KEY")})

		// Past the API: the location is rewritten in the database.
		if _, err := s.Exec(t.Context(), store.Stmt(`UPDATE projects SET repo_url = ? WHERE key = 'ACME'`, "ext::sh -c touch% "+marker)); err != nil {
			t.Fatal(err)
		}
		key := w.ticket("task")
		w.Admin(200, "POST", "/api/v1/items/"+key+"/flow/start", nil)
		w.runner.Complete(w.leaseStage(key, "implement", 1), "done", "ok")
		w.runner.Complete(w.leaseStage(key, "review", 1), "done", "ok")
		w.runner.Complete(w.leaseStage(key, "verify", 1), "done", "ok")
		deadline := time.Now().Add(apitest.HangGuard)
		for {
			rows, err := s.Query(t.Context(), `SELECT COALESCE(last_error, '') FROM jobs WHERE kind = 'flow.merge'`)
			if err != nil {
				t.Fatal(err)
			}
			var last string
			if rows.Len() > 0 {
				_ = rows.Scan(0, &last)
			}
			if strings.Contains(last, "the repository location is refused") {
				break // the merge stage reached the forge, and was refused
			}
			if time.Now().After(deadline) {
				t.Fatalf("the merge stage did not reach the forge: %d jobs, last error %q", rows.Len(), last)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("git executed a command: %s exists (%v)", marker, err)
		}
	})
}
