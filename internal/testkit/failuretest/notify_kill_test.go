package failuretest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/ballet/ballet/internal/auth"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/digest"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/rqlite"
	"github.com/ballet/ballet/internal/store/sqlite"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/mailtest"
	"github.com/ballet/ballet/internal/testkit/rqlitetest"
	"github.com/ballet/ballet/internal/testkit/storetest"
	"github.com/ballet/ballet/internal/transition"
	"github.com/ballet/ballet/internal/webhook"
)

// notifyKill is one crash point between a cause and its deliveries, and
// what a kill there may repeat: the documented at-least-once windows
// (docs/notifications.md) send the mail, or post the webhook, twice with
// the same Message-ID or webhook-id; every other point sends once.
type notifyKill struct {
	point           string
	mails, webhooks int // what the receivers get for the cause
	// what they had got when Core died: a copy out before the kill may
	// be sent again by the next Core whatever the point (the mail and
	// webhook jobs run side by side, so a kill aimed at one can land in
	// the other's window too); a copy sent after it may not.
	mailsAtKill, webhooksAtKill int
	// recorded: the point comes after that channel's delivery was
	// recorded, so its first copy, out before the kill, must be the only
	// one.
	mailRecorded, webhookRecorded bool
}

// allowed reports whether got copies of a cause are what the kill may
// cause: want at the point aimed at, else one, or two when the first was
// out before the kill and not yet recorded.
func allowed(got, want, atKill int, recorded bool) bool {
	return got == want || (want == 1 && got == 2 && atKill >= 1 && !recorded)
}

var notifyKills = []notifyKill{
	{point: "commit:question.asked", mails: 1, webhooks: 1},                                      // the cause committed, no consumer saw it
	{point: "commit:notification.created", mails: 1, webhooks: 1},                                // the notifier's batch (notification, delivery, job) in
	{point: "commit:webhook.delivery_queued", mails: 1, webhooks: 1},                             // the webhook consumer's batch in
	{point: notify.FaultMailSent, mails: 2, webhooks: 1},                                         // SMTP accepted, the delivery not yet recorded
	{point: "handled:notify.mail", mails: 1, webhooks: 1, mailRecorded: true},                    // the delivery recorded sent, its job not finished
	{point: webhook.FaultSent, mails: 1, webhooks: 2},                                            // the receiver answered 2xx, the attempt not recorded
	{point: "handled:" + webhook.Deliver{}.Kind(), mails: 1, webhooks: 1, webhookRecorded: true}, // the attempt recorded, its job not finished
}

// TestNotifyKill kills a real Core with SIGKILL at every point between a
// blocking question and its mail and webhook, restarts it, and checks
// that each cause reached the assignee's mailbox (Mailpit) and a webhook
// receiver that verifies the Standard Webhooks signature: none lost, no
// notification or delivery row doubled, and a repeated mail or post only at
// the two documented points, with the same Message-ID or webhook-id.
// SQLite and a one-node rqlite cluster.
func TestNotifyKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills real Core processes")
	}
	for _, engine := range []string{"sqlite", "rqlite"} {
		t.Run(engine, func(t *testing.T) { runNotifyKill(t, engine) })
	}
}

// hookReceiver is a webhook receiver on 127.0.0.1 that verifies each
// post's signature and keeps what it got, per ticket.
type hookReceiver struct {
	*httptest.Server
	t      testing.TB
	mu     sync.Mutex
	secret string
	got    map[string][]string // ticket key → webhook-ids, in order
	bad    []string
}

