package main

// What `filesink run --group` reports of its lanes, summed over them: the
// `done` line, the progress line and the metrics.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filesink/filesink/internal/testutil/faultproxy"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/internal/testutil/miniotest"
)

// groupJob is a topic on kfake and an output on MinIO for group-mode runs
// in this process.
type groupJob struct {
	srv    *miniotest.Server
	kc     *kafkatest.Cluster
	bucket string
	src    string
	sink   string
	total  int      // records produced
	want   []string // the records newGroupJob produced
}

// newGroupJob makes a topic "orders" of parts partitions holding perPart
// JSON records each, and a bucket for the output.
func newGroupJob(t *testing.T, parts, perPart int) *groupJob {
	t.Helper()
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	j := &groupJob{srv: srv, bucket: srv.NewBucket(t), kc: kafkatest.Start(t, kafkatest.Topic{Name: "orders", Partitions: int32(parts)})}
	for p := range int32(parts) {
		vals := make([]string, perPart)
		for i := range vals {
			vals[i] = fmt.Sprintf(`{"id":"%d-%d"}`, p, i)
		}
		j.want = append(j.want, vals...)
		j.kc.MustProduce(t, "orders", p, vals...)
	}
	j.total = parts * perPart
	j.src = "kafka://" + j.kc.Bootstrap() + "/orders"
	j.sink = "s3://" + j.bucket + "/out"
	return j
}

// args are the arguments of a member of the job's group g, with endpoint
// as the S3 endpoint (MinIO, or a proxy in front of it).
func (j *groupJob) args(endpoint string, extra ...string) []string {
	args := []string{"run", "--source", j.src, "--group", "g", "--sink", j.sink, "--session-timeout", "6s",
		"--s3-endpoint", endpoint, "--s3-path-style"}
	return append(args, extra...)
}

// outputRecords counts the records in the job's visible output.
func (j *groupJob) outputRecords(t *testing.T) int {
	t.Helper()
	return len(s3OutputLines(t, j.srv.Client(t), j.bucket, "out"))
}

// member is a `filesink run` running in this process.
type member struct {
	sig            chan os.Signal
	stdout, stderr syncBuffer
	done           chan int
	code           int
	exited         bool
}

// startMember runs filesink with args in this process.
func startMember(args ...string) *member {
	m := &member{sig: make(chan os.Signal, 2), done: make(chan int, 1)}
	go func() {
		m.done <- runMain(context.Background(), args, strings.NewReader(""), &m.stdout, &m.stderr, m.sig)
	}()
	return m
}

// wait waits for the member to exit and returns its exit code.
func (m *member) wait(t *testing.T) int {
	t.Helper()
	if m.exited {
		return m.code
	}
	select {
	case m.code = <-m.done:
		m.exited = true
	case <-time.After(2 * time.Minute):
		t.Fatalf("the member did not exit; its log:\n%s", lastLines(m.stderr.String(), 40))
	}
	return m.code
}

// waitFor waits until the member's log matches re and returns the match,
// failing the test if the member exits first.
func (m *member) waitFor(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s := re.FindStringSubmatch(m.stderr.String()); s != nil {
			return s
		}
		select {
		case m.code = <-m.done:
			m.exited = true
			t.Fatalf("the member exited %d before its log showed %s:\n%s", m.code, re, lastLines(m.stderr.String(), 40))
		default:
		}
	}
	t.Fatalf("the member's log did not show %s within a minute:\n%s", re, lastLines(m.stderr.String(), 40))
	return nil
}

var doneLineRE = regexp.MustCompile(`(?m)^.* msg=done .*$`)

