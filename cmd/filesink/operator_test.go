package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/twmb/franz-go/pkg/kadm"

	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
	"github.com/filesink/filesink/internal/testutil/miniotest"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/vfs"
)

// TestRefusesStateInSink: a --state that is the sink, or inside it in a
// visible directory, is refused before anything is written (exit 2, one
// line naming both), where it used to write its lock and job record into
// the output and fail on a misleading lost-state message. A state in a
// hidden directory of the output (the default OUT/_filesink, or
// OUT/_mystate) is fine.
func TestRefusesStateInSink(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	for _, st := range []string{out, filepath.Join(out, "state"), filepath.Join(out, "2026", "state")} {
		r := cli(t, "run", "--source", "gen://?count=10", "--sink", out, "--state", st, "--progress", "off")
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		want := "--state " + st + " is inside --sink " + out
		if st == out {
			want = "--state " + st + " is the --sink itself"
		}
		if r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], want) {
			t.Errorf("--state %s with --sink %s: want exit 2 and one line %q, got %v", st, out, want, r)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the refused runs wrote into the output: %v", err)
	}
	hidden := filepath.Join(dir, "out2")
	mustRun(t, "run", "--source", "gen://?count=10", "--sink", hidden, "--state", filepath.Join(hidden, "_mystate"), "--progress", "off")
	mustRun(t, "verify", "--sink", hidden, "--state", filepath.Join(hidden, "_mystate"))

	r := cli(t, "run", "--source", "gen://?count=10", "--sink", "s3://bucket/out", "--state", "s3://bucket/out/state", "--progress", "off")
	if r.code != 2 || !strings.Contains(r.stderr, "--state s3://bucket/out/state is inside --sink s3://bucket/out") {
		t.Errorf("S3 state inside the S3 sink: want exit 2 naming both, got %v", r)
	}
}

// TestUploadsAbortLiveJob: `uploads abort --all` (and --upload-id) against
// a running S3 job, at random instants, with the job's state on S3 (its
// lease) and in a local directory (its lock): every time it is refused
// (exit 1, one line saying the job is running and naming its pid) and
// aborts nothing; the job never fails, and after its SIGTERM every record
// it read is in the output exactly once. It used to abort the uploads the
// job had opened since its last checkpoint, killing the job or losing
// part files.
func TestUploadsAbortLiveJob(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGTERM")
	}
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bin := buildCLI(t)
	client := srv.Client(t)
	seed := chaosSeed(t)
	rng := rand.New(rand.NewPCG(seed, 27))
	for _, tc := range []struct {
		name   string
		local  bool
		aborts int
	}{{"s3-state", false, 3}, {"local-state", true, 6}} {
		t.Run(tc.name, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			sink := "s3://" + bucket + "/out"
			flags := []string{"--s3-endpoint", srv.Endpoint(), "--s3-path-style"}
			state := sink + "/_filesink"
			if tc.local {
				state = filepath.Join(t.TempDir(), "state")
			}
			run := startStdinRun(t, bin, append([]string{"run", "--source", "-", "--sink", sink, "--state", state,
				"--checkpoint-interval", "300ms", "--part-size", "256KiB", "--progress", "off"}, flags...)...)
			stdin, stderr, exited := run.stdin, run.stderr, run.exited
			stopFeed := make(chan struct{})
			fed := make(chan []string, 1)
			go func() { // about 1 MB/s: a part file rolls every quarter second
				var want []string
				defer func() { fed <- want }()
				for i := 0; ; i++ {
					select {
					case <-stopFeed:
						return
					case <-time.After(20 * time.Millisecond):
					}
					var b strings.Builder
					for j := range 100 {
						l := fmt.Sprintf(`{"id":%d,"pad":"%s"}`, i*100+j, strings.Repeat("x", 160))
						want = append(want, l)
						b.WriteString(l + "\n")
					}
					if _, err := io.WriteString(stdin, b.String()); err != nil {
						return
					}
				}
			}()
			holder := fmt.Sprintf("pid %d", run.cmd.Process.Pid)
			for i := range tc.aborts {
				time.Sleep(time.Duration(300+rng.IntN(2000)) * time.Millisecond)
				select {
				case err := <-exited:
					t.Fatalf("the job exited (%v) during the aborts; stderr:\n%s", err, lastLines(stderr.String(), 20))
				default:
				}
				args := []string{"uploads", "abort", "--sink", sink, "--state", state, "--all"}
				if i%2 == 1 {
					ups, err := client.ListMultipartUploads(t.Context(), &s3api.ListMultipartUploadsInput{Bucket: &bucket})
					if err == nil && len(ups.Uploads) > 0 {
						args = []string{"uploads", "abort", "--sink", sink, "--state", state, "--upload-id", aws.ToString(ups.Uploads[0].UploadId)}
					}
				}
				r := cli(t, append(args, flags...)...)
				lines := errorLines(r.stderr) // the lease's wait may be logged too
				if r.code != 1 || r.stdout != "" || len(lines) != 1 || !strings.Contains(lines[0], "is running") || !strings.Contains(lines[0], holder) {
					t.Errorf("%s on a running job: want exit 1, nothing aborted, one line saying it is running (%s); got %v", strings.Join(args[:3], " "), holder, r)
				}
			}
			close(stopFeed)
			want := <-fed
			stdin.Close() // the end of the input: a final checkpoint, exit 0
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("the job: %v; stderr:\n%s", err, lastLines(stderr.String(), 20))
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("the job did not end after its input; stderr:\n%s", lastLines(stderr.String(), 20))
			}
			if r := cli(t, append([]string{"verify", "--deep", "--sink", sink, "--state", state}, flags...)...); r.code != 0 {
				t.Errorf("verify --deep: %v", r)
			}
			checkExactlyOnce(t, s3OutputLines(t, client, bucket, "out"), want)
			// Stopped, the job holds nothing: abort --all finds no upload
			// left (the final checkpoint completed them all).
			r := cli(t, append([]string{"uploads", "abort", "--sink", sink, "--state", state, "--all"}, flags...)...)
			if r.code != 0 || r.stdout != "" {
				t.Errorf("uploads abort --all after the job: want exit 0 and nothing aborted, got %v", r)
			}
		})
	}
}

