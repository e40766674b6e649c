package webhook_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/hang"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/webhook"
)

// Without allow_private_targets, a hook that would reach an internal
// address is a 400 naming url: literal addresses, and localhost, a name
// that resolves to 127.0.0.1. Bad events, formats, unknown fields and too
// many events are 400s naming their field; only admins create hooks.
func TestBadHooksAreRefusedNamingTheField(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		org := e.Org("acme")
		e.Project("acme", "ACME")
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/carol", map[string]any{"role": "admin"})
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/alice", map[string]any{"role": "member"})
		admin, member := e.TokenFor("carol", org, "admin"), e.TokenFor("alice", org, "member")
		field := func(path string, body map[string]any) string {
			t.Helper()
			r := e.Must(400, admin, "POST", path, body)
			var out struct {
				Error struct {
					Details []struct{ Field, Message string }
				}
			}
			r.JSON(t, &out)
			if len(out.Error.Details) == 0 {
				return string(r.Body)
			}
			return out.Error.Details[0].Field + ": " + out.Error.Details[0].Message
		}
		for _, path := range []string{projectHooks, "/api/v1/orgs/acme/webhooks"} {
			for _, u := range []string{"http://127.0.0.1:8080/x", "http://localhost:9/x", "http://[::1]/", "http://10.0.0.1/",
				"http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/", "http://100.64.0.1/", "http://0.0.0.0/"} {
				if got := field(path, map[string]any{"url": u, "events": []string{"*"}}); !strings.HasPrefix(got, "url: ") ||
					!strings.Contains(got, "internal address") {
					t.Errorf("POST %s url %s: %s, want a 400 naming url", path, u, got)
				}
			}
		}
		for _, c := range []struct {
			body map[string]any
			want string
		}{
			{map[string]any{"url": "ftp://hooks.example.com/", "events": []string{"*"}}, "url: must be an http or https URL"},
			{map[string]any{"url": "https://u:p@127.0.0.1/", "events": []string{"*"}}, "url: must not carry credentials"},
			{map[string]any{"url": "https://" + strings.Repeat("a", webhook.MaxURL) + ".com/", "events": []string{"*"}}, "url: is longer than"},
			{map[string]any{"url": "https://93.184.216.34/", "events": []string{}}, "events: must list 1–16"},
			{map[string]any{"url": "https://93.184.216.34/", "events": []string{"*", "nope"}}, "events[1]: \"nope\" is not a cause"},
			{map[string]any{"url": "https://93.184.216.34/", "events": []string{"flow.failed", "flow.failed"}}, "events[1]: \"flow.failed\" is listed twice"},
			{map[string]any{"url": "https://93.184.216.34/", "events": []string{"*"}, "format": "teams"}, "format: must be standard or slack"},
			{map[string]any{"url": "https://93.184.216.34/", "events": []string{"*"}, "secret": "mine"}, "secret"},
		} {
			got := field(projectHooks, c.body)
			if !strings.Contains(got, c.want) {
				t.Errorf("POST %v: %s, want ~%q", c.body, got, c.want)
			}
		}
		many := make([]string, webhook.MaxEvents+1)
		for i := range many {
			many[i] = fmt.Sprint("e", i)
		}
		if got := field(projectHooks, map[string]any{"url": "https://93.184.216.34/", "events": many}); !strings.HasPrefix(got, "events: must list") {
			t.Errorf("%d events: %s", len(many), got)
		}
		e.Must(403, member, "POST", projectHooks, map[string]any{"url": "https://93.184.216.34/", "events": []string{"*"}})
		e.Must(403, member, "GET", projectHooks, nil)
		e.Must(403, member, "POST", "/api/v1/orgs/acme/webhooks", map[string]any{"url": "https://93.184.216.34/", "events": []string{"*"}})
		// A public literal address passes (no resolution needed); PATCH
		// checks the same rules.
		var h webhook.CreatedWebhook
		e.Must(201, admin, "POST", projectHooks, map[string]any{"url": "https://93.184.216.34/hook", "events": []string{"*"}}).JSON(t, &h)
		e.Must(400, admin, "PATCH", projectHooks+"/"+h.ID, map[string]any{"url": "http://127.0.0.1/"})
		e.Must(400, admin, "PATCH", projectHooks+"/"+h.ID, map[string]any{"events": []string{"nope"}})
	})
}

