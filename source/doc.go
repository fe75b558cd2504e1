// Package source provides the inputs of a filesink pipeline: streams of
// records that can be resumed from a position stored in a checkpoint.
//
// Three sources implement [Source]:
//
//   - [Dir]: every regular file under a directory, one record per line
//     (Open "file://DIR" or a plain path). Replayable.
//   - [Generator]: N deterministic JSON records with unique ids, keys, event
//     times and sized payloads (Open "gen://?count=N&seed=S..."). Replayable.
//   - [Reader]: the lines of any io.Reader, such as stdin (Open "-" or
//     "stdin://"). Not replayable.
//
// # Positions and exactly-once
//
// The pipeline calls Next until a checkpoint barrier, then Position, and
// stores the returned JSON document in checkpoint record N. Position is the
// point just after the last record Next returned: opening the same input
// with it (Open(ctx, uri, pos) or the constructors) returns exactly the
// records after that one, in the same order and with the same bytes. So if
// the sink publishes the records before the barrier when checkpoint N is
// decided, and a restarted run resumes at checkpoint N's position, every
// record reaches the output exactly once.
//
// A position is opaque to the caller: a small JSON object whose shape
// belongs to the kind of source ({"file","offset","line","head","before"} for
// Dir, {"next"} for Generator). A malformed position is an error matching
// [ErrBadPosition]. A position that no longer matches the input (the file
// it names is gone, shorter or rewritten, a file was added that sorts
// before it, one read before it changed, the generator's count is
// smaller) is an [*InputChangedError], never a silent restart: resuming
// over changed input would lose or duplicate records.
//
// Replay is only as exact as the input is stable. Dir assumes that the
// files a checkpoint covers are complete and are not rewritten: it reads
// each file to its end at the time it gets there, so a last line still
// being written is read as a (partial) record. Appending whole lines to
// the checkpoint's file, or to a file after it, is safe: a later run
// resumes after the checkpointed line and reads them. A file before it
// was read to its end: lines appended to it would never be read, so a
// resume that finds it grown, shrunk or rewritten (by its size and its
// first 4 KiB) fails with an [*InputChangedError] naming it. Generator
// output depends only on its configuration and is stable across Go
// versions.
//
// # Not replayable sources
//
// A [Reader] (stdin) cannot resume: Replayable returns false, Position
// returns nil, and Open with a position fails with [ErrNotReplayable]. After
// a crash, records covered by a decided checkpoint are in the output exactly
// once, and records read after it are lost (at-most-once).
//
// # Records and memory
//
// Record.Value is valid only until the next call to Next: sources return
// slices of their read buffers and reuse them, so that reading does not
// allocate per record. Record.Origin names the record ("in/a.txt:17",
// "gen:42", "stdin:3") for error messages without allocating; format it
// with %s. Lines are limited by [WithMaxLineSize] (default 16 MiB);
// memory is the read buffer ([WithBufferSize], default 1 MiB) plus, for
// lines longer than the buffer, one line. With [WithSkipLongLines] a
// longer line is read past, keeping its first [LongLineHead] bytes.
//
// # Errors
//
// Next returns io.EOF, unwrapped, at the end of a bounded source, and
// ctx.Err(), unwrapped, when ctx is cancelled while it would block; neither
// loses data. A [*LineTooLongError] whose Skipped is true (a line read
// past, [WithSkipLongLines]) is not sticky either: the next call returns
// the record after it. Any other error from Next is sticky. Sentinels and struct
// errors are in errors.go; messages name the file and line.
//
// # Concurrency
//
// A Source is not safe for concurrent use: one goroutine calls Next,
// Position, Describe and Close. Different sources are independent. The
// package has no global mutable state.
package source
