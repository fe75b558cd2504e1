package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strconv"
)

// Record is one input record.
type Record struct {
	// Value is the record's bytes without the line terminator. It is valid
	// only until the next call to Next or Close: the caller copies what it
	// keeps.
	Value []byte
	// Key is a Kafka record's key (nil for other sources, and for a record
	// without one), valid as long as Value.
	Key []byte
	// Origin names the record for error messages ("in/a.txt:17", "gen:42",
	// "stdin:3"). It is a value, not a string, so that Next does not
	// allocate; format it with %s or String.
	Origin Origin
}

// Origin names a record: an input and a number within it.
type Origin struct {
	// Name is the input: the file's path (the directory as given joined with
	// the file's relative path), "gen" for the generator, or the name given
	// to NewReader ("stdin" for Open("-")).
	Name string
	// Num is the 1-based line number for files and readers, and the record
	// id (0-based) for the generator.
	Num int64
}

// String returns "Name:Num", e.g. "in/a.txt:17" or "gen:42".
func (o Origin) String() string { return string(o.AppendTo(nil)) }

// LogValue makes log/slog handlers log the origin as "Name:Num".
func (o Origin) LogValue() slog.Value { return slog.StringValue(o.String()) }

// AppendTo appends "Name:Num" to b, for logging without allocating.
func (o Origin) AppendTo(b []byte) []byte {
	b = append(b, o.Name...)
	b = append(b, ':')
	return strconv.AppendInt(b, o.Num, 10)
}

// Source is a stream of records.
//
// A Source is not safe for concurrent use: one goroutine calls Next,
// Position and Close.
type Source interface {
	// Next returns the next record. At the end of a bounded source it
	// returns io.EOF, not wrapped, and keeps returning it. Where Next may
	// block (reading a pipe or a terminal), cancelling ctx makes it return
	// ctx.Err(), not wrapped, without losing data: a later call continues
	// where the cancelled one stopped. A *LineTooLongError whose Skipped
	// is true (WithSkipLongLines) reports a line the source read past: the
	// next call returns the record after it. Any other error is sticky:
	// every later call returns it.
	Next(ctx context.Context) (Record, error)

	// Position returns the position just after the last record Next
	// returned (before any, the position the source was opened at), as a
	// JSON document that is opaque to the caller and meant to be stored in
	// a checkpoint record. Opening the same input with it resumes with the
	// record after that one. For a source that is not replayable it
	// returns nil, nil.
	Position() (json.RawMessage, error)

	// Replayable reports whether the source can resume from a Position.
	Replayable() bool

	// Describe returns a short human description for logs, such as
	// "dir /in (3 files)".
	Describe() string

	// Close releases the source's files and goroutines; calling it again
	// does nothing. Next returns ErrClosed after it; Position keeps
	// returning the position after the last record returned, so a final
	// checkpoint may be taken after Close. Close does not close a reader
	// passed to NewReader.
	Close() error
}

// Compile-time checks.
var (
	_ Source = (*Dir)(nil)
	_ Source = (*Generator)(nil)
	_ Source = (*Reader)(nil)
)

// Defaults of the line-reading sources.
const (
	// DefaultMaxLineSize is the longest line, without its terminator, that
	// the directory and reader sources accept by default: 16 MiB.
	DefaultMaxLineSize = 16 << 20
	// DefaultBufferSize is the read buffer of the directory and reader
	// sources: 1 MiB. A line that fits in it is returned without copying.
	DefaultBufferSize = 1 << 20

	minBufferSize = 16
)

// An Option configures a line-reading source (NewDir, NewReader, and Open for
// "file://", plain paths and stdin). Options are validated together when the
// source is made; an option that does not apply to the kind of source is an
// error.
type Option interface {
	apply(*options)
}

