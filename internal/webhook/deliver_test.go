package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/needsme"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/hang"
	"github.com/ballet/ballet/internal/testkit/mailtest"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/webhook"
)

// received is one request a receiver heard.
type received struct {
	header http.Header
	body   []byte
}

// receiver is a real HTTP receiver on 127.0.0.1: it records every request
// and answers as answer says for the nth (1-based): a status, or 0 to hang
// until the request is abandoned.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(n int) int
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	r := &receiver{answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{header: req.Header.Clone(), body: body})
		n := len(r.got)
		r.mu.Unlock()
		code := r.answer(n)
		if code == 0 {
			<-req.Context().Done() // hangs until the sender gives up
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func always(code int) func(int) int { return func(int) int { return code } }

// world is a whole Core (Core.Run: its orchestrator runs the deliveries)
// on a fake clock, with organization acme, project ACME, carol its admin
// and alice a member, each with a token; private targets are allowed (the
// receivers are on 127.0.0.1) and an attempt times out after 300 ms.
type world struct {
	*apitest.Env
	clock  *clock.Fake
	tokens map[string]string
}

func newWorld(t *testing.T, s store.Store, start time.Time, adjust ...func(*config.Config)) *world {
	t.Helper()
	fk := clock.NewFake(start)
	dir := t.TempDir()
	e := apitest.RunOn(t, s, fk, func(c *config.Config) {
		for _, a := range adjust {
			a(c)
		}
		c.Storage.Path = dir + "/core.db"
		c.Notify.AllowPrivateTargets = true
		c.Notify.BaseURL = "https://ballet.example.com/"
		c.Notify.WebhookTimeout.Duration = 300 * time.Millisecond
		// The leader's lease must outlast the clock's steps (up to 2 h).
		c.Leader.TTL.Duration, c.Leader.Renew.Duration = 72*time.Hour, 10*time.Minute
	})
	w := &world{Env: e, clock: fk, tokens: map[string]string{}}
	org := e.Org("acme")
	e.Project("acme", "ACME")
	for person, role := range map[string]string{"alice": "member", "carol": "admin"} {
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/"+person, map[string]any{"role": role})
		w.tokens[person] = e.TokenFor(person, org, role)
	}
	return w
}

// hook creates a hook (as carol) and returns it with its secret.
func (w *world) hook(path, url, format string, events ...string) webhook.CreatedWebhook {
	w.T.Helper()
	var c webhook.CreatedWebhook
	w.Must(201, w.tokens["carol"], "POST", path, map[string]any{"url": url, "events": events, "format": format}).JSON(w.T, &c)
	return c
}

// question creates a ticket as alice and asks a blocking question on it as
// carol (question.opened), and returns the ticket's key.
func (w *world) question() string {
	w.T.Helper()
	var it struct{ Key string }
	w.Must(201, w.tokens["alice"], "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Pick a <database>"}).JSON(w.T, &it)
	w.Must(201, w.tokens["carol"], "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": "Which database?", "blocking": true})
	return it.Key
}

func (w *world) deliveries(path, hookID string) []webhook.WebhookDelivery {
	w.T.Helper()
	var p webhook.WebhookDeliveries
	w.Must(200, w.tokens["carol"], "GET", path+"/"+hookID+"/deliveries", nil).JSON(w.T, &p)
	return p.Deliveries
}

// waitDelivery waits until the hook's only delivery satisfies cond and
// returns it. It nudges the orchestrator meanwhile: a clock step made
// before the orchestrator went to sleep (it was finishing the previous
// attempt's job) would not wake it.
func (w *world) waitDelivery(path, hookID, what string, cond func(webhook.WebhookDelivery) bool) webhook.WebhookDelivery {
	w.T.Helper()
	var d webhook.WebhookDelivery
	hang.WaitFor(w.T, what, func() bool {
		w.Core.Jobs.Notify()
		ds := w.deliveries(path, hookID)
		if len(ds) != 1 {
			return false
		}
		d = ds[0]
		return cond(d)
	})
	return d
}

