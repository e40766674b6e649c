package core_test

import (
	"context"
	"encoding/base64"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/digest"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// mailbox is a Mailer that keeps what it is given.
type mailbox struct {
	mu   sync.Mutex
	sent []digest.Message
}

func (m *mailbox) Send(_ context.Context, msg digest.Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, msg)
	return nil
}

func (m *mailbox) all() []digest.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]digest.Message(nil), m.sent...)
}

// TestWholeCoreMailsTheDigestOnAFakeClock: a whole Core on a fake clock
// mails a person's digest when their period closes (what needs them, with
// a link), mails none for a period in which nothing happened, and after a
// restart across three midnights mails one digest, not three.
func TestWholeCoreMailsTheDigestOnAFakeClock(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fk := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
		mail := &mailbox{}
		adjust := func(c *config.Config) {
			c.Storage.Path = t.TempDir() + "/core.db"
			c.Leader.TTL.Duration, c.Leader.Renew.Duration = 100*time.Hour, 10*time.Hour
		}
		// ann chose her digest just now: her first closes at midnight.
		if _, err := s.Exec(t.Context(), store.Stmt(`INSERT INTO notification_settings (subject, email, email_source, email_confirmed_at, updated_at, version)
VALUES ('ann', 'ann@example.com', 'entered', 1, ?, 1)`, fk.Now().UnixMilli())); err != nil {
			t.Fatal(err)
		}
		e := apitest.RunWithMailer(t, s, fk, mail, adjust)
		acme := e.Org("acme")
		e.Project("acme", "ACME")
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/ann", map[string]any{"role": "member"})
		ann := e.TokenFor("ann", acme, "member")
		var it struct{ Key string }
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "asks"}).JSON(t, &it)
		var q struct{ ID string }
		e.Admin(201, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": "Which database?", "blocking": true}).JSON(t, &q)

		fk.Advance(12 * time.Hour) // midnight
		apitest.Await(t, "the midnight digest", func() bool { return len(mail.all()) >= 1 })
		m := mail.all()[0]
		if m.To != "ann@example.com" || m.Subject != "Ballet digest — 1 needs you" || !strings.Contains(m.Text, "/items/"+it.Key+"#questions") ||
			!strings.Contains(m.HTML, it.Key) {
			t.Fatalf("the digest: %+v", m)
		}

		// The question answered: the next day nothing needs ann, finishes or
		// fails — no mail.
		e.Must(200, ann, "POST", "/api/v1/questions/"+q.ID+"/answer", map[string]any{"answer": "SQLite"})
		fk.Advance(24 * time.Hour)
		apitest.Await(t, "the quiet day's digest row", func() bool {
			return storetest.Count(t, s, `SELECT COUNT(*) FROM digests WHERE status = 'empty' AND period_key = '2026-12-08T00:00:00Z'`) == 1
		})
		if n := len(mail.all()); n != 1 {
			t.Fatalf("%d mails after a quiet day, want still 1", n)
		}

		// Down across three midnights, with a new question meanwhile.
		e.Admin(201, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": "And the cache?", "blocking": true})
		if err := e.Stop(); err != nil {
			t.Fatal(err)
		}
		fk.Advance(72 * time.Hour)
		apitest.RunWithMailer(t, s, fk, mail, adjust)
		apitest.Await(t, "the digest after the restart", func() bool { return len(mail.all()) >= 2 })
		for range 3 {
			fk.Advance(time.Minute)
		}
		if got := mail.all(); len(got) != 2 || !strings.Contains(got[1].Text, "And the cache?") {
			t.Fatalf("after the restart %d mails, want 2 in all (a quiet day has none)", len(got))
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM digests WHERE period_key = '2026-12-11T00:00:00Z'`); n != 1 {
			t.Errorf("%d digests for the midnight after the restart", n)
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM digests WHERE period_key IN ('2026-12-09T00:00:00Z', '2026-12-10T00:00:00Z')`); n != 0 {
			t.Errorf("%d digests for the midnights Core was down", n)
		}
	})
}

// TestASavedDigestChoiceIsSeenAtOnce: the digester sleeps up to a minute
// between passes; a person who chooses a digest half a minute before
// midnight gets the midnight one at midnight, not at the digester's next
// minute, because the saved choice nudges it.
func TestASavedDigestChoiceIsSeenAtOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fk := clock.NewFake(time.Date(2026, 12, 6, 23, 59, 30, 0, time.UTC))
		adjust := func(c *config.Config) {
			c.Storage.Path = t.TempDir() + "/core.db"
			c.Leader.TTL.Duration, c.Leader.Renew.Duration = 100*time.Hour, 10*time.Hour
		}
		// bob's digest closes at noon and his period closed while he had
		// none: the digester's first pass writes his, so it is known to be
		// done. ann has hers off.
		day := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC).UnixMilli()
		if _, err := s.Exec(t.Context(),
			store.Stmt(`INSERT INTO notification_settings (subject, email, email_source, email_confirmed_at, digest_hour, updated_at, version)
VALUES ('bob', 'bob@example.com', 'entered', 1, 12, ?, 1)`, day),
			store.Stmt(`INSERT INTO notification_settings (subject, email, email_source, email_confirmed_at, digest, updated_at, version)
VALUES ('ann', 'ann@example.com', 'entered', 1, 'off', ?, 1)`, day)); err != nil {
			t.Fatal(err)
		}
		e := apitest.RunWithMailer(t, s, fk, &mailbox{}, adjust)
		acme := e.Org("acme")
		ann := e.TokenFor("ann", acme, "member")
		apitest.Await(t, "the first pass (bob's digest)", func() bool {
			return storetest.Count(t, s, `SELECT COUNT(*) FROM digests WHERE subject = 'bob'`) == 1
		})

		e.Must(200, ann, "PUT", "/api/v1/me/notifications", map[string]any{"digest": "period"})
		// Midnight exactly; the digester's minute ends at 00:00:30. Whether
		// the nudged pass runs before or after this, it sees ann's choice.
		fk.Advance(30 * time.Second)
		apitest.Await(t, "ann's midnight digest at midnight", func() bool {
			return storetest.Count(t, s, `SELECT COUNT(*) FROM digests WHERE subject = 'ann' AND period_key = '2026-12-07T00:00:00Z'`) == 1
		})
	})
}

