package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filesink/filesink/source/kafka"
)

// Lanes is the instrumentation of a process in group mode: its methods
// are the group's lane events (group.Events) and feed the lane metrics of
// the registry of the Metrics that made it. Safe for concurrent use.
type Lanes struct {
	mu    sync.Mutex
	owned map[kafka.LaneID]bool
	pos   map[kafka.LaneID]lanePos // per lane owned now

	assigned prometheus.Counter
	released prometheus.Counter
	fenced   prometheus.Counter
	healed   prometheus.Counter
	handoff  prometheus.Histogram
	takeover prometheus.Histogram
}

// lanePos is a lane's committed offset and the partition's high watermark
// (0 if unknown) when it was committed.
type lanePos struct{ next, hwm int64 }

// Lanes registers the lane metrics and returns their feed.
func (m *Metrics) Lanes() *Lanes {
	l := &Lanes{
		owned: map[kafka.LaneID]bool{}, pos: map[kafka.LaneID]lanePos{},
		assigned: prometheus.NewCounter(prometheus.CounterOpts{Name: "filesink_lane_takeovers_total",
			Help: "Group mode: partitions this process took over (assigned by a rebalance, owner epoch raised)."}),
		released: prometheus.NewCounter(prometheus.CounterOpts{Name: "filesink_lane_handoffs_total",
			Help: "Group mode: partitions this process handed off cleanly (final checkpoint, released)."}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{Name: "filesink_lane_fenced_total",
			Help: "Group mode: lane state writes that found another owner: the lane stopped and published nothing more (a paused process whose partition moved)."}),
		healed: prometheus.NewCounter(prometheus.CounterOpts{Name: "filesink_group_rebalances_forced_total",
			Help: "Group mode: rebalances this process asked for because partitions with records to read were assigned to no member of the consumer group."}),
		handoff: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "filesink_lane_handoff_seconds",
			Help: "Group mode: time from a partition's revocation to its release (final checkpoint decided and published).", Buckets: durationBuckets}),
		takeover: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "filesink_lane_takeover_seconds",
			Help: "Group mode: time of a rebalance's takeovers (reading and conditionally writing the lanes' states).", Buckets: durationBuckets}),
	}
	m.reg.MustRegister(l.assigned, l.released, l.fenced, l.healed, l.handoff, l.takeover,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "filesink_lanes_owned", Help: "Group mode: partitions this process owns now."},
			func() float64 { l.mu.Lock(); defer l.mu.Unlock(); return float64(len(l.owned)) }),
		laneCollector{l})
	return l
}

// Assigned is group.Events.Assigned.
func (l *Lanes) Assigned(id kafka.LaneID, _ uint64, took time.Duration) {
	l.mu.Lock()
	l.owned[id] = true
	l.mu.Unlock()
	l.assigned.Inc()
	l.takeover.Observe(took.Seconds())
}

// Released is group.Events.Released.
func (l *Lanes) Released(_ kafka.LaneID, took time.Duration) {
	l.released.Inc()
	l.handoff.Observe(took.Seconds())
}

// Fenced is group.Events.Fenced.
func (l *Lanes) Fenced(kafka.LaneID) { l.fenced.Inc() }

// Healed is group.Events.Healed.
func (l *Lanes) Healed([]kafka.LaneID) { l.healed.Inc() }

// Stopped is group.Events.Stopped.
func (l *Lanes) Stopped(id kafka.LaneID) {
	l.mu.Lock()
	delete(l.owned, id)
	delete(l.pos, id)
	l.mu.Unlock()
}

// Committed is group.Events.Committed.
func (l *Lanes) Committed(id kafka.LaneID, next, hwm int64) {
	l.mu.Lock()
	l.pos[id] = lanePos{next: next, hwm: hwm}
	l.mu.Unlock()
}

var (
	laneOffsetDesc = prometheus.NewDesc("filesink_lane_committed_offset",
		"Group mode: offset after the last record of a lane's last committed checkpoint, per partition this process owns.",
		[]string{"topic", "partition"}, nil)
	laneLagDesc = prometheus.NewDesc("filesink_lane_lag_records",
		"Group mode: records of a partition this process owns that are not committed yet (high watermark minus committed offset).",
		[]string{"topic", "partition"}, nil)
)

// laneCollector reports the per-lane offsets and lags.
type laneCollector struct{ l *Lanes }

func (c laneCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- laneOffsetDesc
	ch <- laneLagDesc
}

func (c laneCollector) Collect(ch chan<- prometheus.Metric) {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	for id, v := range c.l.pos {
		next, hwm := v.next, v.hwm
		p := strconv.Itoa(int(id.Partition))
		ch <- prometheus.MustNewConstMetric(laneOffsetDesc, prometheus.GaugeValue, float64(next), id.Topic, p)
		if hwm > 0 {
			ch <- prometheus.MustNewConstMetric(laneLagDesc, prometheus.GaugeValue, float64(max(hwm-next, 0)), id.Topic, p)
		}
	}
}