const (
	projectHooks = "/api/v1/projects/ACME/webhooks"
	orgHooks     = "/api/v1/orgs/acme/webhooks"
)

// A cause reaches a real receiver, signed as Standard Webhooks says: the
// official library verifies it with the secret shown at creation. The
// message names the cause, the ticket (key, title, an absolute link), the
// project and the organization; the organization's "*" hook hears it too,
// a Slack hook gets {text, blocks}, and a hook for other causes nothing.
func TestACauseReachesSubscribersSignedAndVerifiable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, time.Now().UTC().Truncate(time.Millisecond))
		std, all, chat, other := newReceiver(t, always(204)), newReceiver(t, always(200)), newReceiver(t, always(200)), newReceiver(t, always(200))
		h := w.hook(projectHooks, std.URL+"/ballet", "standard", "question.opened", "approval.waiting")
		org := w.hook("/api/v1/orgs/acme/webhooks", all.URL, "", "*")
		w.hook(projectHooks, chat.URL, "slack", "question.opened")
		w.hook(projectHooks, other.URL, "standard", "flow.failed")
		if !strings.HasPrefix(h.Secret, "whsec_") || org.Format != "standard" {
			t.Fatalf("created: secret %q…, format %q", h.Secret[:6], org.Format)
		}
		key := w.question()
		hang.WaitFor(t, "the three deliveries", func() bool {
			return len(std.requests()) == 1 && len(all.requests()) == 1 && len(chat.requests()) == 1
		})
		got := std.requests()[0]
		wh, err := standardwebhooks.NewWebhook(h.Secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(got.body, got.header); err != nil {
			t.Fatalf("the library does not verify the delivery: %v (headers %v)", err, got.header)
		}
		if other, _ := standardwebhooks.NewWebhook(org.Secret); other.Verify(got.body, got.header) == nil {
			t.Fatal("another hook's secret verifies the delivery")
		}
		var m webhook.Message
		if err := json.Unmarshal(got.body, &m); err != nil {
			t.Fatal(err)
		}
		want := webhook.Data{Cause: notify.CauseQuestionOpened, Text: "Question: Which database?", Project: "ACME", Organization: "acme",
			Ticket: webhook.Ticket{Key: key, Title: "Pick a <database>", Link: "https://ballet.example.com/items/" + key + "#questions"}}
		m.Data.EventSeq = 0
		if m.Type != notify.CauseQuestionOpened || m.Data != want || m.Timestamp.IsZero() {
			t.Errorf("the message: %+v, want type question.opened and %+v", m, want)
		}
		// The org's hook: its own secret, the same message.
		if wh, _ := standardwebhooks.NewWebhook(org.Secret); wh.Verify(all.requests()[0].body, all.requests()[0].header) != nil {
			t.Error("the organization's hook's delivery does not verify with its secret")
		}
		var slack struct {
			Text   string
			Blocks []map[string]any
		}
		if err := json.Unmarshal(chat.requests()[0].body, &slack); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(slack.Text, key) || !strings.Contains(slack.Text, "https://ballet.example.com/items/"+key) || len(slack.Blocks) != 2 ||
			!strings.Contains(fmt.Sprint(slack.Blocks[0]), "<https://ballet.example.com/items/"+key+"#questions|"+key+": Pick a &lt;database&gt;>") {
			t.Errorf("the Slack message: %s", chat.requests()[0].body)
		}
		d := w.waitDelivery(projectHooks, h.ID, "the delivery recorded", func(d webhook.WebhookDelivery) bool { return d.Status == webhook.StatusSucceeded })
		if d.Attempts != 1 || d.HTTPStatus == nil || *d.HTTPStatus != 204 || d.Item != key || d.Cause != notify.CauseQuestionOpened ||
			d.ID != got.header.Get("webhook-id") || d.LastAttemptAt == nil || d.NextAttemptAt != nil {
			t.Errorf("the delivery: %+v", d)
		}
		if n := len(other.requests()); n != 0 {
			t.Errorf("the flow.failed hook got %d requests", n)
		}
		// Every delivery's events are in the ticket's project, also the
		// organization's hook's: the project's history shows them.
		hang.WaitFor(t, "three attempts recorded", func() bool {
			rows, err := s.Query(context.Background(), `SELECT COUNT(*) FROM events WHERE type = 'webhook.delivery_attempted'`)
			var n int64
			return err == nil && rows.Scan(0, &n) == nil && n == 3
		})
		rows, err := s.Query(context.Background(), `SELECT COUNT(*) FROM events WHERE type IN ('webhook.delivery_queued', 'webhook.delivery_attempted')
AND (project_id IS NULL OR project_id = '')`)
		var outside int64
		if err != nil || rows.Scan(0, &outside) != nil || outside != 0 {
			t.Errorf("%d delivery events are in no project (%v)", outside, err)
		}
	})
}

