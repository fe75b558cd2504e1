package localfs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/vfs"
)

// StagingSuffix ends the name of every in-progress file.
const StagingSuffix = ".inprogress"

// Backend is a driver.Backend on a directory of a vfs.FS.
type Backend struct {
	fs   vfs.FS
	root string

	mu       sync.Mutex      // guards the directory sets; held across their fsyncs
	durable  map[string]bool // directories whose entry in their parent is durable
	unsynced map[string]bool // directories made (or found) whose entry is not yet synced
	syncs    chan struct{}   // bounds the background fsyncs of PersistAsync

	// Direct I/O (direct.go): direct is the option, directOff is set once
	// the filesystem refused O_DIRECT; directBufs holds the maxDirect
	// buffers (nil until first used); directWrites counts the writes made
	// with O_DIRECT; setDirect sets or clears O_DIRECT on a file (tests
	// replace it).
	direct       bool
	directOff    atomic.Bool
	directBufs   chan *directSlot
	directWrites atomic.Int64
	setDirect    func(f vfs.File, on bool) error
}

// Option configures a Backend: a value of this sealed interface, made by
// the With functions of this package and applied by New.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is what the options set.
type config struct {
	direct bool
}

// WithDirectIO turns direct I/O of large writes on or off (the default):
// with it, a part writer receiving writes of 256 KiB or more writes them
// from an aligned buffer with O_DIRECT in 1 MiB writes, bypassing the page
// cache (see direct.go); durability is the same either way. Linux only;
// a filesystem that refuses O_DIRECT falls back to buffered writes.
//
// It is off by default: a direct write of a full buffer runs on a goroutine
// of its own, which waits for a free CPU when the writer's caller keeps
// every CPU busy (as a Parquet sink does on two cores), and the writer
// then waits for it; buffered writes cost a copy and never wait
// (BENCHMARKS.md). It pays where the page cache is what is scarce.
func WithDirectIO(on bool) Option { return optionFunc(func(c *config) { c.direct = on }) }

// maxSyncs bounds the fsyncs that PersistAsync runs at once per backend.
const maxSyncs = 16

var _ driver.Backend = (*Backend)(nil)

// New returns a backend publishing under root. fsys is usually vfs.OS{},
// which a nil fsys stands for (direct I/O applies to the files of an fsys
// that are *os.File). It
// returns no error: every value of every option is valid, and nothing is
// touched before the first call.
func New(fsys vfs.FS, root string, opts ...Option) *Backend {
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	if fsys == nil {
		fsys = vfs.OS{}
	}
	b := &Backend{fs: fsys, root: filepath.Clean(root), durable: map[string]bool{}, unsynced: map[string]bool{},
		syncs: make(chan struct{}, maxSyncs), directBufs: make(chan *directSlot, maxDirect), setDirect: vfs.SetDirect,
		direct: cfg.direct}
	for range maxDirect {
		b.directBufs <- nil
	}
	return b
}

// Root returns the output directory.
func (b *Backend) Root() string { return b.root }

// record is both the resumable and the pending committable.
type record struct {
	Target  string `json:"target"`  // relative to root, slash-separated
	Staging string `json:"staging"` // relative to root, slash-separated
	Length  int64  `json:"length"`
}

// StagingName returns the staging path for a target path.
func StagingName(target string) string {
	dir, base := path.Split(target)
	return dir + "." + base + StagingSuffix
}

func (b *Backend) abs(rel string) string { return filepath.Join(b.root, filepath.FromSlash(rel)) }

func checkTarget(target string) error {
	if target == "" || !filepath.IsLocal(target) || strings.Contains(target, "\\") {
		return fmt.Errorf("localfs: invalid target %q", target)
	}
	for _, c := range strings.Split(target, "/") {
		if c == "" || c[0] == '.' || c[0] == '_' {
			return fmt.Errorf("localfs: invalid target %q: component %q is empty or reserved", target, c)
		}
	}
	if strings.HasSuffix(target, StagingSuffix) {
		return fmt.Errorf("localfs: invalid target %q: names ending in %s are reserved for staging", target, StagingSuffix)
	}
	return nil
}

func parse(data json.RawMessage) (record, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("localfs: bad committable %s: %w", data, err)
	}
	if err := checkTarget(r.Target); err != nil {
		return r, err
	}
	if r.Staging != StagingName(r.Target) || r.Length < 0 {
		return r, fmt.Errorf("localfs: bad committable %s: staging name or length do not match", data)
	}
	return r, nil
}

