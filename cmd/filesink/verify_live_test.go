package main

// filesink verify against a job that is running: the output moves while it
// is audited (parts open, roll, get published, manifests and checkpoint
// records are written and pruned), and none of that may be reported as a
// violation; a real one still is.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
)

// liveVerifies is how many times the tests run verify against a live job.
const liveVerifies = 30

// liveJob is a `filesink run` process reading JSON lines that the test
// writes to its stdin at a steady pace, so that the job keeps opening,
// rolling and publishing parts for as long as the test needs, with an
// output that grows slowly.
type liveJob struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr syncBuffer
	exited chan struct{} // closed when the process has exited
	err    error         // its exit status, after exited
	stop   chan struct{} // closed to stop feeding
	fed    sync.WaitGroup
}

// startLiveJob starts bin with args (a run with --source -) and feeds it
// until stopFeeding.
func startLiveJob(t *testing.T, bin string, args ...string) *liveJob {
	t.Helper()
	j := &liveJob{t: t, cmd: exec.Command(bin, args...), exited: make(chan struct{}), stop: make(chan struct{})}
	var err error
	if j.stdin, err = j.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	j.cmd.Stderr = &j.stderr
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		j.err = j.cmd.Wait()
		close(j.exited)
	}()
	t.Cleanup(func() {
		j.stopFeeding()
		if !j.done() {
			_ = j.cmd.Process.Kill()
			<-j.exited
		}
	})
	j.fed.Add(1)
	go j.feed()
	return j
}

// feed writes batches of numbered records, a few hundred kilobytes a
// second, until stop is closed or the job stops reading.
func (j *liveJob) feed() {
	defer j.fed.Done()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	payload := strings.Repeat("x", 60)
	for id := 0; ; {
		select {
		case <-j.stop:
			return
		case <-tick.C:
		}
		var b bytes.Buffer
		for range 50 {
			fmt.Fprintf(&b, `{"id":%d,"key":"k-%d","v":"%s"}`+"\n", id, id%5, payload)
			id++
		}
		if _, err := j.stdin.Write(b.Bytes()); err != nil {
			return
		}
	}
}

// stopFeeding stops the feeder; the job then waits for more input.
func (j *liveJob) stopFeeding() {
	select {
	case <-j.stop:
	default:
		close(j.stop)
	}
	j.fed.Wait()
}

// done reports whether the process has exited.
func (j *liveJob) done() bool {
	select {
	case <-j.exited:
		return true
	default:
		return false
	}
}

// finish ends the input and waits for the job to exit 0 after its final
// checkpoint.
func (j *liveJob) finish() {
	j.t.Helper()
	j.stopFeeding()
	j.stdin.Close()
	select {
	case <-j.exited:
	case <-time.After(2 * time.Minute):
		j.t.Fatalf("the job did not end within 2 minutes of the end of its input; stderr:\n%s", lastLines(j.stderr.String(), 20))
	}
	if j.err != nil {
		j.t.Fatalf("the job: %v; stderr:\n%s", j.err, lastLines(j.stderr.String(), 20))
	}
}

