package icebergsink

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
)

// BenchmarkIcebergCommit measures the commit of one checkpoint (one lane,
// one data file) to a table that grows by a snapshot per commit, on the
// embedded SQLite catalog and on the machine's MariaDB: p50 and p99 of
// FILESINK_ICEBERG_BENCH_COMMITS commits (default 200) per op, as
// p50_ms and p99_ms (scripts/bench prints them).
func BenchmarkIcebergCommit(b *testing.B) {
	commits := 200
	if s := os.Getenv("FILESINK_ICEBERG_BENCH_COMMITS"); s != "" {
		fmt.Sscan(s, &commits)
	}
	for _, kind := range []string{"sqlite", "mariadb"} {
		b.Run("catalog="+kind, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				b.StopTimer()
				c, loc := benchTable(b, kind)
				b.StartTimer()
				for i := range commits {
					f := dataFile(b, c, loc, fmt.Sprintf("c%d.parquet", i), 0)
					start := time.Now()
					if err := c.Commit(context.Background(), "filesink/0", uint64(i+1), []filesink.ManifestFile{f}); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
		})
	}
}

// benchTable makes a fresh unpartitioned table in a catalog of kind.
func benchTable(b *testing.B, kind string) (*Committer, string) {
	uri := ""
	if kind == "mariadb" {
		m := mariadbtest.Shared(b)
		uri = "mysql://" + m.DSN(m.NewDatabase(b))
	}
	return newTableOn(b, uri, "bench")
}
