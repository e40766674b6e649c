package rqlitetest

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func TestBinaryOverride(t *testing.T) {
	t.Setenv("BALLET_RQLITED", "/nonexistent/rqlited")
	t.Setenv("CI", "")
	ok := t.Run("missing", func(t *testing.T) {
		Binary(t)
		t.Error("Binary did not skip for a missing binary")
	})
	if !ok {
		t.Fatal("subtest failed")
	}
}
