package config

import (
	"fmt"
	"net/mail"
	"net/url"
	"strconv"
	"time"

	"github.com/ballet/ballet/internal/secret"
)

// Notify configures how Ballet reaches people (docs/notifications.md).
type Notify struct {
	// BaseURL is where the links of mails point: Ballet's address as its
	// people open it (https://ballet.example.com). Required for mail.
	BaseURL string      `toml:"base_url"`
	Email   NotifyEmail `toml:"email"`
	// AllowPrivateTargets lets webhooks reach loopback, private,
	// link-local and metadata addresses (false): for on-premises receivers
	// and tests only, as it opens the door to server-side request forgery.
	AllowPrivateTargets bool `toml:"allow_private_targets"`
	// WebhookTimeout bounds one webhook delivery attempt (10s): connecting,
	// sending, and the answer.
	WebhookTimeout Duration `toml:"webhook_timeout"`
	// EscalateAfter: a blocking question or an approval still open this
	// long is escalated to the project's admins (4h; 1m … 720h; a project
	// may set its own).
	EscalateAfter Duration `toml:"escalate_after"`
}

// NotifyEmail configures mail over SMTP. Mail is off while SMTPURL is
// empty (the default): notifications stay in the inbox.
type NotifyEmail struct {
	// SMTPURL is the SMTP server: smtp://host:port (STARTTLS when the
	// server offers it; port 587 by default) or smtps://host:port (TLS
	// from the start; 465 by default). No credentials in it.
	SMTPURL string `toml:"smtp_url"`
	// From is the sender's address, "Ballet <ballet@example.com>" or a
	// bare address.
	From string `toml:"from"`
	// Username and PasswordRef authenticate to the server (both or
	// neither); PasswordRef is a secret reference (env:NAME or
	// file:/path), read at every connection, never the password itself.
	Username    string `toml:"username"`
	PasswordRef string `toml:"password_ref"`
	// Timeout bounds one connection to the server (30s).
	Timeout Duration `toml:"timeout"`
}

// MailOn tells whether mail is configured.
func (n Notify) MailOn() bool { return n.Email.SMTPURL != "" }

func (n Notify) validate(p *problems) {
	if d := n.EscalateAfter.Duration; d < time.Minute || d > 720*time.Hour {
		p.bad("escalate_after", "%s is outside 1m … 720h", n.EscalateAfter)
	}
	if d := n.WebhookTimeout.Duration; d < 100*time.Millisecond || d > time.Minute {
		p.bad("webhook_timeout", "%s is outside 100ms … 1m", n.WebhookTimeout)
	}
	if n.BaseURL != "" {
		if u, err := url.Parse(n.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			p.bad("base_url", "%q is not an absolute http(s) URL such as https://ballet.example.com", n.BaseURL)
		}
	}
	e := n.Email
	if e.SMTPURL == "" {
		return
	}
	if n.BaseURL == "" {
		p.bad("base_url", "must be set when notify.email.smtp_url is: the links of mails point there")
	}
	if err := CheckSMTPURL(e.SMTPURL); err != nil {
		p.bad("email.smtp_url", "%v", err)
	}
	if e.From == "" {
		p.bad("email.from", "must be set when notify.email.smtp_url is")
	} else if _, err := mail.ParseAddress(e.From); err != nil {
		p.bad("email.from", "%q is not an address such as \"Ballet <ballet@example.com>\": %v", e.From, err)
	}
	if (e.Username == "") != (e.PasswordRef == "") {
		p.bad("email.password_ref", "username and password_ref go together: set both or neither")
	}
	if e.PasswordRef != "" {
		if _, err := secret.Parse(e.PasswordRef); err != nil {
			p.bad("email.password_ref", "%v", err)
		}
	}
	if e.Timeout.Duration <= 0 {
		p.bad("email.timeout", "must be a positive duration")
	}
}

// CheckSMTPURL checks an SMTP server's URL: smtp:// or smtps://, a host,
// an optional port, nothing else.
func CheckSMTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL such as smtp://mail.example.com:587", s)
	}
	if u.Scheme != "smtp" && u.Scheme != "smtps" {
		return fmt.Errorf("%q: the scheme must be smtp (STARTTLS when offered) or smtps (TLS), not %q", s, u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("%q holds credentials: use notify.email.username and password_ref", redactUser(u))
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q names no host", s)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: only scheme://host:port, no path or query", s)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: the port must be 1–65535", s)
		}
	}
	return nil
}

func redactUser(u *url.URL) string {
	c := *u
	c.User = url.User("…")
	return c.String()
}
