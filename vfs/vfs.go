package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// File is an open file.
type File interface {
	io.Writer
	io.Reader
	io.ReaderAt
	io.Closer
	// Sync makes the file's written data durable.
	Sync() error
	// Truncate changes the file's size. Writes to a file opened with
	// OpenAppend continue at the new end.
	Truncate(size int64) error
	// Stat returns the file's metadata; Size is the current (written) size.
	Stat() (fs.FileInfo, error)
}

// FS is the set of filesystem operations filesink uses.
type FS interface {
	// Create makes a new, empty file open for writing. It fails with an error
	// matching fs.ErrExist if name exists.
	Create(name string) (File, error)
	// OpenAppend opens an existing file for writing; every write appends at
	// the current end of the file.
	OpenAppend(name string) (File, error)
	// Open opens an existing file for reading.
	Open(name string) (File, error)
	// Stat returns metadata of name; a missing name gives an error matching
	// fs.ErrNotExist.
	Stat(name string) (fs.FileInfo, error)
	// Remove deletes a file or an empty directory.
	Remove(name string) error
	// RenameNoReplace atomically renames oldname to newname, failing with an
	// error matching fs.ErrExist if newname exists. Both names must be in the
	// same filesystem.
	RenameNoReplace(oldname, newname string) error
	// Mkdir makes one directory; it fails with fs.ErrExist if name exists.
	Mkdir(name string, perm fs.FileMode) error
	// ReadDir lists a directory, sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// SyncDir makes the entries of directory name durable.
	SyncDir(name string) error
}

// MkdirAllSync makes dir and every missing parent, and syncs the parent of
// every component of the path, existing or not, so that the whole path is
// durable when it returns nil. (A directory that exists may have been made
// by a process that died before syncing its parent: existing is not
// durable.)
func MkdirAllSync(fsys FS, dir string) error {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAllSync(fsys, parent); err != nil {
			return err
		}
	}
	if err := fsys.Mkdir(dir, 0o755); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, serr := fsys.Stat(dir)
		if serr != nil {
			return serr
		}
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
	}
	if parent == dir {
		return nil
	}
	return fsys.SyncDir(parent)
}

// WriteFileSync creates name (which must not exist), writes data, syncs and
// closes it. It does not sync the directory.
func WriteFileSync(fsys FS, name string, data []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadFile reads the whole of name.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// OS is the operating system's filesystem.
type OS struct{}

var _ FS = OS{}

// Create implements FS.
func (OS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
}

// OpenAppend implements FS.
func (OS) OpenAppend(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_APPEND, 0)
}

// Open implements FS.
func (OS) Open(name string) (File, error) { return os.Open(name) }

// Stat implements FS.
func (OS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// Remove implements FS.
func (OS) Remove(name string) error { return os.Remove(name) }

// Mkdir implements FS.
func (OS) Mkdir(name string, perm fs.FileMode) error { return os.Mkdir(name, perm) }

// ReadDir implements FS.
func (OS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// SyncDir implements FS.
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

// RenameNoReplace implements FS with renameat2(RENAME_NOREPLACE); where the
// filesystem does not support it, it falls back to link(2) + unlink(2),
// which also never replaces an existing name. It never calls rename(2).
func (OS) RenameNoReplace(oldname, newname string) error {
	err := renameat2NoReplace(oldname, newname)
	if err == nil {
		return nil
	}
	if !renameat2Unsupported(err) {
		return &os.LinkError{Op: "renameat2", Old: oldname, New: newname, Err: err}
	}
	if err := os.Link(oldname, newname); err != nil {
		return err
	}
	if err := os.Remove(oldname); err != nil {
		return err
	}
	return nil
}

// StartWriteback asks the kernel to start writing the bytes [off, off+n)
// of f to disk without waiting (Linux sync_file_range with
// SYNC_FILE_RANGE_WRITE), so that a later Sync has less to flush, as
// RocksDB's and Pebble's bytes-per-sync do. It is a hint: it promises no
// durability, is a no-op for files other than the OS's, and its errors are
// ignored.
func StartWriteback(f File, off, n int64) {
	osf, ok := f.(*os.File)
	if !ok || n <= 0 {
		return
	}
	rc, err := osf.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { startWriteback(fd, off, n) })
}
