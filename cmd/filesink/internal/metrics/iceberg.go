package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// IcebergCounts are an Iceberg sink's totals so far.
type IcebergCounts struct {
	Commits   int64 // commits that returned (one or more lanes' checkpoints in the table)
	Appended  int64 // lane checkpoints appended by this process
	Skipped   int64 // lane checkpoints the table held already (recovery, lost replies, zombies)
	Attempts  int64 // appends tried
	Snapshots int64 // appends that committed a snapshot
}

// Iceberg registers the metrics of an Iceberg sink whose totals counts
// reads, and returns the function that observes each commit's latency.
// Call it once per run.
func (m *Metrics) Iceberg(counts func() IcebergCounts) (observe func(time.Duration)) {
	latency := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "filesink_iceberg_commit_seconds",
		Help:    "Iceberg sink: time from a lane's request to append a decided checkpoint until the table holds it (waiting for the process's batch included).",
		Buckets: durationBuckets,
	})
	counter := func(name, help string, f func(IcebergCounts) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(counts())) })
	}
	m.reg.MustRegister(latency,
		counter("filesink_iceberg_commits_total", "Iceberg sink: lane checkpoint commits that completed (the table holds them).",
			func(c IcebergCounts) int64 { return c.Commits }),
		counter("filesink_iceberg_checkpoints_appended_total", "Iceberg sink: lane checkpoints this process appended to the table.",
			func(c IcebergCounts) int64 { return c.Appended }),
		counter("filesink_iceberg_checkpoints_skipped_total", "Iceberg sink: lane checkpoints the table held already (a commit after a crash, a lost reply, a zombie): verified no-ops.",
			func(c IcebergCounts) int64 { return c.Skipped }),
		counter("filesink_iceberg_conflicts_retried_total", "Iceberg sink: appends that failed (another writer committed first, an unknown outcome) and were decided again on the reloaded table.",
			func(c IcebergCounts) int64 { return max(c.Attempts-c.Snapshots, 0) }),
	)
	return func(d time.Duration) { latency.Observe(d.Seconds()) }
}
