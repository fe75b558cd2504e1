package metrics

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/pipeline"
)

// Options configure a Metrics.
type Options struct {
	// CheckpointInterval is the job's time between checkpoints: /readyz
	// fails once no checkpoint completed for StaleAfter times it (<= 0:
	// checkpoints are not timed, and readiness only needs the recovery).
	CheckpointInterval time.Duration
	// StaleAfter is the multiple of CheckpointInterval after which the
	// last checkpoint is too old to be ready (default 3).
	StaleAfter int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Metrics is the instrumentation of one job run of a process: a
// Prometheus registry of its own (never the global one) and the functions
// that feed it, to be plugged into the run's extension points:
//
//   - [Metrics.Events] into pipeline.Config.Events (checkpoint and phase
//     durations, progress, end of recovery, orphans swept, failed commit
//     attempts): one listener per pipeline run (in group mode, per lane
//     run), whose totals add up;
//   - [Metrics.WrapSink] around each pipeline.Sink;
//   - [Metrics.WrapKafka] around a Kafka source;
//   - [Metrics.Lanes] for the lane events of group mode.
//
// Every method is safe for concurrent use; none blocks.
type Metrics struct {
	reg      *prometheus.Registry
	now      func() time.Time
	interval time.Duration
	stale    int

	inRecords, inBytes atomic.Int64 // pipeline.Progress totals, summed over the pipeline runs
	checkpoints        atomic.Int64 // completed in this run, by every pipeline run
	retries            atomic.Int64
	registryRetries    atomic.Int64
	bad                atomic.Int64 // BadRecord events
	orphans            [numKinds]atomic.Int64

	ckptDuration  prometheus.Histogram
	phaseDuration *prometheus.HistogramVec

	direct *pipelineRun // the run of Metrics.Progress

	mu        sync.Mutex
	sinks     []*sinkStats
	retired   sinkTotals // of the sinks closed: no longer in sinks
	kafka     []*kafkaSource
	recovered bool
	lastID    uint64
	lastAt    time.Time // completion of checkpoint lastID in this run
	// live counts the pipeline runs that reported progress and no final
	// checkpoint yet; done: some did, and none is live.
	live  int
	done  bool
	start time.Time
}

// orphan kinds, the "kind" label of filesink_orphans_swept_total.
const (
	kindStagingFile = iota
	kindUpload
	kindStagingObject
	numKinds
)

var kindNames = [numKinds]string{driver.SweptStagingFile, driver.SweptUpload, driver.SweptStagingObject}

// durationBuckets spans a local checkpoint (milliseconds) to a slow S3
// upload of large parts (minutes).
var durationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// New returns the metrics of one run, registered in a fresh registry
// along with the Go runtime and process collectors.
func New(opts Options) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(), now: opts.Now,
		interval: opts.CheckpointInterval, stale: opts.StaleAfter,
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.stale <= 0 {
		m.stale = 3
	}
	m.start = m.now()
	m.direct = &pipelineRun{m: m}
	m.ckptDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "filesink_checkpoint_duration_seconds",
		Help:    "Time from a checkpoint's barrier to the end of its phase 2 (its records are published and old records pruned).",
		Buckets: durationBuckets,
	})
	m.phaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "filesink_checkpoint_phase_duration_seconds",
		Help: "Duration of a checkpoint's steps: phase1 (barrier until every subtask's records are durable), " +
			"decide (writing the checkpoint record, the commit point), phase2 (publishing, then pruning old records).",
		Buckets: durationBuckets,
	}, []string{"phase"})
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.ckptDuration, m.phaseDuration,
		counter("filesink_source_records_total", "Records read from the source in this run.",
			func() float64 { return float64(m.inRecords.Load()) }),
		counter("filesink_source_bytes_total", "Bytes of records read from the source in this run.",
			func() float64 { return float64(m.inBytes.Load()) }),
		counter("filesink_sink_records_total", "Records accepted by the sink subtasks in this run (written to part files, "+
			"XA branches or HTTP batches; bad records sent to the dead-letter output included).",
			func() float64 { return m.sumSinks(func(s *sinkStats) int64 { return s.records.Load() }) }),
		counter("filesink_sink_bytes_total", "Bytes of records accepted by the sink subtasks in this run (as read, before encoding and compression).",
			func() float64 { return m.sumSinks(func(s *sinkStats) int64 { return s.bytes.Load() }) }),
		counter("filesink_bad_records_total", "Records sent to the dead-letter output (file and S3 sinks: dead-letter files; MySQL: the dead-letter table; --on-bad-record skip).",
			func() float64 { return float64(m.bad.Load()) }),
		counter("filesink_files_committed_total", "Part files published by phase 2 in this run (file and S3 sinks; recovery re-commits not counted).",
			func() float64 { return m.sumSinks(func(s *sinkStats) int64 { return s.committed() }) }),
		counter("filesink_parts_rebuilt_total", "Part files made again from the source records their checkpoint lists, because the store lost their staged data (file and S3 sinks).",
			func() float64 { return m.sumSinks(func(s *sinkStats) int64 { return s.rebuilt() }) }),
		counter("filesink_async_records_acked_total", "HTTP (async) sinks: records of batches the receiver acknowledged in this run.",
			func() float64 { return m.sumSinks(func(s *sinkStats) int64 { return s.acked() }) }),
		counter("filesink_async_records_dropped_total", "HTTP (async) sinks, --guarantee at-most-once: records of failed batches dropped in this run.",
			func() float64 { return m.sumSinks(func(s *sinkStats) int64 { return s.dropped() }) }),
		gauge("filesink_open_part_files", "Part files in progress (open buckets), over all subtasks (file and S3 sinks).",
			func() float64 { return m.sumSinks(func(s *sinkStats) int64 { return s.open.Load() }) }),
		gauge("filesink_pending_committables", "Committables prepared in phase 1 and not yet published by phase 2 (part files, XA branches).",
			func() float64 { return m.sumSinks(func(s *sinkStats) int64 { return max(s.pending.Load(), 0) }) }),
		counter("filesink_checkpoints_total", "Checkpoints completed (decided and committed) in this run.",
			func() float64 { return float64(m.checkpoints.Load()) }),
		counter("filesink_commit_retries_total", "Phase-2 commit attempts that failed with a retryable error; the coordinator "+
			"retries them with backoff, and fails the job when the attempts run out.",
			func() float64 { return float64(m.retries.Load()) }),
		gauge("filesink_last_checkpoint_id", "Id of the last checkpoint completed in this run (0: none yet).",
			func() float64 { m.mu.Lock(); defer m.mu.Unlock(); return float64(m.lastID) }),
		gauge("filesink_last_checkpoint_timestamp_seconds", "Unix time at which the last checkpoint completed in this run (0: none yet).",
			func() float64 {
				m.mu.Lock()
				defer m.mu.Unlock()
				if m.lastAt.IsZero() {
					return 0
				}
				return float64(m.lastAt.UnixNano()) / 1e9
			}),
		gauge("filesink_last_checkpoint_age_seconds", "Seconds since the last checkpoint completed in this run (since the start until the first one).",
			func() float64 { return m.age().Seconds() }),
		orphanCollector{m}, kafkaCollector{m}, registryRetries(m),
	)
	return m
}