// doneField returns the integer field name of the member's `done` line.
func (m *member) doneField(t *testing.T, name string) int {
	t.Helper()
	line := doneLineRE.FindString(m.stderr.String())
	f := regexp.MustCompile(`\b` + name + `=(\d+)`).FindStringSubmatch(line)
	if f == nil {
		t.Fatalf("no %s= in the done line %q; log:\n%s", name, line, lastLines(m.stderr.String(), 20))
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// holdLaneWrites makes p hold, until the test ends, every write of a lane
// state object after the first n of that lane: the lane's checkpoints
// after its first n-1 are never decided.
func holdLaneWrites(t *testing.T, p *faultproxy.Proxy, n int) faultproxy.RuleID {
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	var mu sync.Mutex
	seen := map[string]int{}
	return p.Add(faultproxy.Rule{
		Kinds: []faultproxy.Kind{faultproxy.PutObject}, Action: faultproxy.Forward, Gate: gate,
		Match: func(r *http.Request) bool {
			if !strings.Contains(r.URL.Path, "/_filesink/lanes/") {
				return false
			}
			mu.Lock()
			defer mu.Unlock()
			seen[r.URL.Path]++
			return seen[r.URL.Path] > n
		},
	})
}

// TestGroupDoneCountsCommitted: the `done` line of a group member says how
// many records it committed, summed over its lanes, also for lanes that
// stopped without a final checkpoint. Two lanes decide two checkpoints
// each; the proxy holds their third decide, and a SIGTERM hands them off:
// the handoff outlasts the rebalance timeout, the lanes stop where they
// are, and the records of the two decided checkpoints per lane, which are
// the whole visible output, are what the process committed.
func TestGroupDoneCountsCommitted(t *testing.T) {
	j := newGroupJob(t, 2, 5000)
	p := faultproxy.New(t, j.srv.Endpoint())
	// Per lane: the takeover, checkpoints 1 and 2; checkpoint 3 is held.
	held := holdLaneWrites(t, p, 3)
	// --roll-on-checkpoint: a decided checkpoint's records are visible.
	m := startMember(j.args(p.URL(), "--bounded", "--checkpoint-records", "100", "--checkpoint-interval", "-1s",
		"--rebalance-timeout", "2s", "--progress", "off", "--roll-on-checkpoint")...)
	for deadline := time.Now().Add(time.Minute); p.Fired(held) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the lanes did not reach their third checkpoint; log:\n%s", lastLines(m.stderr.String(), 40))
		}
	}
	m.sig <- os.Interrupt
	if code := m.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, lastLines(m.stderr.String(), 40))
	}
	if !strings.Contains(m.stderr.String(), "stopping the lane without a final checkpoint") {
		t.Fatalf("the handoff was not cut: the test does not test what it means to:\n%s", lastLines(m.stderr.String(), 40))
	}
	committed := j.outputRecords(t)
	if committed == 0 || committed >= j.total {
		t.Fatalf("%d of %d records in the output; want some, not all", committed, j.total)
	}
	if got := m.doneField(t, "records"); got != committed {
		t.Errorf("done: records=%d, want %d (the records of the checkpoints the process decided: its output)", got, committed)
	}
	if got := m.doneField(t, "records_read"); got < committed {
		t.Errorf("done: records_read=%d < the %d records committed", got, committed)
	}
}

// TestGroupDoneBounded: a bounded job in group mode run by one process:
// its `done` line counts every record of every lane, committed and read.
func TestGroupDoneBounded(t *testing.T) {
	j := newGroupJob(t, 3, 400)
	m := startMember(j.args(j.srv.Endpoint(), "--bounded", "--checkpoint-interval", "100ms", "--progress", "off")...)
	if code := m.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, lastLines(m.stderr.String(), 40))
	}
	if n := j.outputRecords(t); n != j.total {
		t.Fatalf("%d records in the output, want %d", n, j.total)
	}
	for _, f := range []string{"records", "records_read"} {
		if got := m.doneField(t, f); got != j.total {
			t.Errorf("done: %s=%d, want %d", f, got, j.total)
		}
	}
}

var groupProgressRE = regexp.MustCompile(`\r(\d+) records \([0-9]+/s\), [0-9.]+ MiB \([0-9.]+ MiB/s\), (\d+) committed, (\d+) lane\(s\), (\d+) lane checkpoint\(s\)`)

