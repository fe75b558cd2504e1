package filesink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/source"
)

// WithBulkFormat makes the Writer write part files of a bulk (columnar)
// format, such as Parquet or Arrow IPC (package filesink/bulk), instead of
// a row format: each open bucket has one BulkWriter, whose bytes go to the
// part file through the Writer's I/O goroutine.
//
// A bulk part rolls at every checkpoint, whatever the rolling policy's
// OnCheckpoint says (a footer cannot be resumed, so a bulk part is never
// persisted in progress and checkpoint state holds none), and also when the
// policy's OnEvent (size: bytes written plus what the writer's rows are
// expected to add: its PendingSizer estimate, else its Buffered) or
// OnTime (rollover, inactivity) says so. Records of an in-progress bulk part
// that a crash loses come again from the source.
//
// The BulkWriters' Buffered bytes count against the buffer budget: when
// the total goes over, the Writer flushes the largest writers' row groups
// early (BulkWriter.Flush), and rolls a part whose writer does not give
// the memory back.
//
// A record the format rejects (an Add error wrapping source.ErrBadRecord) is a
// *source.BadRecordError naming its origin, or goes to the WithDeadLetter output,
// which stays JSON lines. WithBulkFormat excludes WithEncoder and
// WithCompression (the format compresses its own pages); New reports
// either combination as an error.
func WithBulkFormat(f BulkFormat) Option { return optionFunc(func(c *config) { c.bulk = f }) }

// bulkFlushAt is the size from which the bytes a bulk writer produced are
// handed to the I/O goroutine after the call that produced them.
const bulkFlushAt = minFlush

// isBulk reports whether b's parts are written by bulk writers.
func (w *Writer) isBulk(b *bucket) bool { return w.bulk != nil && !b.key.dl }

// bulkSink is the io.Writer of one bulk part's BulkWriter. Until the
// part's file is open it appends to the bucket's buffer; afterwards it
// fills the bucket's buffers (reserved like any bucket's, counted in
// bufCap) and hands each full one to the I/O goroutine at once, so that a
// row group's pages are written out while the encoder produces the rest
// of them instead of piling up in one regrown slice.
type bulkSink struct {
	w *Writer
	b *bucket
	p *part
}

var _ Lender = bulkSink{}

func (s bulkSink) Write(data []byte) (int, error) {
	if s.b.part != s.p {
		return 0, fmt.Errorf("filesink: the bulk writer of %s wrote after Close", s.p.target)
	}
	if s.p.lent {
		return 0, fmt.Errorf("filesink: the bulk writer of %s wrote to its part while the part was lent", s.p.target)
	}
	w, b, total := s.w, s.b, len(data)
	for {
		if s.p.pw != nil && len(b.buf) > 0 && len(b.buf)+len(data) > cap(b.buf) {
			if err := w.handOff(b); err != nil {
				return total - len(data), err
			}
		}
		w.reserve(b)
		room := cap(b.buf) - len(b.buf)
		if s.p.pw == nil || len(data) <= room {
			old := cap(b.buf)
			b.buf = append(b.buf, data...)
			w.bufCap += int64(cap(b.buf) - old)
			return total, nil
		}
		b.buf = append(b.buf, data[:room]...)
		data = data[room:]
	}
}

// Lend implements Lender. The part's buffered bytes go to the I/O
// goroutine first; the lent writer's first write waits until they are
// written (not the caller).
func (s bulkSink) Lend() io.Writer {
	w, b, p := s.w, s.b, s.p
	if b.part != p || p.pw == nil || p.lent {
		return nil
	}
	if len(b.buf) > 0 {
		if err := w.handOff(b); err != nil {
			return nil // the Writer is broken: its next call says so
		}
	}
	ready, err := w.io.lend(p)
	if err != nil {
		return nil
	}
	p.lent = true
	return &lentPart{p: p, q: &w.io, ready: ready}
}

// Return implements Lender.
func (s bulkSink) Return() { s.p.lent = false }

// lentPart is the writer bulkSink.Lend returns: it writes to the part's
// file on the goroutine it is lent to.
type lentPart struct {
	p     *part
	q     *ioQueue
	ready <-chan struct{} // nil once the queue's earlier writes are done
}

