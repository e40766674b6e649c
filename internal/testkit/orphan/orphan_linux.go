// Package orphan checks that a server a test starts (rqlited, Gitea) dies
// with the test binary, even one killed outright (go test -timeout): the
// servers are started through package procgroup.
package orphan

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

// DiesWithItsTest is the test every server package runs: it re-executes the
// test binary with env (which makes its TestMain start the server, print
// the server's pid and wait), checks that the server runs, kills the child
// outright — as go test's -timeout does, with no cleanup — and fails t
// unless the server (what names it) dies too.
func DiesWithItsTest(t *testing.T, what string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
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
		t.Fatalf("%s %d is not running while its test runs", what, pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(time.Minute) // a hang guard, not a speed claim
	for running(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s %d still runs a minute after its test process was killed", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
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
