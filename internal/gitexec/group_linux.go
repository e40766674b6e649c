package gitexec

import (
	"os/exec"
	"syscall"
)

// ownGroup runs git in its own process group, killed as a whole when it
// times out (git runs ssh, git-remote-https, pack-objects…), and by the
// kernel when the runner dies.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return cmd.Process.Kill()
	}
}
