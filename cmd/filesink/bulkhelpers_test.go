package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/filesink/filesink/internal/testutil/testjob"
)

// Readers of the bulk part files the CLI writes, for the tests: each row
// becomes a JSON line with the fields in schema order, so that the rows of
// a generator (gen://) come back byte for byte as the generator made them:
// timestamps as RFC 3339 UTC with milliseconds, nulls as null.

// isBulkFile reports whether name is a Parquet or Arrow IPC part file.
func isBulkFile(name string) bool {
	return strings.HasSuffix(name, ".parquet") || strings.HasSuffix(name, ".arrow")
}

// arrowMagic starts and ends every complete Arrow IPC file.
const arrowMagic = "ARROW1"

// bulkLines reads a complete Parquet (with Arrow's pqarrow) or Arrow IPC
// file; a truncated or footer-less file is an error.
func bulkLines(name string) ([]string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(name, ".parquet") {
		tbl, err := testjob.ReadParquet(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		defer tbl.Release()
		tr := array.NewTableReader(tbl, 64<<10)
		defer tr.Release()
		var lines []string
		for tr.Next() {
			lines = appendRows(lines, tr.Record())
		}
		return lines, tr.Err()
	}
	if !bytes.HasPrefix(data, []byte(arrowMagic)) || !bytes.HasSuffix(data, []byte(arrowMagic)) {
		return nil, fmt.Errorf("%s: %d bytes without the %s magic at both ends (truncated or footer-less file)", name, len(data), arrowMagic)
	}
	fr, err := ipc.NewFileReader(bytes.NewReader(data), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer fr.Close()
	var lines []string
	for i := range fr.NumRecords() {
		rec, err := fr.Record(i)
		if err != nil {
			return nil, fmt.Errorf("%s: record batch %d: %w", name, i, err)
		}
		lines = appendRows(lines, rec)
	}
	return lines, nil
}

func appendRows(lines []string, rec arrow.Record) []string {
	var b []byte
	for row := range int(rec.NumRows()) {
		b = append(b[:0], '{')
		for c, f := range rec.Schema().Fields() {
			if c > 0 {
				b = append(b, ',')
			}
			name, _ := json.Marshal(f.Name)
			b = append(b, name...)
			b = append(b, ':')
			b = appendValue(b, rec.Column(c), row)
		}
		lines = append(lines, string(append(b, '}')))
	}
	return lines
}

func appendValue(b []byte, col arrow.Array, i int) []byte {
	if col.IsNull(i) {
		return append(b, "null"...)
	}
	switch a := col.(type) {
	case *array.Int64:
		return strconv.AppendInt(b, a.Value(i), 10)
	case *array.Int32:
		return strconv.AppendInt(b, int64(a.Value(i)), 10)
	case *array.Float64:
		return strconv.AppendFloat(b, a.Value(i), 'g', -1, 64)
	case *array.Boolean:
		return strconv.AppendBool(b, a.Value(i))
	case *array.String:
		s, _ := json.Marshal(a.Value(i))
		return append(b, s...)
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		t := a.Value(i).ToTime(unit).UTC()
		layout := "2006-01-02T15:04:05.000Z"
		if unit == arrow.Microsecond {
			layout = "2006-01-02T15:04:05.000000Z"
		}
		return strconv.AppendQuote(b, t.Format(layout))
	case *array.Date32:
		return strconv.AppendQuote(b, a.Value(i).ToTime().Format(time.DateOnly))
	}
	v, err := json.Marshal(col.GetOneForMarshal(i))
	if err != nil {
		return fmt.Appendf(b, "%q", err.Error())
	}
	return append(b, v...)
}
