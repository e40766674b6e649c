//go:build linux

package procgroup_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ballet/ballet/internal/procgroup"
)

// startTree starts a shell that starts a grandchild and prints its pid.
func startTree(t *testing.T, ctx context.Context, setup ...func(*exec.Cmd)) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "sh", "-c", "sleep 300 & echo $!; wait")
	procgroup.Own(cmd, syscall.SIGKILL)
	for _, f := range setup {
		f(cmd)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return cmd, pid
}

// gone waits (bounded) for pid to be gone or a zombie.
func gone(pid int) bool {
	for range 200 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return true
		}
		time.Sleep(10 * time.Millisecond) // the kernel's, not a clock's: the process dies asynchronously
	}
	return false
}

// A stop reaches the grandchild: Kill, a cancelled context and Signal all
// signal the group, not only the child.
func TestStopsReachTheWholeGroup(t *testing.T) {
	t.Run("Kill", func(t *testing.T) {
		cmd, grandchild := startTree(t, context.Background())
		procgroup.Kill(cmd)
		_ = cmd.Wait()
		if !gone(grandchild) {
			t.Errorf("the grandchild %d outlived Kill", grandchild)
			_ = syscall.Kill(grandchild, syscall.SIGKILL)
		}
	})
	t.Run("KillOnCancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cmd, grandchild := startTree(t, ctx, procgroup.KillOnCancel)
		cancel()
		_ = cmd.Wait()
		if !gone(grandchild) {
			t.Errorf("the grandchild %d outlived the cancellation", grandchild)
			_ = syscall.Kill(grandchild, syscall.SIGKILL)
		}
	})
	t.Run("Signal", func(t *testing.T) {
		cmd, grandchild := startTree(t, context.Background())
		if err := procgroup.Signal(cmd.Process.Pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if !gone(grandchild) {
			t.Errorf("the grandchild %d outlived SIGTERM to the group", grandchild)
			_ = syscall.Kill(grandchild, syscall.SIGKILL)
		}
	})
}
