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
}

// Participant is one sink subtask in the protocol. The coordinator calls its
// methods one at a time.
type Participant interface {
	// Name identifies the participant across restarts; it must be stable
	// (for example "filesink/0").
	Name() string
	// Prepare is phase 1 of checkpoint id. It must return only when every
	// record handed to the participant before the call is durable, either in
	// a returned committable or in the returned state; no record may remain
	// in a buffer, queue, goroutine or unfinished upload. With final set, it
	// must also close every open part, so that State holds nothing in
	// progress.
	Prepare(ctx context.Context, id uint64, final bool) (Snapshot, error)
	// Commit publishes one committable of a decided checkpoint. It must be
	// idempotent (committing a published committable again succeeds) and
	// verified (succeeding only when the published data matches the record;
	// if neither staging data nor a matching target exists it must return an
	// error wrapping ErrDataLoss). Commit may run before Restore, during
	// recovery, and must be safe to call concurrently with nothing else.
	Commit(ctx context.Context, committable json.RawMessage) error
	// Restore resets the participant to state, a State from a decided
	// checkpoint (nil: a fresh start). Data written after that checkpoint
	// must be discarded.
	Restore(ctx context.Context, state json.RawMessage) error
	// Sweep deletes this participant's orphaned staging data: data in its
	// own namespace that is referenced neither by any of the retained
	// records nor by its current state. It must never touch staging data a
	// retained record references, nor data of other participants or sinks.
	Sweep(ctx context.Context, retained []*recovery.Checkpoint) error
}

// AsyncPreparer is implemented by participants whose phase 1 can overlap
// with the records of the next checkpoint (the file sink on S3 uploads while
// it goes on writing). The coordinator's Begin uses it; participants without
// it are prepared synchronously.
type AsyncPreparer interface {
	// PrepareAsync takes the barrier of checkpoint id: the records handed
	// to the participant before the call belong to it, later ones to the
	// next checkpoint. It returns a function that completes phase 1: that
	// function must return only when the barrier's records are durable, in
	// the returned Snapshot's committables or state (the contract of
	// Participant.Prepare). Until it returns, the participant accepts new
	// records: the function may run concurrently with the participant's
	// record-writing methods, but with no other protocol call. It is called
	// at most once; if it is never called (the checkpoint was abandoned),
	// the participant must still be usable for Restore and Close.
	PrepareAsync(ctx context.Context, id uint64, final bool) (func(context.Context) (Snapshot, error), error)
}

// CheckpointCommitter is implemented by participants that publish
// something per checkpoint once all of the checkpoint's committables are
// published (the file sink's commit manifest). The coordinator calls
// CommittedCheckpoint in phase 2, and again when recovery re-commits, with
// the participant's committables of checkpoint id in their order; only
// for checkpoints with at least one committable. It must be idempotent:
// a nil error means what it publishes is durable.
type CheckpointCommitter interface {
	CommittedCheckpoint(ctx context.Context, id uint64, committables []json.RawMessage) error
}
