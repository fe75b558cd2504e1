package proc

import "syscall"

// sysProcAttr makes the kernel kill the child when the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
