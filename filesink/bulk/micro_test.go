package bulk

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkConvert is the JSON -> Arrow conversion of one benchmark record
// per op (builders cut every 64Ki rows).
func BenchmarkConvert(b *testing.B) {
	d := makeBenchData(1000)
	s, _ := ParseSchema([]byte(benchSchemaDoc))
	conv := newConverter(s, memory.NewGoAllocator())
	defer conv.release()
	b.SetBytes(int64(len(d.jsonl) / len(d.lines)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := conv.add(d.lines[i%len(d.lines)]); err != nil {
			b.Fatal(err)
		}
		if i%65536 == 65535 {
			conv.record().Release()
		}
	}
}

// BenchmarkRowBuffer is BenchmarkConvert through the Parquet writer's row
// buffer, whose builders are reserved from the previous row group's
// lengths (a row group every 64Ki rows, released at once).
func BenchmarkRowBuffer(b *testing.B) {
	d := makeBenchData(1000)
	s, _ := ParseSchema([]byte(benchSchemaDoc))
	opts, _ := newConfig([]Option{WithRowGroupRows(65536)})
	r := newRowBuffer(s, opts)
	defer r.release()
	b.SetBytes(int64(len(d.jsonl) / len(d.lines)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.add(d.lines[i%len(d.lines)]); err != nil {
			b.Fatal(err)
		}
		if r.full() {
			r.cut()
			r.releasePending()
		}
	}
}
