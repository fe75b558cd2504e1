package filesink

import (
	"context"
	"errors"
	"fmt"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
)

// WithFinalizeOnRestore makes Restore close every in-progress part of the
// restored state at the length the state records, instead of resuming it:
// the part's pending (driver.Backend.Finalize) is committed by the next
// checkpoint like a rolled part's, and the records after the checkpoint go
// to new parts. It is for a Writer that takes parts over from another
// process that may still be writing them (group mode: a lane's new
// owner), which Finalize never disturbs: parts stay open across
// checkpoints and roll by the rolling policy while one process owns them,
// and a takeover ends them where the decided state says. A part whose
// recorded bytes are gone is rebuilt from the source (WithReplayer).
func WithFinalizeOnRestore() Option {
	return optionFunc(func(c *config) { c.finalizeOnRestore = true })
}

// finalizeRestored closes part e of a restored state, target, at its
// recorded length (WithFinalizeOnRestore): its pending joins the parts
// rolled since the last checkpoint, for the next Prepare.
func (w *Writer) finalizeRestored(ctx context.Context, be driver.Backend, e *entry, target string) error {
	stats := e.Stats
	if _, err := restoreStats(stats); err != nil {
		return fmt.Errorf("filesink: bad figures of %s in the checkpoint: %w", target, err)
	}
	pending, err := be.Finalize(ctx, e.Part)
	if err != nil {
		if w.replayer == nil || !w.rebuildable(e, err) || !errors.Is(err, committer.ErrDataLoss) {
			return w.lostPart(e, be.FileLocation(target), err)
		}
		lost := err
		remade, rerr := w.remake(ctx, be, e, target, false, false)
		if rerr != nil {
			return &RebuildError{Part: be.FileLocation(target), Lost: lost, Err: rerr}
		}
		w.noteRebuilt(target, e, remade, lost)
		pending, stats = remade.pending, remade.stats.snapshot(remade.size)
	}
	c := &closing{key: bucketKey{dl: e.DeadLetter, path: e.Bucket}, stats: stats, pending: pending, done: make(chan struct{})}
	close(c.done)
	w.rolled = append(w.rolled, c)
	w.log.Info("in-progress part taken over: closed where the checkpoint recorded it", "part", target)
	return nil
}
