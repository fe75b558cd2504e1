// Package filesink is the file sink writer: it assigns records to buckets,
// encodes them in a row format, and writes them to part files through a
// driver.Backend (local filesystem, S3) with exactly-once results.
//
// # Part file lifecycle
//
// A record goes to the in-progress part file of its bucket. A part rolls
// (becomes pending) when the [RollingPolicy] says so: on size, age or
// inactivity ([DefaultPolicy]: 128 MiB, 60 s, 60 s, as in Flink), at every
// checkpoint ([OnCheckpointPolicy]), or at the final checkpoint. At a
// checkpoint, [Writer.Prepare] writes out every buffer, fsyncs, returns the
// rolled parts as committables and the in-progress parts' recoverables as
// state. The part becomes finished (visible) when the checkpoint commits.
// A part that rolls is closed for commit (fsync, or its last upload) on a
// goroutine of its own, awaited by the next checkpoint, so the next records
// do not wait for it. [Writer.Prepare] only starts this at the barrier:
// its Wait completes it, and on S3 the uploads of the barrier's bytes go on while new records are
// written.
//
// Part files are named "<prefix>-<subtask>-<run id>-<counter><suffix>": the
// run id is random per Writer, so names are never reused across restarts
// (FLINK-10005), and a restored in-progress part keeps its recorded name.
// The suffix is the format's extension plus the compression's (".jsonl.zst").
//
// # Formats and compression
//
// Row formats are [JSONLines] (records are validated, not re-encoded),
// [CSV] and [Text]. Compression ([NewCompression]: gzip, zstd) writes every
// buffer flush as one complete gzip member or zstd frame, so a part file
// always ends on a frame boundary: truncating it to a recorded length leaves
// a valid stream that can be appended to, and standard readers read the
// concatenation.
//
// # Bulk formats
//
// With [WithBulkFormat] (Parquet, Arrow IPC: package filesink/bulk) each
// open bucket has a [BulkWriter] that buffers row groups and writes a
// footer when its part closes. A footer cannot be resumed, so every bulk
// part rolls at every checkpoint whatever the policy says (the checkpoint
// state never holds one), and also on size (bytes written plus Buffered)
// and time. A crash discards the bulk part being written; its records
// come again from the source. Dead letters stay JSON lines.
//
// # Memory
//
// Buffered bytes of all open buckets of a Writer stay within its buffer
// budget ([WithBufferBudget], default 64 MiB): the per-bucket buffer shrinks
// as buckets open, and when the total goes over, the largest buffers are
// written out and released. Buckets with nothing open are forgotten at each
// checkpoint. Bulk writers' Buffered bytes count too: over the budget, the
// largest writers flush a row group early, and a part whose writer keeps
// its memory through Flush rolls.
//
// # Open files
//
// Every part whose PartWriter is open holds a descriptor (a local file,
// an S3 part's spill file). [WithMaxOpenParts] bounds them (default
// [DefaultMaxOpenParts], from RLIMIT_NOFILE): at the limit the least
// recently written part is persisted and closed (released), and resumed
// where it stopped on its next write; a bulk part rolls instead. A
// released part is, to the storage, a part after a checkpoint's persist
// and a crash, and its reopening is the recovery path, which is why it is
// crash-safe (openfiles.go has the argument). [Writer.Restore] resumes a
// checkpoint's parts within the limit too.
//
// # Bad records
//
// A record that cannot be encoded, or whose bucket path is invalid
// (absolute, "..", a component starting with '.' or '_'), gives a
// [*source.BadRecordError] naming its origin; with [WithDeadLetter] it is written,
// exactly once, to a separate dead-letter output instead. Nothing committed
// is ever touched.
//
// # Concurrency
//
// A Writer is used by one goroutine at a time (the pipeline runs each
// subtask's Writer in its own goroutine). Different Writers may share a
// Backend.
package filesink
