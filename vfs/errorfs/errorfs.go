package errorfs

import (
	"io/fs"
	"os"
	"sync/atomic"

	"github.com/filesink/filesink/vfs"
)

// Option configures Wrap.
type Option interface {
	apply(*FS)
}

type filterOption struct{ f Filter }

func (o filterOption) apply(fsys *FS) { fsys.filter = o.f }

// WithFilter counts only the operations f accepts: only they get an index,
// so only they can be selected by [OnIndex] and they alone make up
// [FS.Ops]. The injector still sees every operation. A nil f counts every
// operation, which is the default.
func WithFilter(f Filter) Option { return filterOption{f} }

// FS wraps a vfs.FS, counting operations and injecting errors. Make one with
// [Wrap].
type FS struct {
	inner  vfs.FS
	inj    Injector
	filter Filter

	ops      atomic.Int64
	injected atomic.Int64
	first    atomic.Pointer[Op]
}

var _ vfs.FS = (*FS)(nil)

// Wrap returns an FS that passes every operation to inner after counting it
// and asking inj whether it should fail. A nil inj never fails anything, so
// Wrap(inner, nil) only counts.
func Wrap(inner vfs.FS, inj Injector, opts ...Option) *FS {
	f := &FS{inner: inner, inj: inj}
	for _, o := range opts {
		o.apply(f)
	}
	return f
}

// Ops returns how many counted operations have been attempted so far,
// including those that failed by injection.
func (f *FS) Ops() int64 { return f.ops.Load() }

// Fired reports whether the injector has failed at least one operation.
func (f *FS) Fired() bool { return f.injected.Load() > 0 }

// Injected returns how many operations the injector has failed.
func (f *FS) Injected() int64 { return f.injected.Load() }

// FirstInjected returns the first operation the injector failed, for log
// messages such as "crashed at #17 sync /out/a".
func (f *FS) FirstInjected() (Op, bool) {
	if p := f.first.Load(); p != nil {
		return *p, true
	}
	return Op{}, false
}

// check counts op and consults the injector; it returns the injector's
// error, unwrapped.
func (f *FS) check(op Op) error {
	if f.filter == nil || f.filter(op) {
		op.Index = f.ops.Add(1)
	}
	if f.inj == nil {
		return nil
	}
	err := f.inj.MaybeError(op)
	if err != nil {
		f.injected.Add(1)
		f.first.CompareAndSwap(nil, &op)
	}
	return err
}

func (f *FS) checkPath(kind OpKind, name string) error {
	if err := f.check(Op{Kind: kind, Path: name}); err != nil {
		return &fs.PathError{Op: kind.String(), Path: name, Err: err}
	}
	return nil
}

// Create implements vfs.FS.
func (f *FS) Create(name string) (vfs.File, error) {
	if err := f.checkPath(OpCreate, name); err != nil {
		return nil, err
	}
	inner, err := f.inner.Create(name)
	return f.wrapFile(name, inner, err)
}

// OpenAppend implements vfs.FS.
func (f *FS) OpenAppend(name string) (vfs.File, error) {
	if err := f.checkPath(OpOpenAppend, name); err != nil {
		return nil, err
	}
	inner, err := f.inner.OpenAppend(name)
	return f.wrapFile(name, inner, err)
}

// Open implements vfs.FS.
func (f *FS) Open(name string) (vfs.File, error) {
	if err := f.checkPath(OpOpen, name); err != nil {
		return nil, err
	}
	inner, err := f.inner.Open(name)
	return f.wrapFile(name, inner, err)
}

func (f *FS) wrapFile(name string, inner vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &file{fs: f, inner: inner, name: name}, nil
}

// Stat implements vfs.FS.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	if err := f.checkPath(OpStat, name); err != nil {
		return nil, err
	}
	return f.inner.Stat(name)
}

// Remove implements vfs.FS.
func (f *FS) Remove(name string) error {
	if err := f.checkPath(OpRemove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

// RenameNoReplace implements vfs.FS. An injected error is an *os.LinkError.
func (f *FS) RenameNoReplace(oldname, newname string) error {
	if err := f.check(Op{Kind: OpRename, Path: oldname, NewPath: newname}); err != nil {
		return &os.LinkError{Op: OpRename.String(), Old: oldname, New: newname, Err: err}
	}
	return f.inner.RenameNoReplace(oldname, newname)
}

// Mkdir implements vfs.FS.
func (f *FS) Mkdir(name string, perm fs.FileMode) error {
	if err := f.checkPath(OpMkdir, name); err != nil {
		return err
	}
	return f.inner.Mkdir(name, perm)
}

// ReadDir implements vfs.FS.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := f.checkPath(OpReadDir, name); err != nil {
		return nil, err
	}
	return f.inner.ReadDir(name)
}

// SyncDir implements vfs.FS.
func (f *FS) SyncDir(name string) error {
	if err := f.checkPath(OpSyncDir, name); err != nil {
		return err
	}
	return f.inner.SyncDir(name)
}

// file wraps a File of the inner filesystem.
type file struct {
	fs    *FS
	inner vfs.File
	name  string
}

var _ vfs.File = (*file)(nil)

func (f *file) check(kind OpKind) error {
	return f.fs.checkPath(kind, f.name)
}

func (f *file) Write(p []byte) (int, error) {
	if err := f.check(OpFileWrite); err != nil {
		return 0, err
	}
	return f.inner.Write(p)
}

func (f *file) Read(p []byte) (int, error) {
	if err := f.check(OpFileRead); err != nil {
		return 0, err
	}
	return f.inner.Read(p)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check(OpFileReadAt); err != nil {
		return 0, err
	}
	return f.inner.ReadAt(p, off)
}

func (f *file) Sync() error {
	if err := f.check(OpFileSync); err != nil {
		return err
	}
	return f.inner.Sync()
}

func (f *file) Truncate(size int64) error {
	if err := f.check(OpFileTruncate); err != nil {
		return err
	}
	return f.inner.Truncate(size)
}

func (f *file) Stat() (fs.FileInfo, error) {
	if err := f.check(OpFileStat); err != nil {
		return nil, err
	}
	return f.inner.Stat()
}

// Close closes the wrapped file even when the injector fails the call, so
// that a crash loop does not leak descriptors.
func (f *file) Close() error {
	err := f.check(OpFileClose)
	cerr := f.inner.Close()
	if err != nil {
		return err
	}
	return cerr
}