// SweepEvery implements driver.Backend: a local output's staging files
// are renamed at their commit, so sweeping at recovery is enough.
func (b *Backend) SweepEvery() int { return 0 }

// Describe implements driver.Backend.
func (b *Backend) Describe(data json.RawMessage) (target, staging string, err error) {
	r, err := parse(data)
	return r.Target, r.Staging, err
}

// Open implements driver.Backend.
func (b *Backend) Open(ctx context.Context, target string) (driver.PartWriter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkTarget(target); err != nil {
		return nil, err
	}
	r := record{Target: target, Staging: StagingName(target)}
	dir := filepath.Dir(b.abs(target))
	if err := b.ensureDir(dir); err != nil {
		return nil, fmt.Errorf("localfs: open %s: %w", target, err)
	}
	if _, err := b.fs.Stat(b.abs(target)); err == nil {
		return nil, fmt.Errorf("localfs: open %s: %w", b.abs(target), committer.ErrAlreadyExists)
	}
	f, err := b.fs.Create(b.abs(r.Staging))
	if err != nil {
		return nil, fmt.Errorf("localfs: open %s: %w", target, err)
	}
	return &writer{b: b, f: f, canDirect: vfs.CanDirect(f), rec: r, dir: dir}, nil
}

// ensureDir makes dir and its missing parents. It does not sync: every
// directory it makes or finds for the first time is durable only after the
// next syncDirs, which each part writer runs before it reports a length. (A
// directory that exists may have been made by a process that died before
// syncing its parent: existing is not durable.)
func (b *Backend) ensureDir(dir string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mkdirs(dir)
}

func (b *Backend) mkdirs(dir string) error {
	if b.durable[dir] || b.unsynced[dir] {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent == dir {
		b.durable[dir] = true // the filesystem root
		return nil
	}
	if err := b.mkdirs(parent); err != nil {
		return err
	}
	if err := b.fs.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	b.unsynced[dir] = true
	return nil
}

// syncDirs makes every directory made so far durable with one fsync per
// distinct parent, so that a checkpoint over 1,000 new bucket directories
// syncs their common parent once. Concurrent callers wait for the one that
// syncs.
func (b *Backend) syncDirs() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.unsynced) == 0 {
		return nil
	}
	parents := map[string]bool{}
	for d := range b.unsynced {
		parents[filepath.Dir(d)] = true
	}
	for p := range parents {
		if err := b.fs.SyncDir(p); err != nil {
			return vfs.WrapPath("localfs: fsync directory "+p, err)
		}
	}
	for d := range b.unsynced {
		b.durable[d] = true
		delete(b.unsynced, d)
	}
	return nil
}

// Rebuild implements driver.Backend: it removes the staging file of lost,
// if something of it is left, and opens its target again.
func (b *Backend) Rebuild(ctx context.Context, lost json.RawMessage) (driver.PartWriter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := parse(lost)
	if err != nil {
		return nil, err
	}
	if err := b.fs.Remove(b.abs(r.Staging)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, vfs.WrapPath("localfs: rebuild "+r.Target, err)
	}
	return b.Open(ctx, r.Target)
}

// Finalize implements driver.Backend: Resume, which cuts the staging file
// back to the recorded length, then CloseForCommit. A local output has a
// single writer (the state's lock keeps a second process out), so no
// other writer of the part can exist.
func (b *Backend) Finalize(ctx context.Context, resumable json.RawMessage) (json.RawMessage, error) {
	pw, err := b.Resume(ctx, resumable)
	if errors.Is(err, committer.ErrDataLoss) {
		// Finalized and published before: Commit verifies the target
		// (a resumable is also a pending here).
		if r, perr := parse(resumable); perr == nil {
			if _, serr := b.fs.Stat(b.abs(r.Target)); serr == nil {
				return resumable, nil
			}
		}
	}
	if err != nil {
		return nil, err
	}
	pending, err := pw.CloseForCommit(ctx)
	if err != nil {
		pw.Close()
	}
	return pending, err
}

