package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestTestsRunInTheirOwnPIDNamespace: a mutant's tests see only their own
// processes (the jail's init and themselves), so a mutant that signals every
// process it can see cannot reach the rest of the machine.
func TestTestsRunInTheirOwnPIDNamespace(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no bubblewrap under CI: %v", err)
		}
		t.Skip("no bubblewrap (bwrap) on PATH")
	}
	jail, err := pidJail(true)
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{}, jail[1:]...), "sh", "-c", `echo $$; ls /proc | grep -c '^[0-9]'`)
	out, err := exec.Command(jail[0], args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		t.Fatalf("output %q", out)
	}
	pid, _ := strconv.Atoi(f[0])
	procs, _ := strconv.Atoi(f[1])
	if pid > 3 || procs > 4 {
		t.Fatalf("inside the jail the shell is pid %d and sees %d processes: not its own PID namespace", pid, procs)
	}
	if none, err := pidJail(false); err != nil || none != nil {
		t.Fatalf("pidJail(false) = %v, %v; want no jail", none, err)
	}
}
