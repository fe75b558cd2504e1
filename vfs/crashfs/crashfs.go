package crashfs

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/filesink/filesink/vfs"
)

// FS is an in-memory filesystem that can simulate a crash. Make one with
// [New]; the zero value is not usable. See the package documentation for
// its semantics and crash model.
type FS struct {
	mu   sync.Mutex
	root *inode
}

var _ vfs.FS = (*FS)(nil)

// New returns an empty filesystem holding only the root directory.
func New() *FS {
	return &FS{root: newDir(0o755)}
}

// inode is a file or a directory. All fields are guarded by FS.mu.
type inode struct {
	dir  bool
	perm fs.FileMode

	// Files.
	data    []byte   // the written (live) content
	synced  []byte   // the content at the last Sync; never aliases data
	pending []fileOp // writes and truncates since the last Sync, in order

	// Directories.
	children       map[string]*inode // live entries
	syncedChildren map[string]*inode // entries at the last SyncDir
	log            []dirChange       // changes since the last SyncDir, in order
}

// fileOp is one modification of a file's data.
type fileOp struct {
	truncate bool
	off      int64  // write offset, or the new size of a truncate
	data     []byte // written bytes; owned by the fileOp
}

// dirChange is one change of a directory's entries: name now refers to
// node, or is removed if node is nil.
type dirChange struct {
	name string
	node *inode
	// link is set on the changes made by one rename (a removal in the old
	// parent and an addition in the new one, which may be the same
	// directory): a crash applies all of them or none.
	link *rename
}

// rename ties together the changes of one rename.
type rename struct {
	dirs [2]*inode // old parent, new parent
}

func newDir(perm fs.FileMode) *inode {
	return &inode{
		dir:            true,
		perm:           perm & fs.ModePerm,
		children:       map[string]*inode{},
		syncedChildren: map[string]*inode{},
	}
}

func newFile(perm fs.FileMode) *inode {
	return &inode{perm: perm & fs.ModePerm}
}

func (n *inode) mode() fs.FileMode {
	if n.dir {
		return fs.ModeDir | n.perm
	}
	return n.perm
}

// applyWrite writes p at off into data, filling a gap past the end with
// zeros, and returns the new slice.
func applyWrite(data []byte, off int64, p []byte) []byte {
	if len(p) == 0 {
		return data
	}
	data = resize(data, max(int64(len(data)), off+int64(len(p))))
	copy(data[off:], p)
	return data
}

// resize returns data cut or zero-extended to size.
func resize(data []byte, size int64) []byte {
	n := int(size)
	switch {
	case n <= len(data):
		return data[:n]
	case n <= cap(data):
		old := len(data)
		data = data[:n]
		clear(data[old:]) // bytes left over from an earlier truncate
		return data
	default:
		return append(data, make([]byte, n-len(data))...)
	}
}

func (op fileOp) apply(data []byte) []byte {
	if op.truncate {
		return resize(data, op.off)
	}
	return applyWrite(data, op.off, op.data)
}

// write records and applies a write of p at off.
func (n *inode) write(off int64, p []byte) {
	if len(p) == 0 {
		return
	}
	n.data = applyWrite(n.data, off, p)
	if k := len(n.pending) - 1; k >= 0 && !n.pending[k].truncate &&
		n.pending[k].off+int64(len(n.pending[k].data)) == off {
		// A write continuing the previous one: merging them keeps the
		// model (a torn merged write is a prefix of the history).
		n.pending[k].data = append(n.pending[k].data, p...)
		return
	}
	n.pending = append(n.pending, fileOp{off: off, data: slices.Clone(p)})
}

// truncate records and applies a truncate to size.
func (n *inode) truncate(size int64) {
	n.data = resize(n.data, size)
	n.pending = append(n.pending, fileOp{truncate: true, off: size})
}

// sync makes the file's data durable.
func (n *inode) sync() {
	if len(n.pending) == 1 && !n.pending[0].truncate && n.pending[0].off == int64(len(n.synced)) {
		// Only appended since the last sync: extend synced in place
		// (amortised O(appended bytes) for a growing file).
		n.synced = append(n.synced, n.pending[0].data...)
	} else if len(n.pending) > 0 {
		n.synced = slices.Clone(n.data)
	}
	n.pending = nil
}

// change records and applies a change of a directory entry.
func (n *inode) change(c dirChange) {
	applyChange(n.children, c)
	n.log = append(n.log, c)
}