// One organization never sees another's hooks: every route answers 404
// to another organization's admin, and a project's hook is not found
// under its organization's routes. The secret appears in the creation's
// answer and nowhere else: not in later answers, the events, or the logs.
func TestHooksStayInTheirOrganizationAndTheirSecretIsShownOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s, func(c *config.Config) { c.Notify.AllowPrivateTargets = true })
		acme, other := e.Org("acme"), e.Org("other")
		e.Project("acme", "ACME")
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/carol", map[string]any{"role": "admin"})
		e.Admin(200, "PUT", "/api/v1/orgs/other/members/mallory", map[string]any{"role": "admin"})
		admin, stranger := e.TokenFor("carol", acme, "admin"), e.TokenFor("mallory", other, "admin")
		var ph, oh webhook.CreatedWebhook
		e.Must(201, admin, "POST", projectHooks, map[string]any{"url": "http://127.0.0.1:1/p", "events": []string{"*"}}).JSON(t, &ph)
		e.Must(201, admin, "POST", "/api/v1/orgs/acme/webhooks", map[string]any{"url": "http://127.0.0.1:1/o", "events": []string{"*"}}).JSON(t, &oh)
		for path, id := range map[string]string{projectHooks: ph.ID, "/api/v1/orgs/acme/webhooks": oh.ID} {
			e.Must(404, stranger, "GET", path, nil)
			e.Must(404, stranger, "POST", path, map[string]any{"url": "http://127.0.0.1:1/", "events": []string{"*"}})
			e.Must(404, stranger, "GET", path+"/"+id, nil)
			e.Must(404, stranger, "PATCH", path+"/"+id, map[string]any{"active": false})
			e.Must(404, stranger, "DELETE", path+"/"+id, nil)
			e.Must(404, stranger, "GET", path+"/"+id+"/deliveries", nil)
			e.Must(404, stranger, "POST", path+"/"+id+"/deliveries/x/redeliver", nil)
		}
		// Another organization's own routes do not reach acme's hooks.
		e.Must(404, stranger, "GET", "/api/v1/orgs/other/webhooks/"+oh.ID, nil)
		e.Must(404, admin, "GET", "/api/v1/orgs/acme/webhooks/"+ph.ID, nil)
		e.Must(404, admin, "GET", projectHooks+"/"+oh.ID, nil)

		var list struct{ Webhooks []webhook.Webhook }
		e.Must(200, admin, "GET", projectHooks, nil).JSON(t, &list)
		if len(list.Webhooks) != 1 || list.Webhooks[0].ID != ph.ID {
			t.Errorf("the project's hooks: %+v", list.Webhooks)
		}
		var hk webhook.Webhook
		e.Must(200, admin, "PATCH", projectHooks+"/"+ph.ID, map[string]any{"events": []string{"flow.failed"}, "format": "slack", "active": false}).JSON(t, &hk)
		if hk.Active || hk.Format != "slack" || len(hk.Events) != 1 || hk.Version != 2 {
			t.Errorf("after PATCH: %+v", hk)
		}
		key := strings.TrimPrefix(ph.Secret, webhook.SecretPrefix)
		answers := []string{string(e.Must(200, admin, "GET", projectHooks, nil).Body), string(e.Must(200, admin, "GET", projectHooks+"/"+ph.ID, nil).Body),
			string(e.Must(200, admin, "GET", projectHooks+"/"+ph.ID+"/deliveries", nil).Body)}
		for _, a := range answers {
			if strings.Contains(a, key) || strings.Contains(a, "whsec_") {
				t.Errorf("an answer after the creation holds the secret: %.300s", a)
			}
		}
		seen := []string{e.Logs()} // the URL's admins read it in the answers; nobody else anywhere
		rows, err := s.Query(context.Background(), `SELECT payload FROM events`)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows.Len() {
			var p string
			rows.Scan(i, &p)
			seen = append(seen, p)
		}
		for _, text := range seen {
			if strings.Contains(text, key) || strings.Contains(text, "whsec_") || strings.Contains(text, "127.0.0.1:1/p") {
				t.Errorf("the secret or the URL in the logs or an event: %.300s", text)
			}
		}
		e.Must(204, admin, "DELETE", projectHooks+"/"+ph.ID, nil)
		e.Must(404, admin, "GET", projectHooks+"/"+ph.ID, nil)
		var types []string
		rows, _ = s.Query(context.Background(), `SELECT type FROM events WHERE entity_type = 'webhook' ORDER BY seq`)
		for i := range rows.Len() {
			var ty string
			rows.Scan(i, &ty)
			types = append(types, ty)
		}
		if strings.Join(types, " ") != "webhook.created webhook.created webhook.updated webhook.deleted" {
			t.Errorf("the hooks' events: %v", types)
		}
	})
}

