package bulk

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/filesink/filesink/source"
)

// rowFront is what the Parquet and Arrow IPC writers share in front of
// their encoders: rows are added to buf, and the writer's flush runs when a
// row group is full. Its methods are promoted to both writers.
type rowFront struct {
	buf    *rowBuffer
	pipe   *pipeline    // nil: the writer encodes on the caller's goroutine
	flush  func() error // ends a full row group (the writer's Flush, or a hand-off to pipe)
	err    error        // sticky: the file is broken
	closed bool
	format string // for errors: "Parquet", "Arrow IPC"
}

// Add converts one JSON object record and appends it to the row group (or
// record batch). A record that does not fit the schema is a *FieldError
// (matching source.ErrBadRecord) and leaves no trace: the writer stays
// usable. A nil error means the row is buffered (not that it was written).
func (w *rowFront) Add(record []byte) error {
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.buf.add(record); err != nil {
		return err
	}
	if w.buf.full() {
		return w.flush()
	}
	return nil
}

// AddArrow appends the rows of an Arrow record batch, which must have
// exactly the schema's Arrow schema (Schema.Arrow). The batch is retained
// until it is written; the caller may release its own reference. A batch
// with another schema, or with nulls in a top-level column that is not
// nullable, is an error matching source.ErrBadRecord and adds nothing.
func (w *rowFront) AddArrow(rec arrow.Record) error {
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.buf.addArrow(rec); err != nil {
		return err
	}
	if w.buf.full() {
		return w.flush()
	}
	return nil
}

// AddBatch implements filesink.BatchWriter (for filesink.Writer.WriteBatch):
// batch is added as with AddArrow.
func (w *rowFront) AddBatch(batch arrow.Record) (int64, error) {
	if batch == nil {
		return 0, fmt.Errorf("bulk: a nil batch of %s rows: %w", w.format, source.ErrBadRecord)
	}
	if err := w.AddArrow(batch); err != nil {
		return 0, err
	}
	return batch.NumRows(), nil
}

// usable returns the writer's sticky error; with a pipeline it first
// collects the encoder's bytes and the outcome of a finished encode.
func (w *rowFront) usable() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errClosed
	}
	if w.pipe != nil {
		if err := w.pipe.poll(); err != nil {
			return w.fail(err)
		}
	}
	return nil
}

// fail makes err the writer's sticky error.
func (w *rowFront) fail(err error) error {
	if w.err == nil {
		w.err = fmt.Errorf("bulk: writing %s: %w", w.format, err)
	}
	return w.err
}

// Rows is the number of rows added to the file so far.
func (w *rowFront) Rows() int64 { return w.buf.total }

// Buffered implements filesink.BulkWriter: the bytes of Arrow memory the
// writer holds (builders, batches waiting to be written or being encoded,
// and the encoder's buffers allocated through the writer's allocators) and
// encoded bytes not yet written to the io.Writer. While a row group is
// being encoded on the writer's goroutine, the encoder's share is as of
// the last Add that looked at it (every 16th).
func (w *rowFront) Buffered() int64 {
	n := w.buf.buffered()
	if w.pipe != nil {
		n += w.pipe.buffered()
	}
	return n
}
