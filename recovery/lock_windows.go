//go:build windows

package recovery

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockRegion is the byte range locked: far past the pid written at the
// start of the file, which the next opener reads for its message.
const lockRegion = 1 << 30

// lockFile takes an exclusive LockFileEx lock on f without waiting. held
// reports that another handle holds it.
func lockFile(f *os.File) (held bool, err error) {
	ol := &windows.Overlapped{Offset: lockRegion}
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return true, nil
	}
	return false, err
}
