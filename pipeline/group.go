package pipeline

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/filesink/filesink/source"
)

// groupCommitTimeout bounds one source.GroupCommitter call.
const groupCommitTimeout = 10 * time.Second

// groupCommits hands decided source positions to a source.GroupCommitter
// on a goroutine of its own, so that a slow or failing monitoring commit
// never delays or fails a checkpoint. Only the newest position offered is
// kept: positions offered while a call runs replace each other.
type groupCommits struct {
	gc   source.GroupCommitter
	log  *slog.Logger
	wake chan struct{} // capacity 1: a position is pending
	quit chan struct{} // closed by close
	done chan struct{} // closed when the goroutine has returned

	mu   sync.Mutex
	next json.RawMessage // pending position, nil if none
	id   uint64          // checkpoint of next
}

func startGroupCommits(ctx context.Context, gc source.GroupCommitter, log *slog.Logger) *groupCommits {
	g := &groupCommits{gc: gc, log: log, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go g.run(ctx)
	return g
}

// offer schedules a call with pos, the source position of decided and
// committed checkpoint id. It never blocks; safe for concurrent use.
func (g *groupCommits) offer(id uint64, pos json.RawMessage) {
	if len(pos) == 0 {
		return
	}
	g.mu.Lock()
	g.next, g.id = pos, id
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// close makes the goroutine deliver the pending position, if any, and waits
// for it to return. Cancelling the context given to startGroupCommits makes
// it return at once.
func (g *groupCommits) close() {
	close(g.quit)
	<-g.done
}

func (g *groupCommits) run(ctx context.Context) {
	defer close(g.done)
	for {
		quitting := false
		select {
		case <-g.wake:
		case <-g.quit:
			quitting = true
		case <-ctx.Done():
			return
		}
		g.mu.Lock()
		pos, id := g.next, g.id
		g.next = nil
		g.mu.Unlock()
		if pos != nil {
			cctx, cancel := context.WithTimeout(ctx, groupCommitTimeout)
			if err := g.gc.CommitToGroup(cctx, pos); err != nil && ctx.Err() == nil {
				g.log.Warn("committing the source position to its group failed (monitoring only: nothing is lost)", "checkpoint", id, "err", err)
			}
			cancel()
		}
		if quitting {
			return
		}
	}
}
