package metrics

import (
	"testing"
	"time"
)

// The Iceberg metrics read the sink's totals when scraped: conflicts are
// the appends tried beyond the snapshots made; each observed commit is a
// latency sample.
func TestIcebergMetrics(t *testing.T) {
	m := New(Options{})
	counts := IcebergCounts{Commits: 5, Appended: 7, Skipped: 2, Attempts: 6, Snapshots: 4}
	observe := m.Iceberg(func() IcebergCounts { return counts })
	observe(20 * time.Millisecond)
	observe(40 * time.Millisecond)
	got := values(t, m)
	for name, want := range map[string]float64{
		"filesink_iceberg_commits_total":              5,
		"filesink_iceberg_checkpoints_appended_total": 7,
		"filesink_iceberg_checkpoints_skipped_total":  2,
		"filesink_iceberg_conflicts_retried_total":    2,
		"filesink_iceberg_commit_seconds_count":       2,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	counts.Commits = 6
	if v := values(t, m)["filesink_iceberg_commits_total"]; v != 6 {
		t.Errorf("after one more commit: %v, want 6", v)
	}
}
