package bulk

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
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

// DefaultRowGroupBytes is the row group size when neither WithRowGroupRows
// nor WithRowGroupBytes sets one: the memory of the Arrow builders of one row group.
// A quarter of filesink.DefaultBufferBudget, so that a busy bucket's two
// row groups (one being encoded while the next is built) and its buffers
// fit in the default budget: larger row groups make the filesink.Writer
// flush them, on the caller's goroutine, to stay within it.
const DefaultRowGroupBytes = filesink.DefaultBufferBudget / 4

// DefaultPageBytes is the Parquet data page size unless WithPageBytes
// sets one. Smaller than parquet-mr's 1 MiB: Arrow's encoders grow each page's
// buffer by doubling and zero it when the page is done, and with 64 KiB
// pages that work stays in the CPU's cache. On the benchmark of
// BENCHMARKS.md the encoder is 7-9% faster than with 1 MiB pages, and the
// file 0.1% larger (one page header per 64 KiB).
const DefaultPageBytes = 64 << 10

// UnknownFields says what a format does with a key of a JSON record (at
// the top level or inside a struct) that names no field of the schema.
type UnknownFields string

// Unknown field modes.
const (
	// RejectUnknown (the default) makes such a record bad: Add returns a
	// *FieldError naming the key's path and adds nothing.
	RejectUnknown UnknownFields = "reject"
	// DropUnknown drops the key and its value (the record is added
	// without them) and counts it in the format's Dropped.
	DropUnknown UnknownFields = "drop"
)

// maxDroppedNames bounds the names of dropped keys a Dropped keeps (and
// each writer remembers having passed to it), so that records with ever
// new keys cannot grow them.
const maxDroppedNames = 16

// Dropped counts what a format with DropUnknown dropped from the records
// its writers accepted (Add returned nil): records that had keys not in
// the schema, and those keys. A record with such keys that Add rejects
// for another reason is not counted. Safe for concurrent use.
type Dropped struct {
	records, fields atomic.Int64
	mu              sync.Mutex
	names           []string
}

// Records is the number of records added without some of their keys.
func (d *Dropped) Records() int64 { return d.records.Load() }

// Fields is the number of keys dropped (a key dropped from two records
// counts twice).
func (d *Dropped) Fields() int64 { return d.fields.Load() }

// Names returns the paths of the first distinct keys dropped ("extra",
// "addr.zip", "items[].color"), at most 16, in the order they were met.
func (d *Dropped) Names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.names...)
}

// addName notes the path of a dropped key, unless it is known or the
// names are full.
func (d *Dropped) addName(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.names) < maxDroppedNames && !slices.Contains(d.names, name) {
		d.names = append(d.names, name)
	}
}

// Option configures a bulk format: the With* functions of this package,
// passed to Parquet, ArrowIPC or NewFormat, which validate them together.
// An Option is a value that only this package can make. Without options a
// format uses Snappy for Parquet (no compression for Arrow IPC), row
// groups of DefaultRowGroupBytes, pages of DefaultPageBytes, automatic
// dictionaries and statistics, and rejects records with keys not in the
// schema.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is what the options set; newConfig validates it once.
type config struct {
	compression   Compression
	rowGroupRows  int
	rowGroupBytes int64
	dictionary    Dictionary
	pageBytes     int64
	noStatistics  bool
	unknown       UnknownFields
	dropped       *Dropped // the format's; counted into with DropUnknown
}

// WithCompression sets the codec ("" for the format's default: Snappy for
// Parquet, Uncompressed for Arrow IPC).
func WithCompression(c Compression) Option {
	return optionFunc(func(cfg *config) { cfg.compression = c })
}

// WithRowGroupRows ends a row group (Arrow: a record batch) after n rows;
// 0 (the default) for no row limit. The constructor fails for n < 0.
func WithRowGroupRows(n int) Option { return optionFunc(func(c *config) { c.rowGroupRows = n }) }

// WithRowGroupBytes ends a row group once its rows take n bytes of Arrow
// memory; 0 (the default) for DefaultRowGroupBytes unless WithRowGroupRows
// sets a row limit, negative for no byte limit. A Parquet writer holds up
// to two row groups (one being encoded while the next is built), so its
// Buffered reaches about twice this. The filesink.Writer may flush earlier
// to stay within its buffer budget.
func WithRowGroupBytes(n int64) Option { return optionFunc(func(c *config) { c.rowGroupBytes = n }) }

// WithDictionary sets the Parquet dictionary mode ("" is DictAuto, the
// default). Ignored by Arrow IPC.
func WithDictionary(d Dictionary) Option { return optionFunc(func(c *config) { c.dictionary = d }) }

// WithPageBytes sets the Parquet data page size (the encoded bytes of one
// column after which a page is cut); 0 for DefaultPageBytes. The
// constructor fails for n < 0. Ignored by Arrow IPC.
func WithPageBytes(n int64) Option { return optionFunc(func(c *config) { c.pageBytes = n }) }

// WithoutStatistics turns off Parquet column statistics (min, max, null
// count), which are on by default (readers prune row groups with them).
// Ignored by Arrow IPC.
func WithoutStatistics() Option { return optionFunc(func(c *config) { c.noStatistics = true }) }

// WithUnknownFields sets what the format does with a key of a JSON record
// that names no field of the schema: RejectUnknown ("" too, the default)
// or DropUnknown. It applies to Add (JSON records); AddArrow's batches
// must have the schema exactly.
func WithUnknownFields(u UnknownFields) Option {
	return optionFunc(func(c *config) { c.unknown = u })
}

// newConfig applies opts, fills in the defaults and returns the errors of
// the options, joined.
func newConfig(opts []Option) (config, error) {
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	var errs []error
	if c.rowGroupRows < 0 {
		errs = append(errs, fmt.Errorf("bulk: WithRowGroupRows(%d): negative", c.rowGroupRows))
	}
	if c.pageBytes < 0 {
		errs = append(errs, fmt.Errorf("bulk: WithPageBytes(%d): negative", c.pageBytes))
	}
	if c.pageBytes == 0 {
		c.pageBytes = DefaultPageBytes
	}
	if c.rowGroupBytes == 0 && c.rowGroupRows == 0 {
		c.rowGroupBytes = DefaultRowGroupBytes
	}
	switch c.unknown {
	case "":
		c.unknown = RejectUnknown
	case RejectUnknown, DropUnknown:
	default:
		errs = append(errs, fmt.Errorf("bulk: unknown fields mode %q (want reject or drop)", c.unknown))
	}
	c.dropped = new(Dropped)
	switch c.dictionary {
	case "":
		c.dictionary = DictAuto
	case DictAuto, DictOn, DictOff:
	default:
		errs = append(errs, fmt.Errorf("bulk: unknown dictionary mode %q (want auto, on or off)", c.dictionary))
	}
	return c, errors.Join(errs...)
}

// NewFormat returns the bulk format called name ("parquet", or "arrow" for
// Arrow IPC files) for records of schema, as the CLI's --format asks.
func NewFormat(name string, schema *Schema, opts ...Option) (filesink.BulkFormat, error) {
	switch name {
	case "parquet":
		return Parquet(schema, opts...)
	case "arrow", "arrow-ipc":
		return ArrowIPC(schema, opts...)
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