func newHookReceiver(t testing.TB) *hookReceiver {
	h := &hookReceiver{t: t, got: map[string][]string{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if err != nil {
			h.bad = append(h.bad, err.Error())
			w.WriteHeader(500)
			return
		}
		wh, err := standardwebhooks.NewWebhook(h.secret)
		if err == nil {
			err = wh.VerifyIgnoringTimestamp(body, r.Header)
		}
		var m webhook.Message
		if err == nil {
			err = json.Unmarshal(body, &m)
		}
		if err != nil {
			h.bad = append(h.bad, fmt.Sprintf("%s: %v", body, err))
			w.WriteHeader(400)
			return
		}
		h.got[m.Data.Ticket.Key] = append(h.got[m.Data.Ticket.Key], r.Header.Get("webhook-id"))
		w.WriteHeader(204)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) ids(key string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got[key]...)
}

var confirmLinkRE = regexp.MustCompile(`http://\S+/api/v1/mail/confirm\?t=\S+`)

// TestDigestKill kills a real Core right after it wrote bob's digest
// (commit:digest.created), then after the mail server took the digest's
// mail (digest.mail.sent), then after the digest was recorded sent
// (handled:digest.send), restarting it each time: the digest is one row,
// mailed exactly twice (the window of digest.mail.sent), both copies with
// its Message-ID. SQLite only: it waits for a one-minute period to close.
func TestDigestKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills real Core processes")
	}
	w := newNotifyWorld(t, "sqlite", "[digest]\nevery = \"1m\"")
	key := w.ask() // something needs bob: his digest is not empty
	w.settled(key, 1, 1)
	before := storetest.Count(t, w.db, `SELECT COUNT(*) FROM digests`)
	if err := w.c.stop(); err != nil {
		t.Fatal(err)
	}
	w.up("commit:digest.created")
	w.waitKilled(t, "commit:digest.created", 90*time.Second)
	var id, status string
	rows, err := w.db.Query(context.Background(), `SELECT id, status FROM digests ORDER BY period_at DESC LIMIT 1`)
	if err != nil {
		t.Fatal(err)
	}
	if rows.Len() != 1 {
		t.Fatalf("no digest written before the kill (%d before)", before)
	}
	if err := rows.Scan(0, &id, &status); err != nil || status != "pending" {
		t.Fatalf("the digest written before the kill: %q %q %v (want pending; %d digests before)", id, status, err, before)
	}
	for _, point := range []string{digest.FaultSent, "handled:" + digest.SendArgs{}.Kind()} {
		w.up(point)
		w.waitKilled(t, point, 30*time.Second)
	}
	w.up("")
	last := w.ask() // the next Core works: its jobs ran
	w.settled(last, 1, 1)
	if got := storetest.Count(t, w.db, `SELECT COUNT(*) FROM digests WHERE id = ? AND status = 'sent'`, id); got != 1 {
		t.Errorf("digest %s: %d sent rows, want 1", id, got)
	}
	var copies int
	for _, m := range w.mp.To(t, w.addr) {
		if strings.Contains(m.MessageID, "digest-"+id+"@") {
			copies++
		}
	}
	if copies != 2 {
		t.Errorf("digest %s mailed %d times, want 2 (once, and again after the kill at %s)", id, copies, digest.FaultSent)
	}
	if n := storetest.Count(t, w.db, `SELECT COUNT(*) FROM events WHERE type = 'digest.sent' AND entity_id = ?`, id); n != 1 {
		t.Errorf("digest %s: %d digest.sent events, want 1", id, n)
	}
}

// notifyWorld is a real Core on its database, with Mailpit, a webhook
// receiver and bob, a member with a confirmed address, assignee of the
// tickets.
type notifyWorld struct {
	c       *coreProc
	api     *client
	db      store.Store
	mp      *mailtest.Server
	hooks   *hookReceiver
	addr    string                             // bob's address
	up      func(point string)                 // start Core with point armed
	ask     func() string                      // a ticket for bob with a blocking question; its key
	settled func(key string, mails, hooks int) // wait until key's cause is out and nothing is left to do
}

// waitKilled waits until Core killed itself at its armed point.
func (w *notifyWorld) waitKilled(t *testing.T, point string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !w.c.dead() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: Core did not reach the crash point", point)
		}
		time.Sleep(50 * time.Millisecond) // waiting for a real process to kill itself
	}
	if killed, how := w.c.killed(); !killed {
		t.Fatalf("%s: Core exited without SIGKILL: %s", point, how)
	}
}

