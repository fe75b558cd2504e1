package testjob

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/source"
)

// FakeBulk is a bulk format for tests of the Writer's bulk integration: a
// file is a header, row groups of JSON lines and a footer that counts them;
// DecodeFakeBulk rejects a file without its footer, as a Parquet reader
// would. Buffered is exact: the capacity of the row group being built.
// A record must be a JSON object with an integer "id"; one with
// "bad": true, or without an id, is an ErrBadRecord.
type FakeBulk struct {
	// RowGroupBytes makes Add flush a row group when it holds this many
	// bytes (default 64 KiB).
	RowGroupBytes int
	// Floor is memory a writer reports as Buffered whatever it flushes
	// (like an encoder's dictionaries and column writers), until Close.
	Floor int64
}

// FakeBulkExt is the extension of FakeBulk part files.
const FakeBulkExt = ".fakebulk"

const (
	fakeMagic   = "FAKEBULK1\n"
	fakeTrailer = "FAKEBULK1END"
)

// NewWriter implements filesink.BulkFormat. Like Parquet's, the header is
// written at once.
func (f FakeBulk) NewWriter(w io.Writer) (filesink.BulkWriter, error) {
	if _, err := io.WriteString(w, fakeMagic); err != nil {
		return nil, err
	}
	rg := f.RowGroupBytes
	if rg <= 0 {
		rg = 64 << 10
	}
	return &fakeBulkWriter{w: w, rgBytes: rg, floor: f.Floor}, nil
}

// Extension implements filesink.BulkFormat.
func (FakeBulk) Extension() string { return FakeBulkExt }

type fakeBulkWriter struct {
	w       io.Writer
	rgBytes int
	floor   int64
	pending []byte // the row group being built
	n       int    // rows in pending
	rows    int64
	groups  int
	closed  bool
}

func (w *fakeBulkWriter) Add(record []byte) error {
	if w.closed {
		return errors.New("fakebulk: Add after Close")
	}
	// A cheap check (tests write millions of records): an object with an
	// integer "id" somewhere.
	if len(record) < 2 || record[0] != '{' || record[len(record)-1] != '}' {
		return fmt.Errorf("%w: not a JSON object", source.ErrBadRecord)
	}
	i := bytes.Index(record, []byte(`"id":`))
	if i < 0 {
		return fmt.Errorf("%w: field \"id\": missing", source.ErrBadRecord)
	}
	if _, err := strconv.ParseInt(string(idDigits(record[i+5:])), 10, 64); err != nil {
		return fmt.Errorf("%w: field \"id\": %v", source.ErrBadRecord, err)
	}
	if bytes.Contains(record, []byte(`"bad":true`)) || bytes.IndexByte(record, '\n') >= 0 {
		return fmt.Errorf("%w: field \"bad\": the record says it is bad", source.ErrBadRecord)
	}
	w.pending = append(w.pending, record...)
	w.pending = append(w.pending, '\n')
	w.n++
	w.rows++
	if len(w.pending) >= w.rgBytes {
		return w.Flush()
	}
	return nil
}

func (w *fakeBulkWriter) Buffered() int64 {
	if w.closed {
		return 0
	}
	return int64(cap(w.pending)) + w.floor
}

func (w *fakeBulkWriter) Flush() error {
	if w.n == 0 {
		return nil
	}
	hdr := fmt.Sprintf("RG %d %d\n", w.n, len(w.pending))
	if _, err := io.WriteString(w.w, hdr); err != nil {
		return err
	}
	if _, err := w.w.Write(w.pending); err != nil {
		return err
	}
	w.pending, w.n = nil, 0
	w.groups++
	return nil
}

func (w *fakeBulkWriter) Close() error {
	if w.closed {
		return errors.New("fakebulk: Close twice")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	w.closed = true
	_, err := fmt.Fprintf(w.w, "FOOT %d %d\n%s", w.rows, w.groups, fakeTrailer)
	w.w = nil
	return err
}

// FakeBulkFile is a decoded FakeBulk file.
type FakeBulkFile struct {
	Records   [][]byte
	RowGroups []int // rows per row group
}

// DecodeFakeBulk decodes a complete FakeBulk file; a truncated file or one
// without its footer is an error.
func DecodeFakeBulk(data []byte) (*FakeBulkFile, error) {
	if !bytes.HasSuffix(data, []byte(fakeTrailer)) {
		return nil, errors.New("fakebulk: no footer (truncated file?)")
	}
	rest, ok := bytes.CutPrefix(data, []byte(fakeMagic))
	if !ok {
		return nil, errors.New("fakebulk: bad magic")
	}
	f := &FakeBulkFile{}
	for {
		line, after, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return nil, errors.New("fakebulk: truncated")
		}
		fields := bytes.Fields(line)
		if len(fields) != 3 {
			return nil, fmt.Errorf("fakebulk: bad block header %q", line)
		}
		a, err1 := strconv.Atoi(string(fields[1]))
		b, err2 := strconv.Atoi(string(fields[2]))
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("fakebulk: bad block header %q", line)
		}
		switch string(fields[0]) {
		case "RG":
			if b > len(after) {
				return nil, errors.New("fakebulk: truncated row group")
			}
			body := bytes.TrimSuffix(after[:b], []byte("\n"))
			recs := bytes.Split(body, []byte("\n"))
			if len(recs) != a {
				return nil, fmt.Errorf("fakebulk: row group of %d rows holds %d", a, len(recs))
			}
			f.Records = append(f.Records, recs...)
			f.RowGroups = append(f.RowGroups, a)
			rest = after[b:]
		case "FOOT":
			if a != len(f.Records) || b != len(f.RowGroups) || string(after) != fakeTrailer {
				return nil, fmt.Errorf("fakebulk: footer says %d rows in %d groups, file has %d in %d", a, b, len(f.Records), len(f.RowGroups))
			}
			return f, nil
		default:
			return nil, fmt.Errorf("fakebulk: bad block header %q", line)
		}
	}
}

func idDigits(b []byte) []byte {
	n := 0
	for n < len(b) && (b[n] == '-' || b[n] >= '0' && b[n] <= '9') {
		n++
	}
	return b[:n]
}
