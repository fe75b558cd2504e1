package bulk

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/filesink/filesink/filesink"
)

// ArrowFormat writes Arrow IPC files (the random-access "Feather v2" file
// format, not the stream format) of one schema. Safe for concurrent use
// (its writers are not).
type ArrowFormat struct {
	schema *Schema
	opts   config
	ipcOpt []ipc.Option
}

var _ filesink.BulkFormat = (*ArrowFormat)(nil)

// ArrowIPC returns the Arrow IPC file format for records of schema.
// Compression is Uncompressed (the default), LZ4 or Zstd (buffer
// compression, which every Arrow reader since 2.0 understands); a row
// group is one record batch. WithDictionary, WithPageBytes and
// WithoutStatistics are ignored. The options are validated together; the
// error joins every invalid one.
func ArrowIPC(schema *Schema, opts ...Option) (*ArrowFormat, error) {
	if schema == nil {
		return nil, errNoSchema
	}
	cfg, err := newConfig(opts)
	f := &ArrowFormat{schema: schema, opts: cfg}
	switch cfg.compression {
	case "", Uncompressed:
	case LZ4:
		f.ipcOpt = append(f.ipcOpt, ipc.WithLZ4())
	case Zstd:
		f.ipcOpt = append(f.ipcOpt, ipc.WithZstd())
	default:
		err = errors.Join(err, fmt.Errorf("bulk: Arrow IPC compression %q is not one of none, lz4, zstd", cfg.compression))
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Extension implements filesink.BulkFormat.
func (f *ArrowFormat) Extension() string { return ".arrow" }

// Schema returns the format's schema.
func (f *ArrowFormat) Schema() *Schema { return f.schema }

// Dropped returns what the format's writers dropped from their records
// with DropUnknown, over the format's life (zero with RejectUnknown).
func (f *ArrowFormat) Dropped() *Dropped { return f.opts.dropped }

// NewWriter implements filesink.BulkFormat; it returns an *ArrowWriter.
func (f *ArrowFormat) NewWriter(w io.Writer) (filesink.BulkWriter, error) {
	return f.NewArrowWriter(w)
}

// NewArrowWriter starts an Arrow IPC file whose bytes go to w. Nothing is
// written to w before the first Flush or Close.
func (f *ArrowFormat) NewArrowWriter(w io.Writer) (*ArrowWriter, error) {
	buf := newRowBuffer(f.schema, f.opts)
	out := &posWriter{w: w}
	opts := append([]ipc.Option{ipc.WithSchema(f.schema.arrow), ipc.WithAllocator(buf.mem)}, f.ipcOpt...)
	fw, err := ipc.NewFileWriter(out, opts...)
	if err != nil {
		buf.release()
		return nil, err
	}
	aw := &ArrowWriter{rowFront: rowFront{buf: buf, format: "Arrow IPC"}, fw: fw}
	aw.flush = aw.Flush
	return aw, nil
}

// ArrowWriter encodes one Arrow IPC file. Not safe for concurrent use.
// Each Flush writes the JSON rows added since the last one as one record
// batch; batches added with AddArrow are written as they are.
type ArrowWriter struct {
	rowFront
	fw *ipc.FileWriter
}

var (
	_ filesink.BulkWriter  = (*ArrowWriter)(nil)
	_ filesink.BatchWriter = (*ArrowWriter)(nil)
)

// Flush writes the buffered rows as record batches. An error leaves the
// file broken: later calls return it.
func (w *ArrowWriter) Flush() error {
	if err := w.usable(); err != nil {
		return err
	}
	w.buf.cut()
	for _, rec := range w.buf.pending {
		if err := w.fw.Write(rec); err != nil {
			w.buf.releasePending()
			return w.fail(err)
		}
	}
	w.buf.releasePending()
	return nil
}

// Close writes the remaining rows and the footer. After a nil error the
// bytes written are one complete Arrow IPC file. Close releases the
// writer's memory, also after an error; a second Close returns nil.
func (w *ArrowWriter) Close() error {
	if w.closed {
		return nil
	}
	err := w.Flush()
	if err == nil {
		if cerr := w.fw.Close(); cerr != nil {
			err = w.fail(cerr)
		}
	}
	w.closed = true
	w.buf.release()
	w.fw = nil
	return err
}
