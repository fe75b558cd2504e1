//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPausedRunReportsLeaseLost: a run paused (SIGSTOP) until another run
// took its S3 state's lease over fails, once it goes on, with one line
// saying the lease was lost and naming the new holder, whatever request
// failed first (it used to print an opaque "StatusCode: 499"); the new
// holder runs on undisturbed.
func TestPausedRunReportsLeaseLost(t *testing.T) {
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bin := buildCLI(t)
	bucket := srv.NewBucket(t)
	sink := "s3://" + bucket + "/out"
	flags := []string{"--s3-endpoint", srv.Endpoint(), "--s3-path-style"}
	start := func(name string) (*exec.Cmd, *syncBuffer, chan error) {
		r := startStdinRun(t, bin, append([]string{"run", "--source", "-", "--sink", sink, "--checkpoint-interval", "100ms", "--progress", "off"}, flags...)...)
		go func() { // records until the process ends
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(r.stdin, `{"id":"%s-%d"}`+"\n", name, i); err != nil {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		return r.cmd, r.stderr, r.exited
	}
	a, aErr, aExited := start("a")
	waitFor(t, "run a's first checkpoint", func() bool {
		return strings.Contains(aErr.String(), "checkpoint committed") || checkpointCount(t, srv, bucket) > 0
	})
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b, bErr, bExited := start("b") // waits for a's lease to go stale (its TTL), then takes it
	host, _ := os.Hostname()
	holder := fmt.Sprintf("host %s, pid %d", host, b.Process.Pid)
	waitFor(t, "run b to take the lease", func() bool {
		select {
		case err := <-bExited:
			t.Fatalf("run b exited: %v\n%s", err, lastLines(bErr.String(), 10))
		default:
		}
		return checkpointCount(t, srv, bucket) > 0 && strings.Contains(leaseBody(t, srv, bucket), fmt.Sprintf(`"pid":%d`, b.Process.Pid))
	})
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-aExited:
		lines := errorLines(aErr.String())
		if err == nil || len(lines) != 1 || !strings.Contains(lines[0], "was taken over by another run") || !strings.Contains(lines[0], "lease lost") || !strings.Contains(lines[0], holder) {
			t.Errorf("the paused run after the takeover: want a failure with one line saying the lease was lost to %s; got %v:\n%s", holder, err, lastLines(aErr.String(), 10))
		} else {
			t.Logf("the paused run: %s", lines[0])
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the paused run went on for 2 minutes after the takeover:\n%s", lastLines(aErr.String(), 10))
	}
	if err := b.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-bExited; err != nil {
		t.Errorf("run b after SIGTERM: %v\n%s", err, lastLines(bErr.String(), 10))
	}
}
