package notify_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/needsme"
	"github.com/ballet/ballet/internal/notify"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/mailtest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

// mailWorld is a whole running Core (its notifier and job orchestrator
// on) that mails through a real Mailpit, with organization acme, project
// ACME and people alice and bob (members), carol (admin).
type mailWorld struct {
	*apitest.Env
	mp     *mailtest.Server
	tokens map[string]string
}

func withMail(mp *mailtest.Server) func(*config.Config) {
	return func(c *config.Config) {
		c.Notify.Email.SMTPURL = mp.SMTPURL()
		c.Notify.Email.From = "Ballet <ballet@example.com>"
		c.Notify.Email.Timeout = config.Duration{Duration: 2 * time.Second}
		c.Notify.BaseURL = "" // apitest points it at the Core
		c.Jobs.BackoffCap = config.Duration{Duration: 2 * time.Second}
		c.Jobs.Poll = config.Duration{Duration: 100 * time.Millisecond}
	}
}

func newMailWorld(t testing.TB, s store.Store, mp *mailtest.Server) *mailWorld {
	t.Helper()
	e := apitest.RunOn(t, s, nil, withMail(mp))
	w := &mailWorld{Env: e, mp: mp, tokens: map[string]string{}}
	org := e.Org("acme")
	e.Project("acme", "ACME")
	for person, role := range map[string]string{"alice": "member", "bob": "member", "carol": "admin"} {
		e.Admin(200, "PUT", "/api/v1/orgs/acme/members/"+person, map[string]any{"role": role})
		w.tokens[person] = e.TokenFor(person, org, role)
	}
	return w
}

var confirmLink = regexp.MustCompile(`http://\S+/api/v1/mail/confirm\?t=\S+`)

// confirm enters addr as person's address and opens the confirmation link
// mailed to it.
func (w *mailWorld) confirm(person, addr string) {
	w.T.Helper()
	w.Must(200, w.tokens[person], "PUT", "/api/v1/me/notifications", map[string]any{"email": addr})
	got := w.mp.Wait(w.T, addr, 1, 10*time.Second)
	m := w.mp.Message(w.T, got[0].ID)
	link := confirmLink.FindString(m.Text)
	if link == "" || !strings.Contains(m.Subject, "Confirm") {
		w.T.Fatalf("the confirmation mail %q has no link: %s", m.Subject, m.Text)
	}
	resp, err := http.Get(link) // a page with the button: nothing confirmed yet
	if err != nil || resp.StatusCode != 200 {
		w.T.Fatalf("GET the confirmation page: %v %v", resp, err)
	}
	resp.Body.Close()
	var set notify.Settings
	w.Must(200, w.tokens[person], "GET", "/api/v1/me/notifications", nil).JSON(w.T, &set)
	if set.EmailConfirmed {
		w.T.Fatalf("opening the confirmation page (a GET) confirmed the address")
	}
	resp, err = http.Post(link, "", nil)
	if err != nil || resp.StatusCode != 200 {
		w.T.Fatalf("POST the confirmation link: %v %v", resp, err)
	}
	resp.Body.Close()
	w.Must(200, w.tokens[person], "GET", "/api/v1/me/notifications", nil).JSON(w.T, &set)
	if !set.EmailConfirmed || set.Email == nil || *set.Email != addr || set.EmailSource == nil || *set.EmailSource != notify.SourceEntered {
		w.T.Fatalf("after confirming: %+v", set)
	}
}

func (w *mailWorld) ticket(person, assignee string) string {
	w.T.Helper()
	body := map[string]any{"type": "task", "title": "Pick a database"}
	if assignee != "" {
		body["assignee"] = assignee
	}
	var it struct{ Key, ID string }
	w.Must(201, w.tokens[person], "POST", "/api/v1/projects/ACME/items", body).JSON(w.T, &it)
	return it.Key
}

func (w *mailWorld) ask(person, key, text string) {
	w.T.Helper()
	w.Must(201, w.tokens[person], "POST", "/api/v1/items/"+key+"/questions", map[string]any{"text": text, "blocking": true})
}

