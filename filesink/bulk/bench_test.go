package bulk

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	pgo "github.com/parquet-go/parquet-go"
	xparquet "github.com/xitongsys/parquet-go/parquet"
	xwriter "github.com/xitongsys/parquet-go/writer"
)

// The encoder benchmark: 1,000,000 ten-field records (two
// int64, four strings of 2 to 60 characters, a float64, a bool, an int32
// and a millisecond timestamp), Snappy, written to memory. Run with
//
//	go test -run '^$' -bench BenchmarkEncode -benchtime 1x ./filesink/bulk/
//
// Every sub-benchmark encodes the same records (BENCH_RECORDS, default
// 1,000,000) and reports records/s and the output size ("bytes").
//
// The data: id is sequential, user a random int64 below 10^6; name, email
// and note are random letters (2 to 60, high cardinality); city is one of
// 300 such strings (low cardinality); score a random float64; active a
// random bool; count a random int32 below 1000; ts increasing
// milliseconds. DictAuto picks dictionaries for city and count only.

const benchSchemaDoc = `{"fields": [
	{"name": "id", "type": "int64", "nullable": false},
	{"name": "user", "type": "int64", "nullable": false},
	{"name": "name", "type": "string", "nullable": false},
	{"name": "email", "type": "string", "nullable": false},
	{"name": "city", "type": "string", "nullable": false},
	{"name": "note", "type": "string", "nullable": false},
	{"name": "score", "type": "float64", "nullable": false},
	{"name": "active", "type": "bool", "nullable": false},
	{"name": "count", "type": "int32", "nullable": false},
	{"name": "ts", "type": "timestamp_ms", "nullable": false}]}`

// benchRow is a record as a Go value, for the struct-based encoders.
type benchRow struct {
	ID     int64   `parquet:"id" json:"id"`
	User   int64   `parquet:"user" json:"user"`
	Name   string  `parquet:"name" json:"name"`
	Email  string  `parquet:"email" json:"email"`
	City   string  `parquet:"city" json:"city"`
	Note   string  `parquet:"note" json:"note"`
	Score  float64 `parquet:"score" json:"score"`
	Active bool    `parquet:"active" json:"active"`
	Count  int32   `parquet:"count" json:"count"`
	TS     int64   `parquet:"ts,timestamp(millisecond:utc)" json:"ts"`
}

// xRow is benchRow for xitongsys/parquet-go's tags.
type xRow struct {
	ID     int64   `parquet:"name=id, type=INT64"`
	User   int64   `parquet:"name=user, type=INT64"`
	Name   string  `parquet:"name=name, type=BYTE_ARRAY, convertedtype=UTF8, encoding=PLAIN"`
	Email  string  `parquet:"name=email, type=BYTE_ARRAY, convertedtype=UTF8, encoding=PLAIN"`
	City   string  `parquet:"name=city, type=BYTE_ARRAY, convertedtype=UTF8, encoding=PLAIN_DICTIONARY"`
	Note   string  `parquet:"name=note, type=BYTE_ARRAY, convertedtype=UTF8, encoding=PLAIN"`
	Score  float64 `parquet:"name=score, type=DOUBLE"`
	Active bool    `parquet:"name=active, type=BOOLEAN"`
	Count  int32   `parquet:"name=count, type=INT32"`
	TS     int64   `parquet:"name=ts, type=INT64, convertedtype=TIMESTAMP_MILLIS"`
}