func (m *Metrics) age() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ageLocked()
}

func (m *Metrics) ageLocked() time.Duration {
	if m.lastAt.IsZero() {
		return m.now().Sub(m.start)
	}
	return m.now().Sub(m.lastAt)
}

// Registry returns the run's registry, to register more collectors or to
// gather it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// sumSinks sums f over the sinks, those closed included.
func (m *Metrics) sumSinks(f func(*sinkStats) int64) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := f(m.retired.stats())
	for _, s := range m.sinks {
		n += f(s)
	}
	return float64(n)
}

// Events returns a listener that feeds the metrics from one pipeline run:
// plug it into pipeline.Config.Events (beside other listeners, with
// pipeline.TeeEventListener). Each call returns the listener of another
// run, whose totals (records and bytes read, checkpoints completed) add to
// those of the others: give each run its own, such as each lane run in
// group mode, and the counters are the process's, never going back.
func (m *Metrics) Events() pipeline.EventListener {
	r := &pipelineRun{m: m}
	return pipeline.EventListener{
		EventListener: committer.EventListener{
			Phase1Done: func(i committer.Phase1Info) {
				m.phaseDuration.WithLabelValues("phase1").Observe(i.Duration.Seconds())
			},
			Decided: func(i committer.DecidedInfo) {
				m.phaseDuration.WithLabelValues("decide").Observe(i.Duration.Seconds())
			},
			Committed:    m.committed,
			CommitFailed: func(committer.CommitFailedInfo) { m.retries.Add(1) },
			Swept:        m.swept,
			Recovered: func(committer.RecoveredInfo) {
				m.mu.Lock()
				m.recovered = true
				m.mu.Unlock()
			},
		},
		Progress:  r.progress,
		BadRecord: m.BadRecord,
	}
}

// BadRecord counts a record sent to a dead-letter output (the BadRecord
// of every listener Events returns).
func (m *Metrics) BadRecord(pipeline.BadRecordInfo) { m.bad.Add(1) }

