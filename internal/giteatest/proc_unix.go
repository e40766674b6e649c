//go:build unix && !linux

package giteatest

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup makes the process the leader of a new process group, so
// that killing the group kills exactly what was started here.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to the process group started by cmd.
func killGroup(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}