// A receiver that fails, then hangs past the timeout, then recovers: the
// delivery is retried after the backoff on the injected clock, under the
// same webhook-id, and succeeds at the third attempt, each one counted.
// Then a redelivery sends the same message again under the same id.
func TestAFailingHangingReceiverIsRetriedUntilItRecovers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		w := newWorld(t, s, time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
		r := newReceiver(t, func(n int) int { return map[int]int{1: 500, 2: 0}[n] + map[bool]int{true: 200}[n >= 3] })
		h := w.hook(projectHooks, r.URL, "standard", "*")
		w.question()
		d := w.waitDelivery(projectHooks, h.ID, "the first attempt", func(d webhook.WebhookDelivery) bool { return d.Attempts == 1 })
		if d.Status != webhook.StatusPending || d.HTTPStatus == nil || *d.HTTPStatus != 500 || d.NextAttemptAt == nil ||
			d.NextAttemptAt.Sub(*d.LastAttemptAt) != webhook.Backoff(1) || !strings.Contains(d.Error, "500") {
			t.Fatalf("after a 500: %+v", d)
		}
		w.clock.Advance(webhook.Backoff(1))
		d = w.waitDelivery(projectHooks, h.ID, "the second attempt", func(d webhook.WebhookDelivery) bool { return d.Attempts == 2 })
		if d.Status != webhook.StatusPending || d.HTTPStatus != nil || !strings.Contains(d.Error, "no answer within 300ms") {
			t.Fatalf("after a hang: %+v", d)
		}
		if n := len(r.requests()); n != 2 {
			t.Fatalf("the receiver heard %d requests, want 2", n)
		}
		w.clock.Advance(webhook.Backoff(2))
		d = w.waitDelivery(projectHooks, h.ID, "the third attempt", func(d webhook.WebhookDelivery) bool { return d.Attempts == 3 })
		if d.Status != webhook.StatusSucceeded || *d.HTTPStatus != 200 || d.Error != "" {
			t.Fatalf("after recovering: %+v", d)
		}
		reqs := r.requests()
		wh, _ := standardwebhooks.NewWebhook(h.Secret)
		for i, q := range reqs {
			if q.header.Get("webhook-id") != d.ID || string(q.body) != string(reqs[0].body) || wh.VerifyIgnoringTimestamp(q.body, q.header) != nil {
				t.Errorf("attempt %d: id %q, body %s (want id %s, the same body, a valid signature)", i+1, q.header.Get("webhook-id"), q.body, d.ID)
			}
		}
		// Redelivered: the same message and id, attempts go on counting.
		w.Must(202, w.tokens["carol"], "POST", projectHooks+"/"+h.ID+"/deliveries/"+d.ID+"/redeliver", nil)
		d = w.waitDelivery(projectHooks, h.ID, "the redelivery", func(d webhook.WebhookDelivery) bool { return d.Attempts == 4 })
		if d.Status != webhook.StatusSucceeded {
			t.Fatalf("after the redelivery: %+v", d)
		}
		reqs = r.requests()
		if len(reqs) != 4 || reqs[3].header.Get("webhook-id") != d.ID || string(reqs[3].body) != string(reqs[0].body) {
			t.Errorf("the redelivery: %d requests, the last %v %s", len(reqs), reqs[len(reqs)-1].header, reqs[len(reqs)-1].body)
		}
		// The attempts are counted in /metrics, the dispatcher's lag too.
		resp, err := http.Get(w.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range []string{`ballet_webhook_attempts_total{outcome="failed"} 2`, `ballet_webhook_attempts_total{outcome="succeeded"} 2`,
			"# TYPE ballet_webhooks_lag_events gauge"} {
			if !strings.Contains(string(metrics), line+"\n") {
				t.Errorf("/metrics lacks %q", line)
			}
		}
	})
}

