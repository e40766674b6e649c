// Package mailtest starts a real SMTP server for tests: Mailpit
// (scripts/mailpit.sh builds it), on 127.0.0.1 and random ports, and
// reads the messages it received through its REST API. A test that needs
// it fails under CI=true when the binary is missing (package parts).
package mailtest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/procgroup"
	"github.com/ballet/ballet/internal/testkit/parts"
)

// Version is the Mailpit scripts/mailpit.sh builds.
const Version = "v1.33.1"

// SkipEnv is the variable a developer sets to 1 to skip the tests that
// need Mailpit.
const SkipEnv = "BALLET_SKIP_MAILPIT"

// Binary returns Mailpit's path: $BALLET_MAILPIT, else
// ${XDG_CACHE_HOME:-~/.cache}/ballet/bin/mailpit-v1.33.1.
func Binary(t testing.TB) string {
	t.Helper()
	parts.Asked(t, parts.Mailpit, SkipEnv)
	path := os.Getenv("BALLET_MAILPIT")
	if path == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				t.Fatalf("mailtest: find home folder: %v", err)
			}
			cache = filepath.Join(home, ".cache")
		}
		path = filepath.Join(cache, "ballet", "bin", "mailpit-"+Version)
	}
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		parts.Missing(t, parts.Mailpit, fmt.Errorf("mailtest: mailpit %s not found at %s: build it with scripts/mailpit.sh "+
			"(go install github.com/axllent/mailpit@%s) or set BALLET_MAILPIT; %s=1 skips the tests that need it", Version, path, Version, SkipEnv))
	}
	return path
}

// Server is one Mailpit process.
type Server struct {
	SMTPAddr string // 127.0.0.1:port
	APIURL   string // http://127.0.0.1:port

	t   testing.TB
	bin string
	db  string
	mu  sync.Mutex
	cmd *exec.Cmd
	end chan struct{}
	// args are Mailpit flags of the test's own (StartWith).
	args []string
}

// Start starts Mailpit for the test; it stops when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t)
}

// StartWith is Start with more Mailpit flags, e.g.
// "--smtp-allowed-recipients", "@example\\.com$" (any other recipient is
// refused with a 550).
func StartWith(t testing.TB, args ...string) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), SMTPAddr: freeAddr(t), db: filepath.Join(t.TempDir(), "mailpit.db"), args: args}
	s.APIURL = "http://" + freeAddr(t)
	s.Up()
	t.Cleanup(s.Down)
	return s
}

// SMTPURL is the server's [notify.email] smtp_url.
func (s *Server) SMTPURL() string { return "smtp://" + s.SMTPAddr }

// Up starts the server (again, on the same ports and database) and waits
// until its API answers.
func (s *Server) Up() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	ui := strings.TrimPrefix(s.APIURL, "http://")
	args := append([]string{"--smtp", s.SMTPAddr, "--listen", ui, "--database", s.db, "--disable-version-check",
		"--smtp-auth-accept-any", "--smtp-auth-allow-insecure", "--smtp-disable-rdns", "--quiet", "--max", "100000"}, s.args...)
	cmd := exec.Command(s.bin, args...)
	log, err := os.OpenFile(filepath.Join(filepath.Dir(s.db), "mailpit.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	procgroup.Own(cmd, syscall.SIGKILL)
	if err := cmd.Start(); err != nil {
		log.Close()
		s.t.Fatalf("mailtest: start mailpit: %v", err)
	}
	end := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(end) }()
	s.cmd, s.end = cmd, end
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.APIURL + "/api/v1/info")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				if c, err := net.DialTimeout("tcp", s.SMTPAddr, time.Second); err == nil {
					c.Close()
					return
				}
			}
		}
		select {
		case <-end:
			b, _ := os.ReadFile(filepath.Join(filepath.Dir(s.db), "mailpit.log"))
			s.t.Fatalf("mailtest: mailpit exited at start: %s", b)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("mailtest: mailpit did not answer on %s within 30s", s.APIURL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Down stops the server (SMTP refuses connections until Up).
func (s *Server) Down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	procgroup.Kill(s.cmd)
	<-s.end
	s.cmd = nil
}

// Address is a mailbox of a message.
type Address struct {
	Name    string `json:"Name"`
	Address string `json:"Address"`
}

// Summary is a message as Mailpit lists it.
type Summary struct {
	ID        string    `json:"ID"`
	MessageID string    `json:"MessageID"`
	From      Address   `json:"From"`
	To        []Address `json:"To"`
	Subject   string    `json:"Subject"`
	Created   time.Time `json:"Created"` // when Mailpit received it
}

// Message is one message with its parts and headers.
type Message struct {
	Summary
	Text    string              `json:"Text"`
	HTML    string              `json:"HTML"`
	Headers map[string][]string `json:"-"`
}

func (s *Server) get(path string, v any) error {
	resp, err := http.Get(s.APIURL + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Messages lists the messages received, newest first.
func (s *Server) Messages(t testing.TB) []Summary {
	t.Helper()
	var out struct {
		Messages []Summary `json:"messages"`
	}
	if err := s.get("/api/v1/messages?limit=100000", &out); err != nil {
		t.Fatalf("mailtest: list messages: %v", err)
	}
	return out.Messages
}

// To lists the messages received for addr, newest first.
func (s *Server) To(t testing.TB, addr string) []Summary {
	t.Helper()
	var out []Summary
	for _, m := range s.Messages(t) {
		for _, a := range m.To {
			if strings.EqualFold(a.Address, addr) {
				out = append(out, m)
			}
		}
	}
	return out
}

// Wait waits (up to timeout) until addr received at least n messages, and
// returns them, newest first.
func (s *Server) Wait(t testing.TB, addr string, n int, timeout time.Duration) []Summary {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := s.To(t, addr)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("mailtest: %s received %d messages within %s, want %d", addr, len(got), timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Message reads one message, its parts and its headers.
func (s *Server) Message(t testing.TB, id string) Message {
	t.Helper()
	var m Message
	if err := s.get("/api/v1/message/"+url.PathEscape(id), &m); err != nil {
		t.Fatalf("mailtest: read message %s: %v", id, err)
	}
	if err := s.get("/api/v1/message/"+url.PathEscape(id)+"/headers", &m.Headers); err != nil {
		t.Fatalf("mailtest: read the headers of message %s: %v", id, err)
	}
	return m
}

// Header is a message's first value of header name ("" when none).
func (m Message) Header(name string) string {
	for k, v := range m.Headers {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// freeAddr is a 127.0.0.1 address with a port free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