const xJSONSchema = `{"Tag": "name=parquet_go_root, repetitiontype=REQUIRED", "Fields": [
	{"Tag": "name=id, type=INT64, repetitiontype=REQUIRED"},
	{"Tag": "name=user, type=INT64, repetitiontype=REQUIRED"},
	{"Tag": "name=name, type=BYTE_ARRAY, convertedtype=UTF8, encoding=PLAIN, repetitiontype=REQUIRED"},
	{"Tag": "name=email, type=BYTE_ARRAY, convertedtype=UTF8, encoding=PLAIN, repetitiontype=REQUIRED"},
	{"Tag": "name=city, type=BYTE_ARRAY, convertedtype=UTF8, encoding=PLAIN_DICTIONARY, repetitiontype=REQUIRED"},
	{"Tag": "name=note, type=BYTE_ARRAY, convertedtype=UTF8, encoding=PLAIN, repetitiontype=REQUIRED"},
	{"Tag": "name=score, type=DOUBLE, repetitiontype=REQUIRED"},
	{"Tag": "name=active, type=BOOLEAN, repetitiontype=REQUIRED"},
	{"Tag": "name=count, type=INT32, repetitiontype=REQUIRED"},
	{"Tag": "name=ts, type=INT64, convertedtype=TIMESTAMP_MILLIS, repetitiontype=REQUIRED"}]}`

type benchData struct {
	rows  []benchRow
	lines [][]byte // JSON lines (without the newline), slices of one buffer
	jsonl []byte   // all lines, newline-terminated
}

func makeBenchData(n int) *benchData {
	rng := rand.New(rand.NewPCG(42, 42))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-."
	str := func() string {
		b := make([]byte, 2+rng.IntN(59))
		for i := range b {
			b[i] = letters[rng.IntN(len(letters))]
		}
		return string(b)
	}
	cities := make([]string, 300)
	for i := range cities {
		cities[i] = str()
	}
	d := &benchData{rows: make([]benchRow, n)}
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	buf := make([]byte, 0, n*256)
	offs := make([]int, 0, n+1)
	for i := range d.rows {
		r := benchRow{
			ID: int64(i) + 1e9, User: rng.Int64N(1e6), Name: str(), Email: str(), City: cities[rng.IntN(len(cities))],
			Note: str(), Score: rng.Float64() * 1000, Active: rng.IntN(2) == 0, Count: rng.Int32N(1000), TS: ts + int64(i)*3,
		}
		d.rows[i] = r
		offs = append(offs, len(buf))
		line, _ := json.Marshal(r)
		buf = append(buf, line...)
		buf = append(buf, '\n')
	}
	offs = append(offs, len(buf))
	d.jsonl = buf
	d.lines = make([][]byte, n)
	for i := range d.lines {
		d.lines[i] = buf[offs[i] : offs[i+1]-1]
	}
	return d
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func report(b *testing.B, records int, size int64) {
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(size), "bytes")
	b.ReportMetric(0, "ns/op") // meaningless here: one op is the whole data set
}

