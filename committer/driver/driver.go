// Package driver is the contract a file sink's storage implements: a
// [Backend] stages part files and publishes them, a [PartWriter] writes one
// in-progress part. committer/localfs (rename on a filesystem) and
// committer/s3 (multipart upload) implement it; committer/drivertest is the
// conformance suite every implementation passes. Every rule is written as a
// "must"; the file sink (package filesink) validates its input once and
// relies on them.
package driver

import (
	"context"
	"encoding/json"
	"io"
)

// Backend stages part files and publishes them: the small contract a file
// sink's storage implements (committer/localfs, committer/s3). Every method
// must be safe for concurrent use. Targets are slash-separated paths relative
// to the backend's root; they never start with '/' and never contain a
// component starting with '.' or '_'.
type Backend interface {
	// Open must start a new in-progress part file to be published as target.
	// It must not be visible as finished output before Commit, and must fail
	// if target or its staging data already exists.
	Open(ctx context.Context, target string) (PartWriter, error)
	// Resume must reopen the in-progress part file described by resumable (a
	// value from PartWriter.Persist) so that the next write lands right after
	// the recorded bytes: bytes written after that Persist are discarded.
	// Fewer durable bytes than recorded is an error wrapping committer.ErrDataLoss.
	Resume(ctx context.Context, resumable json.RawMessage) (PartWriter, error)
	// Commit must publish pending (a value from PartWriter.CloseForCommit)
	// atomically and without replacing an existing target. It must be
	// idempotent and verified: when the staging data is gone and the target
	// exists with the recorded length (and checksum where the store has
	// one), it returns nil; a target with other content is an error wrapping
	// committer.ErrAlreadyExists; staging and target both missing, or staging shorter
	// than recorded, is an error wrapping committer.ErrDataLoss.
	Commit(ctx context.Context, pending json.RawMessage) error
	// Sweep must delete staging data whose part name starts with namespace
	// and that no entry of keep (resumables and pendings of retained
	// checkpoints and live writers) references. It must not touch anything
	// else. It returns how many it deleted by kind (Swept*; kinds with none
	// may be absent), also when it fails midway.
	Sweep(ctx context.Context, namespace string, keep []json.RawMessage) (swept map[string]int64, err error)
	// Describe returns the publish target and the staging name of a
	// resumable or pending, for messages and audits.
	Describe(data json.RawMessage) (target, staging string, err error)
}

// Kinds of staging data a Backend's Sweep deletes: the keys of its counts.
const (
	SweptStagingFile   = "staging_file"   // a local staging file (".*.inprogress")
	SweptUpload        = "upload"         // a multipart upload, aborted
	SweptStagingObject = "staging_object" // a staging object (S3 tail or upload marker)
)

// PartWriter writes one in-progress part file. Not safe for concurrent use.
type PartWriter interface {
	// Write appends to the part file (not yet durable).
	Write(p []byte) (int, error)
	// Size is the number of bytes written so far.
	Size() int64
	// Persist must make every written byte durable and return a resumable
	// recording the durable length. The writer stays open.
	Persist(ctx context.Context) (json.RawMessage, error)
	// CloseForCommit must make every written byte durable, close the writer
	// and return the pending committable for Backend.Commit.
	CloseForCommit(ctx context.Context) (json.RawMessage, error)
	// Close releases the writer without publishing; the staging data stays
	// (a checkpoint may reference it).
	Close() error
}

// AsyncPersister is implemented by part writers whose Persist can overlap
// with later writes (an S3 upload keeps uploading while the writer spills
// the next bytes).
type AsyncPersister interface {
	// PersistAsync marks the bytes written so far as the checkpoint's and
	// starts making them durable. The returned function returns the
	// resumable for exactly those bytes once they are durable (Persist's
	// contract). It may run concurrently with Write, Size, MustRoll,
	// CloseForCommit and Close of the same writer, is called at most once,
	// and must be called (or abandoned) before the next PersistAsync.
	PersistAsync(ctx context.Context) (func(context.Context) (json.RawMessage, error), error)
}

// Auditor is implemented by backends that can check their output (the
// verify command).
type Auditor interface {
	// Check reports whether pending is published exactly as recorded
	// (nil), or why not.
	Check(ctx context.Context, pending json.RawMessage) error
	// Scan lists the output: the staging names present (as Describe names
	// them) and every problem seen regardless of checkpoints, such as
	// staging data visible as finished output.
	Scan(ctx context.Context) (staging []string, problems []string, err error)
}

// MetaDir is the hidden directory of an output (beside its finished
// files) that holds the sink's metadata: MetaStore names are relative to
// it, and its "manifests" subdirectory holds the commit manifests.
const MetaDir = "_filesink"

// MetaStore is implemented by backends that keep small metadata objects
// (commit manifests) in their output's MetaDir. Safe for concurrent use.
type MetaStore interface {
	// PutMeta publishes data as name (slash-separated, relative to
	// MetaDir) atomically and at most once. A nil error means the object
	// is durable and holds exactly data, whether this call wrote it or it
	// was already there with the same bytes; if it exists with other
	// bytes, the error matches committer.ErrAlreadyExists and nothing is changed.
	PutMeta(ctx context.Context, name string, data []byte) error
	// GetMeta returns the bytes of name; an error matching fs.ErrNotExist
	// if there is no such object.
	GetMeta(ctx context.Context, name string) ([]byte, error)
	// ListMeta returns the names of the objects directly in dir (relative
	// to MetaDir), sorted; none if dir does not exist.
	ListMeta(ctx context.Context, dir string) ([]string, error)
	// MetaLocation names where name is stored, for messages.
	MetaLocation(name string) string
	// PutFile is PutMeta for a path relative to the output itself (a
	// hidden name such as "bucket/_SUCCESS"; the part files are published
	// by Commit, never by PutFile).
	PutFile(ctx context.Context, target string, data []byte) error
}

// MetaListerAfter is implemented by MetaStores that can list a
// directory from a given name on (S3's StartAfter), so that a reader that
// has seen its first names, such as the markers reading the manifests of
// each new checkpoint, does not list them all again. Safe for concurrent
// use.
type MetaListerAfter interface {
	// ListMetaAfter is ListMeta limited to the names greater than after
	// (a name as ListMeta returns it, which need not exist).
	ListMetaAfter(ctx context.Context, dir, after string) ([]string, error)
}

// FileLister is implemented by backends whose finished output can be
// listed and read back (the verify command's auditor). Safe for
// concurrent use.
type FileLister interface {
	// ListFiles calls fn with the target and size of every visible file
	// of the output: hidden names (starting with "_" or ".", at any level,
	// where staging and metadata live) are not visited.
	ListFiles(ctx context.Context, fn func(target string, size int64) error) error
	// OpenFile opens the finished file target for reading.
	OpenFile(ctx context.Context, target string) (io.ReadCloser, error)
	// FileLocation names target as a user would find it (a path or URL).
	FileLocation(target string) string
}

// Limited is implemented by part writers that cannot grow without bound
// (an S3 multipart upload has at most 10,000 parts). The file sink rolls a
// part as soon as its writer's MustRoll returns true, whatever the rolling
// policy says.
type Limited interface {
	// MustRoll reports whether the part must be closed before more bytes
	// are written to it. The file sink calls it right after Write, from the
	// goroutine that writes.
	MustRoll() bool
}
