package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/recovery"
)

// subtask runs one Sink in its own goroutine. Records arrive in batches;
// protocol calls arrive as functions on the same channel, so a call sees
// every record sent before it (the checkpoint barrier).
type subtask struct {
	sink Sink
	in   chan msg
	idx  int
	n    int

	err    error         // first write error; set before failed is closed
	failed chan struct{} // closed on the first write error
	free   chan<- *batch // processed batches go back to the reader
}

// Batcher is the part of Sink that brackets batches: the pipeline calls
// BeginBatch before the records of a batch and EndBatch after them, on the
// subtask's goroutine, so a sink can take a batch's records at one
// processing time (filesink.Writer reads its clock once per batch instead
// of once per record). Neither method may fail or block.
type Batcher interface {
	BeginBatch()
	EndBatch()
}

func newSubtask(sink Sink, idx, n int, free chan<- *batch) *subtask {
	return &subtask{sink: sink, in: make(chan msg, 4), idx: idx, n: n, failed: make(chan struct{}), free: free}
}

// release marks b processed by this subtask; the last one hands it back
// for reuse.
func (s *subtask) release(b *batch) {
	if b.pending.Add(-1) == 0 {
		select {
		case s.free <- b:
		default:
		}
	}
}

type msg struct {
	batch *batch
	fn    func() error
	done  chan error
}

var _ committer.Participant = (*subtask)(nil)

func (s *subtask) run(ctx context.Context) {
	failed := s.failed
	for m := range s.in {
		if m.fn != nil {
			var err error
			select {
			case <-failed:
				err = s.err
			default:
				err = m.fn()
			}
			m.done <- err
			continue
		}
		b := m.batch
		select {
		case <-failed:
			s.release(b)
			continue
		default:
		}
		write := func(i int) bool {
			var err error
			if len(b.bad) > 0 && b.bad[i] != nil {
				err = WriteBad(ctx, s.sink, b.record(i), b.origins[i], b.bad[i])
			} else {
				err = s.sink.Write(ctx, b.record(i), b.origins[i])
			}
			if err != nil {
				s.err = err
				close(failed)
				return false
			}
			return true
		}
		s.sink.BeginBatch()
		if b.routes != nil {
			for i, r := range b.routes {
				if r == s.idx && !write(i) {
					break
				}
			}
		} else {
			for i := s.idx; i < len(b.ends); i += s.n {
				if !write(i) {
					break
				}
			}
		}
		s.sink.EndBatch()
		s.release(b)
	}
}

// call runs fn on the subtask's goroutine after every batch sent before.
func (s *subtask) call(fn func() error) error {
	done := make(chan error, 1)
	s.in <- msg{fn: fn, done: done}
	return <-done
}

func (s *subtask) Name() string { return s.sink.Name() }

// Prepare takes the barrier on the subtask's goroutine, after every batch
// sent before; the Wait the sink returns runs on the caller's goroutine
// while the subtask goes on with later batches.
func (s *subtask) Prepare(ctx context.Context, id uint64, final bool) (wait committer.Wait, err error) {
	err = s.call(func() (e error) { wait, e = s.sink.Prepare(ctx, id, final); return })
	return wait, err
}

func (s *subtask) Commit(ctx context.Context, c json.RawMessage) error {
	return s.call(func() error { return s.sink.Commit(ctx, c) })
}

// CommittedCheckpoint forwards to the sink, on the caller's goroutine
// (the sink's method may run beside the batches: see
// committer.Participant).
func (s *subtask) CommittedCheckpoint(ctx context.Context, id uint64, committables []json.RawMessage) error {
	return s.sink.CommittedCheckpoint(ctx, id, committables)
}

func (s *subtask) Restore(ctx context.Context, state json.RawMessage) error {
	return s.call(func() error { return s.sink.Restore(ctx, state) })
}

func (s *subtask) Sweep(ctx context.Context, retained []*recovery.Checkpoint) (swept committer.Swept, err error) {
	err = s.call(func() (e error) { swept, e = s.sink.Sweep(ctx, retained); return })
	return swept, err
}

// tick runs Sink.Tick on the subtask's goroutine.
func (s *subtask) tick(ctx context.Context, now time.Time) error {
	if err := s.call(func() error { return s.sink.Tick(ctx, now) }); err != nil {
		return fmt.Errorf("%s: %w", s.sink.Name(), err)
	}
	return nil
}