func BenchmarkEncode(b *testing.B) {
	n := 1_000_000
	if s, err := strconv.Atoi(getenv("BENCH_RECORDS")); err == nil && s > 0 {
		n = s
	}
	d := makeBenchData(n)
	schema, err := ParseSchema([]byte(benchSchemaDoc))
	if err != nil {
		b.Fatal(err)
	}

	// (1) Our JSON -> Arrow -> pqarrow encoder alone, to memory.
	for _, dict := range []Dictionary{DictAuto, DictOn, DictOff} {
		b.Run("json-pqarrow/dict="+string(dict), func(b *testing.B) {
			f, err := Parquet(schema, WithDictionary(dict))
			if err != nil {
				b.Fatal(err)
			}
			var out countWriter
			for i := 0; i < b.N; i++ {
				out.n = 0
				w, _ := f.NewWriter(&out)
				for _, l := range d.lines {
					if err := w.Add(l); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			report(b, n, out.n)
		})
	}

	// The JSON -> Arrow conversion alone (builders, no encoding).
	b.Run("json-to-arrow-only", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			conv := newConverter(schema, memory.NewGoAllocator())
			for k, l := range d.lines {
				if err := conv.add(l); err != nil {
					b.Fatal(err)
				}
				if k%65536 == 65535 {
					conv.record().Release()
				}
			}
			conv.record().Release()
			conv.release()
		}
		report(b, n, 0)
	})

	// The Arrow input path: record batches of 64Ki rows, built beforehand.
	batches := batchesOf(b, schema, d.lines, 65536)
	for _, dict := range []Dictionary{DictAuto, DictOff} {
		b.Run("arrow-pqarrow/dict="+string(dict), func(b *testing.B) {
			f, _ := Parquet(schema, WithDictionary(dict))
			var out countWriter
			for i := 0; i < b.N; i++ {
				out.n = 0
				w, _ := f.NewParquetWriter(&out)
				for _, rec := range batches {
					if err := w.AddArrow(rec); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			report(b, n, out.n)
		})
	}

	b.Run("json-arrow-ipc", func(b *testing.B) {
		f, _ := ArrowIPC(schema)
		var out countWriter
		for i := 0; i < b.N; i++ {
			out.n = 0
			w, _ := f.NewWriter(&out)
			for _, l := range d.lines {
				if err := w.Add(l); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
		report(b, n, out.n)
	})

	// (2) xitongsys/parquet-go, from Go structs and from JSON lines.
	xrows := make([]xRow, n)
	for i, r := range d.rows {
		xrows[i] = xRow(r)
	}
	b.Run("xitongsys-structs", func(b *testing.B) {
		var out countWriter
		for i := 0; i < b.N; i++ {
			out.n = 0
			pw, err := xwriter.NewParquetWriterFromWriter(&out, new(xRow), 2)
			if err != nil {
				b.Fatal(err)
			}
			pw.CompressionType = xparquet.CompressionCodec_SNAPPY
			for k := range xrows {
				if err := pw.Write(xrows[k]); err != nil {
					b.Fatal(err)
				}
			}
			if err := pw.WriteStop(); err != nil {
				b.Fatal(err)
			}
		}
		report(b, n, out.n)
	})
	b.Run("xitongsys-json", func(b *testing.B) {
		var out countWriter
		for i := 0; i < b.N; i++ {
			out.n = 0
			pw, err := xwriter.NewJSONWriterFromWriter(xJSONSchema, &out, 2)
			if err != nil {
				b.Fatal(err)
			}
			pw.CompressionType = xparquet.CompressionCodec_SNAPPY
			for _, l := range d.lines {
				if err := pw.Write(string(l)); err != nil {
					b.Fatal(err)
				}
			}
			if err := pw.WriteStop(); err != nil {
				b.Fatal(err)
			}
		}
		report(b, n, out.n)
	})

	// (3) parquet-go/parquet-go's GenericWriter from Go structs.
	b.Run("parquet-go-generic", func(b *testing.B) {
		var out countWriter
		for i := 0; i < b.N; i++ {
			out.n = 0
			w := pgo.NewGenericWriter[benchRow](&out, pgo.Compression(&pgo.Snappy))
			for k := 0; k < len(d.rows); k += 1024 {
				if _, err := w.Write(d.rows[k:min(k+1024, len(d.rows))]); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
		report(b, n, out.n)
	})

	// JSON lines compressed, for the sizes.
	b.Run("jsonl-gzip", func(b *testing.B) {
		var out countWriter
		for i := 0; i < b.N; i++ {
			out.n = 0
			zw := gzip.NewWriter(&out)
			_, _ = zw.Write(d.jsonl)
			_ = zw.Close()
		}
		report(b, n, out.n)
	})
	b.Run("jsonl-zstd", func(b *testing.B) {
		var out countWriter
		for i := 0; i < b.N; i++ {
			out.n = 0
			zw, _ := zstd.NewWriter(&out)
			_, _ = zw.Write(d.jsonl)
			_ = zw.Close()
		}
		report(b, n, out.n)
	})
	b.Run("jsonl-raw", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_, _ = io.Copy(io.Discard, bytes.NewReader(d.jsonl))
		}
		report(b, n, int64(len(d.jsonl)))
	})
}