func (l *lentPart) Write(data []byte) (int, error) {
	if l.ready != nil {
		<-l.ready
		l.ready = nil
	}
	p := l.p
	p.loanMu.Lock()
	defer p.loanMu.Unlock()
	if p.revoked {
		return 0, fmt.Errorf("filesink: %s: the Writer was closed", p.target)
	}
	if err := l.q.error(); err != nil {
		return 0, err
	}
	if err := p.writeOut(data, nil, 0); err != nil {
		return 0, err
	}
	return len(data), nil
}

// WriteBatch adds a batch of rows to the bulk part of bucket (a bucket
// path, as an Assigner returns; the Writer's assigner is not asked, since
// it reads single records). The Writer's bulk format must take batches
// (BatchWriter: package bulk's Parquet and Arrow IPC formats take an
// arrow.Record of their schema, which is retained until written; nil is a
// bad batch). The rows
// are the records origin.Num, origin.Num+1, ... of origin.Name, in order,
// for the manifests and verify. The whole batch goes to one part file: the
// rolling policy is asked before it, not within it. A batch that does not
// fit the format is an error matching source.ErrBadRecord that names its first
// origin; it adds nothing and leaves the Writer usable (batches never go to
// the dead-letter output). A nil error means the rows are buffered, as
// with Write. Not safe for concurrent use, like Write.
func (w *Writer) WriteBatch(ctx context.Context, bucket string, batch arrow.Record, origin source.Origin) error {
	if w.bulk == nil {
		return errors.New("filesink: WriteBatch needs a bulk format (WithBulkFormat)")
	}
	bpath, err := bucketing.Sanitize(bucket)
	if err != nil {
		return fmt.Errorf("filesink: WriteBatch: bucket %q: %w", bucket, err)
	}
	now := w.recordNow()
	b, err := w.bulkBucket(ctx, bucketKey{path: bpath}, now)
	if err != nil {
		return err
	}
	p := b.part
	bw, ok := p.bulk.(BatchWriter)
	if !ok {
		return fmt.Errorf("filesink: the %s format does not take batches (WriteBatch)", w.ext)
	}
	rows, err := bw.AddBatch(batch)
	w.account(p)
	if err != nil {
		if errors.Is(err, source.ErrBadRecord) {
			return &source.BadRecordError{Origin: origin.String() + " (a batch)", Err: err}
		}
		return fmt.Errorf("filesink: %s: %w", p.target, err)
	}
	p.rows += rows
	w.recTime = time.Time{} // no event time per row
	p.stats.noDigest = true // nor the records' bytes
	for i := range rows {
		w.noteRecord(p, source.Origin{Name: origin.Name, Num: origin.Num + i})
	}
	p.lastWrite = now
	w.countN(rows, 0)
	return w.afterBulk(ctx, b)
}

// writeBulk adds record to the bulk part of bucket key.
func (w *Writer) writeBulk(ctx context.Context, key bucketKey, record []byte, origin source.Origin, now time.Time) error {
	b, err := w.bulkBucket(ctx, key, now)
	if err != nil {
		return err
	}
	p := b.part
	err = p.bulk.Add(record)
	w.account(p)
	if err != nil {
		if !errors.Is(err, source.ErrBadRecord) {
			return fmt.Errorf("filesink: %s: %w", p.target, err)
		}
		if err := w.bad(ctx, record, origin, fmt.Errorf("encode%s: %w", w.bulk.Extension(), err), now); err != nil {
			return err
		}
		return w.afterBulk(ctx, b)
	}
	p.rows++
	w.noteRecord(p, origin)
	p.lastWrite = now
	w.count(len(record))
	return w.afterBulk(ctx, b)
}

