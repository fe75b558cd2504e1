package committer

import (
	"context"
	"encoding/json"

	"github.com/filesink/filesink/recovery"
)

// Snapshot is what a participant hands to the coordinator in phase 1.
type Snapshot struct {
	// State is restored with Participant.Restore after a crash.
	State json.RawMessage
	// Committables are published by Participant.Commit in phase 2.
	Committables []json.RawMessage
	// SweepEvery, when positive, declares that the participant's staging
	// data outlives its commits while the job runs (S3 tail objects of
	// older checkpoints): the coordinator then sweeps after every
	// SweepEvery-th checkpoint and after a final one, as WithSweepEvery
	// does; the smallest interval asked for wins. Zero: sweeping at
	// recovery is enough.
	SweepEvery int
}

// Participant is one sink subtask in the protocol. The coordinator calls its
// methods one at a time, except that the Wait a Prepare returned may run
// while the participant receives records (see Prepare).
type Participant interface {
	// Name identifies the participant across restarts; it must be stable
	// (for example "filesink/0").
	Name() string
	// Prepare takes the barrier of checkpoint id (phase 1): the records
	// handed to the participant before the call belong to it, later ones to
	// the next checkpoint. It returns a Wait that completes phase 1: the
	// Wait must return only when every record of the barrier is durable,
	// either in a returned committable or in the returned state; no record
	// may remain in a buffer, queue, goroutine or unfinished upload. With
	// final set, it must also close every open part, so that State holds
	// nothing in progress.
	//
	// A participant that does its whole phase 1 at the barrier returns
	// Ready(snapshot). One that overlaps it with the next records (the file
	// sink uploads while it goes on writing) returns a Wait that may run
	// concurrently with the participant's record-writing methods, but with
	// no other protocol call. The Wait is called at most once; if it is
	// never called (the checkpoint was abandoned), the participant must
	// still be usable for Restore and Close.
	Prepare(ctx context.Context, id uint64, final bool) (Wait, error)
	// Commit publishes one committable of a decided checkpoint. It must be
	// idempotent (committing a published committable again succeeds) and
	// verified (succeeding only when the published data matches the record;
	// if neither staging data nor a matching target exists it must return an
	// error wrapping ErrDataLoss). Commit may run before Restore, during
	// recovery, and must be safe to call concurrently with nothing else.
	Commit(ctx context.Context, committable json.RawMessage) error
	// CommittedCheckpoint is the post-commit step of checkpoint id: it runs
	// once all of the participant's committables of the checkpoint are
	// published (the file sink publishes its commit manifest), in phase 2
	// and again when recovery re-commits, with those committables in their
	// order; only for checkpoints where the participant has at least one
	// committable. It must be idempotent: a nil error means what it
	// publishes is durable. It may run while the participant receives
	// records. Participants that publish nothing per checkpoint embed
	// NopPostCommit.
	CommittedCheckpoint(ctx context.Context, id uint64, committables []json.RawMessage) error
	// Restore resets the participant to state, a State from a decided
	// checkpoint (nil: a fresh start). Data written after that checkpoint
	// must be discarded.
	Restore(ctx context.Context, state json.RawMessage) error
	// Sweep deletes this participant's orphaned staging data: data in its
	// own namespace that is referenced neither by any of the retained
	// records nor by its current state. It must never touch staging data a
	// retained record references, nor data of other participants or sinks.
	// It returns what it deleted, by kind (nil: nothing, or nothing it
	// counts), also when it fails midway.
	Sweep(ctx context.Context, retained []*recovery.Checkpoint) (Swept, error)
}

// Wait completes the phase 1 that a Participant's Prepare started: it
// returns the checkpoint's Snapshot once the barrier's records are durable.
type Wait func(ctx context.Context) (Snapshot, error)

// Ready returns a Wait that returns snap at once: the result of a Prepare
// that did all of phase 1 at the barrier.
func Ready(snap Snapshot) Wait {
	return func(context.Context) (Snapshot, error) { return snap, nil }
}

// PrepareNow runs p's Prepare and its Wait in a row: phase 1 of checkpoint
// id with nothing overlapping it. A nil error means the returned Snapshot
// holds every record handed to p before the call.
func PrepareNow(ctx context.Context, p interface {
	Prepare(context.Context, uint64, bool) (Wait, error)
}, id uint64, final bool) (Snapshot, error) {
	wait, err := p.Prepare(ctx, id, final)
	if err != nil {
		return Snapshot{}, err
	}
	return wait(ctx)
}

// NopPostCommit is embedded by participants that publish nothing once a
// checkpoint's committables are published: its CommittedCheckpoint does
// nothing and returns nil. It is safe for concurrent use.
type NopPostCommit struct{}

// CommittedCheckpoint implements Participant; it does nothing.
func (NopPostCommit) CommittedCheckpoint(context.Context, uint64, []json.RawMessage) error {
	return nil
}