func applyChange(m map[string]*inode, c dirChange) {
	if c.node == nil {
		delete(m, c.name)
	} else {
		m[c.name] = c.node
	}
}

// commit makes the first k pending changes of directory d durable, and,
// for each rename among them, the other half of the rename and every
// change before it in the other directory.
func commit(d *inode, k int) {
	if k <= 0 {
		return
	}
	done := d.log[:k]
	d.log = slices.Clone(d.log[k:])
	for _, c := range done {
		applyChange(d.syncedChildren, c)
	}
	for _, c := range done {
		if c.link == nil {
			continue
		}
		for _, o := range c.link.dirs {
			if i := lastLinked(o.log, c.link); i >= 0 {
				commit(o, i+1)
			}
		}
	}
}

// lastLinked returns the index of the last change in log that belongs to
// rename r, or -1.
func lastLinked(log []dirChange, r *rename) int {
	for i := len(log) - 1; i >= 0; i-- {
		if log[i].link == r {
			return i
		}
	}
	return -1
}

// Error helpers. They wrap syscall errnos so that errors.Is matches the
// fs.Err* sentinels and the errors look like those of package os.

func pathErr(op, name string, errno error) error {
	return &fs.PathError{Op: op, Path: name, Err: errno}
}

// cleanPath returns the cleaned absolute form of name.
func cleanPath(name string) string {
	if !filepath.IsAbs(name) {
		name = "/" + name
	}
	return filepath.Clean(name)
}

// walk resolves the cleaned absolute path p. It returns the parent
// directory, the base name and the inode (nil if the name does not exist but
// the parent does). For the root, parent is nil and base is "/".
func (f *FS) walk(p string) (parent *inode, base string, n *inode, errno error) {
	if p == "/" {
		return nil, "/", f.root, nil
	}
	parts := strings.Split(p[1:], "/")
	d := f.root
	for _, c := range parts[:len(parts)-1] {
		next := d.children[c]
		if next == nil {
			return nil, "", nil, syscall.ENOENT
		}
		if !next.dir {
			return nil, "", nil, syscall.ENOTDIR
		}
		d = next
	}
	base = parts[len(parts)-1]
	return d, base, d.children[base], nil
}

// lookup resolves name to an existing inode.
func (f *FS) lookup(op, name string) (*inode, error) {
	if name == "" {
		return nil, pathErr(op, name, syscall.ENOENT)
	}
	_, _, n, errno := f.walk(cleanPath(name))
	if errno != nil {
		return nil, pathErr(op, name, errno)
	}
	if n == nil {
		return nil, pathErr(op, name, syscall.ENOENT)
	}
	return n, nil
}

// Create implements [vfs.FS]: it makes a new empty file, open for reading and
// writing, failing with fs.ErrExist if name exists.
func (f *FS) Create(name string) (vfs.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == "" {
		return nil, pathErr("open", name, syscall.ENOENT)
	}
	parent, base, n, errno := f.walk(cleanPath(name))
	if errno != nil {
		return nil, pathErr("open", name, errno)
	}
	if n != nil {
		return nil, pathErr("open", name, syscall.EEXIST)
	}
	n = newFile(0o644)
	parent.change(dirChange{name: base, node: n})
	return &file{fs: f, node: n, name: name, readable: true, writable: true}, nil
}

// OpenAppend implements [vfs.FS]: it opens an existing file for reading and
// appending.
func (f *FS) OpenAppend(name string) (vfs.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	return &file{fs: f, node: n, name: name, readable: true, writable: true, append: true}, nil
}

// Open implements [vfs.FS]: it opens an existing file or directory read-only.
func (f *FS) Open(name string) (vfs.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.lookup("open", name)
	if err != nil {
		return nil, err
	}
	return &file{fs: f, node: n, name: name, readable: true}, nil
}

// Stat implements [vfs.FS].
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return statOf(n, filepath.Base(cleanPath(name))), nil
}

