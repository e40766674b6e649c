package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCheckOfAHangingBwrapEnds: a bwrap that hangs on its trial run (here
// a stand-in whose child in its process group hangs too, and another one,
// out of the group, holds its output) fails Check when the context ends,
// at most a second later, and leaves no process of its group behind.
func TestCheckOfAHangingBwrapEnds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bwrap := filepath.Join(dir, "bwrap")
	script := fmt.Sprintf("#!/bin/sh\nsleep 600 &\necho $! > %[1]s/child\nsetsid sleep 600 &\necho $! > %[1]s/escaped\nwait\n", dir)
	if err := os.WriteFile(bwrap, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	pidOf := func(name string) int {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	t.Cleanup(func() {
		for _, n := range []string{"child", "escaped"} {
			if b, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- (Sandbox{Bwrap: bwrap}).Check(ctx) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "cannot make a sandbox") {
			t.Errorf("Check of a hanging bwrap: %v, want it refused", err)
		}
	case <-time.After(30 * time.Second): // a hang guard: the check ends about 2 s in
		t.Fatal("Check waited on the hanging bwrap's output")
	}
	child := pidOf("child")
	for deadline := time.Now().Add(10 * time.Second); alive(child); time.Sleep(20 * time.Millisecond) { // polling a real process
		if time.Now().After(deadline) {
			t.Fatalf("the hanging bwrap's child %d outlived Check", child)
		}
	}
}

// alive reports whether process pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(string(b[i+1:]), " Z")
}
