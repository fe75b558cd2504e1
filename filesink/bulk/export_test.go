package bulk

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/filesink/filesink/filesink"
)

// Exports for the external test package (sink_bench_test.go).

// CommitFinal takes a Writer's final checkpoint and commits its parts.
func CommitFinal(tb testing.TB, w *filesink.Writer) int { return commitFinal(tb, w) }

// BenchRow is a benchmark record as a Go value.
type BenchRow = benchRow

// BenchSchemaDoc is the benchmark's schema document.
const BenchSchemaDoc = benchSchemaDoc

// MakeBenchRows returns n benchmark records as Go values (the same data
// BenchmarkEncode uses).
func MakeBenchRows(n int) []BenchRow { return makeBenchData(n).rows }

// MakeBenchLines returns the same n records as JSON lines: record k is
// jsonl[ends[k-1]:ends[k]] (from 0 for the first), without its newline.
// The two slices hold no pointers, so, unlike MakeBenchRows's strings
// or a [][]byte, they cost the garbage collector nothing while a
// sub-benchmark runs: a program reading a stream does not keep a million
// records live either.
func MakeBenchLines(n int) (jsonl []byte, ends []int) {
	d := makeBenchData(n)
	ends = make([]int, n)
	for k, l := range d.lines {
		ends[k] = cap(d.jsonl) - cap(l) + len(l)
	}
	return d.jsonl, ends
}

// MakeBenchBatches returns the records of MakeBenchLines as Arrow record
// batches of size rows of schema s (the library's Arrow input).
func MakeBenchBatches(tb testing.TB, s *Schema, jsonl []byte, ends []int, size int) []arrow.Record {
	lines := make([][]byte, len(ends))
	from := 0
	for k, end := range ends {
		lines[k] = jsonl[from:end]
		from = end + 1
	}
	return batchesOf(tb, s, lines, size)
}