// bulkBucket returns bucket key with a bulk part open for the next rows:
// the part it had, or a new one when it had none or the rolling policy
// rolled it.
func (w *Writer) bulkBucket(ctx context.Context, key bucketKey, now time.Time) (*bucket, error) {
	b := w.bucketOf(key)
	if b.part != nil && w.mustRoll(b, partSize(b), 0, now) {
		if err := w.roll(ctx, b); err != nil {
			return nil, err
		}
	}
	if b.part == nil {
		if err := w.openBulk(b, now); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// openBulk starts a new bulk part in b. Its file is opened when the first
// bytes are handed to the I/O goroutine.
func (w *Writer) openBulk(b *bucket, now time.Time) error {
	p := &part{target: w.partName(b.key, w.ext), created: now, lastWrite: now}
	b.part = p
	bw, err := w.bulk.NewWriter(bulkSink{w: w, b: b, p: p})
	if err != nil {
		b.part = nil
		w.bufCap -= int64(cap(b.buf))
		b.buf = nil
		return fmt.Errorf("filesink: new %s writer for %s: %w", w.ext, p.target, err)
	}
	p.bulk = bw
	p.sizer, _ = bw.(PendingSizer)
	w.account(p)
	return nil
}

// account brings the budget's count of p's bulk writer up to date.
func (w *Writer) account(p *part) {
	var held int64
	if p.bulk != nil {
		held = p.bulk.Buffered()
	}
	w.bulkHeld += held - p.held
	p.held, p.pending = held, held
	if p.bulk != nil && p.sizer != nil {
		p.pending = p.sizer.Pending()
	}
}

// afterBulk hands the bytes b's bulk writer produced to the I/O goroutine
// and keeps the total within the budget.
func (w *Writer) afterBulk(ctx context.Context, b *bucket) error {
	// The file is opened with the part's first row, so that the row
	// groups' pages can go to it as they come (bulkSink, Lend).
	if b.part != nil && b.part.pw == nil && b.part.rows > 0 {
		if err := w.open(ctx, b); err != nil {
			return err
		}
	}
	if len(b.buf) >= bulkFlushAt {
		if err := w.flush(ctx, b); err != nil {
			return err
		}
	}
	if w.usage() > w.limit() {
		return w.relieve(ctx)
	}
	return nil
}

// closeBulk writes the footer of b's bulk part into b's buffer. A part
// that received no record and opened no file is dropped (b.part is nil
// afterwards).
func (w *Writer) closeBulk(b *bucket) error {
	p := b.part
	if p.bulk == nil {
		return nil
	}
	err := p.bulk.Close()
	p.bulk = nil
	w.account(p)
	if err != nil {
		return fmt.Errorf("filesink: closing %s: %w", p.target, err)
	}
	if p.rows == 0 && p.pw == nil {
		w.bufCap -= int64(cap(b.buf))
		b.buf, b.part = nil, nil
	}
	return nil
}

// relieve brings the memory held back within the budget: bulk writers
// first (their row groups are the bulk of it), then buffers.
func (w *Writer) relieve(ctx context.Context) error {
	if w.bulkHeld > 0 {
		if err := w.shrinkBulk(ctx); err != nil {
			return err
		}
	}
	if w.usage() > w.limit() {
		return w.shrink(ctx)
	}
	return nil
}

// shrinkBulk flushes the row groups of the bulk writers holding the most
// until the total is at most 3/4 of the budget. A writer that keeps more
// than half of what it held through Flush has its part rolled instead.
func (w *Writer) shrinkBulk(ctx context.Context) error {
	var bs []*bucket
	for _, b := range w.buckets {
		if b.part != nil && b.part.bulk != nil && b.part.held > 0 {
			bs = append(bs, b)
		}
	}
	slices.SortFunc(bs, func(x, y *bucket) int {
		if c := cmp.Compare(y.part.held, x.part.held); c != 0 {
			return c
		}
		return cmp.Compare(x.key.path, y.key.path)
	})
	for _, b := range bs {
		if w.usage() <= w.limit()/4*3 {
			break
		}
		if b.part == nil || b.part.bulk == nil {
			continue // rolled at the open-file limit by a flush before
		}
		p := b.part
		before := p.held
		err := p.bulk.Flush()
		w.account(p)
		if err != nil {
			return fmt.Errorf("filesink: flushing a row group of %s: %w", p.target, err)
		}
		if p.held > before/2 {
			w.log.Debug("bulk writer kept its memory through Flush: rolling its part", "part", p.target, "held", p.held)
			if err := w.roll(ctx, b); err != nil {
				return err
			}
			continue
		}
		if err := w.flush(ctx, b); err != nil {
			return err
		}
	}
	return nil
}
