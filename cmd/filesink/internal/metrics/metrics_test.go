package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
	"github.com/filesink/filesink/vfs/crashfs"
)

// values gathers m's registry: metric name (with labels as
// name{k="v",...}) to value; histograms give name_count and name_sum.
func values(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			name := mf.GetName()
			if len(mt.GetLabel()) > 0 {
				var ls []string
				for _, l := range mt.GetLabel() {
					ls = append(ls, l.GetName()+`="`+l.GetValue()+`"`)
				}
				name += "{" + strings.Join(ls, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[name] = mt.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name] = mt.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"] = float64(mt.GetHistogram().GetSampleCount())
				out[name+"_sum"] = mt.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// job runs a generator of count records into two file-sink subtasks on
// fsys, instrumented by m, checkpointing every 100 records.
func job(t *testing.T, m *Metrics, fsys vfs.FS, count int64) pipeline.Result {
	t.Helper()
	ctx := context.Background()
	store, err := recovery.OpenDir(ctx, fsys, "/out/_filesink")
	if err != nil {
		t.Fatal(err)
	}
	be := localfs.New(fsys, "/out")
	var sinks []pipeline.Sink
	for i := range 2 {
		w, err := filesink.New(be, i, filesink.WithBufferBudget(1<<20),
			filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 8 << 10}))
		if err != nil {
			t.Fatal(err)
		}
		sinks = append(sinks, m.WrapSink(w))
	}
	res, err := pipeline.Run(ctx, pipeline.Config{
		OpenSource: func(_ context.Context, pos json.RawMessage) (source.Source, error) {
			return source.NewGenerator(source.GenConfig{Count: count, Seed: 1}, pos)
		},
		Store: store, Sinks: sinks, CheckpointInterval: -1, CheckpointEvery: 100, BatchSize: 25,
		Events: m.Events(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRunCounts(t *testing.T) {
	mem := crashfs.New()
	if err := vfs.MkdirAllSync(mem, "/out"); err != nil {
		t.Fatal(err)
	}
	// An orphan of subtask 0 (no checkpoint references it): swept at
	// recovery.
	f, err := mem.Create("/out/.part-0-0badc0de-1.jsonl.inprogress")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("{}\n"))
	f.Close()

	m := New(Options{})
	const count = 1000
	res := job(t, m, mem, count)
	v := values(t, m)
	want := map[string]float64{
		"filesink_source_records_total":                                    count,
		"filesink_sink_records_total":                                      count,
		"filesink_source_bytes_total":                                      float64(res.Bytes),
		"filesink_sink_bytes_total":                                        float64(res.Bytes),
		"filesink_checkpoints_total":                                       float64(res.Checkpoint),
		"filesink_last_checkpoint_id":                                      float64(res.Checkpoint),
		"filesink_checkpoint_duration_seconds_count":                       float64(res.Checkpoint),
		`filesink_checkpoint_phase_duration_seconds{phase="phase1"}_count`: float64(res.Checkpoint),
		`filesink_checkpoint_phase_duration_seconds{phase="decide"}_count`: float64(res.Checkpoint),
		`filesink_checkpoint_phase_duration_seconds{phase="phase2"}_count`: float64(res.Checkpoint),
		"filesink_open_part_files":                                         0, // the final checkpoint closes every part
		"filesink_pending_committables":                                    0,
		"filesink_commit_retries_total":                                    0,
		`filesink_orphans_swept_total{kind="staging_file"}`:                1,
		`filesink_orphans_swept_total{kind="upload"}`:                      0,
		"filesink_bad_records_total":                                       0,
	}
	for name, w := range want {
		if got, ok := v[name]; !ok || got != w {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, w)
		}
	}
	if res.Checkpoint < 10 {
		t.Errorf("%d checkpoints, want at least 10 (one per 100 records)", res.Checkpoint)
	}
	if v["filesink_files_committed_total"] < float64(res.Checkpoint) {
		t.Errorf("files committed %v < checkpoints %d", v["filesink_files_committed_total"], res.Checkpoint)
	}
	if ready, why := m.Ready(); !ready {
		t.Errorf("not ready after the run: %s", why)
	}
}

// TestPendingAndOpenDuringRun: between checkpoints the subtasks hold open
// parts, and what phase 1 prepared is pending until phase 2.
func TestPendingAndOpenDuringRun(t *testing.T) {
	mem := crashfs.New()
	m := New(Options{})
	var mu sync.Mutex
	var maxOpen, maxPending float64
	sample := func() {
		v := values(t, m)
		mu.Lock()
		maxOpen = max(maxOpen, v["filesink_open_part_files"])
		maxPending = max(maxPending, v["filesink_pending_committables"])
		mu.Unlock()
	}
	// Sample at every decide step: it sees the committables of the
	// checkpoint prepared and not yet committed.
	events := pipeline.TeeEventListener(m.Events(), pipeline.EventListener{
		EventListener: committer.EventListener{Decided: func(committer.DecidedInfo) { sample() }},
		Progress: func(p pipeline.Progress) {
			if !p.Done {
				sample()
			}
		},
	})
	ctx := context.Background()
	store, err := recovery.OpenDir(ctx, mem, "/out/_filesink")
	if err != nil {
		t.Fatal(err)
	}
	w, err := filesink.New(localfs.New(mem, "/out"), 0, filesink.WithBufferBudget(1<<20),
		filesink.WithRollingPolicy(filesink.OnCheckpointPolicy{PartSize: 1 << 20}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = pipeline.Run(ctx, pipeline.Config{
		OpenSource: func(_ context.Context, pos json.RawMessage) (source.Source, error) {
			return source.NewGenerator(source.GenConfig{Count: 500, Seed: 1}, pos)
		},
		Store: store, Sinks: []pipeline.Sink{m.WrapSink(w)}, CheckpointInterval: -1, CheckpointEvery: 100, BatchSize: 25,
		Events: events,
	})
	if err != nil {
		t.Fatal(err)
	}
	if maxOpen < 1 || maxPending < 1 {
		t.Errorf("max open part files %v, max pending committables %v during the run; want >= 1 each", maxOpen, maxPending)
	}
	v := values(t, m)
	if v["filesink_open_part_files"] != 0 || v["filesink_pending_committables"] != 0 {
		t.Errorf("after the run: open %v, pending %v; want 0", v["filesink_open_part_files"], v["filesink_pending_committables"])
	}
}

func TestReady(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := New(Options{CheckpointInterval: 10 * time.Second, Now: func() time.Time { return now }})
	check := func(want bool, reason string) {
		t.Helper()
		got, why := m.Ready()
		if got != want || !strings.Contains(why, reason) {
			t.Errorf("Ready() = %v %q, want %v and %q", got, why, want, reason)
		}
	}
	ev := m.Events()
	check(false, "recovering")
	ev.Swept(committer.SweptInfo{Participant: "filesink/0", Recovery: true})
	check(false, "recovering")
	ev.Recovered(committer.RecoveredInfo{})
	check(false, "no checkpoint completed yet")
	m.Progress(pipeline.Progress{Records: 5, Checkpoints: 1, Checkpoint: 8})
	check(true, "checkpoint 8 completed")
	now = now.Add(30 * time.Second)
	check(true, "checkpoint 8")
	now = now.Add(time.Second)
	check(false, "stale: the last checkpoint (8) completed 31s ago, more than 3 x the 10s checkpoint interval")
	m.Progress(pipeline.Progress{Records: 5, Checkpoints: 2, Checkpoint: 9})
	check(true, "checkpoint 9")
	if v := values(t, m); v["filesink_last_checkpoint_id"] != 9 || v["filesink_last_checkpoint_age_seconds"] != 0 {
		t.Errorf("last checkpoint id %v, age %v", v["filesink_last_checkpoint_id"], v["filesink_last_checkpoint_age_seconds"])
	}
	now = now.Add(2 * time.Second)
	if v := values(t, m); v["filesink_last_checkpoint_age_seconds"] != 2 {
		t.Errorf("age %v, want 2", v["filesink_last_checkpoint_age_seconds"])
	}
}

func TestHandler(t *testing.T) {
	m := New(Options{CheckpointInterval: time.Hour})
	var logs bytes.Buffer
	s, err := m.Serve("127.0.0.1:0", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + s.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "recovering") {
		t.Errorf("/readyz before recovery: %d %q", code, body)
	}
	m.Events().Recovered(committer.RecoveredInfo{})
	m.Progress(pipeline.Progress{Checkpoints: 1, Checkpoint: 1})
	if code, body := get("/readyz"); code != 200 || !strings.HasPrefix(body, "ready: checkpoint 1 completed") {
		t.Errorf("/readyz after a checkpoint: %d %q", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "filesink_last_checkpoint_id 1\n") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	if code, _ := get("/nothing"); code != 404 {
		t.Errorf("/nothing: %d", code)
	}
}

// TestSweptCounts: the orphans of the sweep events are counted by kind;
// XA branches come from the MySQL sinks' statistics instead (Restore rolls
// back too), and unknown kinds are not exported.
func TestSweptCounts(t *testing.T) {
	m := New(Options{})
	ev := m.Events()
	ev.Swept(committer.SweptInfo{Participant: "filesink/0", Swept: committer.Swept{driver.SweptUpload: 2, driver.SweptStagingObject: 1}})
	ev.Swept(committer.SweptInfo{Participant: "filesink/1", Swept: committer.Swept{driver.SweptStagingObject: 2, "xa_branch": 7, "other": 100}})
	ev.Swept(committer.SweptInfo{Participant: "filesink/2"})
	v := values(t, m)
	if v[`filesink_orphans_swept_total{kind="upload"}`] != 2 || v[`filesink_orphans_swept_total{kind="staging_object"}`] != 3 ||
		v[`filesink_orphans_swept_total{kind="staging_file"}`] != 0 || v[`filesink_orphans_swept_total{kind="xa_branch"}`] != 0 {
		t.Errorf("orphans: %v", v)
	}
}

// TestCommitFailuresCount: every failed phase-2 attempt the protocol
// reports is counted, the last one too.
func TestCommitFailuresCount(t *testing.T) {
	m := New(Options{})
	ev := m.Events()
	ev.CommitFailed(committer.CommitFailedInfo{Checkpoint: 3, Participant: "filesink/0", Attempt: 1, Retry: true})
	ev.CommitFailed(committer.CommitFailedInfo{Checkpoint: 3, Participant: "filesink/0", Attempt: 2})
	if v := values(t, m); v["filesink_commit_retries_total"] != 2 {
		t.Errorf("commit retries %v, want 2", v["filesink_commit_retries_total"])
	}
}

// TestBadRecordsCount: every bad record a sink reports through the event
// stream (pipeline.BadRecordFunc, as the CLI wires the file sinks) counts.
func TestBadRecordsCount(t *testing.T) {
	m := New(Options{})
	ev := pipeline.TeeEventListener(pipeline.EventListener{}, m.Events())
	for i := range 3 {
		pipeline.BadRecordFunc(&ev, "filesink/0")(&source.BadRecordError{Origin: fmt.Sprintf("in:%d", i), Err: errors.New("not JSON")})
	}
	if v := values(t, m); v["filesink_bad_records_total"] != 3 {
		t.Errorf("bad records %v, want 3", v["filesink_bad_records_total"])
	}
}

func TestKafkaCollector(t *testing.T) {
	m := New(Options{})
	ks := &kafkaSource{}
	pos := json.RawMessage(`{"v":1,"start":"earliest","bounded":true,"partitions":[{"topic":"t","partition":0,"next":5,"end":9},{"topic":"t","partition":1,"next":7,"end":7}]}`)
	ks.pos.Store(&pos)
	m.kafka = append(m.kafka, ks)
	v := values(t, m)
	want := map[string]float64{
		`filesink_kafka_partition_offset{partition="0",topic="t"}`:      5,
		`filesink_kafka_partition_end_offset{partition="0",topic="t"}`:  9,
		`filesink_kafka_partition_lag_records{partition="0",topic="t"}`: 4,
		`filesink_kafka_partition_lag_records{partition="1",topic="t"}`: 0,
		`filesink_kafka_partition_offset{partition="1",topic="t"}`:      7,
	}
	for name, w := range want {
		if got, ok := v[name]; !ok || got != w {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, w)
		}
	}
}

// TestKafkaCollectorUnbounded: without an end offset the lag comes from
// the source's last stable offsets.
func TestKafkaCollectorUnbounded(t *testing.T) {
	m := New(Options{})
	ks := &kafkaSource{}
	pos := json.RawMessage(`{"v":1,"start":"earliest","bounded":false,"partitions":[{"topic":"t","partition":0,"next":5},{"topic":"t","partition":1,"next":3}]}`)
	lag := map[string]int64{"t/0": 12} // partition 1 not fetched yet
	ks.pos.Store(&pos)
	ks.lag.Store(&lag)
	m.kafka = append(m.kafka, ks)
	v := values(t, m)
	if got, ok := v[`filesink_kafka_partition_lag_records{partition="0",topic="t"}`]; !ok || got != 12 {
		t.Errorf("lag of partition 0 = %v (present %v), want 12", got, ok)
	}
	if _, ok := v[`filesink_kafka_partition_lag_records{partition="1",topic="t"}`]; ok {
		t.Errorf("a lag for a partition not fetched yet")
	}
	if _, ok := v[`filesink_kafka_partition_end_offset{partition="0",topic="t"}`]; ok {
		t.Errorf("an end offset for an unbounded source")
	}
}

// countingSink is a sink of no known type with every count of
// committer.Counters; only Counters and Tick are called.
type countingSink struct {
	pipeline.Sink
	n int64
}

func (s *countingSink) Counters() committer.Counters {
	f := func(k int64) func() int64 { return func() int64 { return k * s.n } }
	return committer.Counters{FilesCommitted: f(1), BranchesRolledBack: f(2), RecordsAcked: f(3), RecordsDropped: f(4), OpenParts: f(5)}
}

func (s *countingSink) Tick(context.Context, time.Time) error { return nil }

// noCounts counts nothing (committer.Counters{}).
type noCounts struct{ pipeline.Sink }

func (noCounts) Counters() committer.Counters { return committer.Counters{} }

// TestSinkCounters: the sink totals come from Sink.Counters, whatever the
// sink's type; nil counts are zero; open parts are sampled on the
// writing goroutine (here at Tick).
func TestSinkCounters(t *testing.T) {
	m := New(Options{})
	a, b := &countingSink{n: 1}, &countingSink{n: 10}
	wa, wb := m.WrapSink(a), m.WrapSink(b)
	m.WrapSink(noCounts{})
	for _, w := range []pipeline.Sink{wa, wb} {
		if err := w.Tick(context.Background(), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]float64{
		"filesink_files_committed_total":                 11,
		`filesink_orphans_swept_total{kind="xa_branch"}`: 22,
		"filesink_async_records_acked_total":             33,
		"filesink_async_records_dropped_total":           44,
		"filesink_open_part_files":                       55,
	}
	v := values(t, m)
	for name, n := range want {
		if v[name] != n {
			t.Errorf("%s = %v, want %v", name, v[name], n)
		}
	}
	if c := wa.Counters(); c.FilesCommitted() != 1 || c.OpenParts() != 5 {
		t.Errorf("the wrapper's Counters are not the sink's")
	}
}
