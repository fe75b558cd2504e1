package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/recovery"
)

// TestSecondRunRefusedNamesHolder: while a run holds a local state
// directory, a second run of the same job is refused (exit 1) with one
// line naming the state and the first run's host and pid, and the first
// run goes on.
func TestSecondRunRefusedNamesHolder(t *testing.T) {
	bin := buildCLI(t)
	out := filepath.Join(t.TempDir(), "out")
	state := filepath.Join(out, "_filesink")
	args := []string{"run", "--source", "gen://?count=1000000000", "--sink", out, "--progress", "off"}
	first := exec.Command(bin, args...)
	var firstErr syncBuffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { first.Wait(); close(exited) }()
	t.Cleanup(func() {
		first.Process.Kill()
		<-exited
	})
	pid := strconv.Itoa(first.Process.Pid)
	limit := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(filepath.Join(state, recovery.LockFile))
		if strings.HasPrefix(string(b), pid+"\n") {
			break
		}
		select {
		case <-exited:
			t.Fatalf("the first run exited before it held its state; stderr:\n%s", lastLines(firstErr.String(), 20))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(limit) {
			t.Fatalf("the first run did not lock %s within 2 minutes; stderr:\n%s", state, lastLines(firstErr.String(), 20))
		}
	}

	second := exec.Command(bin, args...)
	var stderr bytes.Buffer
	second.Stderr = &stderr
	err := second.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the second run on the same state: %v (want exit 1); stderr:\n%s", err, stderr.String())
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if strings.HasPrefix(l, "filesink: ") {
			lines = append(lines, l)
		}
	}
	holder := fmt.Sprintf("host %s, pid %s, started ", host, pid)
	if ee.ExitCode() != 1 || len(lines) != 1 || !strings.Contains(lines[0], "state directory "+state+" is in use by another filesink process") ||
		!strings.Contains(lines[0], holder) {
		t.Fatalf("the second run on the same state: exit %d, stderr:\n%s\nwant exit 1 and one line naming %s and %q", ee.ExitCode(), stderr.String(), state, holder)
	}
	t.Logf("refused: %s", lines[0])
	select {
	case <-exited:
		t.Fatalf("the first run exited after the second was refused; stderr:\n%s", lastLines(firstErr.String(), 20))
	default:
	}
}