// Remove implements [vfs.FS]: it removes a file or an empty directory. Files
// that are open stay usable.
func (f *FS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == "" {
		return pathErr("remove", name, syscall.ENOENT)
	}
	parent, base, n, errno := f.walk(cleanPath(name))
	switch {
	case errno != nil:
		return pathErr("remove", name, errno)
	case n == nil:
		return pathErr("remove", name, syscall.ENOENT)
	case parent == nil:
		return pathErr("remove", name, syscall.EBUSY)
	case n.dir && len(n.children) > 0:
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	parent.change(dirChange{name: base})
	return nil
}

// RenameNoReplace implements [vfs.FS]: it atomically moves the entry oldname
// to newname, failing with fs.ErrExist if newname exists. It works for files
// and directories; open files stay usable.
func (f *FS) RenameNoReplace(oldname, newname string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fail := func(errno error) error {
		return &os.LinkError{Op: "renameat2", Old: oldname, New: newname, Err: errno}
	}
	if oldname == "" || newname == "" {
		return fail(syscall.ENOENT)
	}
	oldp, newp := cleanPath(oldname), cleanPath(newname)
	oparent, obase, n, errno := f.walk(oldp)
	switch {
	case errno != nil:
		return fail(errno)
	case n == nil:
		return fail(syscall.ENOENT)
	}
	nparent, nbase, existing, errno := f.walk(newp)
	switch {
	case errno != nil:
		return fail(errno)
	case existing != nil:
		return fail(syscall.EEXIST)
	case oparent == nil || nparent == nil:
		return fail(syscall.EBUSY) // the root
	case n.dir && strings.HasPrefix(newp, oldp+"/"):
		return fail(syscall.EINVAL) // a directory into itself
	}
	r := &rename{dirs: [2]*inode{oparent, nparent}}
	oparent.change(dirChange{name: obase, link: r})
	nparent.change(dirChange{name: nbase, node: n, link: r})
	return nil
}

// Mkdir implements [vfs.FS].
func (f *FS) Mkdir(name string, perm fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == "" {
		return pathErr("mkdir", name, syscall.ENOENT)
	}
	parent, base, n, errno := f.walk(cleanPath(name))
	switch {
	case errno != nil:
		return pathErr("mkdir", name, errno)
	case n != nil:
		return pathErr("mkdir", name, syscall.EEXIST)
	}
	parent.change(dirChange{name: base, node: newDir(perm)})
	return nil
}

// ReadDir implements [vfs.FS]: it lists the live entries of a directory,
// sorted by name.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, pathErr("readdirent", name, syscall.ENOTDIR)
	}
	names := slices.Sorted(maps.Keys(n.children))
	out := make([]fs.DirEntry, len(names))
	for i, c := range names {
		out[i] = fs.FileInfoToDirEntry(statOf(n.children[c], c))
	}
	return out, nil
}

// SyncDir implements [vfs.FS]: it makes the entries of directory name
// durable (see the package documentation for renames).
func (f *FS) SyncDir(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.lookup("syncdir", name)
	if err != nil {
		return err
	}
	if !n.dir {
		return pathErr("syncdir", name, syscall.ENOTDIR)
	}
	commit(n, len(n.log))
	return nil
}

// fileInfo implements fs.FileInfo.
type fileInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func statOf(n *inode, name string) fileInfo {
	fi := fileInfo{name: name, mode: n.mode()}
	if !n.dir {
		fi.size = int64(len(n.data))
	}
	return fi
}

func (fi fileInfo) Name() string       { return fi.name }
func (fi fileInfo) Size() int64        { return fi.size }
func (fi fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi fileInfo) ModTime() time.Time { return time.Time{} }
func (fi fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi fileInfo) Sys() any           { return nil }

// String lists the live tree, one line per file or directory, with each
// file's written and synced sizes and each directory's pending (unsynced)
// entry changes. It is meant for test failure messages.
func (f *FS) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	var dump func(p string, n *inode)
	dump = func(p string, n *inode) {
		if n.dir {
			fmt.Fprintf(&b, "%s/", strings.TrimSuffix(p, "/"))
			if len(n.log) > 0 {
				b.WriteString(" unsynced:")
				for _, c := range n.log {
					if c.node == nil {
						fmt.Fprintf(&b, " -%s", c.name)
					} else {
						fmt.Fprintf(&b, " +%s", c.name)
					}
				}
			}
			b.WriteByte('\n')
			for _, c := range slices.Sorted(maps.Keys(n.children)) {
				dump(filepath.Join(p, c), n.children[c])
			}
			return
		}
		fmt.Fprintf(&b, "%s size=%d synced=%d", p, len(n.data), len(n.synced))
		if len(n.pending) > 0 {
			fmt.Fprintf(&b, " pending=%d", len(n.pending))
		}
		b.WriteByte('\n')
	}
	dump("/", f.root)
	return b.String()
}
