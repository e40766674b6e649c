package procgroup

import "syscall"

// groupAttr: a new process group, signalled parentDeath when its parent dies.
func groupAttr(parentDeath syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: parentDeath}
}
