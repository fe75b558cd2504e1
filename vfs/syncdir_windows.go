//go:build windows

package vfs

import (
	"io/fs"
	"os"
)

// SyncDir implements FS. Windows cannot fsync a directory handle; NTFS
// journals its metadata, so a created or renamed name is durable once the
// call that made it returned. SyncDir only checks that name is a directory.
func (OS) SyncDir(name string) error {
	fi, err := os.Stat(name)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &fs.PathError{Op: "syncdir", Path: name, Err: fs.ErrInvalid}
	}
	return nil
}
