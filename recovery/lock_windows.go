//go:build windows

package recovery

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockRegion is the byte range locked: far past the holder's name written
// at the start of the file, which the next opener reads for its message.
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

// probeFile reports whether another handle holds the exclusive lock of f:
// it takes a shared lock of the region without waiting and drops it at
// once.
func probeFile(f *os.File) (held bool, err error) {
	ol := &windows.Overlapped{Offset: lockRegion}
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &windows.Overlapped{Offset: lockRegion})
}