// Resume implements driver.Backend.
func (b *Backend) Resume(ctx context.Context, resumable json.RawMessage) (driver.PartWriter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := parse(resumable)
	if err != nil {
		return nil, err
	}
	name := b.abs(r.Staging)
	f, err := b.fs.OpenAppend(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("localfs: in-progress file %s recorded with %d bytes is missing: %w", name, r.Length, committer.ErrDataLoss)
	}
	if err != nil {
		return nil, vfs.WrapPath("localfs: resume "+name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, vfs.WrapPath("localfs: resume "+name, err)
	}
	switch {
	case fi.Size() < r.Length:
		f.Close()
		return nil, fmt.Errorf("localfs: in-progress file %s has %d bytes, the checkpoint recorded %d: %w", name, fi.Size(), r.Length, committer.ErrDataLoss)
	case fi.Size() > r.Length:
		if err := f.Truncate(r.Length); err != nil {
			f.Close()
			return nil, fmt.Errorf("localfs: resume %s: truncate to %d: %w", name, r.Length, err)
		}
	}
	// The file's directory entry is durable: the checkpoint that recorded it
	// synced the directory.
	return &writer{b: b, f: f, canDirect: vfs.CanDirect(f), rec: r, dir: filepath.Dir(name), dirSynced: true}, nil
}

// Commit implements driver.Backend.
func (b *Backend) Commit(ctx context.Context, pending json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := parse(pending)
	if err != nil {
		return committer.Permanent(err)
	}
	staging, target := b.abs(r.Staging), b.abs(r.Target)
	dir := filepath.Dir(target)
	st, err := b.fs.Stat(staging)
	if errors.Is(err, fs.ErrNotExist) {
		return b.verifyCommitted(r, dir)
	}
	if err != nil {
		return vfs.WrapPath("localfs: commit "+target, err)
	}
	if st.Size() < r.Length {
		return fmt.Errorf("localfs: commit %s: staging file %s has %d bytes, the checkpoint recorded %d: %w", target, staging, st.Size(), r.Length, committer.ErrDataLoss)
	}
	if st.Size() > r.Length {
		// Bytes after the recorded length were never part of the checkpoint.
		if err := b.truncate(staging, r.Length); err != nil {
			return vfs.WrapPath("localfs: commit "+target, err)
		}
	}
	err = b.fs.RenameNoReplace(staging, target)
	if errors.Is(err, fs.ErrExist) {
		// A link+unlink publish that crashed between the two steps leaves both
		// names; anything else is somebody else's file.
		same, cerr := b.sameContent(staging, target)
		if cerr != nil {
			return vfs.WrapPath("localfs: commit "+target, cerr)
		}
		if !same {
			return fmt.Errorf("localfs: commit %s: a different file already has that name (staging kept at %s): %w", target, staging, committer.ErrAlreadyExists)
		}
		if err := b.fs.Remove(staging); err != nil {
			return vfs.WrapPath("localfs: commit "+target, err)
		}
	} else if err != nil {
		return vfs.WrapPath("localfs: commit "+target, err)
	}
	if err := b.fs.SyncDir(dir); err != nil {
		return vfs.WrapPath("localfs: commit "+target, err)
	}
	return nil
}

func (b *Backend) verifyCommitted(r record, dir string) error {
	target := b.abs(r.Target)
	tst, err := b.fs.Stat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("localfs: commit %s: neither the staging file %s nor the target exists: %w", target, b.abs(r.Staging), committer.ErrDataLoss)
	}
	if err != nil {
		return vfs.WrapPath("localfs: commit "+target, err)
	}
	if tst.Size() != r.Length {
		return fmt.Errorf("localfs: commit %s: staging file is gone and the target has %d bytes, the checkpoint recorded %d: %w", target, tst.Size(), r.Length, committer.ErrDataLoss)
	}
	// Already committed; make sure the rename is durable.
	if err := b.fs.SyncDir(dir); err != nil {
		return vfs.WrapPath("localfs: commit "+target, err)
	}
	return nil
}

func (b *Backend) truncate(name string, n int64) error {
	f, err := b.fs.OpenAppend(name)
	if err != nil {
		return err
	}
	if err := f.Truncate(n); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (b *Backend) sameContent(x, y string) (bool, error) {
	fx, err := b.fs.Open(x)
	if err != nil {
		return false, err
	}
	defer fx.Close()
	fy, err := b.fs.Open(y)
	if err != nil {
		return false, err
	}
	defer fy.Close()
	bx, by := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		nx, ex := io.ReadFull(fx, bx)
		ny, ey := io.ReadFull(fy, by)
		if nx != ny || !bytes.Equal(bx[:nx], by[:ny]) {
			return false, nil
		}
		xEOF := errors.Is(ex, io.EOF) || errors.Is(ex, io.ErrUnexpectedEOF)
		yEOF := errors.Is(ey, io.EOF) || errors.Is(ey, io.ErrUnexpectedEOF)
		if ex != nil && !xEOF {
			return false, ex
		}
		if ey != nil && !yEOF {
			return false, ey
		}
		if xEOF || yEOF {
			return xEOF && yEOF, nil
		}
	}
}

