// Package async is a commit-protocol participant for targets without
// transactions (an HTTP endpoint, a search index, a user's client): records
// are cut into batches, a bounded queue hands the batches to N worker
// goroutines, and each worker sends one batch at a time through a [Sender].
// It is a pipeline.Sink, so pipeline.Run drives it like the file sink.
//
// # Batches and ownership
//
// The open batch (the one records are appended to) belongs to whoever
// holds the sink's mutex: Write, the linger timer's callback or Prepare.
// A batch is closed by count ([WithMaxRecords]), by bytes
// ([WithMaxBytes]), by age ([WithLinger]) or by a final checkpoint, under
// that mutex; from then on its records are never touched by the sink
// again, it sits in the queue, and exactly one worker takes it. No slice
// is shared between the timer, the producer and the workers.
//
// # Delivery guarantees
//
// [AtLeastOnce] (the default): [Sink.Prepare] (phase 1) returns only when
// the queue is empty and the target has acknowledged every closed batch
// (Send returned nil). The open batch's records, at most one batch, go into
// the checkpoint's state instead of being cut at the barrier, and are
// restored as the open batch after a crash (what Flink's AsyncSinkWriter
// does with its buffered entries). A failed send, a worker that panicked
// or one whose Send outlived its deadline fails the sink: Prepare, Write
// and Tick return the error from then on, so the checkpoint is never
// recorded and pipeline.Run returns it. Records after the last decided
// checkpoint come again from the source on restart: each record is
// delivered at least once.
//
// [AtMostOnce]: Prepare closes the open batch and returns without waiting
// for any acknowledgement, so the checkpoint records the source position
// before the batches are sent (offsets first; a final checkpoint waits
// until every batch was sent or dropped, so that a clean end sends
// everything); a failed batch is logged,
// counted in [Stats].Dropped and dropped. A crash loses what was queued or
// in flight, and nothing is ever sent twice by the sink (a Sender should
// not retry in this mode).
//
// Exactly-once needs a transaction in the target; this package does not
// offer it. It offers the next best thing, a deterministic idempotency key.
//
// # Idempotency keys
//
// Every batch carries [Batch].Key, built from the sink id, the subtask, the
// batch's sequence number in the subtask's stream since the job's first
// start (kept in the checkpoint state) and a SHA-256 of the batch's first
// record ordinal and records. Two consequences:
//
//   - A key never names two different sets of records: a receiver that
//     drops a batch whose key it has seen never drops a record it has not
//     seen.
//   - The key is the same after a crash: count and byte cuts depend only on
//     the records since the previous cut, and the checkpoint barrier does
//     not cut (the open batch is kept in the state and continues after a
//     restore). A replay from the last checkpoint therefore rebuilds the
//     batches of the interrupted epoch with the same records, the same
//     sequence numbers and the same keys, as long as the subtask sees its
//     records in the same order again (files, the generator, one Kafka
//     partition; with several subtasks use [HashPartition] so the routing
//     does not depend on the pipeline's batch boundaries).
//
// The checkpoint id is carried in [Batch].Checkpoint for information, and
// is deliberately not part of the key: which checkpoint a batch falls in
// depends on when the barrier came, which a replay does not reproduce.
//
// Two cuts depend on time and are not reproduced by a replay: a linger cut
// and a final checkpoint taken on a stop signal (not at the end of input).
// If the process dies after such a batch was sent and before the next
// checkpoint was decided, its records are sent again in batches cut
// differently, under other keys: a deduplicating receiver sees them twice
// (never zero times). With the defaults (a 1 s linger) a linger cut only
// happens when the source is slower than a batch per second, where a
// crash's replay is small.
//
// # Concurrency
//
// Write, Tick, Prepare, Commit, Restore and Sweep are called by one
// goroutine at a time (pipeline.Run does); Stats and Err are safe for
// concurrent use; Close may be called once the other calls have returned.
// The Sender is called from several workers at once.
package async
