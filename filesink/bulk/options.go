package bulk

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/filesink/filesink/filesink"
)

// Compression is a codec name, as the CLI spells it.
type Compression string

// Codecs. Parquet takes Snappy (its default), Zstd, Gzip and Uncompressed;
// Arrow IPC takes Uncompressed (its default), LZ4 and Zstd.
const (
	Snappy       Compression = "snappy"
	Zstd         Compression = "zstd"
	Gzip         Compression = "gzip"
	LZ4          Compression = "lz4"
	Uncompressed Compression = "none"
)

// Dictionary says which Parquet columns are dictionary encoded.
type Dictionary string

// Dictionary modes. DictAuto (the default) decides per column from the
// data, see ParquetWriter.
const (
	DictAuto Dictionary = "auto"
	DictOn   Dictionary = "on"
	DictOff  Dictionary = "off"
)

// DefaultRowGroupBytes is the row group size when neither RowGroupRows nor
// RowGroupBytes is set: the memory of the Arrow builders of one row group.
// A quarter of filesink.DefaultBufferBudget, so that a busy bucket's two
// row groups (one being encoded while the next is built) and its buffers
// fit in the default budget: larger row groups make the filesink.Writer
// flush them, on the caller's goroutine, to stay within it.
const DefaultRowGroupBytes = filesink.DefaultBufferBudget / 4

// DefaultPageBytes is the Parquet data page size when Options.PageBytes
// is 0. Smaller than parquet-mr's 1 MiB: Arrow's encoders grow each page's
// buffer by doubling and zero it when the page is done, and with 64 KiB
// pages that work stays in the CPU's cache. On the benchmark of
// BENCHMARKS.md the encoder is 7-9% faster than with 1 MiB pages, and the
// file 0.1% larger (one page header per 64 KiB).
const DefaultPageBytes = 64 << 10

// Options configure a bulk format. The zero value is valid: Snappy for
// Parquet (no compression for Arrow IPC), row groups of
// DefaultRowGroupBytes, pages of DefaultPageBytes, automatic dictionaries,
// statistics on.
type Options struct {
	// Compression is the codec ("" for the format's default).
	Compression Compression
	// RowGroupRows ends a row group (Arrow: a record batch) after this
	// many rows; 0 for no row limit.
	RowGroupRows int
	// RowGroupBytes ends a row group once its rows take this many bytes
	// of Arrow memory; 0 for DefaultRowGroupBytes unless RowGroupRows is
	// set, negative for no byte limit. A Parquet writer holds up to two
	// row groups (one being encoded while the next is built), so its
	// Buffered reaches about twice this. The filesink.Writer may flush
	// earlier to stay within its buffer budget.
	RowGroupBytes int64
	// Dictionary is the Parquet dictionary mode ("" is DictAuto). Ignored
	// by Arrow IPC.
	Dictionary Dictionary
	// PageBytes is the Parquet data page size (the encoded bytes of one
	// column after which a page is cut); 0 for DefaultPageBytes. Ignored
	// by Arrow IPC.
	PageBytes int64
	// NoStatistics turns off Parquet column statistics (min, max, null
	// count), which are on by default (readers prune row groups with
	// them). Ignored by Arrow IPC.
	NoStatistics bool
}

func (o Options) validate() (Options, error) {
	if o.RowGroupRows < 0 {
		return o, fmt.Errorf("bulk: RowGroupRows %d is negative", o.RowGroupRows)
	}
	if o.PageBytes < 0 {
		return o, fmt.Errorf("bulk: PageBytes %d is negative", o.PageBytes)
	}
	if o.PageBytes == 0 {
		o.PageBytes = DefaultPageBytes
	}
	if o.RowGroupBytes == 0 && o.RowGroupRows == 0 {
		o.RowGroupBytes = DefaultRowGroupBytes
	}
	switch o.Dictionary {
	case "":
		o.Dictionary = DictAuto
	case DictAuto, DictOn, DictOff:
	default:
		return o, fmt.Errorf("bulk: unknown dictionary mode %q (want auto, on or off)", o.Dictionary)
	}
	return o, nil
}

// NewFormat returns the bulk format called name ("parquet", or "arrow" for
// Arrow IPC files) for records of schema, as the CLI's --format asks.
func NewFormat(name string, schema *Schema, opts Options) (filesink.BulkFormat, error) {
	switch name {
	case "parquet":
		return Parquet(schema, opts)
	case "arrow", "arrow-ipc":
		return ArrowIPC(schema, opts)
	}
	return nil, fmt.Errorf("bulk: unknown format %q (want parquet or arrow)", name)
}

// countingAllocator counts the bytes its Arrow buffers hold: Buffered
// reads it. Safe for concurrent use.
type countingAllocator struct {
	mem memory.Allocator
	n   atomic.Int64
}

func (a *countingAllocator) Allocate(size int) []byte {
	a.n.Add(int64(size))
	return a.mem.Allocate(size)
}

func (a *countingAllocator) Reallocate(size int, b []byte) []byte {
	a.n.Add(int64(size - len(b)))
	return a.mem.Reallocate(size, b)
}

func (a *countingAllocator) Free(b []byte) {
	a.n.Add(-int64(len(b)))
	a.mem.Free(b)
}

// posWriter hides the part writer's other methods (the encoders must not
// close it) and knows its position, for Arrow's writers.
type posWriter struct {
	w   io.Writer
	pos int64
}

func (p *posWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.pos += int64(n)
	return n, err
}

// Seek answers only position queries, which is all ipc.FileWriter asks.
func (p *posWriter) Seek(offset int64, whence int) (int64, error) {
	if offset == 0 && whence == io.SeekCurrent {
		return p.pos, nil
	}
	return 0, fmt.Errorf("bulk: part files cannot seek")
}
