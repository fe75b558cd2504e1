package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/source/kafka"
)

// The lane metrics follow the group's lane events: owned lanes, takeovers,
// handoffs and their time, fences, and per owned lane its committed
// offset and lag; a lane that stopped is no longer reported.
func TestLaneMetrics(t *testing.T) {
	m := New(Options{})
	l := m.Lanes()
	a, b := kafka.LaneID{Topic: "orders", Partition: 0}, kafka.LaneID{Topic: "orders", Partition: 1}
	l.Assigned(a, 3, 20*time.Millisecond)
	l.Assigned(b, 1, 30*time.Millisecond)
	l.Committed(a, 100, 150)
	l.Committed(b, 7, 0) // no fetch yet: no lag
	l.Fenced(b)
	l.Stopped(b)
	l.Released(a, 2*time.Second)
	l.Healed([]kafka.LaneID{b})
	v := values(t, m)
	want := map[string]float64{
		"filesink_lanes_owned":                                         1,
		"filesink_lane_takeovers_total":                                2,
		"filesink_lane_handoffs_total":                                 1,
		"filesink_lane_fenced_total":                                   1,
		"filesink_group_rebalances_forced_total":                       1,
		"filesink_lane_handoff_seconds_count":                          1,
		"filesink_lane_handoff_seconds_sum":                            2,
		"filesink_lane_takeover_seconds_count":                         2,
		`filesink_lane_committed_offset{partition="0",topic="orders"}`: 100,
		`filesink_lane_lag_records{partition="0",topic="orders"}`:      50,
	}
	for k, w := range want {
		if got, ok := v[k]; !ok || got != w {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, w)
		}
	}
	for _, k := range []string{`filesink_lane_committed_offset{partition="1",topic="orders"}`, `filesink_lane_lag_records{partition="1",topic="orders"}`} {
		if _, ok := v[k]; ok {
			t.Errorf("%s is reported for a lane that stopped", k)
		}
	}
}

// TestRunsAddUp: each listener of Events is a pipeline run of its own (a
// lane run in group mode): the counters are the sums over the runs, a run
// that starts from zero never takes them back, and the run is done only
// when every run that started took its final checkpoint.
func TestRunsAddUp(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := New(Options{CheckpointInterval: time.Second, Now: func() time.Time { return now }})
	a, b := m.Events(), m.Events()
	a.Recovered(committer.RecoveredInfo{})
	steps := []struct {
		ev                    pipeline.EventListener
		p                     pipeline.Progress
		records, bytes, ckpts float64
		lastID                float64
		done                  bool
	}{
		{a, pipeline.Progress{Records: 10, Bytes: 100}, 10, 100, 0, 0, false},
		{b, pipeline.Progress{Records: 5, Bytes: 50, Checkpoints: 1, Checkpoint: 7}, 15, 150, 1, 7, false},
		{a, pipeline.Progress{Records: 10, Bytes: 100, Checkpoints: 1, Checkpoint: 1}, 15, 150, 2, 1, false},
		{b, pipeline.Progress{Records: 9, Bytes: 90, Checkpoints: 2, Checkpoint: 8, Done: true}, 19, 190, 3, 8, false},
		{m.Events(), pipeline.Progress{Records: 1, Bytes: 10}, 20, 200, 3, 8, false}, // a lane run from zero
		{a, pipeline.Progress{Records: 12, Bytes: 120, Checkpoints: 2, Checkpoint: 2, Done: true}, 22, 220, 4, 2, false},
	}
	for i, s := range steps {
		s.ev.Progress(s.p)
		v := values(t, m)
		if v["filesink_source_records_total"] != s.records || v["filesink_source_bytes_total"] != s.bytes ||
			v["filesink_checkpoints_total"] != s.ckpts || v["filesink_last_checkpoint_id"] != s.lastID {
			t.Errorf("step %d: records %v bytes %v checkpoints %v last id %v, want %v %v %v %v", i, v["filesink_source_records_total"],
				v["filesink_source_bytes_total"], v["filesink_checkpoints_total"], v["filesink_last_checkpoint_id"], s.records, s.bytes, s.ckpts, s.lastID)
		}
		if _, why := m.Ready(); strings.Contains(why, "final checkpoint") != s.done {
			t.Errorf("step %d: Ready says %q, want done %v", i, why, s.done)
		}
	}
	// The run that started at step 4 ends: every run is done.
	steps[4].ev.Progress(pipeline.Progress{Records: 1, Bytes: 10, Checkpoints: 1, Checkpoint: 3, Done: true})
	if ready, why := m.Ready(); !ready || !strings.Contains(why, "final checkpoint 3 completed") {
		t.Errorf("every run done: Ready() = %v %q", ready, why)
	}
}

// closingSink is a countingSink that can be closed.
type closingSink struct{ *countingSink }

func (closingSink) Close() error { return nil }

// TestClosedSinkLeavesGauges: a closed sink (a lane run that ended) keeps
// its totals in the counters and leaves the gauges of open part files.
func TestClosedSinkLeavesGauges(t *testing.T) {
	m := New(Options{})
	a, b := m.WrapSink(closingSink{&countingSink{n: 1}}), m.WrapSink(closingSink{&countingSink{n: 10}})
	for _, w := range []pipeline.Sink{a, b} {
		if err := w.Tick(context.Background(), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a.Close() // twice: counted once
	v := values(t, m)
	for name, want := range map[string]float64{
		"filesink_files_committed_total":       11,
		"filesink_async_records_acked_total":   33,
		"filesink_open_part_files":             50, // b's only
		"filesink_async_records_dropped_total": 44,
	} {
		if v[name] != want {
			t.Errorf("%s = %v, want %v", name, v[name], want)
		}
	}
}
