package filesink

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/filesink/filesink/internal/jsonscan"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Encoder turns one record into the bytes of a row format. Implementations
// must be safe for use by one goroutine at a time.
type Encoder interface {
	// Encode appends the encoded record (with its row terminator) to dst. An
	// error means the record cannot be encoded; dst is then returned
	// unchanged.
	Encode(dst, record []byte) ([]byte, error)
	// Header returns bytes to write at the start of every new part file
	// (nil for none).
	Header() []byte
	// Extension is the file name suffix of the format (".jsonl").
	Extension() string
}

// JSONLines writes each record, which must be one valid JSON value in
// UTF-8, as a line. The record is validated, not re-encoded: its bytes are
// kept. A string holding bytes that are not UTF-8 (which Python's json and
// DuckDB refuse to read back) makes the record a bad record, unless
// InvalidUTF8 is ReplaceInvalidUTF8.
type JSONLines struct {
	// InvalidUTF8 says what a record with invalid UTF-8 in a string does:
	// RejectInvalidUTF8 (the zero value) makes Encode fail with an error
	// that matches ErrInvalidUTF8 and gives the byte offset;
	// ReplaceInvalidUTF8 writes the record with each such byte replaced by
	// U+FFFD.
	InvalidUTF8 InvalidUTF8
}

// ErrInvalidUTF8 is matched (errors.Is) by the error of JSONLines.Encode
// for a record whose strings hold bytes that are not UTF-8.
var ErrInvalidUTF8 = jsonscan.ErrInvalidUTF8

// InvalidUTF8 is what the JSON lines format does with a record whose
// strings hold bytes that are not UTF-8.
type InvalidUTF8 int

const (
	// RejectInvalidUTF8: the record is a bad record (an error naming the
	// byte offset; the dead-letter output, when there is one).
	RejectInvalidUTF8 InvalidUTF8 = iota
	// ReplaceInvalidUTF8: each byte that is not part of a valid UTF-8
	// sequence is written as U+FFFD (the replacement character, bytes EF BF
	// BD), as encoding/json does when it decodes such a string; the rest of
	// the record is kept as it is. Every other error still rejects it.
	ReplaceInvalidUTF8
)

// ParseInvalidUTF8 returns the policy for a CLI name: reject or replace.
func ParseInvalidUTF8(name string) (InvalidUTF8, error) {
	switch name {
	case "reject":
		return RejectInvalidUTF8, nil
	case "replace":
		return ReplaceInvalidUTF8, nil
	}
	return 0, fmt.Errorf("unknown invalid-UTF-8 policy %q (want reject or replace)", name)
}

// String returns the CLI name: reject or replace.
func (p InvalidUTF8) String() string {
	if p == ReplaceInvalidUTF8 {
		return "replace"
	}
	return "reject"
}

// Encode implements Encoder.
func (j JSONLines) Encode(dst, record []byte) ([]byte, error) {
	if err := jsonscan.CheckLineUTF8(record); err != nil {
		if j.InvalidUTF8 != ReplaceInvalidUTF8 || !errors.Is(err, jsonscan.ErrInvalidUTF8) {
			return dst, err
		}
		// Bytes of 0x80 and above are valid JSON only inside strings, so
		// the record is valid once its invalid bytes are replaced if it is
		// valid when UTF-8 is not checked.
		if err := jsonscan.CheckLine(record); err != nil {
			return dst, err
		}
		dst = appendValidUTF8(dst, record)
		return append(dst, '\n'), nil
	}
	dst = append(dst, record...)
	return append(dst, '\n'), nil
}

// appendValidUTF8 appends b to dst with each byte that is not part of a
// valid UTF-8 sequence replaced by U+FFFD.
func appendValidUTF8(dst, b []byte) []byte {
	start := 0
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, b[start:i]...)
			dst = utf8.AppendRune(dst, utf8.RuneError)
			start = i + 1
		}
		i += n
	}
	return append(dst, b[start:]...)
}

// Header implements Encoder.
func (JSONLines) Header() []byte { return nil }

// Extension implements Encoder.
func (JSONLines) Extension() string { return ".jsonl" }

// Text writes each record as it is, as one line. A record containing a
// newline is rejected.
type Text struct{}

// Encode implements Encoder.
func (Text) Encode(dst, record []byte) ([]byte, error) {
	if bytes.IndexByte(record, '\n') >= 0 {
		return dst, fmt.Errorf("record contains a newline")
	}
	dst = append(dst, record...)
	return append(dst, '\n'), nil
}

// Header implements Encoder.
func (Text) Header() []byte { return nil }

// Extension implements Encoder.
func (Text) Extension() string { return ".txt" }

