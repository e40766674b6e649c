//go:build unix && !linux

package procgroup

import (
	"os/exec"
	"syscall"
)

// Own makes cmd the leader of a new process group; parentDeath is Linux's
// (Pdeathsig) and ignored here.
func Own(cmd *exec.Cmd, parentDeath syscall.Signal) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// Signal sends sig to the process group pid leads (the pid itself when it
// leads none).
func Signal(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pid, sig); err != nil {
		return syscall.Kill(pid, sig)
	}
	return nil
}

// Kill sends SIGKILL to the process group cmd started.
func Kill(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = Signal(cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}
