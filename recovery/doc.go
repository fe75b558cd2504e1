// Package recovery keeps filesink's checkpoint records: the durable commit
// point of the two-phase protocol.
//
// # Records
//
// A [Checkpoint] holds everything needed to restart after a crash: the
// source position, and for every participant its state (the recoverables of
// in-progress part files) and the committables that were decided but not yet
// known to be published, tagged with the checkpoint that produced them. The
// newest record alone is therefore enough to finish every decided commit.
//
// Records are encoded by [Encode]: a fixed header (magic, format version,
// payload length, CRC-32C of the payload) followed by a JSON payload. [Decode]
// rejects a short, truncated, checksum-mismatched or unparsable record with an
// error matching [ErrCorruptCheckpoint] that names the file; a record of a
// newer format version gives [ErrUnsupportedVersion]. Neither is ever skipped
// silently: falling back to an older record could publish duplicates.
// [Latest] and [Retained], which a run uses, refuse any defective record;
// [Readable], for tools that only inspect a store, returns the good records
// and names the defective ones apart.
//
// # Durability
//
// [DirStore.Put] writes a record to a hidden temp file, fsyncs it, renames it
// without replacing (never os.Rename) to its final name, and fsyncs the
// directory. A nil error means the record survives a crash: this write is
// the commit point of the checkpoint. If Put returns an error the record may
// or may not exist after a crash; both outcomes are safe because nothing of
// that checkpoint has been published yet.
//
// Retention keeps the newest K records (default [DefaultRetain]); older ones
// are deleted by [Prune] after the newest record's commits succeeded.
//
// # Concurrency
//
// A Store is used by one coordinator at a time; its methods are safe for
// concurrent use. Two processes must not share a state directory:
// [OpenDir] locks it (DIR/LOCK, flock on Unix, LockFileEx on Windows) until
// [DirStore.Close], and fails with [ErrLocked] while another open store
// holds it. A reader that inspects a running job's records opens the
// directory with [ReadOnly], which takes no lock; [LockHolder] tells it
// whether a run holds the directory, and which.
package recovery