// A receiver that fails for 24 hours: the delivery gives up, the hook is
// disabled (webhook.disabled) and the project's admins — only them — are
// notified, with a link to where the hook is managed — by mail too, for
// those who chose mail for webhook.disabled (the default); the next cause
// is not delivered. PATCH active re-enables it.
func TestTwentyFourHoursOfFailureDisableTheHook(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		start := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
		mp := mailtest.Start(t)
		w := newWorld(t, s, start, func(c *config.Config) {
			c.Notify.Email.SMTPURL = mp.SMTPURL()
			c.Notify.Email.From = "Ballet <ballet@example.com>"
			c.Notify.Email.Timeout = config.Duration{Duration: 2 * time.Second}
		})
		// carol (an admin) has a confirmed address and the default choice;
		// dave, another admin, chose the inbox only for webhook.disabled.
		w.Admin(200, "PUT", "/api/v1/orgs/acme/members/dave", map[string]any{"role": "admin"})
		var org struct{ ID string }
		w.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(t, &org)
		dave := w.TokenFor("dave", org.ID, "admin")
		for _, p := range []string{"carol", "dave"} {
			if _, err := s.Exec(t.Context(), store.Stmt(`INSERT INTO notification_settings (subject, email, email_source, email_confirmed_at, updated_at, version)
VALUES (?, ?, 'entered', 1, 1, 1)`, p, p+"@example.com")); err != nil {
				t.Fatal(err)
			}
		}
		var set notify.Settings
		w.Must(200, w.tokens["carol"], "GET", "/api/v1/me/notifications", nil).JSON(t, &set)
		if set.Causes[notify.CauseWebhookDisabled] != notify.ChoiceMail {
			t.Fatalf("carol's settings: %v, want webhook.disabled mail by default", set.Causes)
		}
		w.Must(200, dave, "PUT", "/api/v1/me/notifications", map[string]any{"causes": map[string]string{notify.CauseWebhookDisabled: "inbox"}})
		r := newReceiver(t, always(503))
		h := w.hook(projectHooks, r.URL, "standard", "question.opened")
		w.question()
		var d webhook.WebhookDelivery
		for attempt := 1; ; attempt++ {
			d = w.waitDelivery(projectHooks, h.ID, fmt.Sprintf("attempt %d", attempt), func(d webhook.WebhookDelivery) bool { return d.Attempts == attempt })
			if d.Status != webhook.StatusPending {
				break
			}
			if attempt == 1 { // being retried: failing, in the list and the hook's own answer
				var one webhook.Webhook
				var list struct{ Webhooks []webhook.Webhook }
				w.Must(200, w.tokens["carol"], "GET", projectHooks+"/"+h.ID, nil).JSON(t, &one)
				w.Must(200, w.tokens["carol"], "GET", projectHooks, nil).JSON(t, &list)
				for _, got := range append(list.Webhooks, one) {
					if !got.Failing || got.LastError == nil || !strings.Contains(*got.LastError, "503") || got.FailingSince == nil ||
						!got.FailingSince.Equal(start) || !got.Active {
						t.Fatalf("a hook being retried: %+v, want failing since %v with the 503", got, start)
					}
				}
			}
			if attempt > 40 {
				t.Fatalf("still pending after %d attempts: %+v", attempt, d)
			}
			w.clock.Advance(d.NextAttemptAt.Sub(w.clock.Now()))
		}
		if d.Status != webhook.StatusFailed || !d.LastAttemptAt.Equal(start.Add(webhook.RetryFor)) || d.Attempts < 10 || len(r.requests()) != d.Attempts {
			t.Fatalf("the delivery gave up as %+v at %v (receiver heard %d), want failed at %v", d, d.LastAttemptAt, len(r.requests()), start.Add(webhook.RetryFor))
		}
		var got webhook.Webhook
		w.Must(200, w.tokens["carol"], "GET", projectHooks+"/"+h.ID, nil).JSON(t, &got)
		if got.Active || got.DisabledAt == nil || !got.Failing || got.LastError == nil || got.FailingSince == nil || !got.FailingSince.Equal(start) {
			t.Fatalf("the hook after 24 h of failure: %+v", got)
		}
		var inbox struct {
			Notifications []struct{ Cause, Link, Title, Text string }
		}
		hang.WaitFor(t, "carol's notification", func() bool {
			w.Must(200, w.tokens["carol"], "GET", "/api/v1/me/notifications/inbox", nil).JSON(t, &inbox)
			for _, n := range inbox.Notifications {
				if n.Cause == notify.CauseWebhookDisabled {
					return true
				}
			}
			return false
		})
		for _, n := range inbox.Notifications {
			if n.Cause == notify.CauseWebhookDisabled && (n.Link != "/projects/ACME/settings" || !strings.Contains(n.Title, "127.0.0.1") ||
				!strings.Contains(n.Text, "503")) {
				t.Errorf("carol's notification: %+v", n)
			}
		}
		hang.WaitFor(t, "carol's mail", func() bool {
			return storetest.Count(t, s, `SELECT COUNT(*) FROM mail_deliveries WHERE cause = 'webhook.disabled' AND status = 'sent'`) == 1
		})
		var mailed *mailtest.Summary
		for _, m := range mp.To(t, "carol@example.com") {
			if strings.HasPrefix(m.Subject, "Webhook disabled: Webhook to 127.0.0.1") {
				mailed = &m
			}
		}
		if mailed == nil {
			t.Fatalf("carol has no mail of the disabled hook: %+v", mp.To(t, "carol@example.com"))
		}
		if m := mp.Message(t, mailed.ID); !strings.Contains(m.Text, "https://ballet.example.com/projects/ACME/settings") ||
			m.Header("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" {
			t.Errorf("carol's mail of the disabled hook: %s", m.Text)
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM mail_deliveries WHERE recipient = 'dave' AND cause = 'webhook.disabled'`); n != 0 {
			t.Errorf("dave, who chose the inbox, has %d mail deliveries", n)
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM notifications WHERE recipient = 'dave' AND cause = 'webhook.disabled'`); n != 1 {
			t.Errorf("dave has %d webhook.disabled notifications, want 1 (in his inbox)", n)
		}
		var alice struct{ Notifications []struct{ Cause string } }
		w.Must(200, w.tokens["alice"], "GET", "/api/v1/me/notifications/inbox", nil).JSON(t, &alice)
		for _, n := range alice.Notifications {
			if n.Cause == notify.CauseWebhookDisabled {
				t.Error("alice, a member, was told of the disabled hook")
			}
		}
		// Disabled: the next cause is not delivered.
		w.question()
		before := len(r.requests())
		w.Core.Webhooks.Pass(context.Background())
		if ds := w.deliveries(projectHooks, h.ID); len(ds) != 1 || len(r.requests()) != before {
			t.Errorf("a disabled hook got %d deliveries and %d more requests", len(ds), len(r.requests())-before)
		}
		if fh := w.failingHooks(w.tokens["carol"]); len(fh) != 1 || fh[0].Webhook != h.ID || !fh[0].Since.Equal(start) ||
			!strings.Contains(fh[0].Detail, "disabled") || !strings.Contains(fh[0].Detail, "503") {
			t.Errorf("carol's needs-me with the hook disabled: %+v", fh)
		}
		if fh := w.failingHooks(w.tokens["alice"]); len(fh) != 0 {
			t.Errorf("alice, a member, sees the disabled hook: %+v", fh)
		}
		w.Must(200, w.tokens["carol"], "PATCH", projectHooks+"/"+h.ID, map[string]any{"active": true}).JSON(t, &got)
		if !got.Active || got.DisabledAt != nil {
			t.Errorf("re-enabled: %+v", got)
		}
		w.Must(200, w.tokens["carol"], "GET", projectHooks+"/"+h.ID, nil).JSON(t, &got)
		if got.Failing || got.LastError != nil || got.FailingSince != nil {
			t.Errorf("re-enabled, nothing being retried: %+v, want not failing", got)
		}
		if fh := w.failingHooks(w.tokens["carol"]); len(fh) != 0 {
			t.Errorf("re-enabled, carol's needs-me still has %+v", fh)
		}
	})
}