// waitFor polls ok until it holds, failing the test if the job exits or
// nothing happens within 2 minutes.
func (j *liveJob) waitFor(what string, ok func() bool) {
	j.t.Helper()
	limit := time.Now().Add(2 * time.Minute)
	for !ok() {
		if j.done() {
			j.t.Fatalf("the job exited (%v) while waiting for %s; stderr:\n%s", j.err, what, lastLines(j.stderr.String(), 20))
		}
		if time.Now().After(limit) {
			j.t.Fatalf("no %s within 2 minutes; stderr of the job:\n%s", what, lastLines(j.stderr.String(), 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// verifyRun is one run of the verify command as a process.
type verifyRun struct {
	code         int
	stdout       string
	stderr       string
	liveThrough  bool // the job was running when verify started and after it ended
	exitedBefore bool // the job had exited before verify started
}

func (r verifyRun) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// verify runs `bin verify args...` while j runs.
func (j *liveJob) verify(bin string, args ...string) verifyRun {
	j.t.Helper()
	before := !j.done()
	cmd := exec.Command(bin, append([]string{"verify"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := verifyRun{stdout: stdout.String(), stderr: stderr.String(), liveThrough: before && !j.done(), exitedBefore: !before}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		j.t.Fatalf("verify: %v", err)
	}
	return r
}

// liveRunNote is the start of the line verify prints when a live run
// holds the state.
const liveRunNote = "NOTE live run: "

// verifyWhileRunning runs verify liveVerifies times, at most pause apart
// (random), while j runs, and fails the test for every run that does not
// exit 0 or (when the job ran throughout) does not report the live run.
// With untilExit, a job that ends stops the loop; else it fails the test.
func verifyWhileRunning(t *testing.T, j *liveJob, pause time.Duration, untilExit bool, bin string, args ...string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	var ran, failed, live int
	for i := range liveVerifies {
		time.Sleep(time.Duration(rng.Int64N(int64(pause))))
		r := j.verify(bin, args...)
		if r.exitedBefore && untilExit {
			break
		}
		if r.exitedBefore {
			t.Fatalf("the job exited (%v) before verify %d; stderr:\n%s", j.err, i, lastLines(j.stderr.String(), 20))
		}
		ran++
		if r.code != 0 {
			failed++
			t.Errorf("verify %d of %d while the job runs: %v", i+1, liveVerifies, r)
			continue
		}
		if r.liveThrough {
			live++
			if !strings.Contains(r.stdout, liveRunNote) {
				t.Errorf("verify %d of %d while the job runs: no %q line: %v", i+1, liveVerifies, liveRunNote, r)
			}
		}
	}
	t.Logf("%d of %d verify runs against the live job reported a violation; %d ran wholly while it ran", failed, ran, live)
	if live == 0 {
		t.Errorf("no verify ran wholly while the job ran")
	}
}

// liveRunFlags are the run flags of the live tests: small parts, two
// subtasks and buckets, frequent checkpoints, so that parts open, roll and
// are published all the time.
func liveRunFlags() []string {
	return []string{"--source", "-", "--checkpoint-interval", "100ms", "--part-size", "48KiB",
		"--parallelism", "2", "--bucket", "field:key", "--progress", "off"}
}

// TestVerifyLiveRun: verify against a running local job exits 0 every
// time and names the live run; a visible file no checkpoint published is
// still a violation while the job runs; after the job ends, verify passes
// and reports no live run.
func TestVerifyLiveRun(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the job is killed with SIGKILL at cleanup")
	}
	bin := buildCLI(t)
	out := filepath.Join(t.TempDir(), "out")
	j := startLiveJob(t, bin, append([]string{"run", "--sink", out}, liveRunFlags()...)...)
	j.waitFor("commit manifest", func() bool {
		ms, _ := filepath.Glob(filepath.Join(out, "_filesink", "manifests", "*.json"))
		return len(ms) >= 2
	})

	verifyWhileRunning(t, j, 150*time.Millisecond, false, bin, "--sink", out)

	// A real violation while the job runs.
	stray := filepath.Join(out, "stray.jsonl")
	if err := os.WriteFile(stray, []byte("{\"id\":-1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := j.verify(bin, "--sink", out)
	if want := "VIOLATION " + stray + ": not listed in any manifest"; r.code != 1 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, liveRunNote) {
		t.Errorf("verify with a stray file while the job runs: want exit 1, %q and %q; got %v", want, liveRunNote, r)
	}
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}

	j.finish()
	r = j.verify(bin, "--sink", out)
	if r.code != 0 || strings.Contains(r.stdout, liveRunNote) {
		t.Errorf("verify after the job ended: want exit 0 and no %q line; got %v", liveRunNote, r)
	}
}

// TestVerifyLiveRunGenerator: verify against a running job that reads
// the generator (an input numbered densely, so that a record in no
// manifest is reported as lost), with two subtasks writing parts of
// several buckets, exits 0 every time and names the live run.
func TestVerifyLiveRunGenerator(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the job is killed with SIGKILL at cleanup")
	}
	bin := buildCLI(t)
	out := filepath.Join(t.TempDir(), "out")
	count := 6_000_000
	if testing.Short() {
		count = 2_000_000
	}
	j := startLiveJob(t, bin, "run", "--source", fmt.Sprintf("gen://?count=%d&size=1", count), "--sink", out,
		"--checkpoint-interval", "100ms", "--part-size", "256KiB", "--parallelism", "2", "--bucket", "field:key", "--progress", "off")
	j.stopFeeding() // the generator needs no input
	j.waitFor("commit manifest", func() bool {
		ms, _ := filepath.Glob(filepath.Join(out, "_filesink", "manifests", "*.json"))
		return len(ms) >= 2
	})
	verifyWhileRunning(t, j, 50*time.Millisecond, true, bin, "--sink", out)
	j.finish()
	if r := j.verify(bin, "--sink", out); r.code != 0 || strings.Contains(r.stdout, liveRunNote) {
		t.Errorf("verify after the job ended: want exit 0 and no %q line; got %v", liveRunNote, r)
	}
}

// TestVerifyLiveRunS3 is TestVerifyLiveRun with sink and state on MinIO:
// the live run is found from the state's lease.
func TestVerifyLiveRunS3(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the job is killed with SIGKILL at cleanup")
	}
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bin := buildCLI(t)
	client := srv.Client(t)
	bucket := srv.NewBucket(t)
	sink := "s3://" + bucket + "/out"
	s3 := []string{"--s3-endpoint", srv.Endpoint(), "--s3-path-style"}
	j := startLiveJob(t, bin, append(append([]string{"run", "--sink", sink}, liveRunFlags()...), s3...)...)
	j.waitFor("commit manifest", func() bool {
		out, err := client.ListObjectsV2(t.Context(), &s3api.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("out/_filesink/manifests/")})
		return err == nil && len(out.Contents) >= 2
	})

	verifyArgs := append([]string{"--sink", sink}, s3...)
	verifyWhileRunning(t, j, 150*time.Millisecond, false, bin, verifyArgs...)

	// A real violation while the job runs.
	if _, err := client.PutObject(t.Context(), &s3api.PutObjectInput{Bucket: &bucket, Key: aws.String("out/stray.jsonl"),
		Body: strings.NewReader("{\"id\":-1}\n")}); err != nil {
		t.Fatal(err)
	}
	r := j.verify(bin, verifyArgs...)
	if want := "stray.jsonl: not listed in any manifest"; r.code != 1 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, liveRunNote) {
		t.Errorf("verify with a stray object while the job runs: want exit 1, %q and %q; got %v", want, liveRunNote, r)
	}
	if _, err := client.DeleteObject(t.Context(), &s3api.DeleteObjectInput{Bucket: &bucket, Key: aws.String("out/stray.jsonl")}); err != nil {
		t.Fatal(err)
	}

	j.finish()
	r = j.verify(bin, verifyArgs...)
	if r.code != 0 || strings.Contains(r.stdout, liveRunNote) {
		t.Errorf("verify after the job ended: want exit 0 and no %q line; got %v", liveRunNote, r)
	}
}
