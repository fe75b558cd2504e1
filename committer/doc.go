// Package committer is filesink's two-phase commit protocol.
//
// # Protocol
//
// A [Coordinator] drives a set of [Participant]s (one per sink subtask)
// through checkpoints. Checkpoint N runs:
//
//  1. Phase 1, [Coordinator.Prepare]: every participant flushes, makes what
//     it must publish durable, and returns committables and a state snapshot
//     ([Participant.Prepare]).
//  2. Decide: the coordinator writes checkpoint record N (source position,
//     states, every committable not yet published) to the recovery.Store.
//     That write is the commit point: before it everything of N is
//     abortable, after it everything of N must be published.
//  3. Phase 2, [Coordinator.Commit]: every pending committable of every
//     checkpoint <= N is committed in checkpoint order
//     ([Participant.Commit]). A late or duplicate Commit for an older
//     checkpoint is a no-op (lost notifications are harmless).
//  4. Cleanup: records beyond the retention count are pruned, and with
//     [WithSweepEvery] staging data that no retained record references is
//     swept.
//
// [Coordinator.Recover] restarts from the newest record: phase 2 again for its
// pending committables (idempotently), restore of every participant's state,
// then the orphan sweep ([Participant.Sweep]).
//
// # Backends
//
// Part-file sinks stage bytes through a [Backend] (local filesystem, S3). Its
// contract is written as "must" rules on each method; package
// committer/drivertest checks them for every backend.
//
// # Errors
//
// Commit errors wrapping [ErrDataLoss] or [ErrAlreadyExists] are permanent and
// never retried; other commit errors are retried with exponential backoff and
// jitter a bounded number of times. After any error from Prepare, Commit or
// Recover the Coordinator must not be used again: the process recovers from
// the checkpoint store in a new Coordinator (this is how a crash is handled
// too).
//
// # Concurrency
//
// A Coordinator is not safe for concurrent use. It calls participants one
// at a time.
package committer
