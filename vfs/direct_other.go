//go:build !linux

package vfs

import "errors"

// SetDirect is supported on Linux only: elsewhere setting O_DIRECT fails
// and clearing it is a no-op.
func SetDirect(f File, on bool) error {
	if !on {
		return nil
	}
	return errors.New("vfs: direct I/O is supported on Linux only")
}
