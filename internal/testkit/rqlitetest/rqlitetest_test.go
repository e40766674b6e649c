package rqlitetest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/testkit/parts"
)

func TestSingleNode(t *testing.T) {
	t.Parallel()
	c := Start(t, 1)
	if len(c.Nodes) != 1 || len(c.URLs()) != 1 || !strings.HasPrefix(c.URLs()[0], "http://127.0.0.1:") {
		t.Fatalf("nodes %+v urls %v", c.Nodes, c.URLs())
	}
	if l := c.Leader(t); l != c.Nodes[0] {
		t.Fatalf("leader %s, want n1", l.ID)
	}
	status, _, err := get(c.Nodes[0].URL + "/readyz")
	if err != nil || status != http.StatusOK {
		t.Fatalf("readyz: %d %v", status, err)
	}
	if _, err := os.Stat(filepath.Join(c.Nodes[0].DataDir, "rqlited.log")); err != nil {
		t.Fatalf("no log file: %v", err)
	}
}

func TestThreeNodesKillRestart(t *testing.T) {
	t.Parallel()
	c := Start(t, 3)
	seen := map[string]bool{}
	for _, nd := range c.Nodes {
		if seen[nd.HTTPAddr] || seen[nd.RaftAddr] {
			t.Fatalf("address reused: %+v", c.Nodes)
		}
		seen[nd.HTTPAddr], seen[nd.RaftAddr] = true, true
	}
	old := c.Leader(t)
	c.Kill(t, old)
	if _, _, err := get(old.URL + "/readyz"); err == nil {
		t.Fatalf("killed node %s still answers", old.ID)
	}
	l := c.Leader(t)
	if l == old {
		t.Fatalf("leader is still the killed node %s", old.ID)
	}
	c.Restart(t, old)
	c.WaitReady(t)
	if got := c.Leader(t); got == nil {
		t.Fatal("no leader after restart")
	}
	// The restarted node rejoined with its old state and knows the leader.
	id, err := leaderOf(old)
	if err != nil || id == "" {
		t.Fatalf("restarted node knows no leader: %q %v", id, err)
	}
}

// TestBinaryFailsUnlessSkipAsked: a missing rqlited fails the test under
// CI=true and skips it elsewhere (counted, package parts);
// BALLET_SKIP_RQLITE=1 skips, and then even when the binary exists.
func TestBinaryFailsUnlessSkipAsked(t *testing.T) {
	parts.Aside(t) // the skips below are provoked, not missing parts
	present := filepath.Join(t.TempDir(), "rqlited")
	if err := os.WriteFile(present, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bin, skipEnv, ci string
		path             string // returned
		fatal, skipped   string // substrings of the message, "" if none
	}{
		{bin: "/nonexistent/rqlited", ci: "true", fatal: "not found at /nonexistent/rqlited"},
		{bin: "/nonexistent/rqlited", skipEnv: "0", ci: "true", fatal: "BALLET_SKIP_RQLITE=1 skips"},
		{bin: "/nonexistent/rqlited", skipped: "not found at /nonexistent/rqlited"},
		{bin: "/nonexistent/rqlited", skipEnv: "1", skipped: "BALLET_SKIP_RQLITE=1"},
		{bin: present, skipEnv: "1", skipped: "the tests that need rqlited are skipped"},
		{bin: present, path: present},
		{bin: present, skipEnv: "yes", fatal: `BALLET_SKIP_RQLITE="yes": set it to 1`},
	} {
		t.Setenv("BALLET_RQLITED", c.bin)
		t.Setenv(SkipEnv, c.skipEnv)
		t.Setenv("CI", c.ci)
		path, o := binary(t)
		if path != c.path || !has(o.fatal, c.fatal) || !has(o.skipped, c.skipped) {
			t.Errorf("%s with %s=%q: path %q, fatal %q, skipped %q; want path %q, fatal ~%q, skipped ~%q",
				c.bin, SkipEnv, c.skipEnv, path, o.fatal, o.skipped, c.path, c.fatal, c.skipped)
		}
	}
}

// has reports whether msg contains want, or both are empty.
func has(msg, want string) bool {
	if want == "" {
		return msg == ""
	}
	return strings.Contains(msg, want)
}

// outcome is a testing.TB that records how Binary ended the test.
type outcome struct {
	testing.TB
	fatal, skipped string
}

func (o *outcome) Helper() {}

func (o *outcome) Fatalf(format string, args ...any) {
	o.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (o *outcome) Skipf(format string, args ...any) {
	o.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// binary runs Binary on an outcome, in a goroutine that Fatalf and Skipf
// end as the testing package would.
func binary(t *testing.T) (path string, o *outcome) {
	o = &outcome{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		path = Binary(o)
	}()
	<-done
	return path, o
}
