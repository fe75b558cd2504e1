package bulk

import (
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/filesink/filesink/source"
)

var errClosed = errors.New("bulk: writer is closed")

// rowBuffer holds the rows of the row group being built: JSON records in
// the converter's columns, and record batches (cut from the columns, or added by
// AddArrow) waiting for the next flush, in order. Not safe for concurrent
// use.
type rowBuffer struct {
	schema       *Schema
	opts         config
	mem          *countingAllocator
	conv         *converter
	rows         int   // rows in the converter's columns
	text         int64 // bytes of the JSON records of those rows
	maxText      int64 // text at most before a cut: math.MaxInt32 (tests lower it)
	pending      []arrow.Record
	pendingRows  int64
	foreignBytes int64 // bytes of pending AddArrow batches (not allocated by mem)
	total        int64 // rows added over the file's life
	// taken is what mem counts for the batches handed to the encoding
	// goroutine (take) and not yet released (untake).
	taken int64
	// hints are the top-level columns' lengths (rows, and data bytes of
	// string and binary columns) when the last row group was cut: the
	// next row group reserves them up front instead of regrowing.
	hints []sizeHint
}

type sizeHint struct{ rows, data int }

func newRowBuffer(s *Schema, opts config) *rowBuffer {
	mem := &countingAllocator{mem: memory.NewGoAllocator()}
	conv := newConverter(s, mem)
	if opts.unknown == DropUnknown {
		conv.drop = opts.dropped
	}
	return &rowBuffer{schema: s, opts: opts, mem: mem, conv: conv, maxText: math.MaxInt32}
}

func (r *rowBuffer) add(rec []byte) error {
	if r.rows == 0 && r.hints != nil {
		r.reserve()
	}
	// A string or binary column holds at most the JSON bytes converted
	// since the last cut (values unescaped or decoded are no longer than
	// their text): cutting before they reach 2 GiB keeps its int32 offsets
	// from overflowing.
	if r.rows > 0 && r.text+int64(len(rec)) > r.maxText {
		r.cut()
	}
	if err := r.conv.add(rec); err != nil {
		return err
	}
	r.text += int64(len(rec))
	r.rows++
	r.total++
	return nil
}

func (r *rowBuffer) addArrow(rec arrow.Record) error {
	if !rec.Schema().Equal(r.schema.arrow) {
		return fmt.Errorf("bulk: record batch schema %s does not match the writer's %s: %w", rec.Schema(), r.schema.arrow, source.ErrBadRecord)
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

// cut moves the columns' rows into a pending record batch.
func (r *rowBuffer) cut() {
	if r.rows == 0 {
		return
	}
	if r.hints == nil {
		r.hints = make([]sizeHint, len(r.schema.root.fields))
	}
	for i := range r.hints {
		rows, data := r.conv.lens(i)
		r.hints[i] = sizeHint{rows: rows, data: data}
	}
	r.pending = append(r.pending, r.conv.record())
	r.pendingRows += int64(r.rows)
	r.rows, r.text = 0, 0
}

// valueWidth bounds the bytes a builder of a flat kind takes a value
// (besides string and binary data, and the validity bit).
var valueWidth = [...]int64{kInt32: 4, kInt64: 8, kFloat32: 4, kFloat64: 8, kBool: 1, kString: 4, kBinary: 4, kTimestamp: 8, kDate: 4, kDecimal: 16}

// reserve sizes the empty flat columns for a row group like the last one,
// saving the copies (and garbage) of regrowing them value by value.
func (r *rowBuffer) reserve() {
	hints := r.hints
	r.hints = nil // once per row group
	limit := r.opts.rowGroupBytes
	for i := range hints {
		if r.schema.root.fields[i].kind >= kList {
			continue // nested: regrown as before
		}
		h := hints[i]
		if h.rows == 0 {
			continue
		}
		// The last row group's sizes and a sixteenth more, exactly (not
		// rounded up to a power of two, as Reserve would: that memory
		// would count towards the row group's size unused).
		//
		// A row group ends when the columns' memory reaches
		// RowGroupBytes; reserving must not get there by itself, or the
		// next row would end a row group of one row. cost bounds what
		// reserving allocates (a value or offset and the validity bit, with
		// room for rounding); reserving stops at three quarters of the
		// limit.
		rows, data := h.rows+h.rows/16, h.data+h.data/16
		cost := int64(rows)*(valueWidth[r.schema.root.fields[i].kind]+1) + int64(data) + 128
		if limit > 0 && r.building()+cost >= limit/4*3 {
			continue
		}
		r.conv.reserve(i, rows, data)
	}
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

// take hands the pending batches over (to be encoded on another
// goroutine) and returns what mem counts for them and the bytes of the
// AddArrow batches among them. The columns hold nothing after cut, so
// everything mem counts but what was taken before is the batches'.
func (r *rowBuffer) take() (recs []arrow.Record, mem, foreign int64) {
	recs = r.pending
	mem = r.mem.n.Load() - r.taken
	foreign = r.foreignBytes
	r.taken += mem
	r.pending = nil
	r.pendingRows = 0
	r.foreignBytes = 0
	return recs, mem, foreign
}

// untake releases batches returned by take.
func (r *rowBuffer) untake(recs []arrow.Record, mem int64) {
	for _, rec := range recs {
		rec.Release()
	}
	r.taken -= mem
}

// buffered is the memory of the rows the buffer holds, taken batches
// included.
func (r *rowBuffer) buffered() int64 { return r.mem.n.Load() + r.foreignBytes }

// building is the memory of the row group being built: columns and
// pending batches, not the batches taken.
func (r *rowBuffer) building() int64 { return r.mem.n.Load() - r.taken + r.foreignBytes }

// full reports whether the row group reached its configured size.
func (r *rowBuffer) full() bool {
	if n := r.opts.rowGroupRows; n > 0 && int64(r.rows)+r.pendingRows >= int64(n) {
		return true
	}
	return r.opts.rowGroupBytes > 0 && r.building() >= r.opts.rowGroupBytes
}

func (r *rowBuffer) release() {
	r.releasePending()
	r.conv.release()
}
