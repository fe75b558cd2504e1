//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package s3

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with this pid exists on this
// host: kill(pid, 0) fails with ESRCH only when there is none (EPERM: it
// exists under another user).
func processAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
