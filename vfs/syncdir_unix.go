//go:build !windows

package vfs

import (
	"io/fs"
	"os"
)

// SyncDir implements FS: it fsyncs the directory, making its entries
// (created, renamed and removed names) durable.
func (OS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &fs.PathError{Op: "syncdir", Path: name, Err: err}
	}
	return nil
}
