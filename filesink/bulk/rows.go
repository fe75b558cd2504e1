package bulk

import (
	"errors"
	"fmt"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/apache/arrow/go/v15/arrow/util"
	"github.com/filesink/filesink/filesink"
)

var errClosed = errors.New("bulk: writer is closed")

// rowBuffer holds the rows of the row group being built: JSON records in
// Arrow builders, and record batches (cut from the builders, or added by
// AddArrow) waiting for the next flush, in order. Not safe for concurrent
// use.
type rowBuffer struct {
	schema       *Schema
	opts         Options
	mem          *countingAllocator
	rb           *array.RecordBuilder
	conv         *converter
	rows         int // rows in the builders
	pending      []arrow.Record
	pendingRows  int64
	foreignBytes int64 // bytes of AddArrow batches (not allocated by mem)
	total        int64 // rows added over the file's life
}

func newRowBuffer(s *Schema, opts Options) *rowBuffer {
	mem := &countingAllocator{mem: memory.NewGoAllocator()}
	rb := array.NewRecordBuilder(mem, s.arrow)
	return &rowBuffer{schema: s, opts: opts, mem: mem, rb: rb, conv: newConverter(s.root, rb.Fields())}
}

func (r *rowBuffer) add(rec []byte) error {
	if err := r.conv.add(rec); err != nil {
		return err
	}
	r.rows++
	r.total++
	return nil
}

func (r *rowBuffer) addArrow(rec arrow.Record) error {
	if !rec.Schema().Equal(r.schema.arrow) {
		return fmt.Errorf("bulk: record batch schema %s does not match the writer's %s: %w", rec.Schema(), r.schema.arrow, filesink.ErrBadRecord)
	}
	for i, f := range r.schema.arrow.Fields() {
		if !f.Nullable && rec.Column(i).NullN() > 0 {
			return &FieldError{Field: f.Name, Problem: fmt.Sprintf("%d nulls in a column that is not nullable", rec.Column(i).NullN())}
		}
	}
	if rec.NumRows() == 0 {
		return nil
	}
	r.cut()
	rec.Retain()
	r.pending = append(r.pending, rec)
	r.pendingRows += rec.NumRows()
	r.foreignBytes += util.TotalRecordSize(rec)
	r.total += rec.NumRows()
	return nil
}

// cut moves the builders' rows into a pending record batch.
func (r *rowBuffer) cut() {
	if r.rows == 0 {
		return
	}
	rec := r.rb.NewRecord()
	r.pending = append(r.pending, rec)
	r.pendingRows += int64(r.rows)
	r.rows = 0
	r.conv.size = 0
}

func (r *rowBuffer) releasePending() {
	for _, rec := range r.pending {
		rec.Release()
	}
	clear(r.pending)
	r.pending = r.pending[:0]
	r.pendingRows = 0
	r.foreignBytes = 0
}

func (r *rowBuffer) buffered() int64 { return r.mem.n.Load() + r.foreignBytes }

// full reports whether the row group reached its configured size.
func (r *rowBuffer) full() bool {
	if n := r.opts.RowGroupRows; n > 0 && int64(r.rows)+r.pendingRows >= int64(n) {
		return true
	}
	return r.opts.RowGroupBytes > 0 && r.buffered() >= r.opts.RowGroupBytes
}

func (r *rowBuffer) release() {
	r.releasePending()
	r.rb.Release()
}
