package apitest_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// TestProjectPatchMergesNestedObjects: PATCH /projects/{project} is a JSON
// merge patch (RFC 7386) down into budgets, merge_policy and repository:
// a field left out stays as it is, null puts it back to its default (what
// a new project gets: no limit, manual, no approvals or checks, main, no
// credentials), and a field that has no default (forge, url) cannot be
// cleared. Sending one budget used to remove the other; sending the
// repository's url alone needed the whole repository.
func TestProjectPatchMergesNestedObjects(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Admin(201, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme",
			"repository":   map[string]any{"forge": "git", "url": "/srv/acme.git", "default_branch": "trunk", "credentials_ref": "env:ACME_GIT"},
			"merge_policy": map[string]any{"mode": "auto", "required_approvals": 2, "required_checks": []string{"ci", "lint"}},
			"budgets":      map[string]any{"per_ticket_usd": 5, "per_day_usd": 40}})
		version := 1.0
		patch := func(status int, body string) map[string]any {
			t.Helper()
			var in map[string]any
			if err := json.Unmarshal([]byte(body), &in); err != nil {
				t.Fatal(err)
			}
			in["version"] = version
			var out map[string]any
			r := e.Admin(status, "PATCH", "/api/v1/projects/ACME", in)
			r.JSON(t, &out)
			if status == 200 {
				version = out["version"].(float64)
			}
			return out
		}
		settings := func(p map[string]any) string {
			t.Helper()
			b, _ := json.Marshal(map[string]any{"repository": p["repository"], "merge_policy": p["merge_policy"], "budgets": p["budgets"]})
			return string(b)
		}
		for _, c := range []struct{ patch, want string }{
			{`{"budgets":{"per_day_usd":50}}`,
				`{"budgets":{"per_day_usd":50,"per_ticket_usd":5},"merge_policy":{"mode":"auto","required_approvals":2,"required_checks":["ci","lint"]},"repository":{"api_url":"","credentials_ref":"env:ACME_GIT","default_branch":"trunk","forge":"git","url":"/srv/acme.git","webhook_secret_ref":""}}`},
			{`{"budgets":{"per_ticket_usd":null}}`,
				`{"budgets":{"per_day_usd":50,"per_ticket_usd":null},"merge_policy":{"mode":"auto","required_approvals":2,"required_checks":["ci","lint"]},"repository":{"api_url":"","credentials_ref":"env:ACME_GIT","default_branch":"trunk","forge":"git","url":"/srv/acme.git","webhook_secret_ref":""}}`},
			{`{"merge_policy":{"required_checks":["ci"]},"repository":{"url":"/srv/acme-2.git"}}`,
				`{"budgets":{"per_day_usd":50,"per_ticket_usd":null},"merge_policy":{"mode":"auto","required_approvals":2,"required_checks":["ci"]},"repository":{"api_url":"","credentials_ref":"env:ACME_GIT","default_branch":"trunk","forge":"git","url":"/srv/acme-2.git","webhook_secret_ref":""}}`},
			{`{"merge_policy":{"required_approvals":null},"repository":{"default_branch":null,"credentials_ref":null}}`,
				`{"budgets":{"per_day_usd":50,"per_ticket_usd":null},"merge_policy":{"mode":"auto","required_approvals":0,"required_checks":["ci"]},"repository":{"api_url":"","credentials_ref":"","default_branch":"main","forge":"git","url":"/srv/acme-2.git","webhook_secret_ref":""}}`},
			{`{"merge_policy":{"mode":null,"required_approvals":1}}`,
				`{"budgets":{"per_day_usd":50,"per_ticket_usd":null},"merge_policy":{"mode":"manual","required_approvals":1,"required_checks":["ci"]},"repository":{"api_url":"","credentials_ref":"","default_branch":"main","forge":"git","url":"/srv/acme-2.git","webhook_secret_ref":""}}`},
			{`{"merge_policy":null,"budgets":null}`,
				`{"budgets":{"per_day_usd":null,"per_ticket_usd":null},"merge_policy":{"mode":"manual","required_approvals":0,"required_checks":[]},"repository":{"api_url":"","credentials_ref":"","default_branch":"main","forge":"git","url":"/srv/acme-2.git","webhook_secret_ref":""}}`},
			{`{"repository":null}`,
				`{"budgets":{"per_day_usd":null,"per_ticket_usd":null},"merge_policy":{"mode":"manual","required_approvals":0,"required_checks":[]},"repository":null}`},
			{`{"repository":{"forge":"git","url":"/srv/new.git"}}`,
				`{"budgets":{"per_day_usd":null,"per_ticket_usd":null},"merge_policy":{"mode":"manual","required_approvals":0,"required_checks":[]},"repository":{"api_url":"","credentials_ref":"","default_branch":"main","forge":"git","url":"/srv/new.git","webhook_secret_ref":""}}`},
			{`{"repository":{"forge":"github","url":"https://github.example.com/acme/app.git","api_url":"https://github.example.com/api/v3","webhook_secret_ref":"env:ACME_HOOK"}}`,
				`{"budgets":{"per_day_usd":null,"per_ticket_usd":null},"merge_policy":{"mode":"manual","required_approvals":0,"required_checks":[]},"repository":{"api_url":"https://github.example.com/api/v3","credentials_ref":"","default_branch":"main","forge":"github","url":"https://github.example.com/acme/app.git","webhook_secret_ref":"env:ACME_HOOK"}}`},
			{`{"repository":{"api_url":null,"webhook_secret_ref":null}}`,
				`{"budgets":{"per_day_usd":null,"per_ticket_usd":null},"merge_policy":{"mode":"manual","required_approvals":0,"required_checks":[]},"repository":{"api_url":"","credentials_ref":"","default_branch":"main","forge":"github","url":"https://github.example.com/acme/app.git","webhook_secret_ref":""}}`},
		} {
			if got := settings(patch(200, c.patch)); got != c.want {
				t.Errorf("%s:\n got %s\nwant %s", c.patch, got, c.want)
			}
		}
		// What cannot be cleared, or is missing where there was nothing to
		// merge into, is refused naming the field.
		e.Admin(200, "PATCH", "/api/v1/projects/ACME", map[string]any{"version": version, "repository": nil})
		version++
		for _, c := range []struct{ patch, field string }{
			{`{"repository":{"url":null}}`, "repository.forge"}, // nothing to merge into: forge is missing first
			{`{"repository":{"forge":"git"}}`, "repository.url"},
			{`{"merge_policy":{"mode":"sometimes"}}`, "merge_policy.mode"},
			{`{"budgets":{"per_day_usd":-1}}`, "budgets.per_day_usd"},
			{`{"budgets":{"per_week_usd":1}}`, "budgets.per_week_usd"},
		} {
			out := patch(400, c.patch)
			if got := fmt.Sprint(out["error"]); !strings.Contains(got, "field:"+c.field+" ") {
				t.Errorf("%s: %s, want a problem with %s", c.patch, got, c.field)
			}
		}
		// The event carries the merged values of what the patch named.
		var evs apiEvents
		e.Admin(200, "GET", "/api/v1/projects/ACME/events", nil).JSON(t, &evs)
		first := evs.Events[1]
		if first.Type != "project.updated" || string(first.Payload) != `{"changes":{"budgets":{"per_ticket_usd":5,"per_day_usd":50}}}` {
			t.Errorf("first update's event: %s %s", first.Type, first.Payload)
		}
	})
}
