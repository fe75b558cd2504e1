package mariadbtest

import "syscall"

// sysProcAttr makes the kernel kill mariadbd when the test binary dies (a
// panic, a timeout, kill -9), so no server outlives its test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