// failingHooks are the webhook_failing entries of a token's needs-me.
func (w *world) failingHooks(token string) []needsme.Entry {
	w.T.Helper()
	var l needsme.List
	w.Must(200, token, "GET", "/api/v1/needs-me", nil).JSON(w.T, &l)
	var out []needsme.Entry
	for _, e := range l.Items {
		if e.Kind == needsme.KindWebhookFailing {
			out = append(out, e)
		}
	}
	return out
}

// A project's and an organization's hook whose receiver answers 500: each
// is a webhook_failing entry of needs-me for acme's admin (carol), with
// its host and last error, never for a member (alice) or another
// organization's admin (gus); once the receiver recovers and the retries
// succeed, the entries are gone.
func TestFailingHooksNeedTheirAdmins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		start := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
		w := newWorld(t, s, start)
		var healthy atomic.Bool
		r := newReceiver(t, func(int) int {
			if healthy.Load() {
				return 200
			}
			return 500
		})
		globex := w.Org("globex")
		w.Admin(200, "PUT", "/api/v1/orgs/globex/members/gus", map[string]any{"role": "admin"})
		gus := w.TokenFor("gus", globex, "admin")
		proj := w.hook(projectHooks, r.URL, "standard", "*")
		org := w.hook(orgHooks, r.URL, "standard", "*")
		w.question()
		for _, h := range []struct{ path, id string }{{projectHooks, proj.ID}, {orgHooks, org.ID}} {
			w.waitDelivery(h.path, h.id, "the first attempt", func(d webhook.WebhookDelivery) bool { return d.Attempts == 1 })
		}
		got := w.failingHooks(w.tokens["carol"])
		ids := map[string]needsme.Entry{}
		for _, e := range got {
			ids[e.Webhook] = e
		}
		if e := ids[proj.ID]; len(got) != 2 || e.Org != "acme" || e.Project != "ACME" || e.Item != "" || !e.Since.Equal(start) ||
			!strings.Contains(e.Title, "127.0.0.1") || !strings.Contains(e.Detail, "500") {
			t.Fatalf("carol's failing hooks: %+v", got)
		}
		if e := ids[org.ID]; e.Org != "acme" || e.Project != "" || !strings.Contains(e.Detail, "500") {
			t.Errorf("the organization's hook: %+v", e)
		}
		for name, tok := range map[string]string{"alice (a member)": w.tokens["alice"], "gus (globex's admin)": gus} {
			if got := w.failingHooks(tok); len(got) != 0 {
				t.Errorf("%s sees %+v", name, got)
			}
		}
		healthy.Store(true)
		w.clock.Advance(webhook.Backoff(1))
		for _, h := range []struct{ path, id string }{{projectHooks, proj.ID}, {orgHooks, org.ID}} {
			w.waitDelivery(h.path, h.id, "the retry", func(d webhook.WebhookDelivery) bool { return d.Status == webhook.StatusSucceeded })
		}
		if got := w.failingHooks(w.tokens["carol"]); len(got) != 0 {
			t.Errorf("recovered, carol still sees %+v", got)
		}
	})
}
