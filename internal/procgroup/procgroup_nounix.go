//go:build !unix

package procgroup

import (
	"os/exec"
	"syscall"
)

// Own does nothing here: process groups are Unix's.
func Own(cmd *exec.Cmd, parentDeath syscall.Signal) {}

// Signal is not supported here.
func Signal(pid int, sig syscall.Signal) error { return syscall.EWINDOWS }

// Kill kills cmd's process.
func Kill(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