// A blocking question reaches its assignee's mailbox: the subject names
// the ticket and the question, the text and HTML parts link straight to
// the answer box, the threading headers tie the ticket's mails together
// (two questions, one thread, each its own Message-ID), and the
// List-Unsubscribe link's POST (no login) turns that cause's mail off:
// the next question is not mailed, only listed in the inbox. Nobody else
// gets mail; every mail is recorded with its event.
func TestABlockingQuestionIsMailedToItsAssignee(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		mp := mailtest.Start(t)
		w := newMailWorld(t, s, mp)
		addr := "bob-" + s.Engine() + "@example.com"
		w.confirm("bob", addr)
		key := w.ticket("alice", "bob")
		w.ask("carol", key, "Which database?")
		got := w.mp.Wait(t, addr, 2, 15*time.Second) // the confirmation, then the question
		m := w.mp.Message(t, got[0].ID)
		if m.Subject != "["+key+"] Question: Which database?" {
			t.Errorf("subject %q", m.Subject)
		}
		link := w.URL + "/items/" + key + "#questions"
		if !strings.Contains(m.Text, link) || !strings.Contains(m.HTML, `href="`+link+`"`) {
			t.Errorf("the mail does not link to %s:\ntext: %s\nhtml: %s", link, m.Text, m.HTML)
		}
		req, _ := http.NewRequest("GET", strings.TrimSuffix(link, "#questions"), nil)
		req.Header.Set("Accept", "text/html") // a browser opening the link: the web UI's page
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("the ticket's page %s: %v %v", link, resp, err)
		} else {
			resp.Body.Close()
		}
		msgID := m.Header("Message-Id")
		if !strings.HasPrefix(msgID, "<n-") || m.Header("References") == "" || m.Header("In-Reply-To") != m.Header("References") {
			t.Errorf("threading headers: Message-ID %q, References %q, In-Reply-To %q", msgID, m.Header("References"), m.Header("In-Reply-To"))
		}
		if m.Header("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" {
			t.Errorf("List-Unsubscribe-Post %q", m.Header("List-Unsubscribe-Post"))
		}

		// A second question on the same ticket: the same thread.
		w.ask("carol", key, "And which version?")
		got = w.mp.Wait(t, addr, 3, 15*time.Second)
		m2 := w.mp.Message(t, got[0].ID)
		if m2.Header("References") != m.Header("References") || m2.Header("Message-Id") == msgID {
			t.Errorf("second mail: References %q (want %q), Message-ID %q (want another than %q)", m2.Header("References"),
				m.Header("References"), m2.Header("Message-Id"), msgID)
		}

		// One-click unsubscribe: a POST to the link, without a login.
		unsub := strings.Trim(m.Header("List-Unsubscribe"), "<>")
		if !strings.HasPrefix(unsub, w.URL+notify.UnsubscribePath+"?t=") {
			t.Fatalf("List-Unsubscribe %q does not point to this Core's %s", unsub, notify.UnsubscribePath)
		}
		resp, err = http.Get(unsub) // the confirmation page changes nothing
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", unsub, resp, err)
		}
		resp.Body.Close()
		tampered := strings.Replace(unsub, "question.opened", "flow.failed", 1)
		if resp, err := http.Post(tampered, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click")); err != nil ||
			resp.StatusCode != 404 {
			t.Errorf("a tampered unsubscribe link: %v %v, want 404", resp, err)
		}
		var set notify.Settings
		w.Must(200, w.tokens["bob"], "GET", "/api/v1/me/notifications", nil).JSON(t, &set)
		if set.Causes[notify.CauseQuestionOpened] != notify.ChoiceMail || set.Causes[notify.CauseFlowFailed] != notify.ChoiceMail {
			t.Fatalf("before the unsubscribe: %v", set.Causes)
		}
		resp, err = http.Post(unsub, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST %s: %v %v", unsub, resp, err)
		}
		resp.Body.Close()
		w.Must(200, w.tokens["bob"], "GET", "/api/v1/me/notifications", nil).JSON(t, &set)
		if set.Causes[notify.CauseQuestionOpened] != notify.ChoiceInbox || set.Causes[notify.CauseFlowFailed] != notify.ChoiceMail {
			t.Errorf("after the unsubscribe: %v, want question.opened inbox (and the rest unchanged)", set.Causes)
		}
		w.ask("carol", key, "Still there?")
		waitFor(t, func() bool { return countEvents(t, s, "notification.created") == 3 })
		waitFor(t, func() bool {
			return countRows(t, s, `SELECT COUNT(*) FROM mail_deliveries WHERE status = 'sent'`) == 2
		})
		if n := len(w.mp.To(t, addr)); n != 3 {
			t.Errorf("%s received %d mails, want 3 (the confirmation and two questions: the third is unsubscribed)", addr, n)
		}
		if n := countEvents(t, s, "notification.mailed"); n != 2 {
			t.Errorf("%d notification.mailed events, want 2", n)
		}
		for _, p := range []string{"alice", "carol"} {
			if n := len(w.mp.To(t, p+"@example.com")); n != 0 {
				t.Errorf("%s got %d mails", p, n)
			}
		}
	})
}

