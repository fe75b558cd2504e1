package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/filesink/filesink/source"
)

type batch struct {
	data   []byte
	vals   [][]byte // the records, when the source's values are retained (no copy in data)
	ends   []int    // data[ends[i-1]:ends[i]] is record i; with vals, the running byte count
	routes []int    // subtask of record i (Config.Partition); nil: round robin
	// pending counts the subtasks that have not yet processed the batch;
	// the last one hands it back to the reader for reuse.
	pending atomic.Int32
	origins []source.Origin
	pos     json.RawMessage // source position after the last record
	eof     bool            // the source is exhausted after this batch
	// skipping: the reader drops the records the output holds; skip is
	// what is left to drop after this batch, skipped how many it dropped.
	skipping bool
	skip     *skipState
	skipped  int64
	err      error
	// restart is the source's error matching source.ErrSchemaChanged: the
	// batch holds no records (those read since the last batch are read
	// again by the next run), the run ends with a final checkpoint and
	// returns it.
	restart error
	// bad holds the records the source could not deliver whole (a line it
	// skipped for its length), by index: they go to the sinks'
	// dead-letter outputs (BadRecordSink). Empty for most batches.
	bad map[int]error
}

// bytes is the size of the batch's records.
func (b *batch) bytes() int {
	if len(b.ends) == 0 {
		return 0
	}
	return b.ends[len(b.ends)-1]
}

func (b *batch) record(i int) []byte {
	if b.vals != nil {
		return b.vals[i]
	}
	start := 0
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.data[start:b.ends[i]]
}

// reset empties b for reuse, keeping its buffers.
func (b *batch) reset() {
	clear(b.vals) // let the source's memory go
	clear(b.bad)
	b.data, b.ends, b.origins, b.routes = b.data[:0], b.ends[:0], b.origins[:0], b.routes[:0]
	if b.vals != nil {
		b.vals = b.vals[:0]
	}
	b.pos, b.eof, b.err, b.restart = nil, false, nil, nil
	b.skipping, b.skip, b.skipped = false, nil, 0
}

// linger is how long the reader waits for more records before it hands a
// partial batch over, so that records of a slow source (stdin) reach the
// sinks and the next checkpoint.
const linger = 50 * time.Millisecond

// reader reads the source into batches on a goroutine of its own.
type reader struct {
	src       source.Source
	size      int                   // records per batch
	partition func([]byte, int) int // Config.Partition
	subtasks  int                   // number of subtasks, for partition
	retained  bool                  // the source's values stay valid: no copy
	free      <-chan *batch         // processed batches, for reuse
	out       chan<- *batch         // closed when run returns
	dataCap   int                   // the previous batch's bytes: the next one is sized for as many
	stopped   bool                  // the stop was seen: the current batch is the last
	stopCtx   context.Context       // cancelled on stop or with run's context
	cancel    context.CancelFunc    // cancels stopCtx
	skipping  bool                  // drop the records in skip (Config.ResumeFromOutput)
	skip      *skipState
}

func newReader(src source.Source, cfg *Config, free <-chan *batch, out chan<- *batch) *reader {
	r, ok := src.(source.Retained)
	return &reader{
		src: src, size: cfg.BatchSize, partition: cfg.Partition, subtasks: len(cfg.Sinks),
		retained: ok && r.ValuesRetained(), free: free, out: out,
	}
}

// run sends batches of records until the end of the source, an error,
// stop (then it sends what it has read and closes out) or cancellation of
// ctx (then it returns at once).
func (rd *reader) run(ctx context.Context, stop <-chan struct{}) {
	defer close(rd.out)
	rd.stopCtx, rd.cancel = context.WithCancel(ctx)
	defer rd.cancel()
	go func() {
		select {
		case <-stop:
			rd.cancel()
		case <-rd.stopCtx.Done():
		}
	}()
	for {
		b := rd.batch()
		if !rd.fill(ctx, b) {
			return
		}
		rd.dataCap = len(b.data)
		if b.err == nil && b.restart == nil {
			pos, err := rd.src.Position()
			if err != nil {
				b.err = fmt.Errorf("source position: %w", err)
			}
			b.pos = pos
		}
		b.skipping, b.skip = rd.skipping, rd.skip
		select {
		case rd.out <- b:
		case <-ctx.Done():
			return
		}
		if b.eof || b.err != nil || b.restart != nil || rd.stopped {
			return
		}
	}
}

