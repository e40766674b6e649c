//go:build unix && !linux

package procgroup

import "syscall"

// groupAttr: a new process group; the parent-death signal is Linux's.
func groupAttr(syscall.Signal) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