// Core stopped between an event and its delivery: a second Core on the
// same database delivers the message once — whether the first stopped
// before its dispatcher decided (the cursor had not moved), or after it
// wrote the delivery and its job but before the job ran. And two
// dispatchers passing at once on one database (two Core instances) decide
// each message once.
func TestACoreStoppedBeforeDeliveringDeliversOnceAfterTheRestart(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		r := newReceiver(t, always(200))
		fk := clock.NewFake(time.Now().UTC())
		allow := func(c *config.Config) { c.Notify.AllowPrivateTargets = true }
		first := apitest.NewOn(t, s, fk, allow) // its loops never run: as if it stopped
		org := first.Org("acme")
		first.Project("acme", "ACME")
		first.Admin(200, "PUT", "/api/v1/orgs/acme/members/carol", map[string]any{"role": "admin"})
		admin := first.TokenFor("carol", org, "admin")
		var h webhook.CreatedWebhook
		first.Must(201, admin, "POST", projectHooks, map[string]any{"url": r.URL, "events": []string{"question.opened"}}).JSON(t, &h)
		ask := func(e *apitest.Env) {
			var it struct{ Key string }
			e.Must(201, admin, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "t"}).JSON(t, &it)
			e.Must(201, admin, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": "?", "blocking": true})
		}
		ask(first) // not decided before the stop
		ask(first)
		if _, err := first.Core.Webhooks.Pass(context.Background()); err != nil { // decided; the jobs never ran
			t.Fatal(err)
		}
		ask(first) // the third: not decided either

		// Two more instances decide at once, again and again: one delivery
		// each for the third question, none more for the first two.
		second, third := apitest.NewOn(t, s, fk, allow), apitest.NewOn(t, s, fk, allow)
		var wg sync.WaitGroup
		for _, e := range []*apitest.Env{second, third, second, third} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := e.Core.Webhooks.Pass(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		var page webhook.WebhookDeliveries
		second.Must(200, admin, "GET", projectHooks+"/"+h.ID+"/deliveries", nil).JSON(t, &page)
		if len(page.Deliveries) != 3 {
			t.Fatalf("%d deliveries for 3 causes", len(page.Deliveries))
		}
		if len(r.requests()) != 0 {
			t.Fatalf("the receiver heard %d requests before any Core ran its jobs", len(r.requests()))
		}
		// A whole Core runs: the pending jobs are delivered, once each.
		last := apitest.RunOn(t, s, fk, allow, func(c *config.Config) {
			c.Storage.Path = t.TempDir() + "/core.db"
			c.Leader.TTL.Duration, c.Leader.Renew.Duration = time.Hour, 10*time.Minute
		})
		hang.WaitFor(t, "three deliveries", func() bool {
			last.Core.Jobs.Notify()
			last.Must(200, admin, "GET", projectHooks+"/"+h.ID+"/deliveries", nil).JSON(t, &page)
			for _, d := range page.Deliveries {
				if d.Status != webhook.StatusSucceeded {
					return false
				}
			}
			return true
		})
		ask(last)
		hang.WaitFor(t, "the fourth delivery", func() bool { return len(r.requests()) == 4 })
		if _, err := second.Core.Webhooks.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		last.Must(200, admin, "GET", projectHooks+"/"+h.ID+"/deliveries", nil).JSON(t, &page)
		ids := map[string]bool{}
		for _, q := range r.requests() {
			ids[q.header.Get("webhook-id")] = true
		}
		if len(page.Deliveries) != 4 || len(ids) != 4 || len(r.requests()) != 4 {
			t.Errorf("%d deliveries, %d requests with %d ids; want 4 of each", len(page.Deliveries), len(r.requests()), len(ids))
		}
	})
}