// batch returns an empty batch: one processed by every subtask, or a new
// one.
func (rd *reader) batch() *batch {
	select {
	case b := <-rd.free:
		b.reset()
		return b
	default:
	}
	b := &batch{
		ends:    make([]int, 0, rd.size),
		origins: make([]source.Origin, 0, rd.size),
	}
	if rd.retained {
		b.vals = make([][]byte, 0, rd.size)
	} else {
		b.data = make([]byte, 0, rd.dataCap+rd.dataCap/8)
	}
	if rd.partition != nil {
		b.routes = make([]int, 0, rd.size)
	}
	return b
}

// fill reads records into b until it is full, the source ends, fails or
// lingers with records in b, or the stop comes (rd.stopped). It returns
// false if ctx was cancelled: b is then to be dropped.
func (rd *reader) fill(ctx context.Context, b *batch) bool {
	lctx, lcancel := rd.lingering()
	defer func() { lcancel() }()
	for len(b.ends) < rd.size {
		if rd.stopCtx.Err() != nil && ctx.Err() == nil {
			rd.stopped = true // a source that never blocks ignores its context
			return true
		}
		rec, err := rd.src.Next(lctx)
		switch {
		case err == io.EOF:
			b.eof = true
			return true
		case err == nil:
			if b.err = rd.add(b, rec); b.err != nil {
				return true
			}
			continue
		case skipped(err) != nil:
			if b.err = rd.addBad(b, skipped(err)); b.err != nil {
				return true
			}
			continue
		case errors.Is(err, source.ErrSchemaChanged):
			// The position covers the records read into b: drop them, to
			// be read again after the change.
			b.reset()
			b.restart = err
			return true
		case ctx.Err() != nil:
			return false
		case rd.stopCtx.Err() != nil:
			rd.stopped = true
			return true
		case lctx.Err() == nil:
			b.err = sourceError("read source", err)
			return true
		case len(b.ends) > 0:
			return true // hand over a partial batch
		}
		lcancel()
		lctx, lcancel = rd.lingering()
	}
	return true
}

// lingering bounds a wait for the next record to linger.
func (rd *reader) lingering() (context.Context, context.CancelFunc) {
	return context.WithTimeout(rd.stopCtx, linger)
}

// skipped returns err as a record the source read past and could not
// deliver whole (a line longer than the maximum with
// source.WithSkipLongLines, a value its decoder refused), or nil.
func skipped(err error) error {
	var le *source.LineTooLongError
	if errors.As(err, &le) && le.Skipped {
		return le
	}
	var ue *source.UndecodableError
	if errors.As(err, &ue) {
		return ue
	}
	return nil
}

// addBad appends the skipped record of err (see skipped) to b as a bad
// record: what the source kept of it, for the sink's dead-letter output.
func (rd *reader) addBad(b *batch, err error) error {
	var rec source.Record
	switch e := err.(type) {
	case *source.LineTooLongError:
		rec = source.Record{Value: e.Head, Origin: e.Origin}
	case *source.UndecodableError:
		rec = source.Record{Value: e.Value, Origin: e.Origin}
	}
	n := len(b.ends)
	if err := rd.add(b, rec); err != nil || len(b.ends) == n {
		return err // or dropped: the output holds its dead letter
	}
	if b.bad == nil {
		b.bad = map[int]error{}
	}
	b.bad[len(b.ends)-1] = err
	return nil
}

// add appends rec to b, routed by the partition function if there is one.
func (rd *reader) add(b *batch, rec source.Record) error {
	if rd.skip != nil {
		var drop bool
		if drop, rd.skip = rd.skip.skips(rec.Origin); drop {
			b.skipped++
			return nil
		}
	}
	if rd.partition != nil {
		i := rd.partition(rec.Value, rd.subtasks)
		if i < 0 || i >= rd.subtasks {
			return fmt.Errorf("partition of record %s: subtask %d out of [0, %d)", rec.Origin, i, rd.subtasks)
		}
		b.routes = append(b.routes, i)
	}
	if rd.retained {
		b.vals = append(b.vals, rec.Value)
		b.ends = append(b.ends, b.bytes()+len(rec.Value))
	} else {
		b.data = append(b.data, rec.Value...)
		b.ends = append(b.ends, len(b.data))
	}
	b.origins = append(b.origins, rec.Origin)
	return nil
}

// sourceError puts context in front of a source's error, without the
// "source: " that package source starts its errors with: "open source:
// list input directory ...", not "open source: source: list ...". The
// result wraps err.
func sourceError(context string, err error) error {
	rest, _ := strings.CutPrefix(err.Error(), "source: ")
	return &contextError{msg: context + ": " + rest, err: err}
}

// contextError is an error with a message of its own that wraps another.
type contextError struct {
	msg string
	err error
}

func (e *contextError) Error() string { return e.msg }
func (e *contextError) Unwrap() error { return e.err }
