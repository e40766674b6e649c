// Package procgroup starts the servers tests run (rqlited, Gitea) in a
// process group of their own that dies with the test binary, and kills
// that group whole.
package procgroup

import (
	"os/exec"
	"syscall"
)

// Own makes cmd the leader of a new process group, so that Kill kills
// exactly what was started here. The kernel kills it when the process that
// started it dies: a test binary killed by a timeout (go test -timeout, a
// mutation run) leaves no server behind.
func Own(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// Kill sends SIGKILL to the process group cmd started.
func Kill(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}
