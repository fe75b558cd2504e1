// Package committer is filesink's two-phase commit protocol.
//
// # Protocol
//
// A [Coordinator] drives a set of [Participant]s (one per sink subtask)
// through checkpoints. Checkpoint N runs:
//
//  1. Phase 1: [Coordinator.Begin] takes the barrier: every participant's
//     [Participant.Prepare] starts (or does) its phase 1 and returns a
//     [Wait]. The Wait flushes, makes what the participant must publish
//     durable, and returns committables and a state snapshot; it may run
//     while the participant takes the next checkpoint's records.
//  2. Decide: [Phase1.Decide] waits for every participant's phase 1, then
//     writes checkpoint record N (source position, states, every
//     committable not yet published) to the recovery.Store. That write is
//     the commit point: before it everything of N is abortable, after it
//     everything of N must be published.
//  3. Phase 2, [Coordinator.Commit]: every pending committable of every
//     checkpoint <= N is committed in checkpoint order
//     ([Participant.Commit]); once a checkpoint's committables are
//     published, each participant's post-commit step runs
//     ([Participant.CommittedCheckpoint]). A late or duplicate Commit for
//     an older checkpoint is a no-op (lost notifications are harmless).
//  4. Cleanup: records beyond the retention count are pruned, and with
//     [WithSweepEvery] staging data that no retained record references is
//     swept; then the function of [WithPostCommit] runs.
//
// [Phase1.Complete] runs steps 2 to 4 in one call, on whichever goroutine
// the caller chooses; [Coordinator.Checkpoint] runs all four.
//
// [Coordinator.Recover] restarts from the newest record: phase 2 again for its
// pending committables (idempotently), restore of every participant's state,
// then the orphan sweep ([Participant.Sweep]).
//
// # Backends
//
// Part-file sinks stage bytes through a backend (local filesystem, S3)
// whose contract is package committer/driver; package committer/drivertest
// checks it for every backend.
//
// # Events
//
// An [EventListener] (WithEventListener) receives the protocol's steps as
// typed events: checkpoint begun, phase 1 done, decided, committed (with
// durations), commit attempts that failed, sweeps (with counts by kind of
// staging data, [Swept]) and the end of recovery. Logs ([LogEvents],
// WithLogger) and metrics are built on them. [WithHook] is a test seam
// (crash points), not an event stream.
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