// Check implements driver.Output: nil when the target exists with the
// recorded length and its staging file is gone.
func (b *Backend) Check(ctx context.Context, pending json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := parse(pending)
	if err != nil {
		return err
	}
	if _, err := b.fs.Stat(b.abs(r.Staging)); err == nil {
		return committer.NotCommitted("%s: not yet committed (staging file %s present; run filesink run again to finish the commit)", b.abs(r.Target), b.abs(r.Staging))
	}
	st, err := b.fs.Stat(b.abs(r.Target))
	if err != nil {
		return fmt.Errorf("%s: committed file missing: %w", b.abs(r.Target), err)
	}
	if st.Size() != r.Length {
		return fmt.Errorf("%s: has %d bytes, the checkpoint recorded %d", b.abs(r.Target), st.Size(), r.Length)
	}
	return nil
}

// Scan implements driver.Output: it lists hidden in-progress files and
// reports a visible file named like staging data (".inprogress").
func (b *Backend) Scan(ctx context.Context) (staging, problems []string, err error) {
	err = b.walk(ctx, "", func(rel string, _ fs.DirEntry) error {
		base := path.Base(rel)
		switch {
		case base[0] == '.' && strings.HasSuffix(base, StagingSuffix):
			staging = append(staging, rel)
		case base[0] == '.' || base[0] == '_':
		case strings.HasSuffix(base, StagingSuffix):
			problems = append(problems, fmt.Sprintf("%s: staging file visible as finished output", b.abs(rel)))
		}
		return nil
	})
	return staging, problems, err
}

// Sweep implements driver.Backend.
// It counts the part files' staging files it deletes.
func (b *Backend) Sweep(ctx context.Context, namespace string, keep []json.RawMessage) (map[string]int64, error) {
	keepSet := make(map[string]bool, len(keep))
	for _, k := range keep {
		r, err := parse(k)
		if err != nil {
			return nil, err
		}
		keepSet[r.Staging] = true
	}
	var files int64
	err := b.walk(ctx, "", func(rel string, _ fs.DirEntry) error {
		base := path.Base(rel)
		// Part files of this namespace, and the temporary files of
		// marker puts (PutFile) that a crash interrupted.
		part := strings.HasPrefix(base, "."+namespace) && strings.HasSuffix(base, StagingSuffix) && !keepSet[rel]
		if !part && !(strings.HasPrefix(base, tmpPrefix) && strings.HasSuffix(base, "-_SUCCESS")) {
			return nil
		}
		removed, err := b.remove(b.abs(rel))
		if part && removed {
			files++
		}
		return err
	})
	swept := map[string]int64{driver.SweptStagingFile: files}
	if err != nil {
		return swept, err
	}
	// Temporary files of this namespace's interrupted manifest puts.
	dir := filepath.Join(b.root, driver.MetaDir, "manifests")
	ents, err := b.fs.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return swept, nil
	}
	if err != nil {
		return swept, vfs.WrapPath("localfs: sweep "+dir, err)
	}
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, tmpPrefix) && strings.HasSuffix(n, "-"+strings.TrimSuffix(namespace, "-")+".json") {
			if _, err := b.remove(filepath.Join(dir, n)); err != nil {
				return swept, err
			}
		}
	}
	return swept, b.sweepClaims()
}

