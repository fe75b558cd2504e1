//go:build !linux

package vfs

import "errors"

// renameat2NoReplace is Linux only: elsewhere RenameNoReplace always uses
// link(2) + unlink(2), which never replaces an existing name either.
func renameat2NoReplace(oldname, newname string) error { return errors.ErrUnsupported }

func renameat2Unsupported(err error) bool { return errors.Is(err, errors.ErrUnsupported) }

// startWriteback is a no-op without Linux's sync_file_range.
func startWriteback(fd uintptr, off, n int64) {}