// An entered address that is not confirmed receives its confirmation and
// nothing else: the notification is in the inbox, no delivery is made.
func TestAnUnconfirmedAddressGetsOnlyItsConfirmation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		mp := mailtest.Start(t)
		w := newMailWorld(t, s, mp)
		addr := "alice-" + s.Engine() + "@example.com"
		w.Must(200, w.tokens["alice"], "PUT", "/api/v1/me/notifications", map[string]any{"email": addr})
		key := w.ticket("alice", "")
		w.ask("carol", key, "Which database?")
		waitFor(t, func() bool { return countEvents(t, s, "notification.created") == 1 })
		w.mp.Wait(t, addr, 1, 10*time.Second)
		if n := countRows(t, s, `SELECT COUNT(*) FROM mail_deliveries`); n != 0 {
			t.Errorf("%d deliveries for an unconfirmed address", n)
		}
		got := w.mp.To(t, addr)
		if len(got) != 1 || !strings.Contains(got[0].Subject, "Confirm") {
			t.Errorf("the unconfirmed address received %+v, want its confirmation alone", got)
		}
	})
}

// SMTP down: the delivery is retried with backoff, its failure recorded
// (status retrying, last error, an event) and shown to platform admins;
// once SMTP is back it is delivered, once.
func TestMailIsRetriedUntilSMTPIsBack(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		mp := mailtest.Start(t)
		w := newMailWorld(t, s, mp)
		addr := "bob-" + s.Engine() + "@example.com"
		w.confirm("bob", addr)
		mp.Down()
		key := w.ticket("alice", "bob")
		w.ask("carol", key, "Which database?")
		waitFor(t, func() bool { return countEvents(t, s, "notification.mail_failed") >= 2 })
		var att notify.MailAttention
		w.Admin(200, "GET", "/api/v1/platform/mail", nil).JSON(t, &att)
		if !att.Failing || att.Retrying != 1 || att.LastError == nil || !strings.Contains(*att.LastError, mp.SMTPAddr) {
			t.Errorf("platform mail status while SMTP is down: %+v", att)
		}
		w.Must(403, w.tokens["carol"], "GET", "/api/v1/platform/mail", nil)
		// Needs me tells the platform admins, not an organization's admin.
		if got := channelEntries(w, ""); len(got) != 1 || got[0].Kind != "mail_failing" || got[0].Item != "" ||
			!strings.Contains(got[0].Detail, mp.SMTPAddr) {
			t.Errorf("a platform admin's needs-me while SMTP is down: %+v", got)
		}
		if got := channelEntries(w, w.tokens["carol"]); len(got) != 0 {
			t.Errorf("carol (acme's admin) sees %+v", got)
		}
		if m := string(w.Do("", "GET", "/metrics", nil).Body); !strings.Contains(m, `ballet_notify_mail_failing{status="retrying"} 1`) ||
			!strings.Contains(m, `ballet_notify_mail_attempts_total{result="retrying"}`) {
			t.Errorf("/metrics does not show the failing mail")
		}
		mp.Up()
		waitFor(t, func() bool { return countEvents(t, s, "notification.mailed") == 1 })
		if got := mp.To(t, addr); len(got) != 2 { // the confirmation and the question
			t.Errorf("%s received %d mails, want 2", addr, len(got))
		}
		w.Admin(200, "GET", "/api/v1/platform/mail", nil).JSON(t, &att)
		if att.Failing || att.Sent != 1 {
			t.Errorf("platform mail status once delivered: %+v", att)
		}
		if got := channelEntries(w, ""); len(got) != 0 {
			t.Errorf("a platform admin's needs-me once delivered: %+v", got)
		}
	})
}

// channelEntries are the entries of needs-me no ticket is concerned by
// (token "": the platform admin's).
func channelEntries(w *mailWorld, token string) []needsme.Entry {
	w.T.Helper()
	var l needsme.List
	if token == "" {
		w.Admin(200, "GET", "/api/v1/needs-me", nil).JSON(w.T, &l)
	} else {
		w.Must(200, token, "GET", "/api/v1/needs-me", nil).JSON(w.T, &l)
	}
	var out []needsme.Entry
	for _, e := range l.Items {
		if e.Item == "" {
			out = append(out, e)
		}
	}
	return out
}

