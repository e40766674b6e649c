//go:build unix && !linux

// Package procgroup starts the servers tests run (rqlited, Gitea) in a
// process group of their own and kills that group whole.
package procgroup

import (
	"os/exec"
	"syscall"
)

// Own makes cmd the leader of a new process group, so that Kill kills
// exactly what was started here.
func Own(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// Kill sends SIGKILL to the process group cmd started.
func Kill(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}
