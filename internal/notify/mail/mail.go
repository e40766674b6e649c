// Package mail sends Ballet's mail over SMTP (github.com/wneessen/go-mail):
// one message a call, with a text and an HTML part, threading headers
// (Message-ID, References, In-Reply-To) and RFC 8058 one-click unsubscribe
// (List-Unsubscribe, List-Unsubscribe-Post). It knows nothing of
// notifications: its callers (the notifier's deliveries, the digest)
// decide what to say and to whom.
package mail

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/secret"
)

// Message is one mail. MessageID and References are bare ids
// (left@right, without angle brackets); the last of References is also
// the In-Reply-To. Unsubscribe, when set, is the https link whose POST
// turns this kind of mail off (RFC 8058).
type Message struct {
	To         string
	Subject    string
	Text       string
	HTML       string
	MessageID  string
	References []string
	// Unsubscribe is the one-click unsubscribe link ("": none).
	Unsubscribe string
}

// Sender sends messages to one SMTP server. Its zero value is unusable:
// build it with New. Safe for concurrent use: each Send opens its own
// connection.
type Sender struct {
	host      string
	port      int
	tls       bool // smtps: TLS from the start
	from      string
	username  string
	password  string // the secret reference, resolved at every Send
	timeout   time.Duration
	lookupEnv func(string) (string, bool)
}

// New returns the sender of the [notify.email] configuration e (checked:
// the error names the key).
func New(e config.NotifyEmail) (*Sender, error) {
	if err := config.CheckSMTPURL(e.SMTPURL); err != nil {
		return nil, fmt.Errorf("notify.email.smtp_url: %w", err)
	}
	u, _ := url.Parse(e.SMTPURL) // checked
	s := &Sender{host: u.Hostname(), tls: u.Scheme == "smtps", from: e.From, username: e.Username, password: e.PasswordRef,
		timeout: e.Timeout.Duration, lookupEnv: os.LookupEnv}
	s.port = 587
	if s.tls {
		s.port = 465
	}
	if p := u.Port(); p != "" {
		s.port, _ = strconv.Atoi(p) // checked
	}
	if s.timeout <= 0 {
		s.timeout = 30 * time.Second
	}
	if e.From == "" {
		return nil, errors.New("notify.email.from: must be set")
	}
	if e.PasswordRef != "" {
		if _, err := secret.Parse(e.PasswordRef); err != nil {
			return nil, fmt.Errorf("notify.email.password_ref: %w", err)
		}
	}
	return s, nil
}

// Send sends m. Its error says whether a retry may succeed (Temporary)
// and the server's reply code (Code); it never holds the password.
func (s *Sender) Send(ctx context.Context, m Message) error {
	msg, err := s.build(m)
	if err != nil {
		return err
	}
	opts := []gomail.Option{gomail.WithPort(s.port), gomail.WithTimeout(s.timeout)}
	if s.tls {
		opts = append(opts, gomail.WithSSL())
	} else {
		opts = append(opts, gomail.WithTLSPortPolicy(gomail.TLSOpportunistic))
	}
	if s.username != "" {
		pw, err := s.resolvePassword()
		if err != nil {
			return err
		}
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover), gomail.WithUsername(s.username), gomail.WithPassword(pw))
	}
	c, err := gomail.NewClient(s.host, opts...)
	if err != nil {
		return fmt.Errorf("smtp client for %s:%d: %w", s.host, s.port, err)
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return &SendError{Host: s.host, Port: s.port, err: err}
	}
	return nil
}

// build is the message m as go-mail writes it.
func (s *Sender) build(m Message) (*gomail.Msg, error) {
	msg := gomail.NewMsg()
	if err := msg.From(s.from); err != nil {
		return nil, fmt.Errorf("notify.email.from: %w", err)
	}
	if err := msg.To(m.To); err != nil {
		return nil, &SendError{err: fmt.Errorf("recipient %q: %w", m.To, err), permanent: true}
	}
	msg.Subject(m.Subject)
	msg.SetDate()
	if m.MessageID != "" {
		msg.SetMessageIDWithValue(m.MessageID)
	} else {
		msg.SetMessageID()
	}
	if len(m.References) > 0 {
		refs := make([]string, len(m.References))
		for i, r := range m.References {
			refs[i] = "<" + r + ">"
		}
		msg.SetGenHeaderPreformatted(gomail.HeaderReferences, strings.Join(refs, " "))
		msg.SetGenHeaderPreformatted(gomail.HeaderInReplyTo, refs[len(refs)-1])
	}
	if m.Unsubscribe != "" {
		msg.SetGenHeaderPreformatted(gomail.HeaderListUnsubscribe, "<"+m.Unsubscribe+">")
		msg.SetGenHeaderPreformatted(gomail.HeaderListUnsubscribePost, "List-Unsubscribe=One-Click")
	}
	msg.SetGenHeader(gomail.HeaderXAutoResponseSuppress, "All")
	msg.SetGenHeader(gomail.Header("Auto-Submitted"), "auto-generated")
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	return msg, nil
}

// resolvePassword reads the password reference (env:NAME or file:/path).
func (s *Sender) resolvePassword() (string, error) {
	r, err := secret.Parse(s.password)
	if err != nil {
		return "", fmt.Errorf("notify.email.password_ref: %w", err)
	}
	var v string
	switch r.Scheme {
	case secret.SchemeEnv:
		v, _ = s.lookupEnv(r.Name)
	case secret.SchemeFile:
		b, err := readBounded(r.Name)
		if err != nil {
			return "", fmt.Errorf("notify.email.password_ref %s: %w", r, err)
		}
		v = strings.TrimRight(string(b), "\r\n")
	}
	if v == "" {
		return "", fmt.Errorf("notify.email.password_ref %s: %w", r, secret.ErrMissing)
	}
	return v, nil
}

func readBounded(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, errors.New("cannot be read") // the path is in the reference; the OS's words add nothing secret but are kept out
	}
	defer f.Close()
	b := make([]byte, secret.MaxFile+1)
	n, _ := f.Read(b)
	if n > secret.MaxFile {
		return nil, fmt.Errorf("is over %d bytes", secret.MaxFile)
	}
	return b[:n], nil
}

// SendError is a failed Send: the server refused or could not be reached.
type SendError struct {
	Host      string
	Port      int
	err       error
	permanent bool
}

func (e *SendError) Error() string {
	if e.Host == "" {
		return e.err.Error()
	}
	return fmt.Sprintf("smtp %s:%d: %v", e.Host, e.Port, e.err)
}

func (e *SendError) Unwrap() error { return e.err }

// Temporary tells whether a retry may succeed: a server that could not be
// reached, or a 4xx reply. A 5xx reply (a refused recipient) is not.
func Temporary(err error) bool {
	var se *SendError
	if errors.As(err, &se) && se.permanent {
		return false
	}
	var ge *gomail.SendError
	if errors.As(err, &ge) {
		if c := ge.ErrorCode(); c >= 500 && c < 600 {
			return false
		}
	}
	return true
}

// Code is the SMTP reply code of a refusal (0: none, the server was not
// reached).
func Code(err error) int {
	var ge *gomail.SendError
	if errors.As(err, &ge) {
		return ge.ErrorCode()
	}
	return 0
}
