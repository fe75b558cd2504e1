//go:build unix

package filesink

import "golang.org/x/sys/unix"

// openFileLimit returns the process's soft limit of open descriptors
// (RLIMIT_NOFILE).
func openFileLimit() (uint64, bool) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil || r.Cur == 0 {
		return 0, false
	}
	return uint64(r.Cur), true
}
