//go:build linux

package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// RenameNoReplace implements FS with renameat2(RENAME_NOREPLACE); where the
// filesystem does not support it, it falls back to link(2) + unlink(2),
// which also never replaces an existing name. It never calls rename(2).
func (OS) RenameNoReplace(oldname, newname string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldname, unix.AT_FDCWD, newname, unix.RENAME_NOREPLACE)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
		return &os.LinkError{Op: "renameat2", Old: oldname, New: newname, Err: err}
	}
	return linkUnlink(oldname, newname)
}

// StartWriteback asks the kernel to start writing the bytes [off, off+n)
// of f to disk without waiting (Linux sync_file_range with
// SYNC_FILE_RANGE_WRITE), so that a later Sync has less to flush, as
// RocksDB's and Pebble's bytes-per-sync do. It is a hint: it promises no
// durability, is a no-op for files other than the OS's (and on systems
// other than Linux), and its errors are ignored.
func StartWriteback(f File, off, n int64) {
	osf, ok := f.(*os.File)
	if !ok || n <= 0 {
		return
	}
	rc, err := osf.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	})
}
