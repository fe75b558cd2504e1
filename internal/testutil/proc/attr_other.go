//go:build !linux

package proc

import "syscall"

// sysProcAttr is nil outside Linux: there is no parent-death signal, so a
// test binary killed from outside may leave its servers running.
func sysProcAttr() *syscall.SysProcAttr { return nil }
