// Package driver is the contract a file sink's storage implements: a
// [Backend] stages part files, publishes them and keeps the output's
// metadata ([Output]); a [PartWriter] writes one in-progress part.
// committer/localfs (rename on a filesystem) and committer/s3 (multipart
// upload) implement it; committer/drivertest is the conformance suite every
// implementation passes.
//
// Every method of both interfaces is required: there are no optional
// capabilities found by type assertion, and a wrapper that embeds a Backend
// or a PartWriter forwards all of them. Every rule is written as a "must";
// the file sink (package filesink) validates its input once and relies on
// them.
package driver

import (
	"context"
	"encoding/json"
	"io"
)

// Backend stages part files and publishes them: the contract a file sink's
// storage implements (committer/localfs, committer/s3). Every method must be
// safe for concurrent use. Targets are slash-separated paths relative to
// the backend's root; they never start with '/' and never contain a
// component starting with '.' or '_'.
type Backend interface {
	// Open must start a new in-progress part file to be published as target.
	// It must not be visible as finished output before Commit, and must fail
	// if target or its staging data already exists.
	Open(ctx context.Context, target string) (PartWriter, error)
	// Resume must reopen the in-progress part file described by resumable (a
	// value from PartWriter.Persist) so that the next write lands right after
	// the recorded bytes: bytes written after that Persist are discarded.
	// Fewer durable bytes than recorded must be an error wrapping
	// committer.ErrDataLoss.
	Resume(ctx context.Context, resumable json.RawMessage) (PartWriter, error)
	// Rebuild must start a new in-progress part file for the target of
	// lost, a resumable or pending whose Resume or Commit failed with
	// committer.ErrDataLoss (its staging data gone or short), as Open does,
	// after removing what is left of that staging data and of earlier
	// rebuilds of the target that were not published. Like Open it must
	// fail with committer.ErrAlreadyExists if the target exists. The file
	// sink writes the part again into it from the source records its
	// checkpoint lists.
	Rebuild(ctx context.Context, lost json.RawMessage) (PartWriter, error)
	// Finalize must return a pending committable that publishes exactly
	// the bytes resumable records, for a part that another process may
	// still be writing (it lost the part to this one and does not know
	// it yet): it must not change or remove anything that writer could
	// still write, and what that writer writes later must never reach the
	// published file. Called again with the same resumable (a crash came
	// before its pending was committed), it must return a pending that
	// publishes the same bytes, or that Commit finds published. Recorded
	// bytes that are gone must be an error wrapping committer.ErrDataLoss.
	Finalize(ctx context.Context, resumable json.RawMessage) (pending json.RawMessage, err error)
	// Commit must publish pending (a value from PartWriter.CloseForCommit)
	// atomically and without replacing an existing target. It must be
	// idempotent and verified: when the staging data is gone and the target
	// exists with the recorded length (and checksum where the store has
	// one), it returns nil; a target with other content must be an error
	// wrapping committer.ErrAlreadyExists; staging and target both missing,
	// or staging shorter than recorded, must be an error wrapping
	// committer.ErrDataLoss.
	Commit(ctx context.Context, pending json.RawMessage) error
	// Sweep must delete staging data whose part name starts with namespace
	// and that no entry of keep (resumables and pendings of retained
	// checkpoints and live writers) references. It must not touch anything
	// else. It returns how many it deleted by kind (Swept*; kinds with none
	// may be absent), also when it fails midway.
	Sweep(ctx context.Context, namespace string, keep []json.RawMessage) (swept map[string]int64, err error)
	// Describe must return the publish target and the staging name of a
	// resumable or pending (for messages and audits), and an error for
	// anything else.
	Describe(data json.RawMessage) (target, staging string, err error)
	// SweepEvery must return how often, in checkpoints, Sweep must run
	// while the job runs: a positive n when staging data outlives the
	// commit of the checkpoint that wrote it (S3 tail objects of older
	// checkpoints), 0 when sweeping at recovery is enough. The file sink
	// passes it to the coordinator (committer.Snapshot.SweepEvery), which
	// schedules the sweeps.
	SweepEvery() int

	Output
}

// MetaDir is the hidden directory of an output (beside its finished
// files) that holds the sink's metadata: Output's metadata names are
// relative to it, and its "manifests" subdirectory holds the commit
// manifests.
const MetaDir = "_filesink"

