package recovery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/filesink/filesink/vfs"
)

// DefaultRetain is how many checkpoint records Prune keeps by default.
const DefaultRetain = 3

// Store holds the checkpoint records of one job and, beside them, the job's
// id: the name of the job's external transactions (the MySQL sink's XA
// branches) and of its idempotency keys (the HTTP sink's), which must
// survive restarts and moves of the store. DirStore and the S3 store
// (committer/s3) are Stores.
//
// An implementation must make Put and SetJobID durable and atomic (after a
// crash a record or the id is either absent or complete), must never
// overwrite an existing record or a kept job id, and must check ctx before
// any I/O. Whether it is safe for concurrent use is for the implementation
// to document (DirStore and the S3 store are).
type Store interface {
	// Put writes record c. It must fail if a record with the same ID
	// exists, and must never replace it. A nil error guarantees that the
	// record is durable: List and Get return it, also after a crash.
	Put(ctx context.Context, c *Checkpoint) error
	// List returns the IDs of the stored records. It must return them in
	// ascending order, and a *CorruptError for a name in the store's
	// namespace that is not a record's. A nil error guarantees that every
	// record whose Put returned nil before the call, and that was not
	// deleted, is listed.
	List(ctx context.Context) ([]uint64, error)
	// Get reads record id. It must return a *CorruptError for a defective
	// record (one that does not decode, or whose ID is not id), never a
	// partial record. A nil error guarantees that the record is the one
	// Put wrote.
	Get(ctx context.Context, id uint64) (*Checkpoint, error)
	// Delete removes record id. Deleting a missing record must not be an
	// error. A nil error guarantees that List no longer returns id (a
	// deleted record that comes back after a crash is harmless: it is
	// older than the newest).
	Delete(ctx context.Context, id uint64) error
	// Location describes the store for messages ("/out/_filesink"). It
	// must do no I/O.
	Location() string
	// JobID returns the job id kept in the store, "" if none is. It must
	// return an error, not "", for a kept id it cannot read or that is
	// empty. A nil error guarantees that the returned id, if not "", is the
	// one SetJobID kept.
	JobID(ctx context.Context) (string, error)
	// SetJobID keeps id in the store. It must never replace a kept id: if
	// one is kept (written meanwhile by another run), it must equal id,
	// else the error must be a *JobIDError with Meanwhile set. A nil error
	// guarantees that id is durable: JobID returns it, also after a crash.
	SetJobID(ctx context.Context, id string) error
	// JobIDLocation names where the id is kept, for messages
	// ("/state/JOB", "s3://bucket/prefix/JOB"). It must do no I/O.
	JobIDLocation() string
	// JobRecords returns the versions of the store's job record, oldest
	// first (none: a store no run has checked its identity in). A record
	// that does not decode is a *CorruptError.
	JobRecords(ctx context.Context) ([]*JobRecord, error)
	// AddJobRecord writes version r.Version of the job record. It must
	// never replace one: if that version exists, the error matches
	// fs.ErrExist. A nil error guarantees that r is durable: JobRecords
	// returns it, also after a crash.
	AddJobRecord(ctx context.Context, r *JobRecord) error
}

// Latest returns the newest record of s, or (nil, nil) when s is empty. A
// defective newest record is an error, never skipped.
func Latest(ctx context.Context, s Store) (*Checkpoint, error) {
	ids, err := s.List(ctx)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	return s.Get(ctx, ids[len(ids)-1])
}