func runNotifyKill(t *testing.T, engine string) {
	w := newNotifyWorld(t, engine, "")
	c, db, mp, hooks, addr, up, ask, settled := w.c, w.db, w.mp, w.hooks, w.addr, w.up, w.ask, w.settled
	keys := map[string]notifyKill{}
	for _, k := range notifyKills {
		if err := c.stop(); err != nil {
			t.Fatal(err)
		}
		up(k.point)
		key := ask()
		keys[key] = k
		w.waitKilled(t, k.point, 60*time.Second)
		k.mailsAtKill, k.webhooksAtKill = len(mailsFor(t, mp, addr, key)), len(hooks.ids(key))
		keys[key] = k
		up("")
		for key, k := range keys {
			settled(key, k.mails, k.webhooks)
		}
		t.Logf("%s: %s delivered after the kill", k.point, key)
	}
	// A last Core, stopped and started cleanly, and one more cause after
	// everything: nothing of the earlier causes is sent again.
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	up("")
	last := ask()
	keys[last] = notifyKill{point: "none", mails: 1, webhooks: 1}
	settled(last, 1, 1)

	hooks.mu.Lock()
	if len(hooks.bad) > 0 {
		t.Errorf("webhook posts that do not verify: %v", hooks.bad)
	}
	hooks.mu.Unlock()
	for key, k := range keys {
		if n := count(t, db, `SELECT COUNT(*) FROM notifications WHERE item_key = ?`, key); n != 1 {
			t.Errorf("%s (%s): %d notification rows, want 1", key, k.point, n)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM mail_deliveries WHERE item_key = ? AND status = 'sent'`, key); n != 1 {
			t.Errorf("%s (%s): %d mail delivery rows, want 1 (sent)", key, k.point, n)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM webhook_deliveries WHERE item_key = ? AND status = 'succeeded'`, key); n != 1 {
			t.Errorf("%s (%s): %d webhook delivery rows, want 1 (succeeded)", key, k.point, n)
		}
		mails := mailsFor(t, mp, addr, key)
		if !allowed(len(mails), k.mails, k.mailsAtKill, k.mailRecorded) || distinct(mails) != 1 {
			t.Errorf("%s (%s): %d mails with %d Message-IDs %v (%d before the kill), want %d with one", key, k.point, len(mails), distinct(mails), mails, k.mailsAtKill, k.mails)
		}
		ids := hooks.ids(key)
		if !allowed(len(ids), k.webhooks, k.webhooksAtKill, k.webhookRecorded) || distinct(ids) != 1 {
			t.Errorf("%s (%s): %d webhook posts with %d webhook-ids %v (%d before the kill), want %d with one", key, k.point, len(ids), distinct(ids), ids, k.webhooksAtKill, k.webhooks)
		}
		if len(mails) > 1 || len(ids) > 1 {
			t.Logf("%s (%s): %d mails, %d webhook posts (the at-least-once window)", key, k.point, len(mails), len(ids))
		}
	}
	if n, want := count(t, db, `SELECT COUNT(*) FROM events WHERE type = 'notification.mailed'`), int64(len(keys)); n != want {
		t.Errorf("%d notification.mailed events, want %d (one per cause)", n, want)
	}
}

