//go:build !unix

// Package procgroup starts the servers tests run (rqlited, Gitea); without
// process groups it kills only the process itself.
package procgroup

import "os/exec"

// Own does nothing here.
func Own(*exec.Cmd) {}

// Kill kills cmd's process.
func Kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