// stdinRun is a filesink process started by startStdinRun.
type stdinRun struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncBuffer
	// exited receives the process's exit, then is closed.
	exited chan error
}

// startStdinRun starts the CLI binary with args, its stdin a pipe the
// test writes; the process is killed at the end of the test if it still
// runs.
func startStdinRun(t *testing.T, bin string, args ...string) *stdinRun {
	t.Helper()
	r := &stdinRun{cmd: exec.Command(bin, args...), stderr: &syncBuffer{}, exited: make(chan error, 1)}
	var err error
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	r.cmd.Stderr = r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.exited <- r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		r.cmd.Process.Kill() // also ends a stopped process; a no-op once it exited
		for range r.exited {
		}
	})
	return r
}

// TestXACommitNeedsDecision: `xa commit` without --state used to commit a
// branch that no checkpoint decided, with exit 0, so that the job applied
// its records again. It is refused (exit 2, one line asking for --state or
// --without-state) and commits nothing; --without-state commits. With
// --state held by a running job, commit and rollback are refused (exit 1,
// naming the holder's pid) unless --force.
func TestXACommitNeedsDecision(t *testing.T) {
	srv := mariadbtest.Shared(t)
	dbName := srv.NewDatabase(t)
	db := srv.Open(t, dbName)
	table := createWC(t, db.DB, "wc")
	job := fmt.Sprintf("xa-decide-%d", time.Now().UnixNano()%1e9)
	xids := leaveBranches(t, db.DB, table, job, 2)
	sink := "mysql://" + srv.DSN(dbName)

	r := cli(t, "xa", "commit", "--sink", sink, "--xid", xids[0])
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], "--state is required") || !strings.Contains(lines[0], "--without-state") {
		t.Errorf("xa commit without --state: want exit 2 and one line asking for --state, got %v", r)
	}
	if got := wcTotals(t, db.DB, table); len(got) != 0 {
		t.Errorf("xa commit without --state committed: %v", got)
	}

	// A state held by a running job (here this test holds its lock).
	state := t.TempDir()
	if err := writeJobFile(state, job); err != nil {
		t.Fatal(err)
	}
	held, err := recovery.OpenDir(t.Context(), vfs.OS{}, state)
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"commit", "rollback"} {
		r := cli(t, "xa", verb, "--sink", sink, "--state", state, "--xid", xids[1])
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code != 1 || len(lines) != 1 || !strings.Contains(lines[0], "is running") || !strings.Contains(lines[0], fmt.Sprintf("pid %d", os.Getpid())) {
			t.Errorf("xa %s with --state held by a running job: want exit 1 and one line naming the holder, got %v", verb, r)
		}
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}

	if r := resolveXA(t, "xa", "commit", "--sink", sink, "--without-state", "--xid", xids[0]); r.code != 0 || !strings.Contains(r.stdout, "committed") {
		t.Fatalf("xa commit --without-state: %v", r)
	}
	if r := resolveXA(t, "xa", "rollback", "--sink", sink, "--state", state, "--xid", xids[1]); r.code != 0 || !strings.Contains(r.stdout, "rolled back") {
		t.Fatalf("xa rollback of an undecided branch with --state: %v", r)
	}
	if got := wcTotals(t, db.DB, table); len(got) != 1 || got["w0"] != 1 {
		t.Errorf("table after commit of w0's branch and rollback of w1's: %v", got)
	}
}