// TestTheDigestsOneClickUnsubscribe: a digest mail carries its one-click
// unsubscribe link (RFC 8058); POSTing it, without a login, turns that
// person's digest off — and only theirs — so no digest is made for them
// at the next boundary. A link with another person's name is refused.
func TestTheDigestsOneClickUnsubscribe(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		fk := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
		mail := &mailbox{}
		adjust := func(c *config.Config) {
			c.Storage.Path = t.TempDir() + "/core.db"
			c.Leader.TTL.Duration, c.Leader.Renew.Duration = 100*time.Hour, 10*time.Hour
		}
		for _, p := range []string{"ann", "bob"} {
			if _, err := s.Exec(t.Context(), store.Stmt(`INSERT INTO notification_settings (subject, email, email_source, email_confirmed_at, updated_at, version)
VALUES (?, ?, 'entered', 1, ?, 1)`, p, p+"@example.com", fk.Now().UnixMilli())); err != nil {
				t.Fatal(err)
			}
		}
		e := apitest.RunWithMailer(t, s, fk, mail, adjust)
		acme := e.Org("acme")
		e.Project("acme", "ACME")
		tokens := map[string]string{}
		for _, p := range []string{"ann", "bob"} {
			e.Admin(200, "PUT", "/api/v1/orgs/acme/members/"+p, map[string]any{"role": "member"})
			tokens[p] = e.TokenFor(p, acme, "member")
		}
		var it struct{ Key string }
		e.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "asks"}).JSON(t, &it)
		e.Admin(201, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": "Which database?", "blocking": true})

		fk.Advance(12 * time.Hour) // midnight: both get a digest
		apitest.Await(t, "the midnight digests", func() bool { return len(mail.all()) == 2 })
		var link string
		for _, m := range mail.all() {
			if m.To == "ann@example.com" {
				link = m.Unsubscribe
			}
		}
		prefix := e.URL + notify.UnsubscribePath + "?t="
		if !strings.HasPrefix(link, prefix) {
			t.Fatalf("ann's digest's List-Unsubscribe %q, want under %s", link, prefix)
		}
		path := strings.TrimPrefix(link, e.URL)

		// Opening it in a browser changes nothing; bob's name in ann's
		// signature is refused.
		if r := e.Do("", "GET", path, nil); r.Status != 200 || !strings.Contains(string(r.Body), "Stop the digest") {
			t.Fatalf("GET the link: %d %s", r.Status, r.Body)
		}
		tok, _ := url.QueryUnescape(strings.TrimPrefix(link, prefix))
		forged := notify.UnsubscribePath + "?t=" + url.QueryEscape(base64.RawURLEncoding.EncodeToString([]byte("bob"))+tok[strings.Index(tok, "~"):])
		if r := e.Raw("", "POST", forged, "application/x-www-form-urlencoded", []byte("List-Unsubscribe=One-Click")); r.Status != 404 {
			t.Errorf("a link forged for bob: %d, want 404", r.Status)
		}
		digestOf := func(p string) string {
			var set notify.Settings
			e.Must(200, tokens[p], "GET", "/api/v1/me/notifications", nil).JSON(t, &set)
			return set.Digest
		}
		if digestOf("ann") != "period" {
			t.Fatalf("before the POST ann's digest is %q", digestOf("ann"))
		}

		// The one-click POST, as a mail client sends it.
		if r := e.Raw("", "POST", path, "application/x-www-form-urlencoded", []byte("List-Unsubscribe=One-Click")); r.Status != 200 {
			t.Fatalf("POST the link: %d %s", r.Status, r.Body)
		}
		if got, bob := digestOf("ann"), digestOf("bob"); got != "off" || bob != "period" {
			t.Fatalf("after the POST: ann's digest %q (want off), bob's %q (want period)", got, bob)
		}
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM events WHERE type = 'notification.settings_changed' AND entity_id = 'ann'`); n != 1 {
			t.Errorf("%d notification.settings_changed events for ann, want 1", n)
		}

		// The next midnight: bob's digest, none for ann.
		fk.Advance(24 * time.Hour)
		apitest.Await(t, "bob's second digest", func() bool { return len(mail.all()) == 3 })
		if n := storetest.Count(t, s, `SELECT COUNT(*) FROM digests WHERE subject = 'ann'`); n != 1 {
			t.Errorf("%d digests for ann, want 1 (none after she unsubscribed)", n)
		}
	})
}
