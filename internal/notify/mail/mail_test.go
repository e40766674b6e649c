package mail_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/notify/mail"
	"github.com/ballet/ballet/internal/testkit/mailtest"
)

// A message reaches a real SMTP server (Mailpit) with its text and HTML
// parts, its Message-ID, References and In-Reply-To, and RFC 8058's
// one-click unsubscribe headers.
func TestSendReachesMailpitWithEveryHeader(t *testing.T) {
	mp := mailtest.Start(t)
	s, err := mail.New(config.NotifyEmail{SMTPURL: mp.SMTPURL(), From: "Ballet <ballet@example.com>", Timeout: config.Duration{Duration: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Send(context.Background(), mail.Message{To: "ada@example.com", Subject: "[ACME-7] Question: Which database?",
		Text: "plain words", HTML: "<p>html words</p>", MessageID: "n-1.t-9@ballet.example.com",
		References: []string{"t-9@ballet.example.com"}, Unsubscribe: "https://ballet.example.com/notify/unsubscribe?t=x"})
	if err != nil {
		t.Fatal(err)
	}
	got := mp.Wait(t, "ada@example.com", 1, 10*time.Second)
	m := mp.Message(t, got[0].ID)
	if m.Subject != "[ACME-7] Question: Which database?" || m.From.Address != "ballet@example.com" {
		t.Errorf("subject %q from %q", m.Subject, m.From.Address)
	}
	if !strings.Contains(m.Text, "plain words") || !strings.Contains(m.HTML, "<p>html words</p>") {
		t.Errorf("text %q, html %q: want both parts", m.Text, m.HTML)
	}
	for h, want := range map[string]string{
		"Message-Id":            "<n-1.t-9@ballet.example.com>",
		"References":            "<t-9@ballet.example.com>",
		"In-Reply-To":           "<t-9@ballet.example.com>",
		"List-Unsubscribe":      "<https://ballet.example.com/notify/unsubscribe?t=x>",
		"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
	} {
		if got := m.Header(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
}

// A server that is down is a temporary failure (retried), naming where.
func TestSendToAServerDownIsTemporary(t *testing.T) {
	mp := mailtest.Start(t)
	mp.Down()
	s, err := mail.New(config.NotifyEmail{SMTPURL: mp.SMTPURL(), From: "ballet@example.com", Timeout: config.Duration{Duration: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Send(context.Background(), mail.Message{To: "ada@example.com", Subject: "s", Text: "t"})
	if err == nil || !mail.Temporary(err) || !strings.Contains(err.Error(), mp.SMTPAddr) {
		t.Fatalf("send to a server down: %v (temporary %v), want a temporary error naming %s", err, mail.Temporary(err), mp.SMTPAddr)
	}
}

// An invalid smtp_url is refused with its key's name.
func TestNewNamesTheKeyOfABadURL(t *testing.T) {
	for _, u := range []string{"http://mail.example.com", "smtp://user:pw@mail.example.com", "smtp://", "smtp://mail.example.com:99999", "smtp://h/x"} {
		_, err := mail.New(config.NotifyEmail{SMTPURL: u, From: "ballet@example.com"})
		if err == nil || !strings.HasPrefix(err.Error(), "notify.email.smtp_url: ") || strings.Contains(err.Error(), "pw") {
			t.Errorf("smtp_url %q: %v, want an error naming notify.email.smtp_url (and no password)", u, err)
		}
	}
}

// A recipient the server refuses (a 5xx) is a permanent failure with its
// code: no retry can change it.
func TestARefusedRecipientIsPermanent(t *testing.T) {
	mp := mailtest.StartWith(t, "--smtp-allowed-recipients", `@example\.com$`)
	s, err := mail.New(config.NotifyEmail{SMTPURL: mp.SMTPURL(), From: "ballet@example.com", Timeout: config.Duration{Duration: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Send(context.Background(), mail.Message{To: "ada@elsewhere.org", Subject: "s", Text: "t"})
	if err == nil || mail.Temporary(err) || mail.Code(err) < 500 {
		t.Fatalf("a refused recipient: %v (temporary %v, code %d), want a permanent 5xx", err, mail.Temporary(err), mail.Code(err))
	}
	if err := s.Send(context.Background(), mail.Message{To: "ada@example.com", Subject: "s", Text: "t"}); err != nil {
		t.Fatalf("an allowed recipient: %v", err)
	}
}
