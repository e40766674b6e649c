//go:build !linux

package gitexec

import "os/exec"

// ownGroup does nothing here: process groups and Pdeathsig are Linux's.
func ownGroup(cmd *exec.Cmd) {}
