//go:build unix

package procgroup

import (
	"os/exec"
	"syscall"
)

// Own makes cmd the leader of a new process group, and has the kernel send
// it parentDeath when the process that started it dies, where the kernel
// can (Linux's Pdeathsig): a killed runner or test binary leaves no child
// behind; SIGTERM lets a server stop cleanly.
func Own(cmd *exec.Cmd, parentDeath syscall.Signal) {
	cmd.SysProcAttr = groupAttr(parentDeath)
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
