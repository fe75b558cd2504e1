package vfs

import (
	"errors"

	"golang.org/x/sys/unix"
)

func renameat2NoReplace(oldname, newname string) error {
	return unix.Renameat2(unix.AT_FDCWD, oldname, unix.AT_FDCWD, newname, unix.RENAME_NOREPLACE)
}

// renameat2Unsupported reports a filesystem or kernel without
// renameat2(RENAME_NOREPLACE): RenameNoReplace falls back to link+unlink.
func renameat2Unsupported(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)
}

func startWriteback(fd uintptr, off, n int64) {
	_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
