package bulk

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The converter against Arrow's own JSON reader (array.NewJSONReader) on
// the benchmark's records: same schema, same JSON lines, one record batch
// of all the lines per op. The two alternate in one process for
// BENCH_ROUNDS rounds (default 1), as the machine's speed drifts; the
// rounds after the first get the suffixes #01, #02... (strip them for
// benchstat):
//
//	BENCH_ROUNDS=6 go test -run '^$' -bench BenchmarkConvertVsArrowJSONReader ./filesink/bulk/ |
//		sed 's/#[0-9]*//' > vs.txt && go run golang.org/x/perf/cmd/benchstat@latest -col /impl vs.txt

// convertBatch converts lines into one record batch with the converter.
func convertBatch(conv *converter, lines [][]byte) (arrow.Record, error) {
	for _, l := range lines {
		if err := conv.add(l); err != nil {
			return nil, err
		}
	}
	return conv.record(), nil
}

// arrowJSONBatch converts jsonl (n newline-terminated lines) into one
// record batch with array.NewJSONReader.
func arrowJSONBatch(s *arrow.Schema, mem memory.Allocator, jsonl []byte, n int) (arrow.Record, error) {
	r := array.NewJSONReader(bytes.NewReader(jsonl), s, array.WithChunk(n), array.WithAllocator(mem))
	defer r.Release()
	if !r.Next() {
		return nil, r.Err()
	}
	rec := r.Record()
	rec.Retain()
	return rec, nil
}

// TestArrowJSONReaderMatches checks that the benchmark compares like with
// like: both produce the same record batch from the benchmark's lines.
func TestArrowJSONReaderMatches(t *testing.T) {
	d := makeBenchData(1000)
	s, err := ParseSchema([]byte(benchSchemaDoc))
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	conv := newConverter(s, mem)
	defer conv.release()
	want, err := convertBatch(conv, d.lines)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Release()
	got, err := arrowJSONBatch(s.arrow, mem, d.jsonl, len(d.lines))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if !array.RecordEqual(got, want) {
		t.Fatalf("array.NewJSONReader and the converter disagree:\n%v\n%v", got.Column(0), want.Column(0))
	}
}

func BenchmarkConvertVsArrowJSONReader(b *testing.B) {
	d := makeBenchData(1000)
	s, _ := ParseSchema([]byte(benchSchemaDoc))
	mem := memory.NewGoAllocator()
	n := len(d.lines)
	perRecord := func(b *testing.B) {
		recs := float64(b.N) * float64(n)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/recs, "ns/record")
		b.ReportMetric(recs/b.Elapsed().Seconds(), "records/s")
	}
	rounds := 1
	if r, err := strconv.Atoi(getenv("BENCH_ROUNDS")); err == nil && r > 0 {
		rounds = r
	}
	for range rounds {
		benchConvertRound(b, s, mem, d, perRecord)
	}
}

// benchConvertRound runs one round of BenchmarkConvertVsArrowJSONReader:
// the converter, then array.NewJSONReader.
func benchConvertRound(b *testing.B, s *Schema, mem memory.Allocator, d *benchData, perRecord func(*testing.B)) {
	n := len(d.lines)
	b.Run("impl=converter", func(b *testing.B) {
		conv := newConverter(s, mem)
		defer conv.release()
		b.SetBytes(int64(len(d.jsonl)))
		b.ReportAllocs()
		for b.Loop() {
			rec, err := convertBatch(conv, d.lines)
			if err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
		perRecord(b)
	})
	b.Run("impl=arrow-jsonreader", func(b *testing.B) {
		b.SetBytes(int64(len(d.jsonl)))
		b.ReportAllocs()
		for b.Loop() {
			rec, err := arrowJSONBatch(s.arrow, mem, d.jsonl, n)
			if err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
		perRecord(b)
	})
}
