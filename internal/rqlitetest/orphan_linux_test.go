package rqlitetest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), orphanEnv+"="+t.TempDir(), "BALLET_RQLITED="+bin)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child printed %q: %v %v", line, err, perr)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // if the test fails
	if !running(pid) {
		t.Fatalf("rqlited %d is not running while its test runs", pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(time.Minute) // a hang guard, not a speed claim
	for running(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("rqlited %d still runs a minute after its test process was killed", pid)
		}
		time.Sleep(pollInterval)
	}
}

// running reports whether pid is a live process (not gone, not a zombie
// waiting for a parent that does not reap it).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) state …": the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}
