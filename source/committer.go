package source

import (
	"context"
	"encoding/json"
)

// GroupCommitter is an optional interface of a Source that can report the
// progress of a job outside the checkpoint store, such as a Kafka source
// committing offsets to a consumer group so that lag monitoring sees them.
//
// The pipeline calls CommitToGroup after phase 2 of a checkpoint succeeded,
// with that checkpoint's source position (a document the source's Position
// returned). It is for monitoring only: a source must never read what it
// commits back (exactly-once comes from the checkpoint record), and the
// pipeline logs a failure as a warning and goes on.
//
// CommitToGroup must be safe to call concurrently with Next, Position and
// Close; the pipeline calls it from a goroutine of its own, one call at a
// time, and may skip positions when calls are slower than checkpoints (only
// the newest decided position matters).
type GroupCommitter interface {
	CommitToGroup(ctx context.Context, pos json.RawMessage) error
}
