package icebergsink

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/filesink/filesink/filesink"
)

// Participant is one lane of an Iceberg sink: a filesink.Writer whose
// output is the table location, with a CommittedCheckpoint that appends
// the checkpoint's files to the table. Phase 1 and phase 2 are the
// writer's: a checkpoint's Parquet files are durable when it is decided
// and at their final paths once it is committed; the table references
// them once CommittedCheckpoint returns nil. Its methods are the writer's
// and as safe for concurrent use.
type Participant struct {
	*filesink.Writer
	lane      string
	committer *Committer
}

// NewParticipant returns the lane named lane (its name in the table's
// snapshot summaries and properties; stable across restarts) writing
// with w and appending with c.
func NewParticipant(w *filesink.Writer, lane string, c *Committer) *Participant {
	return &Participant{Writer: w, lane: lane, committer: c}
}

// Lane returns the lane's name.
func (p *Participant) Lane() string { return p.lane }

// CommittedCheckpoint implements committer.Participant: it publishes the
// writer's manifest of checkpoint id, then appends the checkpoint's files
// to the table (a verified no-op if the table holds the lane's checkpoint
// id or a later one). A nil error means the table's snapshot holding the
// checkpoint is committed in the catalog.
func (p *Participant) CommittedCheckpoint(ctx context.Context, id uint64, committables []json.RawMessage) error {
	if err := p.Writer.CommittedCheckpoint(ctx, id, committables); err != nil {
		return err
	}
	files, err := p.Writer.Published(committables)
	if err != nil {
		return err
	}
	if err := p.committer.Commit(ctx, p.lane, id, files); err != nil {
		return fmt.Errorf("checkpoint %d of lane %s: %w", id, p.lane, err)
	}
	return nil
}