type options struct {
	maxLine  int
	bufSize  int
	fsys     fs.FS
	fsSet    bool
	skipLong bool
	set      []string // names of the options given, for error messages
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithMaxLineSize sets the longest accepted line, in bytes, without its
// terminator (a trailing "\r" of a CRLF line is not counted). A longer line
// makes Next return a *LineTooLongError. Default DefaultMaxLineSize; n must
// be at least 1.
func WithMaxLineSize(n int) Option {
	return optionFunc(func(o *options) { o.maxLine = n; o.set = append(o.set, "WithMaxLineSize") })
}

// WithSkipLongLines makes a line longer than the maximum line size a line
// to skip instead of the end of the source. Next reads past the line, to
// its "\n", holding no more of it than its first LongLineHead bytes, and
// returns a *LineTooLongError whose Skipped is true, with the line's
// origin, length and first bytes (Head). That error is not sticky: the
// next call returns the line after it, and Position covers the skipped
// line, so a checkpoint taken after it never reads it again. The pipeline
// hands such a line to the sink's dead-letter output
// (pipeline.BadRecordSink). Without this option a long line is a sticky
// error.
func WithSkipLongLines() Option {
	return optionFunc(func(o *options) { o.skipLong = true; o.set = append(o.set, "WithSkipLongLines") })
}

// WithBufferSize sets the read buffer size in bytes. Lines that fit in the
// buffer are returned without copying; longer ones are assembled in a
// separate buffer that grows up to the maximum line size. Default
// DefaultBufferSize; n must be at least 16.
func WithBufferSize(n int) Option {
	return optionFunc(func(o *options) { o.bufSize = n; o.set = append(o.set, "WithBufferSize") })
}

// WithFS makes a directory source read from fsys instead of the operating
// system: the directory argument of NewDir then only names the input in
// origins, errors and Describe, and the files are those under "." of fsys.
// It applies to directory sources only.
func WithFS(fsys fs.FS) Option {
	return optionFunc(func(o *options) { o.fsys = fsys; o.fsSet = true; o.set = append(o.set, "WithFS") })
}

// buildOptions applies opts over the defaults and validates them together
// for a source of the given kind ("dir", "reader", "gen").
func buildOptions(kind string, opts []Option) (options, error) {
	o := options{maxLine: DefaultMaxLineSize, bufSize: DefaultBufferSize}
	for _, opt := range opts {
		if opt == nil {
			return o, errors.New("source: nil Option")
		}
		opt.apply(&o)
	}
	var errs []error
	switch kind {
	case "gen":
		if len(o.set) > 0 {
			errs = append(errs, fmt.Errorf("source: options %v do not apply to the generator (configure it with GenConfig or the gen:// query)", o.set))
		}
	case "reader":
		if o.fsSet {
			errs = append(errs, errors.New("source: WithFS applies to directory sources only"))
		}
	}
	if o.fsSet && o.fsys == nil {
		errs = append(errs, errors.New("source: WithFS(nil)"))
	}
	if o.maxLine < 1 {
		errs = append(errs, fmt.Errorf("source: maximum line size %d: must be at least 1", o.maxLine))
	}
	if o.bufSize < minBufferSize {
		errs = append(errs, fmt.Errorf("source: buffer size %d: must be at least %d", o.bufSize, minBufferSize))
	}
	return o, errors.Join(errs...)
}

// isNullPosition reports whether pos means "from the beginning": empty,
// blank or the JSON literal null.
func isNullPosition(pos json.RawMessage) bool {
	t := bytes.TrimSpace(pos)
	return len(t) == 0 || string(t) == "null"
}

// decodePosition decodes a position document strictly into v (a pointer to
// a struct): unknown fields and trailing data are errors.
func decodePosition(kind string, pos json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(pos))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s position %q: %v", ErrBadPosition, kind, truncate(pos, 200), err)
	}
	if dec.More() {
		return fmt.Errorf("%w: %s position %q: trailing data", ErrBadPosition, kind, truncate(pos, 200))
	}
	return nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// Retained is implemented by sources whose Record.Value, unlike the
// general contract's "valid until the next Next", stays valid and unchanged
// for as long as it is referenced (the Kafka source: each fetch's records
// are allocated anew). The pipeline then keeps the values in its batches
// instead of copying them.
type Retained interface {
	// ValuesRetained reports whether Record.Value may be kept.
	ValuesRetained() bool
}
