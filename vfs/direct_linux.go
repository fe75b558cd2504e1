package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// SetDirect sets or clears O_DIRECT on f's open file description: with it,
// writes go from the caller's memory to the device without the page cache,
// and must be DirectAlign-aligned in buffer address, length and file
// offset. It does not make writes durable (fsync still does). An error
// means the flag was not changed; a filesystem without direct I/O refuses
// to set it (or, on some, the first write: IsDirectRefused).
func SetDirect(f File, on bool) error {
	osf, ok := f.(*os.File)
	if !ok {
		return errNoDirect
	}
	rc, err := osf.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil {
			ferr = err
			return
		}
		if on {
			fl |= unix.O_DIRECT
		} else {
			fl &^= unix.O_DIRECT
		}
		_, ferr = unix.FcntlInt(fd, unix.F_SETFL, fl)
	}); err != nil {
		return err
	}
	return ferr
}
