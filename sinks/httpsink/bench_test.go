package httpsink_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/internal/testutil/cputime"
	"github.com/filesink/filesink/sinks/async"
	"github.com/filesink/filesink/sinks/httpsink"
	"github.com/filesink/filesink/source"
)

// Benchmark parameters: a receiver that takes 5 ms per batch,
// 100 records of 200 bytes per batch, the async sink with 1, 2, 4 and 8
// workers and a queue of 2 x workers, a checkpoint (Prepare) every 10,050
// records, a linger of 50 ms.
const (
	benchDelay       = 5 * time.Millisecond
	benchBatch       = 100
	benchRecordBytes = 200
	benchCkptEvery   = 10050
	benchLinger      = 50 * time.Millisecond
)

// BenchmarkHTTPSink reports, per worker count, records/s and batches/s
// through the sink into a receiver that takes 5 ms per batch, and the
// latency of phase 1 (Prepare: until every batch before the barrier is
// acknowledged) as p50/p99/max ms beside the linger (ckpt-p99/linger <
// 2 is the target). Scaling is read from records/s across the worker
// counts (scripts/bench prints the ratio to N x the 1-worker figure).
// FILESINK_HTTP_BENCH_RECORDS sets the records per op (default 100,000).
func BenchmarkHTTPSink(b *testing.B) {
	records := 100000
	if s := os.Getenv("FILESINK_HTTP_BENCH_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < benchBatch {
			b.Fatalf("FILESINK_HTTP_BENCH_RECORDS=%q", s)
		}
		records = n
	}
	var received atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		time.Sleep(benchDelay)
		received.Add(n)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	rec := make([]byte, benchRecordBytes)
	for i := range rec {
		rec[i] = 'a' + byte(i%26)
	}
	rec[0], rec[len(rec)-1] = '"', '"' // a JSON string

	for _, workers := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			c, err := httpsink.New(srv.URL + "/ingest")
			if err != nil {
				b.Fatal(err)
			}
			var lat []time.Duration
			var batches int64
			cpu0 := cpuSeconds()
			b.SetBytes(int64(records * benchRecordBytes))
			b.ResetTimer()
			for range b.N {
				s, err := httpsink.NewSink(c, 0, async.WithWorkers(workers), async.WithQueue(2*workers),
					async.WithMaxRecords(benchBatch), async.WithLinger(benchLinger))
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				id := uint64(0)
				for i := range records {
					if err := s.Write(ctx, rec, source.Origin{Num: int64(i)}); err != nil {
						b.Fatal(err)
					}
					if (i+1)%benchCkptEvery == 0 {
						id++
						t0 := time.Now()
						if _, err := committer.PrepareNow(ctx, s, id, false); err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(t0))
					}
				}
				if _, err := committer.PrepareNow(ctx, s, id+1, true); err != nil {
					b.Fatal(err)
				}
				if got := s.Stats().Acked.Load(); got != int64(records) {
					b.Fatalf("%d records acknowledged, want %d", got, records)
				}
				batches += s.Stats().Batches.Load()
				s.Close()
			}
			b.StopTimer()
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(records)*float64(b.N)/secs, "records/s")
			b.ReportMetric(float64(batches)/secs, "batches/s")
			b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
			slices.Sort(lat)
			if len(lat) > 0 {
				pct := func(p float64) float64 {
					return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
				}
				b.ReportMetric(pct(0.5), "ckpt-p50-ms")
				b.ReportMetric(pct(0.99), "ckpt-p99-ms")
				b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "ckpt-max-ms")
				b.ReportMetric(pct(0.99)/float64(benchLinger.Milliseconds()), "ckpt-p99/linger")
			}
		})
	}
}

// cpuSeconds is the process's user+system CPU time (the receiver runs in
// the same process).
func cpuSeconds() float64 {
	d, err := cputime.Process()
	if err != nil {
		return 0
	}
	return d.Seconds()
}
