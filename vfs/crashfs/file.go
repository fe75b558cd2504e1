package crashfs

import (
	"io"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/filesink/filesink/vfs"
)

// file is an open file of an FS. It refers to its inode, not to its name,
// so it stays usable after a rename or a removal, like a POSIX descriptor.
type file struct {
	fs       *FS
	node     *inode
	name     string // as given when opening, for errors and Stat
	readable bool
	writable bool
	append   bool
	off      int64 // file offset for Read and (unless append) Write
	closed   bool
}

var _ vfs.File = (*file)(nil)

func (f *file) err(op string, errno error) error {
	return pathErr(op, f.name, errno)
}

// Write writes at the file offset, or at the end of the file if it was
// opened with OpenAppend.
func (f *file) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	switch {
	case f.closed:
		return 0, f.err("write", fs.ErrClosed)
	case !f.writable:
		return 0, f.err("write", syscall.EBADF)
	}
	if f.append {
		f.off = int64(len(f.node.data))
	}
	f.node.write(f.off, p)
	f.off += int64(len(p))
	return len(p), nil
}

// Read reads from the file offset.
func (f *file) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkRead("read"); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if f.off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[f.off:])
	f.off += int64(n)
	return n, nil
}

// ReadAt reads at off without moving the file offset.
func (f *file) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkRead("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, f.err("readat", syscall.EINVAL)
	}
	if off >= int64(len(f.node.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *file) checkRead(op string) error {
	switch {
	case f.closed:
		return f.err(op, fs.ErrClosed)
	case !f.readable:
		return f.err(op, syscall.EBADF)
	case f.node.dir:
		return f.err(op, syscall.EISDIR)
	}
	return nil
}

// Sync makes the file's data durable. On a directory opened with Open it
// makes the directory's entries durable, like fsync(2) of a directory.
func (f *file) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return f.err("sync", fs.ErrClosed)
	}
	if f.node.dir {
		commit(f.node, len(f.node.log))
	} else {
		f.node.sync()
	}
	return nil
}

// Truncate changes the file's size, filling with zeros when it grows. It
// does not move the file offset.
func (f *file) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	switch {
	case f.closed:
		return f.err("truncate", fs.ErrClosed)
	case size < 0, !f.writable:
		return f.err("truncate", syscall.EINVAL)
	}
	f.node.truncate(size)
	return nil
}

// Stat returns the file's metadata; Name is the base of the name the file
// was opened with.
func (f *file) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, f.err("stat", fs.ErrClosed)
	}
	return statOf(f.node, filepath.Base(cleanPath(f.name))), nil
}

// Close closes the file; later calls fail with fs.ErrClosed.
func (f *file) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return f.err("close", fs.ErrClosed)
	}
	f.closed = true
	return nil
}
