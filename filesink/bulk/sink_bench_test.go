package bulk_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/filesink/bulk"
	"github.com/filesink/filesink/internal/vfs"
	"github.com/filesink/filesink/source"
	pgo "github.com/parquet-go/parquet-go"
)

// BenchmarkParquetSink is the sink benchmark of issue 5: records/s of the
// whole Parquet file sink (a filesink.Writer with WithBulkFormat(Parquet,
// snappy, default options) over committer/localfs in a temporary
// directory, one bucket, one checkpoint at the end whose part is
// committed) on the 1,000,000 ten-field JSON records of BenchmarkEncode
// (BENCH_RECORDS overrides the count), beside, in the same run:
//
//   - encoder: the same Parquet format's writer alone, to memory;
//   - parquet-go: github.com/parquet-go/parquet-go's GenericWriter on the
//     same records as Go structs, snappy, to memory.
//
// Run with
//
//	go test -run '^$' -bench BenchmarkParquetSink -benchtime 1x -count 3 ./filesink/bulk/
//
// and compare the records/s of the three: the targets are sink >=
// 85% of encoder and sink >= 60% of parquet-go. Durations are reported,
// never asserted.
func BenchmarkParquetSink(b *testing.B) {
	n := 1_000_000
	if s, err := strconv.Atoi(os.Getenv("BENCH_RECORDS")); err == nil && s > 0 {
		n = s
	}
	rows, lines := bulk.MakeBenchData(n)
	schema, err := bulk.ParseSchema([]byte(bulk.BenchSchemaDoc))
	if err != nil {
		b.Fatal(err)
	}
	format, err := bulk.Parquet(schema, bulk.Options{Compression: bulk.Snappy})
	if err != nil {
		b.Fatal(err)
	}
	report := func(b *testing.B, size int64) {
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		b.ReportMetric(float64(size), "bytes")
		b.ReportMetric(0, "ns/op") // one op is the whole data set
	}

	b.Run("sink", func(b *testing.B) {
		ctx := context.Background()
		var size int64
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			root := b.TempDir()
			be := localfs.New(vfs.OS{}, root)
			w, err := filesink.New(be, 0, filesink.WithBulkFormat(format))
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			for k, l := range lines {
				if err := w.Write(ctx, l, source.Origin{Name: "bench", Num: int64(k + 1)}); err != nil {
					b.Fatal(err)
				}
			}
			snap, err := w.Prepare(ctx, 1, true)
			if err != nil {
				b.Fatal(err)
			}
			for _, c := range snap.Committables {
				if err := w.Commit(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if got := w.Stats().Records.Load(); got != int64(n) {
				b.Fatalf("%d records written, want %d", got, n)
			}
			if len(snap.Committables) != 1 {
				b.Fatalf("%d parts committed, want 1", len(snap.Committables))
			}
			size = dirSize(b, root)
			b.StartTimer()
		}
		report(b, size)
	})

	b.Run("encoder", func(b *testing.B) {
		var out countWriter
		for i := 0; i < b.N; i++ {
			out.n = 0
			w, err := format.NewWriter(&out)
			if err != nil {
				b.Fatal(err)
			}
			for _, l := range lines {
				if err := w.Add(l); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
		report(b, out.n)
	})

	b.Run("parquet-go", func(b *testing.B) {
		var out countWriter
		for i := 0; i < b.N; i++ {
			out.n = 0
			w := pgo.NewGenericWriter[bulk.BenchRow](&out, pgo.Compression(&pgo.Snappy))
			for k := 0; k < len(rows); k += 1024 {
				if _, err := w.Write(rows[k:min(k+1024, len(rows))]); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
		report(b, out.n)
	})
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// dirSize is the total size of the regular files under root.
func dirSize(b *testing.B, root string) int64 {
	var n int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
