//go:build unix

package bulk_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/filesink/filesink/internal/testutil/cputime"

	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/filesink/bulk"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
	pgo "github.com/parquet-go/parquet-go"
)

// BenchmarkParquetSink is the Parquet sink benchmark: records/s of the
// whole Parquet file sink (a filesink.Writer with WithBulkFormat(Parquet,
// snappy, default options) over committer/localfs in a temporary
// directory (BENCH_DIRECT_IO=1: with direct I/O), one bucket, one checkpoint at the end whose parts are
// committed; the default rolling policy rolls the part on size too) on the 1,000,000 ten-field JSON records of BenchmarkEncode
// (BENCH_RECORDS overrides the count), beside, in the same run:
//
//   - encoder: the same Parquet format's writer alone, to memory;
//   - parquet-go: github.com/parquet-go/parquet-go's GenericWriter on the
//     same records as Go structs, snappy, to memory.
//
// and alternating: the sink and the encoder one after the other in each
// iteration, with their ratio; rotating: the sink, the encoder and
// parquet-go in turn in each iteration, with the sink's ratios to both;
// rotating-arrow: the same with the records as Arrow record batches
// (filesink.Writer.WriteBatch), the library's input, built beforehand
// like parquet-go's Go values.
// Run with
//
//	go test -run '^$' -bench BenchmarkParquetSink -benchtime 1x -count 3 ./filesink/bulk/
//	go test -run '^$' -bench BenchmarkParquetSink/alternating -benchtime 6x ./filesink/bulk/
//	go test -run '^$' -bench BenchmarkParquetSink/rotating -benchtime 6x ./filesink/bulk/
//	go test -run '^$' -bench BenchmarkParquetSink/rotating-arrow -benchtime 6x ./filesink/bulk/
//
// (each sub-benchmark first runs one untimed iteration; the sink's output
// is measured and deleted after each iteration, outside the timing) and
// compare the records/s: the goals are sink >= 85% of encoder
// and sink >= 60% of parquet-go. Durations are reported, never asserted.
func BenchmarkParquetSink(b *testing.B) {
	n := 1_000_000
	if s, err := strconv.Atoi(os.Getenv("BENCH_RECORDS")); err == nil && s > 0 {
		n = s
	}
	// The rows are made for the parquet-go sub-benchmark only: live, their
	// millions of strings would slow every garbage collection of the others.
	jsonl, ends := bulk.MakeBenchLines(n)
	runtime.GC()
	schema, err := bulk.ParseSchema([]byte(bulk.BenchSchemaDoc))
	if err != nil {
		b.Fatal(err)
	}
	format, err := bulk.Parquet(schema, bulk.WithCompression(bulk.Snappy))
	if err != nil {
		b.Fatal(err)
	}
	// records/s is over wall time; cpu-records/s over the process's CPU
	// time (user+system, all threads: GC and I/O included) during the
	// sub-benchmark, which a loaded machine disturbs less.
	var cpu0 time.Duration
	// Each sub-benchmark runs one untimed iteration first (i == -1), so
	// that none pays alone for growing the heap and the page cache (on a
	// virtual machine, first touching memory costs several times more
	// than reusing it; the first sub-benchmark would otherwise be the
	// only one to pay).
	warmedUp := func(b *testing.B, i int) {
		b.Helper()
		if i == 0 {
			b.ResetTimer()
			cpu0 = cpuTime(b)
		}
	}
	report := func(b *testing.B, size int64) {
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		b.ReportMetric(float64(n)*float64(b.N)/(cpuTime(b)-cpu0).Seconds(), "cpu-records/s")
		b.ReportMetric(float64(size), "bytes")
		b.ReportMetric(0, "ns/op") // one op is the whole data set
	}

	// sinkFeedOp runs the sink over the records once, fed by feed, and
	// returns the time from the first record to the end of Close, the part
	// of it taken by the checkpoint (Prepare, Commit and Close), and the
	// output's size and parts. The rest (making the Writer, measuring and
	// deleting the output) runs with b's timer stopped.
	sinkFeedOp := func(b *testing.B, feed func(context.Context, *filesink.Writer)) (elapsed, checkpoint time.Duration, size int64, parts int) {
		b.Helper()
		ctx := context.Background()
		b.StopTimer()
		root := b.TempDir()
		be := localfs.New(vfs.OS{}, root, localfs.WithDirectIO(os.Getenv("BENCH_DIRECT_IO") == "1"))
		w, err := filesink.New(be, 0, filesink.WithBulkFormat(format))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		feed(ctx, w)
		t1 := time.Now()
		parts = bulk.CommitFinal(b, w)
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		t2 := time.Now()
		if got := w.Stats().Records.Load(); got != int64(n) {
			b.Fatalf("%d records written, want %d", got, n)
		}
		size = dirSize(b, root)
		// Free the page cache the part took, as a long-running sink's old
		// files leave it: on a virtual machine, writing into memory the
		// guest never touched costs several times more than into reused
		// pages (BENCHMARKS.md), which would otherwise weigh on every
		// iteration after the first.
		if err := os.RemoveAll(root); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		// The default policy also rolls on size.
		return t2.Sub(t0), t2.Sub(t1), size, parts
	}
	// sinkOp: the sink on the JSON lines, in batches of
	// pipeline.DefaultBatchSize, as pipeline.Run hands records to a sink
	// (pipeline.Batcher).
	sinkOp := func(b *testing.B) (elapsed, checkpoint time.Duration, size int64, parts int) {
		b.Helper()
		return sinkFeedOp(b, func(ctx context.Context, w *filesink.Writer) {
			from := 0
			for k, end := range ends {
				l := jsonl[from:end]
				from = end + 1
				if k%pipeline.DefaultBatchSize == 0 {
					w.EndBatch()
					w.BeginBatch()
				}
				if err := w.Write(ctx, l, source.Origin{Name: "bench", Num: int64(k + 1)}); err != nil {
					b.Fatal(err)
				}
			}
			w.EndBatch()
		})
	}
	// encoderOp runs the format's writer alone over the records once, to
	// memory, and returns its time and output size.
	encoderOp := func(b *testing.B) (time.Duration, int64) {
		b.Helper()
		var out countWriter
		t0 := time.Now()
		w, err := format.NewWriter(&out)
		if err != nil {
			b.Fatal(err)
		}
		from := 0
		for _, end := range ends {
			if err := w.Add(jsonl[from:end]); err != nil {
				b.Fatal(err)
			}
			from = end + 1
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0), out.n
	}

	b.Run("sink", func(b *testing.B) {
		var size int64
		parts := 0
		var checkpoint time.Duration // of the timed iterations
		for i := -1; i < b.N; i++ {
			warmedUp(b, i)
			_, cp, sz, np := sinkOp(b)
			if i >= 0 {
				checkpoint += cp
			}
			size, parts = sz, np
		}
		report(b, size)
		b.ReportMetric(float64(parts), "parts")
		b.ReportMetric(checkpoint.Seconds()/float64(b.N), "checkpoint-s")
	})

	b.Run("encoder", func(b *testing.B) {
		var size int64
		for i := -1; i < b.N; i++ {
			warmedUp(b, i)
			_, size = encoderOp(b)
		}
		report(b, size)
	})

	// alternating runs the sink and the encoder alone one after the other
	// in each iteration, the order swapped every iteration, and reports
	// the records/s of each and their ratio: on a machine whose speed
	// drifts (a virtual machine's often does, by a third within minutes),
	// the ratio of the two consecutive sub-benchmarks above compares one
	// speed with another.
	b.Run("alternating", func(b *testing.B) {
		var sinkT, encT time.Duration
		for i := -1; i < b.N; i++ {
			var s, e time.Duration
			if i%2 == 0 {
				s, _, _, _ = sinkOp(b)
				e, _ = encoderOp(b)
			} else {
				e, _ = encoderOp(b)
				s, _, _, _ = sinkOp(b)
			}
			if i >= 0 {
				sinkT += s
				encT += e
			}
		}
		recs := float64(n) * float64(b.N)
		b.ReportMetric(recs/sinkT.Seconds(), "sink-records/s")
		b.ReportMetric(recs/encT.Seconds(), "encoder-records/s")
		b.ReportMetric(100*encT.Seconds()/sinkT.Seconds(), "sink/encoder-%")
		b.ReportMetric(0, "ns/op")
	})

	// parquetGoOp writes rows with parquet-go's GenericWriter once, to
	// memory, and returns its time and output size.
	parquetGoOp := func(b *testing.B, rows []bulk.BenchRow) (time.Duration, int64) {
		b.Helper()
		var out countWriter
		t0 := time.Now()
		w := pgo.NewGenericWriter[bulk.BenchRow](&out, pgo.Compression(&pgo.Snappy))
		for k := 0; k < len(rows); k += 1024 {
			if _, err := w.Write(rows[k:min(k+1024, len(rows))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0), out.n
	}

	b.Run("parquet-go", func(b *testing.B) {
		b.StopTimer()
		rows := bulk.MakeBenchRows(n)
		runtime.GC() // the garbage of making them is not this sub-benchmark's
		b.StartTimer()
		var size int64
		for i := -1; i < b.N; i++ {
			warmedUp(b, i)
			_, size = parquetGoOp(b, rows)
		}
		report(b, size)
	})

	// rotate runs the sink, the encoder alone and parquet-go one after the
	// other in each iteration, the order rotated every iteration, and
	// reports the ratios of the sink to the two others, each measured
	// within seconds of it. parquet-go's rows are made before its turn and
	// dropped after it, outside the timing, so that their millions of
	// strings do not slow the others' garbage collections.
	rotate := func(b *testing.B, sink, encoder func(*testing.B) time.Duration) {
		var sinkT, encT, pgoT time.Duration
		for i := -1; i < b.N; i++ {
			var s, e, p time.Duration
			for k := range 3 {
				switch (i + 1 + k) % 3 {
				case 0:
					s = sink(b)
				case 1:
					e = encoder(b)
				case 2:
					b.StopTimer()
					rows := bulk.MakeBenchRows(n)
					runtime.GC()
					b.StartTimer()
					p, _ = parquetGoOp(b, rows)
					b.StopTimer()
					rows = nil
					runtime.GC()
					b.StartTimer()
				}
			}
			if i >= 0 {
				sinkT += s
				encT += e
				pgoT += p
			}
		}
		recs := float64(n) * float64(b.N)
		b.ReportMetric(recs/sinkT.Seconds(), "sink-records/s")
		b.ReportMetric(recs/encT.Seconds(), "encoder-records/s")
		b.ReportMetric(recs/pgoT.Seconds(), "parquet-go-records/s")
		b.ReportMetric(100*encT.Seconds()/sinkT.Seconds(), "sink/encoder-%")
		b.ReportMetric(100*pgoT.Seconds()/sinkT.Seconds(), "sink/parquet-go-%")
		b.ReportMetric(0, "ns/op")
	}

	// rotating: the JSON lines (the CLI's input).
	b.Run("rotating", func(b *testing.B) {
		rotate(b, func(b *testing.B) time.Duration {
			t, _, _, _ := sinkOp(b)
			return t
		}, func(b *testing.B) time.Duration {
			t, _ := encoderOp(b)
			return t
		})
	})

	// rotating-arrow: the same records as Arrow record batches of 8,192
	// rows, built beforehand as parquet-go's Go values are (the library's
	// input: filesink.Writer.WriteBatch; the encoder alone takes them with
	// AddBatch).
	b.Run("rotating-arrow", func(b *testing.B) {
		b.StopTimer()
		batches := bulk.MakeBenchBatches(b, schema, jsonl, ends, 8192)
		defer func() {
			for _, r := range batches {
				r.Release()
			}
		}()
		b.StartTimer()
		rotate(b, func(b *testing.B) time.Duration {
			t, _, _, _ := sinkFeedOp(b, func(ctx context.Context, w *filesink.Writer) {
				num := int64(1)
				for _, rec := range batches {
					if err := w.WriteBatch(ctx, "", rec, source.Origin{Name: "bench", Num: num}); err != nil {
						b.Fatal(err)
					}
					num += rec.NumRows()
				}
			})
			return t
		}, func(b *testing.B) time.Duration {
			var out countWriter
			t0 := time.Now()
			w, err := format.NewWriter(&out)
			if err != nil {
				b.Fatal(err)
			}
			for _, rec := range batches {
				if _, err := w.(filesink.BatchWriter).AddBatch(rec); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			return time.Since(t0)
		})
	})
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	d, err := cputime.Process()
	if err != nil {
		b.Fatal(err)
	}
	return d
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
