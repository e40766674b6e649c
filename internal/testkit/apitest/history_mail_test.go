package apitest_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/mailtest"
)

// withMail makes Core mail through mp (its links point at the Core:
// apitest sets base_url), retrying after at most a second.
func withMail(mp *mailtest.Server) func(*config.Config) {
	return func(c *config.Config) {
		c.Notify.Email.SMTPURL, c.Notify.Email.From = mp.SMTPURL(), "ballet@example.com"
		c.Notify.Email.Timeout = config.Duration{Duration: 2 * time.Second}
		c.Jobs.BackoffCap = config.Duration{Duration: time.Second}
	}
}

// writeMailEvents writes the mail's events: an address entered and
// confirmed (the link key made once), a question mailed, and a question
// whose mail fails while SMTP is down and is skipped once SMTP is back,
// its recipient having left the project meanwhile.
func writeMailEvents(t *testing.T, w *flowWorld, mp *mailtest.Server) {
	t.Helper()
	ctx := context.Background()
	var acme struct{ ID string }
	w.Admin(200, "GET", "/api/v1/orgs/acme", nil).JSON(t, &acme)
	w.Admin(200, "PUT", "/api/v1/orgs/acme/members/mia", map[string]any{"role": "member"})
	mia := w.TokenFor("mia", acme.ID, "member")
	w.Must(200, mia, "PUT", "/api/v1/me/notifications", map[string]any{"email": "mia@example.com"})
	got := mp.Wait(t, "mia@example.com", 1, 10*time.Second)
	link := confirmLinkRE.FindString(mp.Message(t, got[0].ID).Text)
	if resp, err := http.Post(link, "", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("confirm mia's address (%q): %v %v", link, resp, err)
	}
	ask := func() {
		var it struct{ Key string }
		w.Admin(201, "POST", "/api/v1/projects/ACME/items", map[string]any{"type": "task", "title": "mail me", "assignee": "mia"}).JSON(t, &it)
		w.Admin(201, "POST", "/api/v1/items/"+it.Key+"/questions", map[string]any{"text": "Which?", "blocking": true})
		if _, err := w.Core.Notifier.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ask()
	mp.Wait(t, "mia@example.com", 2, 10*time.Second)
	// The mail is in the box before the sender has its answer to QUIT and
	// records notification.mailed: stopping the server before that fails
	// the delivery.
	apitest.Await(t, "a mailed notification", func() bool { return countType(t, w.Store, "notification.mailed") > 0 })
	mp.Down()
	ask()
	apitest.Await(t, "a failed mail", func() bool { return countType(t, w.Store, "notification.mail_failed") > 0 })
	w.Admin(204, "DELETE", "/api/v1/orgs/acme/members/mia", nil)
	mp.Up()
	apitest.Await(t, "a skipped mail", func() bool { return countType(t, w.Store, "notification.mail_skipped") > 0 })
}

func countType(t *testing.T, s store.Store, typ string) int64 {
	t.Helper()
	rows, err := s.Query(context.Background(), `SELECT COUNT(*) FROM events WHERE type = ?`, typ)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := rows.Scan(0, &n); err != nil {
		t.Fatal(err)
	}
	return n
}