// newNotifyWorld starts the world on engine; extra is added to Core's
// configuration.
func newNotifyWorld(t *testing.T, engine, extra string) *notifyWorld {
	ctx := context.Background()
	mp := mailtest.Start(t)
	hooks := newHookReceiver(t)
	dir := t.TempDir()
	storage := "[storage]\npath = \"data/core.db\""
	dbPath := filepath.Join(dir, "data", "core.db")
	// beside the running Core
	open := func() (store.Store, error) { return sqlite.OpenShared(ctx, dbPath) }
	if engine == "rqlite" {
		cluster := rqlitetest.Start(t, 1)
		storage = fmt.Sprintf("[storage]\nengine = \"rqlite\"\nurl = %q\npath = \"data/core.db\"", strings.Join(cluster.URLs(), ","))
		open = func() (store.Store, error) {
			return rqlite.Open(ctx, rqlite.Options{URLs: cluster.URLs(), Consistency: "strong"})
		}
	}
	c, err := newCoreProc(binary, dir, storage, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Short leases: a job whose Core was killed runs again within seconds.
	cfg := fmt.Sprintf(`%s
[http]
addr = %q
[jobs]
lease = "2s"
poll = "50ms"
backoff_cap = "1s"
[leader]
ttl = "2s"
renew = "500ms"
[auth]
bootstrap_token = %q
[secrets]
allow = [%q]
[notify]
base_url = "http://%s"
allow_private_targets = true # the receiver is on 127.0.0.1
[notify.email]
smtp_url = %q
from = "Ballet <ballet@example.com>"
timeout = "5s"
%s
`, storage, c.addr, AdminToken, apitest.SecretsAllow, c.addr, mp.SMTPURL(), extra)
	if err := os.WriteFile(c.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.kill(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("core log (tail):\n%s", tailFile(c.logPath, 8000))
		}
	})
	api := newClient(c.addr)
	up := func(point string) {
		t.Helper()
		if err := c.start(point); err != nil || c.dead() {
			t.Fatalf("start core (%q): %v\n%s", point, err, tailFile(c.logPath, 4000))
		}
	}
	must := func(want int, token, method, path string, body, out any) {
		t.Helper()
		status, b, err := api.call(nil, 30*time.Second, token, method, path, body)
		if err != nil || status != want {
			t.Fatalf("%s %s: %d %s %v (want %d)", method, path, status, b, err, want)
		}
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s %s: %v: %s", method, path, err, b)
			}
		}
	}
	up("")

	// The world: an organization, a project, bob (a member, with a
	// confirmed address) and an organization webhook for questions.
	var org struct{ ID string }
	must(201, AdminToken, "POST", "/api/v1/orgs", map[string]any{"slug": "acme", "name": "Acme"}, &org)
	must(201, AdminToken, "POST", "/api/v1/orgs/acme/projects", map[string]any{"key": "ACME", "name": "Acme",
		"repository": map[string]any{"forge": "git", "url": "/srv/git/acme.git"}}, nil)
	must(200, AdminToken, "PUT", "/api/v1/orgs/acme/members/bob", map[string]any{"role": "member"}, nil)
	db, err := open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	bob := mintToken(t, db, "bob", org.ID)
	addr := "bob-" + engine + "@example.com"
	must(200, bob, "PUT", "/api/v1/me/notifications", map[string]any{"email": addr}, nil)
	m := mp.Message(t, mp.Wait(t, addr, 1, 20*time.Second)[0].ID)
	link := confirmLinkRE.FindString(m.Text)
	if link == "" {
		t.Fatalf("no confirmation link in %q", m.Text)
	}
	resp, err := http.Post(link, "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("confirm the address: %v %v", resp, err)
	}
	resp.Body.Close()
	var hook webhook.CreatedWebhook
	must(201, AdminToken, "POST", "/api/v1/orgs/acme/webhooks", map[string]any{"url": hooks.URL + "/hook", "events": []string{"question.opened"}}, &hook)
	hooks.mu.Lock()
	hooks.secret = hook.Secret
	hooks.mu.Unlock()

	ask := func() string {
		t.Helper()
		var it struct{ Key string }
		must(201, AdminToken, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "Pick a database", "assignee": "bob"}, &it)
		// The question's answer may never come: Core may die right after
		// committing it (commit:question.asked).
		_, _, _ = api.once(AdminToken, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": "Which database?", "blocking": true})
		return it.Key
	}
	// settled waits until key's cause was mailed and posted want times and
	// nothing about it is left to do.
	settled := func(key string, mails, hooksWant int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			nm := len(mailsFor(t, mp, addr, key))
			nh := len(hooks.ids(key))
			left := count(t, db, `SELECT COUNT(*) FROM jobs WHERE kind IN ('notify.mail', 'webhook.deliver') AND status IN ('pending', 'running')`) +
				count(t, db, `SELECT COUNT(*) FROM mail_deliveries WHERE item_key = ? AND status <> 'sent'`, key) +
				count(t, db, `SELECT COUNT(*) FROM webhook_deliveries WHERE item_key = ? AND status <> 'succeeded'`, key)
			if nm >= mails && nh >= hooksWant && left == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d mails (want %d), %d webhook posts (want %d), %d deliveries or jobs left", key, nm, mails, nh, hooksWant, left)
			}
			time.Sleep(100 * time.Millisecond) // polling receivers a real Core writes to
		}
	}

	return &notifyWorld{c: c, api: api, db: db, mp: mp, hooks: hooks, addr: addr, up: up, ask: ask, settled: settled}
}

// mintToken writes an API token for subject straight into the database,
// as an identity provider's login would give one.
func mintToken(t testing.TB, db store.Store, subject, orgID string) string {
	t.Helper()
	secret, _, tr := auth.Issue(event.Actor{Kind: event.ActorHuman, Sub: subject}, auth.KindAPI, "notify kill", orgID, "member", nil, nil, time.Now())
	if err := (&transition.Applier{Store: db, Clock: clock.Real{}}).Apply(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	return secret
}

// mailsFor returns the Message-IDs of the mails to addr about key.
func mailsFor(t testing.TB, mp *mailtest.Server, addr, key string) []string {
	var ids []string
	for _, m := range mp.To(t, addr) {
		if strings.HasPrefix(m.Subject, "["+key+"]") {
			ids = append(ids, m.MessageID)
		}
	}
	return ids
}

func distinct(xs []string) int {
	seen := map[string]bool{}
	for _, x := range xs {
		seen[x] = true
	}
	return len(seen)
}

func count(t testing.TB, db store.Store, q string, args ...any) int64 {
	t.Helper()
	return storetest.Count(t, db, q, args...)
}