// Retained reads every stored record, oldest first. Any defective record is
// an error: a sweep that cannot see what a record references must not run.
func Retained(ctx context.Context, s Store) ([]*Checkpoint, error) {
	ids, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Checkpoint, 0, len(ids))
	for _, id := range ids {
		c, err := s.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// Readable reads every stored record that it can, oldest first, and returns
// the defective ones apart, each a *CorruptError naming its record (a
// record of an unsupported format version included). It is for the tools
// that inspect a store (filesink state, verify, uploads), which report a
// defective record and go on with the others; a run must not, and uses
// Latest and Retained, which refuse any defective record. A record deleted
// between the listing and its reading (a running job pruned it) is left
// out. A nil error guarantees that every listed record is in good or bad,
// or was deleted meanwhile; an error (the store cannot be listed, a name in
// it is not a record's, a read failed) returns nothing else.
func Readable(ctx context.Context, s Store) (good []*Checkpoint, bad []*CorruptError, err error) {
	ids, err := s.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, id := range ids {
		c, err := s.Get(ctx, id)
		var ce *CorruptError
		switch {
		case err == nil:
			good = append(good, c)
		case errors.As(err, &ce):
			bad = append(bad, ce)
		case errors.Is(err, fs.ErrNotExist):
		default:
			return nil, nil, err
		}
	}
	return good, bad, nil
}

// Prune deletes all but the newest keep records (keep < 1 means 1).
func Prune(ctx context.Context, s Store, keep int) error {
	ids, err := s.List(ctx)
	if err != nil {
		return err
	}
	_, err = PruneIDs(ctx, s, ids, keep)
	return err
}

// PruneIDs is Prune for a caller that knows the store's ids (ascending)
// without listing it: it deletes all but the newest keep of them (keep < 1
// means 1), oldest first, and returns how many it deleted, those before an
// error included.
func PruneIDs(ctx context.Context, s Store, ids []uint64, keep int) (int, error) {
	keep = max(keep, 1)
	n := 0
	for ; n+keep < len(ids); n++ {
		if err := s.Delete(ctx, ids[n]); err != nil {
			return n, err
		}
	}
	return n, nil
}

// DirStore keeps records as files "ckpt-<20-digit id>" in one directory of a
// vfs.FS. An open DirStore on the real file system (vfs.OS) holds the
// directory's lock (LockFile) until Close. Safe for concurrent use.
type DirStore struct {
	fs       vfs.FS
	dir      string
	readOnly bool
	lock     *dirLock
}

// OpenOption configures OpenDir. Its values come from this package's
// functions (ReadOnly).
type OpenOption interface{ apply(*openOptions) }

type openOptions struct {
	readOnly bool
}

type openOptionFunc func(*openOptions)

func (f openOptionFunc) apply(o *openOptions) { f(o) }

// ReadOnly opens a checkpoint directory for reading only, as a process
// that inspects the records of a job that may be running does: it takes no
// lock, creates nothing, removes no temp file, and Put, Delete and SetJobID
// fail with ErrReadOnly. The directory must exist.
func ReadOnly() OpenOption { return openOptionFunc(func(o *openOptions) { o.readOnly = true }) }

// ErrReadOnly is matched by the error of a write to a DirStore opened with
// ReadOnly.
var ErrReadOnly = errors.New("checkpoint store opened read-only")

var _ Store = (*DirStore)(nil)

const (
	recordPrefix = "ckpt-"
	tempPrefix   = ".ckpt-"
)

// OpenDir opens (creating durably if needed) a checkpoint directory, locks
// it and removes temp files of interrupted Puts, which are never records.
//
// On the real file system (vfs.OS) the store holds an exclusive lock on
// DIR/LOCK until Close (flock on Unix, LockFileEx on Windows; the kernel
// drops it when the process dies, so a killed run never blocks the next):
// while it is held, a second OpenDir of the directory, in this process or
// another, fails with a *LockedError matching ErrLocked that names the
// directory and the holder (pid, host and start time, from DIR/LOCK). A
// held lock is tried again for about 100 ms before that error, so that a
// reader's LockHolder, which tests the lock for an instant, does not make
// a starting run fail. A nil error guarantees that the caller alone
// writes the directory until Close. Other file systems take no lock.
// A nil fsys is vfs.OS{}.
// With ReadOnly, see there.
func OpenDir(ctx context.Context, fsys vfs.FS, dir string, opts ...OpenOption) (*DirStore, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var o openOptions
	for _, opt := range opts {
		opt.apply(&o)
	}
	if fsys == nil {
		fsys = vfs.OS{}
	}
	if o.readOnly {
		if _, err := fsys.Stat(dir); err != nil {
			return nil, vfs.WrapPath("checkpoint store "+dir, err)
		}
		return &DirStore{fs: fsys, dir: dir, readOnly: true}, nil
	}
	if err := vfs.MkdirAllSync(fsys, dir); err != nil {
		return nil, vfs.WrapPath("checkpoint store "+dir, err)
	}
	// Lock before removing temp files: they may be a running Put's.
	lock, err := lockDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	s := &DirStore{fs: fsys, dir: dir, lock: lock}
	if err := s.removeTemps(); err != nil {
		_ = lock.release()
		return nil, err
	}
	return s, nil
}

func (s *DirStore) removeTemps() error {
	ents, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return vfs.WrapPath("checkpoint store "+s.dir, err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			if err := s.fs.Remove(filepath.Join(s.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("checkpoint store %s: remove temp file: %w", s.dir, err)
			}
		}
	}
	return nil
}

// Close releases the directory's lock; the store must not be used after.
// Closing twice is not an error. Not safe for concurrent use with the
// other methods.
func (s *DirStore) Close() error {
	if err := s.lock.release(); err != nil {
		return fmt.Errorf("checkpoint store %s: unlock: %w", s.dir, err)
	}
	return nil
}

func (s *DirStore) writable() error {
	if s.readOnly {
		return fmt.Errorf("checkpoint store %s: %w", s.dir, ErrReadOnly)
	}
	return nil
}

// Location implements Store.
func (s *DirStore) Location() string { return s.dir }

func (s *DirStore) name(id uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%s%020d", recordPrefix, id))
}

// Put implements Store: temp file, fsync, no-replace rename, directory fsync.
func (s *DirStore) Put(ctx context.Context, c *Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.writable(); err != nil {
		return err
	}
	b, err := Encode(c)
	if err != nil {
		return err
	}
	if err := s.publish(fmt.Sprintf("%020d", c.ID), s.name(c.ID), b); err != nil {
		return fmt.Errorf("write checkpoint %d: %w", c.ID, err)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("write checkpoint %d: %w", c.ID, err)
	}
	return nil
}

// publish writes data durably as name (a path in the directory), never
// replacing it: a temp file named after tag (removed by the next OpenDir
// if left behind) is written and fsynced, then renamed without replacing.
// The caller fsyncs the directory to make the name durable. An
// existing name gives an error matching fs.ErrExist; the temp file is gone
// whatever the error.
func (s *DirStore) publish(tag, name string, data []byte) error {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(s.dir, tempPrefix+tag+".tmp-"+hex.EncodeToString(rnd[:]))
	if err := vfs.WriteFileSync(s.fs, tmp, data); err != nil {
		_ = s.fs.Remove(tmp)
		return err
	}
	if err := s.fs.RenameNoReplace(tmp, name); err != nil {
		_ = s.fs.Remove(tmp)
		return err
	}
	return nil
}

// List implements Store.
func (s *DirStore) List(ctx context.Context) ([]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ents, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, vfs.WrapPath("checkpoint store "+s.dir, err)
	}
	var ids []uint64
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), recordPrefix)
		if !ok || e.IsDir() {
			continue
		}
		id, err := strconv.ParseUint(rest, 10, 64)
		if err != nil || len(rest) != 20 {
			return nil, &CorruptError{File: filepath.Join(s.dir, e.Name()), Reason: "unexpected file name in the checkpoint directory", Err: ErrCorruptCheckpoint}
		}
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// Get implements Store.
func (s *DirStore) Get(ctx context.Context, id uint64) (*Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := s.name(id)
	b, err := vfs.ReadFile(s.fs, name)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %d: %w", id, err)
	}
	c, err := Decode(name, b)
	if err != nil {
		return nil, err
	}
	if c.ID != id {
		return nil, &CorruptError{File: name, Reason: fmt.Sprintf("record says checkpoint %d", c.ID), Err: ErrCorruptCheckpoint}
	}
	return c, nil
}

// Delete implements Store. The directory is synced so that a deleted record
// does not come back; a record that does come back after a crash is harmless
// because it is older than the newest.
func (s *DirStore) Delete(ctx context.Context, id uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.writable(); err != nil {
		return err
	}
	if err := s.fs.Remove(s.name(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete checkpoint %d: %w", id, err)
	}
	return s.fs.SyncDir(s.dir)
}