// Output is the read side of a backend and its metadata: the audit of
// committed parts (the verify command), small metadata objects (commit
// manifests in MetaDir, _SUCCESS markers) and the finished files. The file
// sink's auditor and markers need only this part of a Backend. Every method
// must be safe for concurrent use.
type Output interface {
	// Check must return nil if pending is published exactly as recorded,
	// and otherwise an error saying why not: one matching
	// committer.ErrNotCommitted while the staging data of pending is still
	// there (its commit has not run).
	Check(ctx context.Context, pending json.RawMessage) error
	// Scan must list the output: the staging names present (as Describe
	// names them) and every problem seen regardless of checkpoints, such
	// as staging data visible as finished output.
	Scan(ctx context.Context) (staging []string, problems []string, err error)

	// PutMeta must publish data as name (slash-separated, relative to
	// MetaDir) atomically and at most once. A nil error means the object
	// is durable and holds exactly data, whether this call wrote it or it
	// was already there with the same bytes; if it exists with other
	// bytes, the error must match committer.ErrAlreadyExists and nothing
	// is changed.
	PutMeta(ctx context.Context, name string, data []byte) error
	// GetMeta must return the bytes of name, or an error matching
	// fs.ErrNotExist if there is no such object.
	GetMeta(ctx context.Context, name string) ([]byte, error)
	// ListMeta must return the names of the objects directly in dir
	// (relative to MetaDir, as GetMeta takes them), sorted; none if dir
	// does not exist.
	ListMeta(ctx context.Context, dir string) ([]string, error)
	// ListMetaAfter must be ListMeta limited to the names greater than
	// after (a name as ListMeta returns it, which need not exist), so that
	// a reader that has seen the first names, such as the markers reading
	// the manifests of each new checkpoint, need not list them all again.
	ListMetaAfter(ctx context.Context, dir, after string) ([]string, error)
	// MetaLocation must name where name is stored, for messages.
	MetaLocation(name string) string
	// PutFile must be PutMeta for a path relative to the output itself (a
	// hidden name such as "bucket/_SUCCESS"; the part files are published
	// by Commit, never by PutFile).
	PutFile(ctx context.Context, target string, data []byte) error

	// ListFiles must call fn with the target and size of every visible
	// file of the output, and stop at fn's first error, returning it.
	// Hidden names (starting with "_" or ".", at any level, where staging
	// and metadata live) must not be visited.
	ListFiles(ctx context.Context, fn func(target string, size int64) error) error
	// OpenFile must open the finished file target for reading; an error
	// matching fs.ErrNotExist if there is none.
	OpenFile(ctx context.Context, target string) (io.ReadCloser, error)
	// FileLocation must name target as a user would find it (a path or
	// URL).
	FileLocation(target string) string
}

// Kinds of staging data a Backend's Sweep deletes: the keys of its counts.
const (
	SweptStagingFile   = "staging_file"   // a local staging file (".*.inprogress")
	SweptUpload        = "upload"         // a multipart upload, aborted
	SweptStagingObject = "staging_object" // a staging object (S3 tail or upload marker)
)

// PartWriter writes one in-progress part file. Not safe for concurrent use,
// except as PersistAsync says.
type PartWriter interface {
	// Write must append p to the part file (not yet durable).
	Write(p []byte) (int, error)
	// Size must return the number of bytes written so far.
	Size() int64
	// Persist must make every written byte durable and return a resumable
	// recording the durable length. The writer stays open.
	Persist(ctx context.Context) (json.RawMessage, error)
	// PersistAsync must mark the bytes written so far as the checkpoint's
	// and start making them durable; a writer that cannot overlap the two
	// persists at once. The returned function must return the resumable
	// for exactly those bytes once they are durable (Persist's contract).
	// It may run concurrently with Write, Size, MustRoll, CloseForCommit
	// and Close of the same writer, is called at most once, and is called
	// (or abandoned) before the next PersistAsync. An S3 upload keeps
	// uploading while the writer spills the next bytes.
	PersistAsync(ctx context.Context) (func(context.Context) (json.RawMessage, error), error)
	// MustRoll must report whether the part must be closed before more
	// bytes are written to it (an S3 multipart upload has at most 10,000
	// parts); a writer without a limit returns false. The file sink rolls
	// the part as soon as it returns true, whatever the rolling policy
	// says, and calls it right after Write, from the goroutine that writes.
	MustRoll() bool
	// CloseForCommit must make every written byte durable, close the writer
	// and return the pending committable for Backend.Commit.
	CloseForCommit(ctx context.Context) (json.RawMessage, error)
	// Close must release the writer without publishing; the staging data
	// stays (a checkpoint may reference it).
	Close() error
}