// CSV writes each record, a JSON object, as one RFC 4180 row. With Columns
// set, the row has those fields in that order (a missing field is an empty
// cell, extra fields are an error) and HeaderRow adds a header line to every
// part file. Without Columns, the row has the object's fields in sorted key
// order. Strings are written unquoted where RFC 4180 allows; numbers, bools
// keep their JSON text; null is empty; nested objects and arrays are written
// as their JSON text.
type CSV struct {
	Columns   []string
	HeaderRow bool
}

// Encode implements Encoder.
func (c CSV) Encode(dst, record []byte) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := jsonscan.ObjectCheck(record); err != nil {
		return dst, err
	}
	if err := json.Unmarshal(record, &obj); err != nil {
		return dst, err
	}
	cols := c.Columns
	if cols == nil {
		cols = make([]string, 0, len(obj))
		for k := range obj {
			cols = append(cols, k)
		}
		sort.Strings(cols)
	} else {
		for k := range obj {
			if !slices.Contains(cols, k) {
				return dst, fmt.Errorf("field %q is not one of the CSV columns %v", k, cols)
			}
		}
	}
	row := make([]string, len(cols))
	for i, k := range cols {
		raw, ok := obj[k]
		if !ok {
			continue
		}
		cell, err := csvCell(raw)
		if err != nil {
			return dst, fmt.Errorf("field %q: %w", k, err)
		}
		row[i] = cell
	}
	return appendCSV(dst, row), nil
}

func csvCell(raw json.RawMessage) (string, error) {
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case 'n':
		return "", nil
	default:
		return string(raw), nil
	}
}

func appendCSV(dst []byte, row []string) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write(row) // writes to a bytes.Buffer cannot fail
	w.Flush()
	return append(dst, buf.Bytes()...)
}

// Header implements Encoder.
func (c CSV) Header() []byte {
	if !c.HeaderRow || len(c.Columns) == 0 {
		return nil
	}
	return appendCSV(nil, c.Columns)
}

// Extension implements Encoder.
func (CSV) Extension() string { return ".csv" }

// ParseFormat returns the encoder for a CLI format name: jsonl, csv or text.
func ParseFormat(name string) (Encoder, error) {
	switch name {
	case "jsonl", "json":
		return JSONLines{}, nil
	case "csv":
		return CSV{}, nil
	case "text", "txt":
		return Text{}, nil
	}
	return nil, fmt.Errorf("unknown format %q (want jsonl, csv or text)", name)
}

// Compression compresses the bytes of part files. Every call to Frame
// produces one self-contained gzip member or zstd frame; concatenated frames
// are one valid stream for every standard reader. The sink calls Frame once
// per buffer flush, so a part file always ends on a frame boundary and can be
// resumed after a crash without compressor state.
type Compression interface {
	// Frame writes src to w as one complete frame.
	Frame(w io.Writer, src []byte) error
	// Extension is appended to the format's extension (".gz"); "" for none.
	Extension() string
}

// Compressions by CLI name.
const (
	CompressNone = "none"
	CompressGzip = "gzip"
	CompressZstd = "zstd"
)

// NewCompression returns a compressor by name (none, gzip, zstd); nil for
// none. A compressor is not safe for concurrent use: give each writer its own.
func NewCompression(name string) (Compression, error) {
	switch name {
	case "", CompressNone:
		return nil, nil
	case CompressGzip:
		return &gzipFrames{}, nil
	case CompressZstd:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true),
			zstd.WithWindowSize(1<<20))
		if err != nil {
			return nil, err
		}
		return &zstdFrames{enc: enc}, nil
	}
	return nil, fmt.Errorf("unknown compression %q (want none, gzip or zstd)", name)
}

type gzipFrames struct {
	zw  *gzip.Writer
	buf bytes.Buffer
}

func (g *gzipFrames) Frame(w io.Writer, src []byte) error {
	g.buf.Reset()
	if g.zw == nil {
		g.zw = gzip.NewWriter(&g.buf)
	} else {
		g.zw.Reset(&g.buf)
	}
	if _, err := g.zw.Write(src); err != nil {
		return err
	}
	if err := g.zw.Close(); err != nil {
		return err
	}
	_, err := w.Write(g.buf.Bytes())
	return err
}

func (*gzipFrames) Extension() string { return ".gz" }

type zstdFrames struct {
	enc *zstd.Encoder
	buf []byte
}

func (z *zstdFrames) Frame(w io.Writer, src []byte) error {
	z.buf = z.enc.EncodeAll(src, z.buf[:0])
	_, err := w.Write(z.buf)
	return err
}

func (*zstdFrames) Extension() string { return ".zst" }

// ParseSize parses a byte size with an optional unit: "128MiB", "64KiB",
// "1GB", "4096".
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	num, mult := s, int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	v, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || v < 0 || v > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid size %q (use a number of bytes or a unit: KiB, MiB, GiB, KB, MB, GB)", s)
	}
	return v * mult, nil
}
