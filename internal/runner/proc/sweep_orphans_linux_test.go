package proc

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestSweepKillsAnOrphanNotAReusedGroup: a dead runner's session left a
// marked process in a session of its own, and its recorded process group
// number now belongs to an unrelated program. Sweep kills the marked
// orphan (and names it) but not the unrelated group: no marked process is
// in that group, so it is not the session's.
func TestSweepKillsAnOrphanNotAReusedGroup(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	startHang := func(env []string) *exec.Cmd {
		c := exec.Command(testBinary(t))
		c.Env = append(env, helperEnv+"=hang")
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c
	}
	unrelated := startHang(nil)
	orphan := startHang([]string{Marker("dead-3")})
	orphanFD := pidfd(t, orphan.Process.Pid)
	start, err := selfStart()
	if err != nil {
		t.Fatal(err)
	}
	pg := unrelated.Process.Pid
	b, _ := json.Marshal(record{ID: "dead-3", PID: pg, PGID: pg, RunnerPID: os.Getpid(), RunnerStart: start + 1})
	if err := os.WriteFile(filepath.Join(state, "dead-3.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	swept, err := Sweep(state)
	if err != nil {
		t.Fatal(err)
	}
	// It waits for the killed process to die, not for the 2 s bound of
	// that wait (a dead process's pidfd is ready at once).
	if took := time.Since(began); took >= 2*time.Second {
		t.Errorf("Sweep took %s: it waited out its bound instead of the death of what it killed", took)
	}
	if len(swept) != 1 || !slices.Equal(swept[0].Killed, []int{orphan.Process.Pid}) {
		t.Fatalf("swept %+v, want dead-3 with only %d killed", swept, orphan.Process.Pid)
	}
	if !exitedWithin(t, orphanFD, 0) {
		t.Error("the session's marked orphan outlived Sweep")
	}
	if !running(pg) {
		t.Error("Sweep killed the unrelated program that reused the session's process group")
	}
}

// TestZombiesAreNotLeftOvers: a marked process that has exited but was not
// yet reaped by its parent (a zombie) is no process of the session: Find
// does not list it, and Sweep neither reports it as surviving SIGKILL nor
// keeps the record for it.
func TestZombiesAreNotLeftOvers(t *testing.T) {
	t.Parallel()
	c := exec.Command(testBinary(t))
	c.Env = []string{helperEnv + "=print", Marker("zombie-1"), "GOCOVERDIR=" + t.TempDir()}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Wait() })
	if !exitedWithin(t, pidfd(t, c.Process.Pid), hangGuard) { // exited, not reaped: a zombie
		t.Fatal("the helper did not exit")
	}
	if got := Find("zombie-1"); len(got) != 0 {
		t.Errorf("Find lists the zombie: %v", got)
	}
	state := t.TempDir()
	b, _ := json.Marshal(record{ID: "zombie-1"}) // no runner: gone
	if err := os.WriteFile(filepath.Join(state, "zombie-1.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if swept, err := Sweep(state); err != nil || len(swept) != 1 || len(swept[0].Killed) != 0 {
		t.Errorf("swept %+v, %v; want the record swept, nothing killed, no error", swept, err)
	}
}

// TestSweepNamesOnlyTheLiving: a dead runner's session group holds a
// marked process and an exited, unreaped child of it (a zombie): Sweep
// kills the group and names the living process only.
func TestSweepNamesOnlyTheLiving(t *testing.T) {
	t.Parallel()
	c := exec.Command(testBinary(t))
	c.Env = []string{helperEnv + "=zombie-parent", Marker("dead-4")}
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	var zombie int
	if _, err := fmt.Fscanf(out, "zombie %d\n", &zombie); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	pg := c.Process.Pid
	b, _ := json.Marshal(record{ID: "dead-4", PID: pg, PGID: pg}) // no runner: gone
	if err := os.WriteFile(filepath.Join(state, "dead-4.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	swept, err := Sweep(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != 1 || !slices.Equal(swept[0].Killed, []int{pg}) {
		t.Fatalf("swept %+v, want dead-4 with only %d killed (not the zombie %d)", swept, pg, zombie)
	}
}
