package metrics

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
)

// sinkStats are one subtask's figures, written by its wrapper and read
// at scrape time.
type sinkStats struct {
	records, bytes atomic.Int64
	open           atomic.Int64 // open part files after the last writer-goroutine call
	pending        atomic.Int64 // committables prepared, not yet committed
	restored       atomic.Bool  // Restore ran: later commits are of this run's committables

	// The sink's own counters (Sink.Counters; zero for those it has not).
	committed, rolledBack, acked, dropped, rebuilt func() int64
}

// sinkTotals are the figures of the sinks that were closed (a lane run
// that ended, in group mode): their counters still count, their open part
// files and pending committables no longer are this process's.
type sinkTotals struct {
	records, bytes, committed, rolledBack, acked, dropped, rebuilt int64
}

// retire adds the final figures of st, whose sink is closed, to t.
func (t *sinkTotals) retire(st *sinkStats) {
	t.records += st.records.Load()
	t.bytes += st.bytes.Load()
	t.committed += st.committed()
	t.rolledBack += st.rolledBack()
	t.acked += st.acked()
	t.dropped += st.dropped()
	t.rebuilt += st.rebuilt()
}

// stats returns t as the figures of one closed sink.
func (t *sinkTotals) stats() *sinkStats {
	st := &sinkStats{
		committed:  constant(t.committed),
		rolledBack: constant(t.rolledBack),
		acked:      constant(t.acked),
		dropped:    constant(t.dropped),
		rebuilt:    constant(t.rebuilt),
	}
	st.records.Store(t.records)
	st.bytes.Store(t.bytes)
	return st
}

func constant(n int64) func() int64 { return func() int64 { return n } }

func zero() int64 { return 0 }

// orZero returns f, or zero when f is nil.
func orZero(f func() int64) func() int64 {
	if f == nil {
		return zero
	}
	return f
}

// WrapSink returns s instrumented: records and bytes it accepts, its open
// part files, its pending committables and its failed commit attempts,
// and the totals of s.Counters. The wrapper keeps s's name and behaviour,
// including whether it overlaps checkpoints with the next records, and
// returns s's Counters as its own. Once the wrapper is closed, s's totals
// still count and its open part files and pending committables no longer
// do (a lane run that ended). Call it before the run starts.
func (m *Metrics) WrapSink(s pipeline.Sink) pipeline.Sink {
	c := s.Counters()
	st := &sinkStats{
		committed:  orZero(c.FilesCommitted),
		rolledBack: orZero(c.BranchesRolledBack),
		acked:      orZero(c.RecordsAcked),
		dropped:    orZero(c.RecordsDropped),
		rebuilt:    orZero(c.PartsRebuilt),
	}
	m.mu.Lock()
	m.sinks = append(m.sinks, st)
	m.mu.Unlock()
	// OpenParts is not safe for concurrent use: sampled on the writing goroutine.
	return &sink{Sink: s, m: m, st: st, open: c.OpenParts}
}

// sink instruments a pipeline.Sink. Its methods are called as the
// pipeline calls the wrapped sink's: one at a time, on the subtask's
// goroutine, except the Wait of Prepare and CommittedCheckpoint (the
// committing goroutine).
type sink struct {
	pipeline.Sink
	m    *Metrics
	st   *sinkStats
	open func() int64 // nil: no part files
}

var (
	_ pipeline.Sink                       = (*sink)(nil)
	_ pipeline.BadRecordSink              = (*sink)(nil)
	_ interface{ Unwrap() pipeline.Sink } = (*sink)(nil)
)

// Unwrap returns the instrumented sink.
func (s *sink) Unwrap() pipeline.Sink { return s.Sink }

// sample stores the number of open part files; only on the goroutine
// that writes (Counters.OpenParts is not safe for concurrent use).
func (s *sink) sample() {
	if s.open == nil {
		return
	}
	if n := s.open(); s.st.open.Load() != n {
		s.st.open.Store(n)
	}
}

func (s *sink) Write(ctx context.Context, record []byte, origin source.Origin) error {
	err := s.Sink.Write(ctx, record, origin)
	if err == nil {
		s.st.records.Add(1)
		s.st.bytes.Add(int64(len(record)))
	}
	s.sample()
	return err
}

// WriteBad forwards a record the source could not deliver whole to the
// wrapped sink (pipeline.WriteBad) and counts it as Write counts a record
// sent to the dead-letter output.
func (s *sink) WriteBad(ctx context.Context, record []byte, origin source.Origin, cause error) error {
	err := pipeline.WriteBad(ctx, s.Sink, record, origin, cause)
	if err == nil {
		s.st.records.Add(1)
		s.st.bytes.Add(int64(len(record)))
	}
	s.sample()
	return err
}

func (s *sink) Tick(ctx context.Context, now time.Time) error {
	err := s.Sink.Tick(ctx, now)
	s.sample()
	return err
}

// Prepare counts the committables of the sink's phase 1 as pending once
// its Wait returns them.
func (s *sink) Prepare(ctx context.Context, id uint64, final bool) (committer.Wait, error) {
	wait, err := s.Sink.Prepare(ctx, id, final)
	s.sample()
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (committer.Snapshot, error) {
		snap, err := wait(ctx)
		if err == nil {
			s.st.pending.Add(int64(len(snap.Committables)))
		}
		return snap, err
	}, nil
}

func (s *sink) Commit(ctx context.Context, c json.RawMessage) error {
	err := s.Sink.Commit(ctx, c)
	s.committed(err)
	return err
}

// committed counts a published committable: one fewer pending.
// (Failed attempts are counted from the protocol's events.)
func (s *sink) committed(err error) {
	// Recovery commits the restored record's committables before
	// Restore; those were not counted as pending by this run.
	if err == nil && s.st.restored.Load() {
		s.st.pending.Add(-1)
	}
}

func (s *sink) Restore(ctx context.Context, state json.RawMessage) error {
	err := s.Sink.Restore(ctx, state)
	if err == nil {
		s.st.pending.Store(0)
		s.st.restored.Store(true)
	}
	s.sample()
	return err
}

// Close closes the wrapped sink. Its totals stay in the metrics; its open
// part files and pending committables leave the gauges: whatever it left
// is for the next run (in group mode, the lane's next owner) to publish or
// sweep.
func (s *sink) Close() error {
	err := s.Sink.Close()
	s.m.retire(s.st)
	return err
}

// retire moves the figures of a closed sink to the retired totals.
func (m *Metrics) retire(st *sinkStats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.Index(m.sinks, st)
	if i < 0 {
		return // closed twice
	}
	m.sinks = slices.Delete(m.sinks, i, i+1)
	m.retired.retire(st)
}

func (s *sink) Sweep(ctx context.Context, retained []*recovery.Checkpoint) (committer.Swept, error) {
	swept, err := s.Sink.Sweep(ctx, retained)
	s.sample()
	return swept, err
}
