package filesink

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// RecordCounter is implemented by formats that count the records of a
// file of theirs from its bytes, as the deep audit (Auditor.Count) does:
// the row formats here and the bulk formats of filesink/bulk.
type RecordCounter interface {
	// Extension is the suffix of the format's files (".csv").
	Extension() string
	// CountRecords counts the records in the uncompressed bytes of one
	// file; header says that the file starts with a header row, which is
	// not a record (ManifestFile.Header). A nil error means r was read to
	// its end and was a well-formed file of the format.
	CountRecords(r io.Reader, header bool) (int64, error)
}

var (
	_ RecordCounter = JSONLines{}
	_ RecordCounter = Text{}
	_ RecordCounter = CSV{}
)

// CountRecords counts the records of the published file f from its bytes
// r, by f's name: a .gz or .zst suffix is decompressed, then the format of
// the extension counts: one of formats (such as bulk.Counters() for
// .parquet and .arrow), else CSV for .csv (less the header row), else one
// record per line (JSON lines, text, and any other extension). For
// Auditor.Count:
//
//	a.Count = func(f *filesink.ManifestFile, r io.Reader) (int64, error) {
//		return filesink.CountRecords(f, r, bulk.Counters()...)
//	}
func CountRecords(f *ManifestFile, r io.Reader, formats ...RecordCounter) (int64, error) {
	r, name, done, err := decompressByName(f.Path, r)
	if err != nil {
		return 0, err
	}
	defer done()
	for _, c := range append(formats, CSV{}) {
		if strings.HasSuffix(name, c.Extension()) {
			return c.CountRecords(r, f.Header)
		}
	}
	return countLines(r)
}

// CountRecords implements RecordCounter: one record per line.
func (JSONLines) CountRecords(r io.Reader, _ bool) (int64, error) { return countLines(r) }

// CountRecords implements RecordCounter: one record per line.
func (Text) CountRecords(r io.Reader, _ bool) (int64, error) { return countLines(r) }

// CountRecords implements RecordCounter: the RFC 4180 records, less the
// header row if header is set.
func (CSV) CountRecords(r io.Reader, header bool) (int64, error) {
	cr := csv.NewReader(bufio.NewReaderSize(r, 1<<20))
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	var n int64
	for {
		_, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		n++
	}
	if header && n > 0 {
		n--
	}
	return n, nil
}

// countLines counts the newlines of r.
func countLines(r io.Reader) (int64, error) {
	var n int64
	buf := make([]byte, 1<<20)
	for {
		k, err := r.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// decompressByName returns the bytes of r decompressed by the suffix of
// name (.gz, .zst; anything else as is), name without that suffix, and a
// func that releases the decompressor.
func decompressByName(name string, r io.Reader) (io.Reader, string, func(), error) {
	switch {
	case strings.HasSuffix(name, ".gz"):
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, name, nil, err
		}
		return zr, strings.TrimSuffix(name, ".gz"), func() { zr.Close() }, nil
	case strings.HasSuffix(name, ".zst"):
		zr, err := zstd.NewReader(r)
		if err != nil {
			return nil, name, nil, err
		}
		return zr, strings.TrimSuffix(name, ".zst"), zr.Close, nil
	}
	return r, name, func() {}, nil
}