// TestFailedFirstRunLeavesNoJob: a first run that cannot open its source
// (a topic name mistyped) fails without writing a job record or claiming
// the output, so the corrected command runs on the same state and sink;
// it used to be refused as another job.
func TestFailedFirstRunLeavesNoJob(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "orders", Partitions: 1})
	c.MustProduce(t, "orders", 0, `{"id":1}`, `{"id":2}`, `{"id":3}`)
	dir := t.TempDir()
	out, state := filepath.Join(dir, "out"), filepath.Join(dir, "state")
	args := func(topic string) []string {
		return []string{"run", "--source", "kafka://" + c.Bootstrap() + "/" + topic + "?connect_timeout=3s", "--bounded",
			"--sink", out, "--state", state, "--progress", "off"}
	}
	r := cli(t, args("odrers")...)
	if r.code == 0 || !strings.Contains(r.stderr, "odrers") {
		t.Fatalf("a run from a topic that does not exist: want a failure naming it, got %v", r)
	}
	for _, left := range []string{filepath.Join(state, recovery.JobRecordName(1)), filepath.Join(out, "_filesink", "claims")} {
		if _, err := os.Stat(left); !os.IsNotExist(err) {
			t.Errorf("the failed first run left %s (%v)", left, err)
		}
	}
	mustRun(t, args("orders")...)
	checkExactlyOnce(t, outputLines(t, out), []string{`{"id":1}`, `{"id":2}`, `{"id":3}`})
	if _, err := os.Stat(filepath.Join(state, recovery.JobRecordName(1))); err != nil {
		t.Errorf("the corrected run kept no job record: %v", err)
	}
}

// TestTwoJobsOneOutputAtOnce: two jobs with different states started at
// the same instant into one empty output, locally and on S3, again and
// again: exactly one of them runs; the other is refused before it
// publishes anything, naming the output's claim and the other job's
// state (or, had it started after the other published, as a run whose
// state holds no checkpoint); the output holds every record once. They used to both publish,
// leaving duplicates in visible files.
func TestTwoJobsOneOutputAtOnce(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("starts processes at the same instant with a barrier file")
	}
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bin := buildCLI(t)
	client := srv.Client(t)
	const count = 20000
	rounds := map[string]int{"local": 6, "s3": 3}
	for _, kind := range []string{"local", "s3"} {
		for round := range rounds[kind] {
			dir := t.TempDir()
			var sink, bucket string
			var flags []string
			if kind == "local" {
				sink = filepath.Join(dir, "out")
			} else {
				bucket = srv.NewBucket(t)
				sink = "s3://" + bucket + "/out"
				flags = []string{"--s3-endpoint", srv.Endpoint(), "--s3-path-style"}
			}
			type res struct {
				err    error
				stderr string
			}
			results := make(chan res, 2)
			start := make(chan struct{})
			for i := range 2 {
				cmd := exec.Command(bin, append([]string{"run", "--source", fmt.Sprintf("gen://?count=%d", count), "--sink", sink,
					"--state", filepath.Join(dir, fmt.Sprintf("state%d", i)), "--checkpoint-records", "2000", "--progress", "off"}, flags...)...)
				var stderr syncBuffer
				cmd.Stderr = &stderr
				go func() {
					<-start
					err := cmd.Run()
					results <- res{err, stderr.String()}
				}()
			}
			close(start)
			var ok, refused int
			for range 2 {
				r := <-results
				switch {
				case r.err == nil:
					ok++
				case strings.Contains(r.stderr, "belongs to another job") && strings.Contains(r.stderr, "state0") && strings.Contains(r.stderr, "state1"):
					refused++
				case strings.Contains(r.stderr, "holds no checkpoint, but"):
					refused++ // started after the other published: the lost-state check
				default:
					t.Errorf("%s round %d: a run failed without naming both states as another job's: %v\n%s", kind, round, r.err, lastLines(r.stderr, 10))
				}
			}
			if ok != 1 || refused != 1 {
				t.Fatalf("%s round %d: %d runs succeeded and %d were refused as another job's; want one each", kind, round, ok, refused)
			}
			if r := cli(t, append([]string{"verify", "--deep", "--sink", sink}, flags...)...); r.code != 0 {
				t.Errorf("%s round %d: verify --deep: %v", kind, round, r)
			}
			var lines []lineAt
			if kind == "local" {
				lines = outputLines(t, sink)
			} else {
				lines = s3OutputLines(t, client, bucket, "out")
			}
			if len(lines) != count {
				t.Errorf("%s round %d: the output holds %d records, want %d (each once)", kind, round, len(lines), count)
			}
			seen := map[string]bool{}
			for _, l := range lines {
				if seen[l.line] {
					t.Fatalf("%s round %d: %s is in the output twice", kind, round, l.line)
				}
				seen[l.line] = true
			}
		}
	}
}