// Settings: strict values, each error naming its field; addresses are the
// owner's alone.
func TestSettingsRefuseBadValuesNamingTheField(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		mp := mailtest.Start(t)
		w := newMailWorld(t, s, mp)
		tok := w.tokens["alice"]
		for body, field := range map[string]string{
			`{"causes": {"thing.happened": "mail"}}`:  "causes.thing.happened",
			`{"causes": {"question.opened": "loud"}}`: "causes.question.opened",
			`{"time_zone": "Mars/Olympus"}`:           "time_zone",
			`{"digest_hour": 24}`:                     "digest_hour",
			`{"digest_hour": -1}`:                     "digest_hour",
			`{"digest": "daily"}`:                     "digest",
			`{"email": "not an address"}`:             "email",
			`{"email": "Ada <ada@example.com>"}`:      "email",
			`{"colour": "blue"}`:                      "colour",
		} {
			r := w.Raw(tok, "PUT", "/api/v1/me/notifications", "application/json", []byte(body))
			if r.Status != 400 || !strings.Contains(string(r.Body), field) {
				t.Errorf("%s: %d %s, want 400 naming %s", body, r.Status, r.Body, field)
			}
		}
		var set notify.Settings
		w.Must(200, tok, "PUT", "/api/v1/me/notifications", map[string]any{"digest": "weekly", "digest_hour": 7,
			"time_zone": "Europe/Paris", "causes": map[string]string{"ticket.done": "mail", "flow.failed": "off"}}).JSON(t, &set)
		if set.Digest != "weekly" || set.DigestHour == nil || *set.DigestHour != 7 || set.TimeZone != "Europe/Paris" ||
			set.Causes["ticket.done"] != "mail" || set.Causes["flow.failed"] != "off" || set.Causes["question.opened"] != "mail" {
			t.Errorf("after PUT: %+v", set)
		}
		w.Must(200, tok, "PUT", "/api/v1/me/notifications", map[string]any{"digest_hour": nil}).JSON(t, &set)
		if set.DigestHour != nil || set.Digest != "weekly" {
			t.Errorf("digest_hour null clears it alone: %+v", set)
		}
		// Nothing about alice's settings, her address least of all, is
		// in any other answer or event.
		w.Must(200, tok, "PUT", "/api/v1/me/notifications", map[string]any{"email": "secret-alice@example.com"})
		var bobs notify.Settings
		w.Must(200, w.tokens["bob"], "GET", "/api/v1/me/notifications", nil).JSON(t, &bobs)
		if bobs.Email != nil {
			t.Errorf("bob sees an address: %+v", bobs)
		}
		if n := countRows(t, s, `SELECT COUNT(*) FROM events WHERE payload LIKE '%secret-alice%'`); n != 0 {
			t.Errorf("%d events hold alice's address", n)
		}
		if r := w.Admin(200, "GET", "/api/v1/platform/events", nil); strings.Contains(string(r.Body), "secret-alice") {
			t.Errorf("the event history shows alice's address")
		}
	})
}

// waitFor polls cond (a real Core works at its own pace) for up to 20 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A recipient the SMTP server refuses (a 5xx) fails at once, without
// retries: the delivery is failed, its event final, and platform admins
// see it.
func TestARefusedMailFailsAtOnceAndIsShown(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s store.Store) {
		mp := mailtest.StartWith(t, "--smtp-allowed-recipients", `@example\.com$`)
		w := newMailWorld(t, s, mp)
		// bob's address comes from his identity provider (a verified claim).
		if err := w.Core.NotifySettings.RecordVerifiedEmail(context.Background(), "bob", "bob@elsewhere.org"); err != nil {
			t.Fatal(err)
		}
		key := w.ticket("alice", "bob")
		w.ask("carol", key, "Which database?")
		waitFor(t, func() bool {
			return countRows(t, s, `SELECT COUNT(*) FROM mail_deliveries WHERE status = 'failed'`) == 1
		})
		if n := countEvents(t, s, "notification.mail_failed"); n != 1 {
			t.Errorf("%d mail_failed events, want 1 (no retry)", n)
		}
		if n := countRows(t, s, `SELECT COUNT(*) FROM events WHERE type = 'notification.mail_failed' AND payload LIKE '%"final":true%'`); n != 1 {
			t.Errorf("the failure is not final")
		}
		var att notify.MailAttention
		w.Admin(200, "GET", "/api/v1/platform/mail", nil).JSON(t, &att)
		if att.Failed != 1 || att.LastError == nil {
			t.Errorf("platform mail status: %+v", att)
		}
	})
}
