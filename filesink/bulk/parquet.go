package bulk

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/filesink/filesink/filesink"
)

// ParquetFormat writes Parquet part files of one schema. Safe for
// concurrent use (its writers are not).
type ParquetFormat struct {
	schema *Schema
	opts   config
	codec  compress.Compression
	// sequential turns the pipeline off (tests): row groups ended by Add
	// are encoded on the caller's goroutine, as by Flush.
	sequential bool
	// rowBytes holds the bits of the float64 bytes per row that a writer
	// of this format last measured, for the Pending of writers that have
	// not written a row group yet.
	rowBytes *atomic.Uint64
}

var _ filesink.BulkFormat = (*ParquetFormat)(nil)

// Parquet returns the Parquet format for records of schema. Files are
// written with Apache Arrow's pqarrow encoder; the Arrow schema is stored in
// the file (ARROW:schema) so Arrow readers get the exact types back.
// The options are validated together; the error joins every invalid one.
func Parquet(schema *Schema, opts ...Option) (*ParquetFormat, error) {
	if schema == nil {
		return nil, errNoSchema
	}
	cfg, err := newConfig(opts)
	f := &ParquetFormat{schema: schema, opts: cfg, rowBytes: new(atomic.Uint64)}
	switch cfg.compression {
	case "", Snappy:
		f.codec = compress.Codecs.Snappy
	case Zstd:
		f.codec = compress.Codecs.Zstd
	case Gzip:
		f.codec = compress.Codecs.Gzip
	case Uncompressed:
		f.codec = compress.Codecs.Uncompressed
	default:
		err = errors.Join(err, fmt.Errorf("bulk: Parquet compression %q is not one of snappy, zstd, gzip, none", cfg.compression))
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Extension implements filesink.BulkFormat.
func (f *ParquetFormat) Extension() string { return ".parquet" }

// Schema returns the format's schema.
func (f *ParquetFormat) Schema() *Schema { return f.schema }

// Dropped returns what the format's writers dropped from their records
// with DropUnknown, over the format's life (zero with RejectUnknown).
func (f *ParquetFormat) Dropped() *Dropped { return f.opts.dropped }

// NewWriter implements filesink.BulkFormat; it returns a *ParquetWriter.
func (f *ParquetFormat) NewWriter(w io.Writer) (filesink.BulkWriter, error) {
	return f.NewParquetWriter(w)
}

// NewParquetWriter starts a Parquet file whose bytes go to w. Nothing is
// written to w before the first row group.
func (f *ParquetFormat) NewParquetWriter(w io.Writer) (*ParquetWriter, error) {
	buf := newRowBuffer(f.schema, f.opts)
	pw := &ParquetWriter{rowFront: rowFront{buf: buf, format: "Parquet"}, f: f, out: &posWriter{w: w}}
	pw.pipe = newPipeline(pw.out, buf)
	pw.flush = pw.handOff
	pw.encoder = pw.encode
	if f.sequential || runtime.GOMAXPROCS(0) < 2 {
		pw.flush = pw.Flush // no second core to encode on
	}
	return pw, nil
}

// ParquetWriter encodes one Parquet file. Not safe for concurrent use.
//
// Rows are appended to Arrow builders (Add converts JSON, AddArrow takes
// record batches); a row group ends when the rows being buffered reach
// WithRowGroupRows or WithRowGroupBytes, at Flush, and at Close.
//
// # Pipelining
//
// A row group that Add or AddArrow ends is encoded (pqarrow) on a
// goroutine of its own (when GOMAXPROCS is 2 or more at NewParquetWriter)
// while the caller goes on adding rows to the next one; its bytes reach
// the io.Writer on the caller's goroutine, in order, during the following
// calls (Add, AddArrow, Flush, Close: the io.Writer is never called
// concurrently nor from another goroutine). At most one row group is
// encoded at a time: ending the next one first waits for it. Meanwhile the
// writer holds up to two row groups (Buffered counts both, the encoder's
// buffers, and encoded bytes not yet written); once the encode is over
// and collected by a call, no goroutine and none of that memory. An error
// of the encode is returned by the first call after it (at the latest the
// next Flush or Close) and leaves the writer broken; a panic is raised
// again by that call, on the caller's goroutine.
//
// Flush and Close wait for the encode in flight and encode the rest on the
// caller's goroutine: when Flush returns nil, every row added before it has
// been written to the io.Writer as part of a row group, except the last
// column's last page, which pqarrow writes when the next row group starts
// or at Close (Buffered counts it).
//
// # Dictionary encoding
//
// With DictAuto the writer decides per leaf column, once per file, on the
// rows of the first row group (the first 8192 values of each column):
// dictionary encoding is on when at most a quarter of the sampled non-null
// values are distinct (country codes, enum-like strings, small integer
// ranges), and for 4-byte values (int32, float32, date) at most 256, off
// otherwise (ids, timestamps, free text), and always off for booleans. High-cardinality columns gain nothing from a dictionary but
// cost encoding time (pqarrow builds a hash table per value and falls back
// to plain encoding when the dictionary page grows past 1 MiB); the sample
// is taken before the first row group because Parquet writer properties
// are fixed when a file starts.
type ParquetWriter struct {
	rowFront
	f   *ParquetFormat
	out *posWriter
	// rateDone is the rows encoded when Pending last computed perRow, the
	// bytes per row written so far (and stored it in f.rowBytes).
	rateDone int64
	perRow   float64
	fw       *pqarrow.FileWriter
	dict     []bool   // per leaf column, as decided at the first row group
	paths    []string // the leaf columns' paths
	// encoder is encode (tests wrap it to inject errors).
	encoder func([]arrow.Record) error
}

var (
	_ filesink.BulkWriter   = (*ParquetWriter)(nil)
	_ filesink.PendingSizer = (*ParquetWriter)(nil)
	_ filesink.BatchWriter  = (*ParquetWriter)(nil)
)

// handOff ends the row group being built and has the pipeline encode it
// (after the previous one).
func (w *ParquetWriter) handOff() error {
	if err := w.pipe.wait(); err != nil {
		return w.fail(err)
	}
	w.buf.cut()
	if len(w.buf.pending) == 0 {
		return nil
	}
	if err := w.start(); err != nil {
		return w.fail(err)
	}
	w.pipe.spawn(w.encoder)
	return nil
}

// encode writes recs as one row group, to the pipeline's spool.
func (w *ParquetWriter) encode(recs []arrow.Record) error {
	if len(recs) == 1 {
		return w.fw.Write(recs[0])
	}
	tbl := array.NewTableFromRecords(w.f.schema.arrow, recs)
	defer tbl.Release()
	return w.fw.WriteTable(tbl, tbl.NumRows())
}

// Flush writes the buffered rows as one row group (none if there are no
// rows), after the row group being encoded, if any. An error leaves the
// file broken: later calls return it.
func (w *ParquetWriter) Flush() error {
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.pipe.wait(); err != nil {
		return w.fail(err)
	}
	w.buf.cut()
	if len(w.buf.pending) == 0 {
		return nil
	}
	if err := w.start(); err != nil {
		return w.fail(err)
	}
	rows := w.buf.pendingRows
	err := w.encoder(w.buf.pending)
	w.buf.releasePending()
	if err != nil {
		return w.fail(err)
	}
	w.pipe.encoded += rows
	return nil
}

// Pending implements filesink.PendingSizer: the rows added and not yet
// written (the row group being built, and the one being encoded) times
// the bytes per row written so far, so that a filesink.Writer rolls parts
// near its policy's part size rather than at the part size less the rows'
// Arrow memory (Buffered, which also counts the capacity reserved for a
// whole row group). Before its first row group is written, a writer uses
// the bytes per row another writer of the same format measured last, and
// before any did, Buffered. It is an estimate: a file ends somewhat over
// the part size when later rows encode larger. The bytes that the encode
// in flight has already written to a file lent to it (filesink.Lender)
// are in the file's size, so they are not pending.
func (w *ParquetWriter) Pending() int64 {
	if w.out == nil {
		return w.Buffered()
	}
	done := w.pipe.encoded
	perRow := w.perRow
	if done > 0 {
		if done != w.rateDone { // once per row group
			perRow = float64(w.out.pos) / float64(done)
			w.rateDone, w.perRow = done, perRow
			w.f.rowBytes.Store(math.Float64bits(perRow))
		}
	} else if perRow = math.Float64frombits(w.f.rowBytes.Load()); perRow <= 0 {
		return w.Buffered()
	}
	est := int64(float64(w.buf.total-done) * perRow)
	if rows, written := w.pipe.inFlight(); written > 0 {
		building := int64(float64(w.buf.total-done-rows) * perRow) // the rows after the encode's
		est = max(est-written, building)
	}
	return est
}

// Close writes the remaining rows and the footer. After a nil error the
// bytes written are one complete Parquet file (with no row group if no row
// was added). Close releases the writer's memory and stops its encoding
// goroutine, also after an error; a second Close returns nil.
func (w *ParquetWriter) Close() error {
	if w.closed {
		return nil
	}
	err := w.Flush()
	if err == nil {
		err = w.start()
	}
	if err == nil {
		if cerr := w.fw.Close(); cerr != nil {
			err = w.fail(cerr)
		}
	}
	w.pipe.abort() // after an error: wait for the encode, write nothing
	w.closed = true
	w.buf.release()
	w.fw = nil
	w.out = nil
	return err
}

// DictionaryColumns reports, after the first row group, which leaf
// columns (by their Parquet path) are dictionary encoded.
func (w *ParquetWriter) DictionaryColumns() map[string]bool {
	if w.dict == nil {
		return nil
	}
	out := make(map[string]bool, len(w.dict))
	for i, on := range w.dict {
		out[w.paths[i]] = on
	}
	return out
}

// start makes the pqarrow writer, deciding the dictionary columns from
// the first pending batch.
func (w *ParquetWriter) start() error {
	if w.fw != nil {
		return nil
	}
	o := w.f.opts
	props := []parquet.WriterProperty{
		parquet.WithAllocator(w.pipe.mem),
		parquet.WithCompression(w.f.codec),
		parquet.WithStats(!o.noStatistics),
		parquet.WithDataPageSize(o.pageBytes),
		parquet.WithCreatedBy("filesink"),
		parquet.WithMaxRowGroupLength(math.MaxInt32),
	}
	arrProps := pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(w.pipe.mem))
	pqs, err := pqarrow.ToParquet(w.f.schema.arrow, parquet.NewWriterProperties(props...), arrProps)
	if err != nil {
		return err
	}
	w.dict = make([]bool, pqs.NumColumns())
	switch o.dictionary {
	case DictOn:
		for i := range w.dict {
			w.dict[i] = true
		}
	case DictAuto:
		if len(w.buf.pending) > 0 {
			var leaves []arrow.Array
			for _, col := range w.buf.pending[0].Columns() {
				leaves = leafArrays(col, leaves)
			}
			for i := range w.dict {
				if i < len(leaves) {
					w.dict[i] = lowCardinality(leaves[i])
				}
			}
		}
	}
	for i, on := range w.dict {
		path := pqs.Column(i).ColumnPath().String()
		w.paths = append(w.paths, path)
		props = append(props, parquet.WithDictionaryFor(path, on))
	}
	props = append(props, parquet.WithDictionaryDefault(false))
	w.fw, err = pqarrow.NewFileWriter(w.f.schema.arrow, &w.pipe.spool, parquet.NewWriterProperties(props...), arrProps)
	return err
}

// leafArrays appends the leaf arrays of a in Parquet column order.
func leafArrays(a arrow.Array, out []arrow.Array) []arrow.Array {
	switch a := a.(type) {
	case *array.List:
		return leafArrays(a.ListValues(), out)
	case *array.Struct:
		for i := 0; i < a.NumField(); i++ {
			out = leafArrays(a.Field(i), out)
		}
		return out
	}
	return append(out, a)
}

// dictSample is how many values of a column lowCardinality looks at.
const dictSample = 8192

// lowCardinality reports whether at most a quarter of the first
// dictSample non-null values of a are distinct, and for 4-byte values
// (int32, float32, date) at most 256: a dictionary index is then a byte
// or less, a quarter of the value at most. Beyond that a dictionary of
// small values saves little (10-bit indices for 1,000 distinct int32s:
// 2.75 bytes a row) and costs a hash lookup per value, which on the
// benchmark's records was a tenth of the encoder's time.
func lowCardinality(a arrow.Array) bool {
	n := 0
	for i := 0; i < a.Len() && n < dictSample; i++ {
		if a.IsValid(i) {
			n++
		}
	}
	if n == 0 {
		return false
	}
	limit := n / 4
	switch a.DataType().ID() {
	case arrow.INT32, arrow.FLOAT32, arrow.DATE32:
		limit = min(limit, 256)
	}
	switch a := a.(type) {
	case *array.Int32:
		return distinctAtMost(a, limit, func(i int) int32 { return a.Value(i) })
	case *array.Int64:
		return distinctAtMost(a, limit, func(i int) int64 { return a.Value(i) })
	case *array.Float32:
		return distinctAtMost(a, limit, func(i int) float32 { return a.Value(i) })
	case *array.Float64:
		return distinctAtMost(a, limit, func(i int) float64 { return a.Value(i) })
	case *array.Timestamp:
		return distinctAtMost(a, limit, func(i int) arrow.Timestamp { return a.Value(i) })
	case *array.Date32:
		return distinctAtMost(a, limit, func(i int) arrow.Date32 { return a.Value(i) })
	case *array.Decimal128:
		return distinctAtMost(a, limit, func(i int) decimal128.Num { return a.Value(i) })
	case *array.String:
		return distinctAtMost(a, limit, func(i int) string { return a.Value(i) })
	case *array.Binary:
		return distinctAtMost(a, limit, func(i int) string { return string(a.Value(i)) })
	}
	return false // booleans and anything else
}

func distinctAtMost[K comparable](a arrow.Array, limit int, val func(int) K) bool {
	seen := make(map[K]struct{}, limit+1)
	n := 0
	for i := 0; i < a.Len() && n < dictSample; i++ {
		if !a.IsValid(i) {
			continue
		}
		n++
		seen[val(i)] = struct{}{}
		if len(seen) > limit {
			return false
		}
	}
	return true
}
