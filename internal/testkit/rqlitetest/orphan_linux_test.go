package rqlitetest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/testkit/orphan"
)

// orphanEnv makes this test binary a process that starts a node, prints
// its pid, and waits to be killed (TestMain).
const orphanEnv = "RQLITETEST_ORPHAN_ROOT"

func TestMain(m *testing.M) {
	if root := os.Getenv(orphanEnv); root != "" {
		c, err := Launch(os.Getenv("BALLET_RQLITED"), root, 1)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(c.Nodes[0].cmd.Process.Pid)
		time.Sleep(2 * time.Minute) // a hang guard: the test kills this process long before
		c.Stop()
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestNodesDieWithTheirTest: a test binary killed outright (by go test's
// -timeout, or a mutation run's) runs no cleanup; its rqlited nodes must
// not outlive it.
func TestNodesDieWithTheirTest(t *testing.T) {
	bin := Binary(t)
	orphan.DiesWithItsTest(t, "rqlited", orphanEnv+"="+t.TempDir(), "BALLET_RQLITED="+bin)
}