// errorLines returns the lines of stderr that are errors or warnings of
// the CLI ("filesink: ..."), without log lines.
func errorLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "filesink: ") {
			out = append(out, l)
		}
	}
	return out
}

// waitFor polls ok for up to 2 minutes.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 2 minutes", what)
		}
	}
}

// checkpointCount is the number of checkpoint records of the state
// s3://bucket/out/_filesink.
func checkpointCount(t *testing.T, srv *miniotest.Server, bucket string) int {
	t.Helper()
	st, err := s3sink.NewStore(srv.Client(t), bucket, "out/_filesink")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := st.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

// leaseBody is the content of the lease of s3://bucket/out/_filesink.
func leaseBody(t *testing.T, srv *miniotest.Server, bucket string) string {
	t.Helper()
	out, err := srv.Client(t).GetObject(t.Context(), &s3api.GetObjectInput{Bucket: &bucket, Key: aws.String("out/_filesink/" + s3sink.LeaseFile)})
	if err != nil {
		return ""
	}
	defer out.Body.Close()
	b, _ := io.ReadAll(out.Body)
	return string(b)
}

// TestUploadsAbortGroupJob: while a group-mode job runs, uploads abort is
// refused naming a lane and its owner (the lanes' owners hold the job);
// once the job stopped and handed its lanes off, it goes ahead.
func TestUploadsAbortGroupJob(t *testing.T) {
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bucket := srv.NewBucket(t)
	kc := kafkatest.Start(t, kafkatest.Topic{Name: "orders", Partitions: 2})
	for p := range int32(2) {
		kc.MustProduce(t, "orders", p, `{"id":1}`, `{"id":2}`)
	}
	flags := []string{"--s3-endpoint", srv.Endpoint(), "--s3-path-style"}
	sink := "s3://" + bucket + "/out"
	sig := make(chan os.Signal, 1)
	done := make(chan cliResult, 1)
	go func() {
		done <- cliWith(t, strings.NewReader(""), sig, append([]string{"run", "--source", "kafka://" + kc.Bootstrap() + "/orders", "--group", "g",
			"--sink", sink, "--checkpoint-interval", "200ms", "--session-timeout", "6s", "--progress", "off"}, flags...)...)
	}()
	stopped := false
	defer func() {
		if !stopped {
			sig <- syscall.SIGTERM
			<-done
		}
	}()
	waitFor(t, "the lanes", func() bool {
		r := cli(t, append([]string{"state", "--state", sink + "/_filesink"}, flags...)...)
		return strings.Contains(r.stdout, "2 lane(s)")
	})
	r := cli(t, append([]string{"uploads", "abort", "--sink", sink, "--all"}, flags...)...)
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if r.code != 1 || r.stdout != "" || len(lines) != 1 || !strings.Contains(lines[0], "is running") || !strings.Contains(lines[0], "lane orders/") ||
		!strings.Contains(lines[0], fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("uploads abort on a running group job: want exit 1 and one line naming a lane and its owner, got %v", r)
	}
	sig <- syscall.SIGTERM
	stopped = true
	if r := <-done; r.code != 0 {
		t.Fatalf("the group job after SIGTERM: %v", r)
	}
	if r := cli(t, append([]string{"uploads", "abort", "--sink", sink, "--all"}, flags...)...); r.code != 0 {
		t.Errorf("uploads abort after the group job stopped: %v", r)
	}
}

// TestDataLossMessageAndWayOn: the in-progress file of a decided
// checkpoint removed behind the job's back, and the Kafka records it held
// deleted since (retention): the next run cannot rebuild the part, and
// stops with one line that names the part, the partition's offsets that
// are gone and why, that a plain rerun stops again, and the way on;
// following it (a new, empty state with --resume-from-output) writes every
// record the topic still holds exactly once. The same for the whole
// _filesink directory removed: the refusal says the commit manifests are
// gone.
func TestDataLossMessageAndWayOn(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("kills a process")
	}
	bin := buildCLI(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	kc := kafkatest.Start(t, kafkatest.Topic{Name: kafkaChaosTopic, Partitions: kafkaChaosPartitions})
	const perPartition = 50000
	for p := range int32(kafkaChaosPartitions) {
		var vals []string
		for i := range perPartition {
			vals = append(vals, fmt.Sprintf(`{"p":%d,"i":%d,"pad":"%s"}`, p, i, strings.Repeat("x", 100)))
		}
		kc.MustProduce(t, kafkaChaosTopic, p, vals...)
	}
	src := "kafka://" + kc.Bootstrap() + "/" + kafkaChaosTopic
	cmd := exec.Command(bin, "run", "--source", src, "--bounded", "--sink", out, "--checkpoint-records", "5000", "--checkpoint-interval", "1h", "--progress", "off")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(out, "_filesink")
	waitFor(t, "a checkpoint", func() bool { newest, _ := kafkaDecided(t, state); return newest != nil })
	cmd.Process.Kill()
	cmd.Wait()
	staged, err := filepath.Glob(filepath.Join(out, ".part-*inprogress"))
	if err != nil || len(staged) == 0 {
		t.Fatalf("no in-progress file after the kill (%v)", err)
	}
	for _, f := range staged {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	// Retention passes the newest checkpoint's offsets.
	newest, _ := kafkaDecided(t, state)
	cl, err := kc.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var upTo kadm.Offsets
	for p, next := range newest.next {
		upTo.AddOffset(kafkaChaosTopic, p, next, -1)
	}
	if _, err := kadm.NewClient(cl).DeleteRecords(t.Context(), upTo); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a plain rerun stops the same way, every time
		r := cli(t, "run", "--source", src, "--bounded", "--sink", out, "--progress", "off")
		oneLineErr(t, "a run after its in-progress file and its records were removed", r, "data loss", "cannot be rebuilt from the source",
			kafkaChaosTopic+"/", "retention", "a plain rerun stops here again", "--resume-from-output")
	}
	mustRun(t, "run", "--source", src, "--bounded", "--sink", out, "--state", filepath.Join(out, "_state2"), "--resume-from-output", "--progress", "off")
	mustRun(t, "verify", "--deep", "--sink", out, "--state", filepath.Join(out, "_state2"))
	seen := map[string]bool{}
	for _, l := range outputLines(t, out) {
		if seen[l.line] {
			t.Fatalf("record %.40s is in the output twice", l.line)
		}
		seen[l.line] = true
	}
	for p := range int32(kafkaChaosPartitions) {
		for i := newest.next[p]; i < perPartition; i++ {
			if l := fmt.Sprintf(`{"p":%d,"i":%d,"pad":"%s"}`, p, i, strings.Repeat("x", 100)); !seen[l] {
				t.Fatalf("record %d of partition %d, which the topic still holds, is not in the output", i, p)
			}
		}
	}

	// rm -rf OUT/_filesink: the refusal says the manifests are gone.
	out2 := filepath.Join(dir, "out2")
	mustRun(t, "run", "--source", "gen://?count=10", "--sink", out2, "--progress", "off")
	if err := os.RemoveAll(filepath.Join(out2, "_filesink")); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "run", "--source", "gen://?count=10", "--sink", out2, "--progress", "off")
	oneLineErr(t, "rm -rf OUT/_filesink", r, "commit manifests are gone", "_filesink directory removed")
}
