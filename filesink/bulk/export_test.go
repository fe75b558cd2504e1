package bulk

// Exports for the external test package (sink_bench_test.go).

// BenchRow is a benchmark record as a Go value.
type BenchRow = benchRow

// BenchSchemaDoc is the benchmark's schema document.
const BenchSchemaDoc = benchSchemaDoc

// MakeBenchData returns n benchmark records as Go values and as JSON lines
// (the same data BenchmarkEncode uses).
func MakeBenchData(n int) ([]BenchRow, [][]byte) {
	d := makeBenchData(n)
	return d.rows, d.lines
}
