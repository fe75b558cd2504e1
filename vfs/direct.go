package vfs

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// DirectAlign is the alignment of the buffers, lengths and file offsets of
// writes made with O_DIRECT (SetDirect): the page size, a multiple of
// every common device's logical block size.
const DirectAlign = 4096

// CanDirect reports whether f is a file of the operating system, on
// which SetDirect may work.
func CanDirect(f File) bool {
	_, ok := f.(*os.File)
	return ok
}

// IsDirectRefused reports whether err, from a write to a file with
// O_DIRECT set, means that the filesystem refuses direct I/O (or this
// write's alignment); the same bytes can then be written without it.
func IsDirectRefused(err error) bool { return errors.Is(err, syscall.EINVAL) }

// AlignedBuffer returns an empty slice of capacity n whose first byte is
// DirectAlign-aligned, for writes with O_DIRECT.
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+DirectAlign)
	off := int(uintptr(unsafe.Pointer(&b[0])) & (DirectAlign - 1))
	if off != 0 {
		off = DirectAlign - off
	}
	return b[off : off : off+n]
}

var errNoDirect = errors.New("vfs: direct I/O needs a file of the operating system")
