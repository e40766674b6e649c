// Package procgroup is the one way Ballet starts and stops a child's
// process tree: the child leads a process group of its own (Own), which
// the kernel signals when its parent dies, and a stop reaches the whole
// group (Signal, Kill, KillOnCancel) — what the child started (git's ssh
// and pack-objects, a server's workers, an agent's tools) included. Core's
// git commands, `ballet up`'s children, the runner's agent sessions (which
// lead a session of their own, package runner/proc) and the servers the
// tests start all go through it.
package procgroup

import "os/exec"

// KillOnCancel makes the cancellation of cmd's context (exec.CommandContext)
// kill its whole group, not only its process.
func KillOnCancel(cmd *exec.Cmd) {
	cmd.Cancel = func() error {
		Kill(cmd)
		return nil
	}
}
