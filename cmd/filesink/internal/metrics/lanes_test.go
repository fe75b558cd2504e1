package metrics

import (
	"testing"
	"time"

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
	v := values(t, m)
	want := map[string]float64{
		"filesink_lanes_owned":                                         1,
		"filesink_lane_takeovers_total":                                2,
		"filesink_lane_handoffs_total":                                 1,
		"filesink_lane_fenced_total":                                   1,
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
