package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"
)

// DirectAlign is the alignment of the file offsets, lengths and memory of
// direct writes (a multiple of every common logical block size).
const DirectAlign = 4096

// directChunk is the size of a DirectAppender's buffer: the bytes of one
// direct write.
const directChunk = 1 << 20

// ErrNoDirectIO is returned by OpenDirect where the OS or the filesystem
// does not support direct I/O (tmpfs, for one).
var ErrNoDirectIO = errors.New("vfs: direct I/O not supported here")

// DirectAppender appends to a file of the OS through a second descriptor
// opened with O_DIRECT: whole aligned blocks go from its own reused,
// aligned buffer to the device without passing through the page cache,
// which saves the copy into the cache and, on a machine whose memory is
// backed lazily by a hypervisor, the cost of touching fresh pages for every
// new page of the file. The last, partial block stays in the buffer; Flush
// writes it through a third, ordinary descriptor (so that it reaches the
// file and an fsync makes it durable) and keeps it, so that the next direct
// write rewrites that block whole.
//
// Nothing is durable until the caller fsyncs the file (any descriptor of
// it) after Flush. Not safe for concurrent use.
type DirectAppender struct {
	d, t *os.File
	name string
	buf  []byte // file bytes [off, off+len(buf)); cap directChunk, aligned
	off  int64  // aligned
	// tail is set when Flush wrote a partial block that the next direct
	// write rewrites: before that write, beforeRewrite is called (the
	// owner waits there for an fsync in flight over that block).
	tail          bool
	beforeRewrite func()
}

// OpenDirect opens the existing file name, whose first size bytes are
// kept, for appending at size through a DirectAppender. beforeRewrite (may
// be nil) is called before a direct write rewrites a block that Flush
// wrote partially. It returns ErrNoDirectIO (wrapped) where direct I/O is
// unavailable; the caller then writes as usual.
func OpenDirect(name string, size int64, beforeRewrite func()) (*DirectAppender, error) {
	d, err := openDirect(name)
	if err != nil {
		return nil, err
	}
	t, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		d.Close()
		return nil, err
	}
	raw := make([]byte, directChunk+DirectAlign)
	skip := int((DirectAlign - uintptr(unsafe.Pointer(&raw[0]))%DirectAlign) % DirectAlign)
	a := &DirectAppender{d: d, t: t, name: name, buf: raw[skip : skip : skip+directChunk], beforeRewrite: beforeRewrite}
	a.off = size &^ (DirectAlign - 1)
	if n := int(size - a.off); n > 0 {
		a.buf = a.buf[:n]
		if _, err := io.ReadFull(io.NewSectionReader(t, a.off, int64(n)), a.buf); err != nil {
			a.Close()
			return nil, fmt.Errorf("vfs: direct append to %s: read the last block: %w", name, err)
		}
		a.tail = true
	}
	return a, nil
}

// Write appends p; full chunks are written to the file at once.
func (a *DirectAppender) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := copy(a.buf[len(a.buf):cap(a.buf)], p)
		a.buf = a.buf[:len(a.buf)+k]
		p, n = p[k:], n+k
		if len(a.buf) == cap(a.buf) {
			if err := a.writeBlocks(); err != nil {
				return n - k, err
			}
		}
	}
	return n, nil
}

// writeBlocks writes the whole blocks of the buffer directly and moves the
// rest to its start.
func (a *DirectAppender) writeBlocks() error {
	k := len(a.buf) &^ (DirectAlign - 1)
	if k == 0 {
		return nil
	}
	if a.tail && a.beforeRewrite != nil {
		a.beforeRewrite()
	}
	a.tail = false
	if _, err := a.d.WriteAt(a.buf[:k], a.off); err != nil {
		return fmt.Errorf("vfs: direct write to %s at %d: %w", a.name, a.off, err)
	}
	rest := copy(a.buf, a.buf[k:])
	a.buf = a.buf[:rest]
	a.off += int64(k)
	return nil
}

// Flush writes every buffered byte to the file: whole blocks directly, the
// partial last block through the ordinary descriptor. The bytes are not
// durable until the file is fsynced.
func (a *DirectAppender) Flush() error {
	if err := a.writeBlocks(); err != nil {
		return err
	}
	if len(a.buf) == 0 {
		return nil
	}
	if _, err := a.t.WriteAt(a.buf, a.off); err != nil {
		return fmt.Errorf("vfs: write to %s at %d: %w", a.name, a.off, err)
	}
	a.tail = true
	return nil
}

// Close closes the descriptors without flushing.
func (a *DirectAppender) Close() error {
	return errors.Join(a.d.Close(), a.t.Close())
}
