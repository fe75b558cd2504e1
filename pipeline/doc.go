// Package pipeline runs a job: it reads a source, hands records to sink
// subtasks, and drives the commit protocol.
//
// # Run loop
//
// [Run] recovers from the checkpoint store first (committing what the newest
// record decided, restoring the sinks, sweeping orphans), opens the source at
// the recorded position, then reads records in batches. Subtask i of N takes
// records i, i+N, ... of every batch, in its own goroutine. A checkpoint is
// taken between two batches (the barrier is aligned trivially in one
// process): every checkpoint interval, every CheckpointEvery records, at the
// end of a bounded source (a final checkpoint that closes every part file),
// and when Stop is closed (a graceful stop: final checkpoint, then Run
// returns nil).
//
// Only the barrier stops the records: the coordinator's Begin runs on every
// subtask after the batches before it, and sinks whose phase 1 overlaps
// the next records (the file sink) only start it there.
// Phase 1's waiting (part uploads, fsyncs of rolled parts), the decide step
// and phase 2 then run on a goroutine of their own while the subtasks take
// the next batches. One checkpoint runs at a time: the next barrier, a
// final checkpoint and the end of Run wait for it. When a sink's
// OverlapsCheckpoints is false (the MySQL XA sink), the whole checkpoint runs at the
// barrier, so that its phase 2 releases the branch's row locks before the
// next records need them.
//
// # Events
//
// Config.Events ([EventListener]) receives the run's events: the commit
// protocol's (committer.EventListener: checkpoint steps with durations,
// recovery, sweeps with counts, failed commit attempts), the opened source
// and the progress totals. Config.Logger logs them; Config.Progress and
// Config.Barrier are shorthands for two of them.
//
// # Group commits (monitoring)
//
// A source that implements source.GroupCommitter (the Kafka source, with a
// consumer group configured) gets the source position of every checkpoint
// whose phase 2 succeeded, including the checkpoint restored at the start,
// on a goroutine of its own: a slow call never delays a checkpoint, and
// positions offered meanwhile are coalesced to the newest. A failure is
// logged as a warning and never fails the job; the positions committed
// this way are for monitoring only and are never read back. When Run
// returns, the newest pending position is delivered before the source is
// closed (unless the context was cancelled).
//
// # Guarantees
//
// When Run returns nil after the end of input, every record of a replayable
// source is published exactly once. When Run returns an error, or the
// process dies, nothing decided is lost: running again with the same
// checkpoint store finishes the job, and records after the newest decided
// checkpoint are read again from the source. A non-replayable source (stdin)
// loses the records read after the last decided checkpoint.
//
// Cancelling the context passed to Run aborts at once without a final
// checkpoint (like a crash, minus the crash).
//
// # Concurrency
//
// Run is safe to call concurrently with other Runs on different stores.
// A Sink is used by one goroutine at a time.
package pipeline
