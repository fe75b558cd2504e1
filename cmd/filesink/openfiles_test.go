package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filesink/filesink/source"
)

// TestManyBucketsUnderUlimit runs the built CLI with 5,000 distinct bucket
// values under `ulimit -n 256`, with the default --max-open-files (derived
// from that limit), kills it with SIGKILL after its first checkpoint and
// runs it again under the same limit (its recovery has 5,000 parts to
// resume): both runs reach the open-file limit, the second one finishes,
// verify --deep passes and every record is in the output exactly once.
func TestManyBucketsUnderUlimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs sh's ulimit -n and SIGKILL")
	}
	t.Parallel()
	bin := buildCLI(t)
	out := filepath.Join(t.TempDir(), "out")
	const count, keys = 60000, 5000
	src := fmt.Sprintf("gen://?count=%d&seed=5&keys=%d&size=40", count, keys)
	args := []string{"run", "--source", src, "--sink", out, "--bucket", "field:key",
		"--checkpoint-records", "15000", "--checkpoint-interval", "1h"}
	limited := func() *exec.Cmd {
		return exec.Command("sh", append([]string{"-c", `ulimit -n 256 && exec "$0" "$@"`, bin}, args...)...)
	}

	// Run 1, killed once its first checkpoint record is written.
	cmd := limited()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	killed := false
	for !killed {
		select {
		case err := <-done:
			t.Fatalf("run 1 ended before its first checkpoint was written (%v); stderr:\n%s", err, lastLines(stderr.String(), 20))
		case <-time.After(5 * time.Millisecond):
		}
		if recs, _ := filepath.Glob(filepath.Join(out, "_filesink", "ckpt-*")); len(recs) > 0 {
			_ = cmd.Process.Kill()
			killed = true
		}
	}
	<-done
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("run 1 was not killed: %v; stderr:\n%s", cmd.ProcessState, lastLines(stderr.String(), 20))
	}
	if !strings.Contains(stderr.String(), "open part files at the limit") {
		t.Errorf("run 1 never reached the open-file limit; stderr:\n%s", lastLines(stderr.String(), 20))
	}
	if s := scanOutput(t, out); len(s.staging) == 0 {
		t.Fatal("no in-progress file after the kill: the kill did not land in the middle of the job")
	}

	// Run 2, under the same limit, resumes the 5,000 parts and finishes.
	cmd = limited()
	outErr, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run 2: %v\n%s", err, lastLines(string(outErr), 30))
	}
	if strings.Contains(string(outErr), "too many open files") || !strings.Contains(string(outErr), "open part files at the limit") {
		t.Errorf("run 2: want the open-file limit reached and no EMFILE; stderr:\n%s", lastLines(string(outErr), 30))
	}
	if r := cli(t, "verify", "--sink", out, "--deep"); r.code != 0 {
		t.Fatalf("verify --deep: %v", r)
	}
	got := outputLines(t, out)
	if len(got) != count {
		t.Errorf("%d records in the output, want %d", len(got), count)
	}
	checkExactlyOnce(t, got, generatedLines(t, src))
	if s := scanOutput(t, out); len(s.files) < keys || len(s.staging) > 0 {
		t.Errorf("%d files and %d staging files after the end, want at least one file per bucket (%d) and no staging", len(s.files), len(s.staging), keys)
	}
}

// generatedLines returns the records of the generator URI src.
func generatedLines(t *testing.T, src string) []string {
	t.Helper()
	ctx := context.Background()
	g, err := source.Open(ctx, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var lines []string
	for {
		rec, err := g.Next(ctx)
		if err == io.EOF {
			return lines
		}
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(rec.Value))
	}
}