// TestGroupProgress: with --progress on, a group member draws the progress
// line of its lanes together: the records they read and committed, the
// lanes it runs and their checkpoints. The totals never go back, and the
// last line, drawn at the end, counts every record of every lane.
func TestGroupProgress(t *testing.T) {
	j := newGroupJob(t, 3, 2000)
	m := startMember(j.args(j.srv.Endpoint(), "--bounded", "--checkpoint-records", "500", "--checkpoint-interval", "100ms", "--progress", "on")...)
	if code := m.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, lastLines(m.stderr.String(), 40))
	}
	lines := groupProgressRE.FindAllStringSubmatch(m.stderr.String(), -1)
	if len(lines) == 0 {
		t.Fatalf("no progress line in group mode; stderr:\n%q", lastLines(m.stderr.String(), 20))
	}
	num := func(s string) int { n, _ := strconv.Atoi(s); return n }
	for i := 1; i < len(lines); i++ {
		for _, k := range []int{1, 2, 4} { // records, committed, lane checkpoints
			if num(lines[i][k]) < num(lines[i-1][k]) {
				t.Errorf("progress went back: %q after %q", lines[i][0], lines[i-1][0])
			}
		}
	}
	t.Logf("%d progress lines, the last: %q", len(lines), lines[len(lines)-1][0])
	last := lines[len(lines)-1]
	if num(last[1]) != j.total || num(last[2]) != j.total || num(last[3]) != 0 || num(last[4]) < 3 {
		t.Errorf("the last progress line %q: want %d records read and committed, no lane running, at least a checkpoint per lane", last[0], j.total)
	}
}

// groupCounters are the counters of a group member that must never go
// back between two scrapes.
var groupCounters = []string{
	"filesink_source_records_total", "filesink_source_bytes_total", "filesink_sink_records_total", "filesink_sink_bytes_total",
	"filesink_bad_records_total", "filesink_files_committed_total", "filesink_checkpoints_total", "filesink_commit_retries_total",
	"filesink_checkpoint_duration_seconds_count", "filesink_lane_takeovers_total",
}

// TestGroupMetrics: the metrics of a group member running three lanes are
// the process's, summed over the lanes: the records read equal every
// record of every partition, the bad record of one lane is counted, every
// lane's checkpoints count, and no counter ever goes back between scrapes,
// through the handoff of every lane at SIGTERM too.
func TestGroupMetrics(t *testing.T) {
	j := newGroupJob(t, 3, 2000)
	j.kc.MustProduce(t, "orders", 1, "not JSON")
	j.total++
	// --roll-on-checkpoint: every lane commits files while it runs.
	m := startMember(j.args(j.srv.Endpoint(), "--checkpoint-interval", "100ms", "--on-bad-record", "skip",
		"--metrics-addr", "127.0.0.1:0", "--progress", "off", "--roll-on-checkpoint")...)
	addr := m.waitFor(t, metricsAddrRE)[1]

	var last map[string]float64
	check := func(v map[string]float64) {
		t.Helper()
		for _, name := range groupCounters {
			if _, ok := v[name]; !ok {
				t.Fatalf("%s is not exported", name)
			}
			if last != nil && v[name] < last[name] {
				t.Errorf("%s went back from %v to %v", name, last[name], v[name])
			}
		}
		last = v
	}
	// Until every lane committed every record of its partition (and the
	// lanes' pipelines counted the checkpoints that did it).
	ends := map[string]float64{"0": 2000, "1": 2001, "2": 2000}
	var settled map[string]float64
	for deadline := time.Now().Add(time.Minute); settled == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the lanes did not commit every record within a minute; last scrape: %v\nlog:\n%s", last, lastLines(m.stderr.String(), 30))
		}
		v := scrape(t, addr)
		check(v)
		all := v["filesink_checkpoints_total"] >= 3
		for p, end := range ends {
			all = all && v[`filesink_lane_committed_offset{partition="`+p+`",topic="orders"}`] == end
		}
		if all {
			settled = v
		}
	}
	for name, want := range map[string]float64{
		"filesink_source_records_total": float64(j.total),
		"filesink_sink_records_total":   float64(j.total),
		"filesink_bad_records_total":    1,
		"filesink_lanes_owned":          3,
		"filesink_lane_takeovers_total": 3,
	} {
		if settled[name] != want {
			t.Errorf("%s = %v, want %v (summed over the 3 lanes)", name, settled[name], want)
		}
	}
	if settled["filesink_checkpoints_total"] < 3 || settled["filesink_files_committed_total"] < 3 {
		t.Errorf("checkpoints %v, files committed %v: want at least one per lane", settled["filesink_checkpoints_total"], settled["filesink_files_committed_total"])
	}

	// SIGTERM: every lane hands off; scrape until the server goes away.
	m.sig <- os.Interrupt
	for {
		v, err := scrapeErr(addr)
		if err != nil {
			break
		}
		check(v)
	}
	if code := m.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, lastLines(m.stderr.String(), 40))
	}
	if n := j.outputRecords(t); n != j.total-1 {
		t.Errorf("%d records in the output, want %d", n, j.total-1)
	}
}