// sweepClaims deletes the temporary files of interrupted claim puts
// (claims/.tmp-RANDOM-NNNNNNNN.json) whose claim number is taken: their
// writer died, or lost the claim and fails on its own. A temporary file of
// a higher number may be a claim being made now and is left.
func (b *Backend) sweepClaims() error {
	dir := filepath.Join(b.root, driver.MetaDir, "claims")
	ents, err := b.fs.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return vfs.WrapPath("localfs: sweep "+dir, err)
	}
	number := func(name string) (uint64, bool) {
		base, ok := strings.CutSuffix(name, ".json")
		if i := strings.LastIndexByte(base, '-'); i >= 0 {
			base = base[i+1:]
		}
		n, err := strconv.ParseUint(base, 10, 64)
		return n, ok && err == nil && len(base) == 8
	}
	var taken uint64
	for _, e := range ents {
		if n, ok := number(e.Name()); ok && !strings.HasPrefix(e.Name(), ".") {
			taken = max(taken, n)
		}
	}
	for _, e := range ents {
		if n, ok := number(e.Name()); ok && strings.HasPrefix(e.Name(), tmpPrefix) && n <= taken {
			if _, err := b.remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// tmpPrefix starts the names of the temporary files of PutMeta and PutFile.
const tmpPrefix = ".tmp-"

// remove deletes name (gone already is fine: removed is false) and syncs
// its directory.
func (b *Backend) remove(name string) (removed bool, err error) {
	err = b.fs.Remove(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, vfs.WrapPath("localfs: sweep "+name, err)
	}
	return err == nil, b.fs.SyncDir(filepath.Dir(name))
}

// Walk calls fn for every file under the output directory, skipping
// directories whose names start with '_' or '.' (state, dead letters and
// other reserved names). rel is slash-separated and relative to the root.
func (b *Backend) Walk(ctx context.Context, fn func(rel string, e fs.DirEntry) error) error {
	return b.walk(ctx, "", fn)
}

func (b *Backend) walk(ctx context.Context, rel string, fn func(string, fs.DirEntry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ents, err := b.fs.ReadDir(b.abs(rel))
	if errors.Is(err, fs.ErrNotExist) && rel == "" {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		child := path.Join(rel, e.Name())
		if e.IsDir() {
			if n := e.Name(); n[0] == '_' || n[0] == '.' {
				continue
			}
			if err := b.walk(ctx, child, fn); err != nil {
				return err
			}
			continue
		}
		if err := fn(child, e); err != nil {
			return err
		}
	}
	return nil
}

// writer is an in-progress part file: a driver.PartWriter and
// driver.PartWriter. Not safe for concurrent use, except that the
// fsync started by PersistAsync runs beside the other methods.
type writer struct {
	b *Backend
	f vfs.File
	// canDirect: f is the OS's file, on which direct I/O is possible.
	canDirect bool
	rec       record
	dir       string
	size      int64
	// hinted is how much of size has been handed to StartWriteback.
	hinted int64
	// closed is set by CloseForCommit and Close, on the writing goroutine.
	closed bool
	// syncing is closed when the last fsync started on a goroutine of its
	// own (PersistAsync's, or Write's every syncEvery bytes) has finished;
	// nil before the first.
	syncing chan struct{}
	// bgSynced is size when Write last started an fsync.
	bgSynced int64
	// In direct mode (direct.go), dslot is the writer's pair of buffers,
	// dbuf the one gathering the bytes of the next direct write (both nil
	// in buffered mode), and dflight, while a direct write runs on its
	// own goroutine, where its error comes. odirect is whether O_DIRECT is
	// set on f (the goroutine of a direct write in flight owns it).
	dslot   *directSlot
	dbuf    []byte
	dflight chan error
	odirect bool

	mu        sync.Mutex // guards err and dirSynced, touched by that fsync
	err       error      // sticky: a failed write or fsync breaks the writer
	dirSynced bool
}

var _ driver.PartWriter = (*writer)(nil)

func (w *writer) broken() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *writer) fail(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// Write implements driver.PartWriter. Large writes go through the
// direct buffer (direct.go).
func (w *writer) Write(p []byte) (int, error) {
	if err := w.broken(); err != nil {
		return 0, err
	}
	written := 0
	if w.dslot == nil && len(p) >= directMin && w.canDirect {
		// Direct writes start at a block boundary of the file: the bytes
		// before it go buffered.
		n, err := w.startDirect(p)
		if err != nil {
			return n, err
		}
		written, p = n, p[n:]
	}
	var n int
	var err error
	if w.dslot != nil {
		n, err = w.writeDirect(p)
	} else {
		n, err = w.writeBuffered(p)
	}
	if err == nil && w.size-w.bgSynced >= syncEvery && !w.syncBusy() {
		w.bgSynced = w.size
		w.startSync()
	}
	return written + n, err
}

// writeBuffered writes p to the file through the page cache.
func (w *writer) writeBuffered(p []byte) (int, error) {
	if w.odirect {
		if err := w.setODirect(false); err != nil {
			return 0, err
		}
	}
	n, err := w.f.Write(p)
	w.size += int64(n)
	if err != nil {
		return n, w.fail(vfs.WrapPath("localfs: write "+w.b.abs(w.rec.Staging), err))
	}
	if w.size-w.hinted >= writebackEvery {
		vfs.StartWriteback(w.f, w.rec.Length+w.hinted, w.size-w.hinted)
		w.hinted = w.size
	}
	return n, nil
}

// writebackEvery is how many written bytes a part writer lets accumulate
// before it asks the kernel to start writing them out (vfs.StartWriteback):
// the fsync of a checkpoint then finds most of the part on disk already.
const writebackEvery = 1 << 20

// syncEvery is how many written bytes a part writer lets accumulate before
// it fsyncs them on a goroutine of its own (if its last fsync is over),
// beside the writing: writeback alone leaves a checkpoint's fsync the
// journal commit and the device's cache flush of the whole part, which on
// some disks cost as much as writing it (60-90 ms for 128 MiB on the
// benchmark machine), while the writer waits.
const syncEvery = 16 << 20

func (w *writer) Size() int64 { return w.rec.Length + w.size }

// awaitSync waits for the last fsync started by startSync, if any.
func (w *writer) awaitSync() {
	if w.syncing != nil {
		<-w.syncing
	}
}

// syncBusy reports whether the last fsync started by startSync runs.
func (w *writer) syncBusy() bool {
	if w.syncing == nil {
		return false
	}
	select {
	case <-w.syncing:
		return false
	default:
		return true
	}
}

// startSync runs syncData on a goroutine of its own (at most maxSyncs per
// backend at once) and returns the channel closed when it ends (also
// w.syncing) and where its error is then. The previous one must be over
// (awaitSync).
func (w *writer) startSync() (done <-chan struct{}, errp *error) {
	ch := make(chan struct{})
	w.syncing = ch
	errp = new(error)
	go func() {
		defer close(ch)
		w.b.syncs <- struct{}{}
		defer func() { <-w.b.syncs }()
		*errp = w.syncData()
	}()
	return ch, errp
}

// sync makes the file's bytes durable (and its directory entry) and
// returns the record of its current length.
func (w *writer) sync(ctx context.Context) (record, error) {
	if err := ctx.Err(); err != nil {
		return record{}, err
	}
	w.awaitSync()
	if err := w.endDirect(); err != nil {
		return record{}, err
	}
	r := w.rec
	r.Length = w.Size()
	return r, w.syncData()
}

// syncData fsyncs the file, the directories made for it and its
// directory. Safe to call beside Write.
func (w *writer) syncData() error {
	if err := w.broken(); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		// Never retry fsync on the same descriptor: the kernel may have
		// dropped the dirty pages.
		return w.fail(vfs.WrapPath("localfs: fsync "+w.b.abs(w.rec.Staging), err))
	}
	if err := w.b.syncDirs(); err != nil {
		return w.fail(err)
	}
	w.mu.Lock()
	synced := w.dirSynced
	w.mu.Unlock()
	if !synced {
		if err := w.b.fs.SyncDir(w.dir); err != nil {
			return w.fail(vfs.WrapPath("localfs: fsync directory "+w.dir, err))
		}
		w.mu.Lock()
		w.dirSynced = true
		w.mu.Unlock()
	}
	return nil
}

// PersistAsync implements driver.PartWriter: it records the length
// written so far and starts the fsync on a goroutine of its own (at most
// 16 per backend at once), so that writing goes on beside it. The returned
// function waits for the fsync; a nil error from it means the recorded
// length is durable. Bytes written after PersistAsync may be made durable
// too; a Resume truncates them.
func (w *writer) PersistAsync(ctx context.Context) (func(context.Context) (json.RawMessage, error), error) {
	if err := w.broken(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w.awaitSync()
	if err := w.endDirect(); err != nil {
		return nil, err
	}
	r := w.rec
	r.Length = w.Size()
	done, errp := w.startSync()
	return func(ctx context.Context) (json.RawMessage, error) {
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if *errp != nil {
			return nil, *errp
		}
		return json.Marshal(r)
	}, nil
}

func (w *writer) Persist(ctx context.Context) (json.RawMessage, error) {
	r, err := w.sync(ctx)
	if err != nil {
		return nil, err
	}
	return json.Marshal(r)
}

// MustRoll implements driver.PartWriter: a file has no limit that
// rolling must respect.
func (w *writer) MustRoll() bool { return false }

func (w *writer) CloseForCommit(ctx context.Context) (json.RawMessage, error) {
	r, err := w.sync(ctx)
	if err != nil {
		return nil, err
	}
	w.closed = true
	if err := w.f.Close(); err != nil {
		return nil, vfs.WrapPath("localfs: close "+w.b.abs(w.rec.Staging), err)
	}
	return json.Marshal(r)
}

func (w *writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.awaitSync()
	err := w.dropDirect()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}