// committed times a checkpoint whose phase 2 completed.
func (m *Metrics) committed(i committer.CommittedInfo) {
	if i.Total == 0 { // not begun by this run's coordinator: not timed
		return
	}
	m.phaseDuration.WithLabelValues("phase2").Observe(i.Phase2.Seconds())
	m.ckptDuration.Observe(i.Total.Seconds())
}

// swept counts the orphans a sweep deleted, by kind. XA branches are
// counted from the MySQL sinks' statistics (Restore rolls back too).
func (m *Metrics) swept(i committer.SweptInfo) {
	for k, name := range kindNames {
		m.orphans[k].Add(i.Swept[name])
	}
}

// registryRetries is filesink_schema_registry_retries_total.
func registryRetries(m *Metrics) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "filesink_schema_registry_retries_total",
		Help: "--value-format avro: requests to the Schema Registry that failed (no connection, a timeout, 5xx, 429) " +
			"and are retried with backoff until it answers."},
		func() float64 { return float64(m.registryRetries.Load()) })
}

// RegistryRetry counts a failed request to the Schema Registry that is
// retried (avro.WithRetryHook). It is safe for concurrent use.
func (m *Metrics) RegistryRetry(error) { m.registryRetries.Add(1) }

// Progress records a pipeline.Progress of a run of its own, apart from
// those of the listeners of Events (each of which includes its run's).
func (m *Metrics) Progress(p pipeline.Progress) { m.direct.progress(p) }

// pipelineRun is the progress of one pipeline run, whose increments it adds
// to the metrics' totals.
type pipelineRun struct {
	m *Metrics

	mu      sync.Mutex
	last    pipeline.Progress
	started bool
}

// progress adds what changed since the run's last Progress. The calls of
// one run come from its goroutine, in order.
func (r *pipelineRun) progress(p pipeline.Progress) {
	m := r.m
	r.mu.Lock()
	last, first := r.last, !r.started
	r.last, r.started = p, true
	r.mu.Unlock()
	m.inRecords.Add(p.Records - last.Records)
	m.inBytes.Add(p.Bytes - last.Bytes)
	ended := p.Done && !last.Done
	if p.Checkpoints == last.Checkpoints && !first && !ended {
		return
	}
	m.checkpoints.Add(p.Checkpoints - last.Checkpoints)
	m.mu.Lock()
	if first {
		m.live++
	}
	if ended {
		m.live--
	}
	if p.Checkpoints != last.Checkpoints {
		m.lastID, m.lastAt = p.Checkpoint, m.now()
	}
	m.done = m.live == 0 && (ended || m.done)
	m.mu.Unlock()
}

// Ready reports whether the job is ready: recovered, and a checkpoint
// completed in this run less than StaleAfter checkpoint intervals ago.
// reason says why not, or what the last checkpoint was.
func (m *Metrics) Ready() (ready bool, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case !m.recovered:
		return false, "recovering: restoring the newest checkpoint and sweeping orphans"
	case m.lastAt.IsZero() && m.interval > 0:
		return false, "recovered; no checkpoint completed yet in this run"
	case m.lastAt.IsZero():
		return true, "recovered (checkpoints are not timed)"
	}
	age := m.ageLocked()
	if limit := time.Duration(m.stale) * m.interval; m.interval > 0 && age > limit && !m.done {
		return false, fmt.Sprintf("stale: the last checkpoint (%d) completed %s ago, more than %d x the %s checkpoint interval",
			m.lastID, age.Round(time.Millisecond), m.stale, m.interval)
	}
	if m.done {
		return true, fmt.Sprintf("final checkpoint %d completed; stopping", m.lastID)
	}
	return true, fmt.Sprintf("checkpoint %d completed %s ago", m.lastID, age.Round(time.Millisecond))
}

// orphanCollector exports the orphans swept, by kind.
type orphanCollector struct{ m *Metrics }

var orphanDesc = prometheus.NewDesc("filesink_orphans_swept_total",
	"Orphaned staging data deleted by the sweep (recovery, and every 10 checkpoints with S3): "+
		"staging_file (local .inprogress files), upload (S3 multipart uploads aborted), "+
		"staging_object (S3 tail and marker objects), xa_branch (MySQL XA branches rolled back).",
	[]string{"kind"}, nil)

func (c orphanCollector) Describe(ch chan<- *prometheus.Desc) { ch <- orphanDesc }

func (c orphanCollector) Collect(ch chan<- prometheus.Metric) {
	for k := range numKinds {
		ch <- prometheus.MustNewConstMetric(orphanDesc, prometheus.CounterValue, float64(c.m.orphans[k].Load()), kindNames[k])
	}
	ch <- prometheus.MustNewConstMetric(orphanDesc, prometheus.CounterValue,
		c.m.sumSinks(func(s *sinkStats) int64 { return s.rolledBack() }), "xa_branch")
}
