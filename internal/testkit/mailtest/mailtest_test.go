package mailtest

import (
	"fmt"
	"net/smtp"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/testkit/parts"
)

// end records how Binary ended a test.
type end struct {
	testing.TB
	fatal, skip string
}

func (e *end) Helper()      {}
func (e *end) Name() string { return "TestSomething" }
func (e *end) Fatalf(format string, args ...any) {
	e.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (e *end) Skipf(format string, args ...any) {
	e.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// A missing Mailpit fails the test under CI=true, saying how to get it,
// and is a skip elsewhere; BALLET_SKIP_MAILPIT=1 skips.
func TestAMissingMailpitFailsUnderCI(t *testing.T) {
	parts.Aside(t)
	for _, c := range []struct{ ci, skip, wantFatal, wantSkip string }{
		{ci: "true", wantFatal: "scripts/mailpit.sh"},
		{ci: "", wantSkip: "scripts/mailpit.sh"},
		{ci: "true", skip: "1", wantSkip: SkipEnv + "=1"},
	} {
		t.Setenv("CI", c.ci)
		t.Setenv(SkipEnv, c.skip)
		t.Setenv("BALLET_MAILPIT", filepath.Join(t.TempDir(), "no-mailpit"))
		e := &end{}
		done := make(chan struct{})
		go func() { defer close(done); Binary(e) }()
		<-done
		if c.wantFatal != "" && !strings.Contains(e.fatal, c.wantFatal) || c.wantSkip != "" && !strings.Contains(e.skip, c.wantSkip) {
			t.Errorf("CI=%q skip=%q: fatal %q, skip %q", c.ci, c.skip, e.fatal, e.skip)
		}
	}
}

// Mailpit starts, takes mail on its SMTP port and lists it; Down refuses
// connections and Up serves again with what it had.
func TestStartDownUp(t *testing.T) {
	s := Start(t)
	if got := s.Messages(t); len(got) != 0 {
		t.Fatalf("a new Mailpit lists %d messages", len(got))
	}
	send := func() error {
		return smtp.SendMail(s.SMTPAddr, nil, "a@example.com", []string{"b@example.com"},
			[]byte("From: a@example.com\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nbody\r\n"))
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	s.Down()
	if err := send(); err == nil {
		t.Fatal("Mailpit down took mail")
	}
	s.Up()
	got := s.Wait(t, "b@example.com", 1, 10*time.Second)
	if m := s.Message(t, got[0].ID); m.Subject != "hi" || !strings.Contains(m.Text, "body") {
		t.Errorf("after a restart: %+v", m)
	}
}
