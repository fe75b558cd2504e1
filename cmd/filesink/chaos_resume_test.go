package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
)

// resumeDeletions is how many times TestChaosResumeFromOutput deletes the
// state after a kill -9.
const resumeDeletions = 20

// TestChaosResumeFromOutput kills `filesink run` with SIGKILL at random
// moments and, after each kill, deletes its state directory (the whole
// _filesink but the manifests: a lost state), at least resumeDeletions
// times; each next run goes on with --resume-from-output. At the end the
// output holds every generated record exactly once and verify --deep
// passes.
func TestChaosResumeFromOutput(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	bin := buildCLI(t)
	seed := chaosSeed(t)
	count := int64(300000)
	configs := []struct {
		name string
		args []string
	}{
		// One bucket, parts spanning checkpoints: the open part's records
		// are in no manifest when the state goes.
		{"jsonl", []string{"--part-size", "256KiB"}},
		// Four buckets rolled at every checkpoint: the manifests hold a
		// prefix of the input, interleaved over files.
		{"field-roll", []string{"--bucket", "field:key", "--roll-on-checkpoint"}},
	}
	for i, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(100+i)))
			runResumeChaos(t, bin, rng, count, c.args)
		})
	}
}

func runResumeChaos(t *testing.T, bin string, rng *rand.Rand, count int64, extra []string) {
	out := filepath.Join(t.TempDir(), "out")
	state := filepath.Join(t.TempDir(), "state") // outside the output: deleting it leaves the manifests
	src := fmt.Sprintf("gen://?count=%d&seed=%d&keys=4", count, chaosGenSeed)
	base := append([]string{"run", "--source", src, "--sink", out, "--state", state, "--checkpoint-interval", "50ms", "--progress", "off"}, extra...)
	// Kill windows cover a whole run: time one into a scratch output.
	probe := startRun(t, bin, []string{"run", "--source", src, "--sink", filepath.Join(t.TempDir(), "probe"), "--progress", "off"}, 0, 3*time.Minute)
	if probe.outcome != exitedOK {
		t.Fatalf("probe run: %s", lastLines(probe.stderr, 10))
	}
	window := int64(max(probe.dur, 100*time.Millisecond))
	deletions, moved, resumed := 0, 0, 0
	for run := 1; ; run++ {
		if run > 400 {
			t.Fatalf("no run finished within 400 runs (%d deletions)", deletions)
		}
		args := base
		if !hasCheckpoint(t, state) {
			args = append(append([]string{}, base...), "--resume-from-output")
			resumed++
		}
		var killAt time.Duration
		if deletions < resumeDeletions {
			killAt = 5*time.Millisecond + time.Duration(rng.Int64N(window))
		}
		r := startRun(t, bin, args, killAt, 3*time.Minute)
		switch r.outcome {
		case exitedOK:
			if deletions >= resumeDeletions {
				t.Logf("%d runs, %d state deletions after a kill, %d runs with --resume-from-output, %d unlisted files moved out", run, deletions, resumed, moved)
				checkGeneratedOnce(t, bin, out, state, count)
				return
			}
			// Finished before enough deletions: lose the state now; the
			// next runs find everything published.
			if err := os.RemoveAll(state); err != nil {
				t.Fatal(err)
			}
			continue
		case wasKilled:
		case failed:
			// The one refusal a resume may meet: a file published by a
			// commit that the kill interrupted before its manifest. The
			// runbook says to move it out (its records are read again).
			if !strings.Contains(r.stderr, "is not listed in any commit manifest") {
				t.Fatalf("run %d failed: %s", run, lastLines(r.stderr, 10))
			}
			moved += moveUnlisted(t, out)
			continue
		}
		if deletions < resumeDeletions && r.outcome == wasKilled && rng.IntN(3) > 0 {
			if err := os.RemoveAll(state); err != nil {
				t.Fatal(err)
			}
			deletions++
		}
	}
}

// hasCheckpoint reports whether the state directory holds a record.
func hasCheckpoint(t *testing.T, state string) bool {
	t.Helper()
	ents, err := os.ReadDir(state)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "ckpt-") {
			return true
		}
	}
	return false
}

// moveUnlisted moves the output's files that no manifest lists out of
// the output, and returns how many.
func moveUnlisted(t *testing.T, out string) int {
	t.Helper()
	pub, err := filesink.ReadPublished(context.Background(), localfs.New(nil, out), localfs.New(nil, filepath.Join(out, "_dead-letter")))
	if err != nil {
		t.Fatal(err)
	}
	if len(pub.Unlisted) == 0 {
		t.Fatal("a resume refused an unlisted file, but the output has none")
	}
	for _, f := range pub.Unlisted {
		if err := os.Rename(f, filepath.Join(t.TempDir(), filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	return len(pub.Unlisted)
}

// checkGeneratedOnce checks that out holds the ids 0..count-1 each once
// and that verify --deep passes.
func checkGeneratedOnce(t *testing.T, bin, out, state string, count int64) {
	t.Helper()
	seen := make([]int, count)
	for _, l := range outputLines(t, out) {
		id, err := recordID(l.line)
		if err != nil || id < 0 || id >= count {
			t.Fatalf("unexpected line %q in %s", l.line, l.file)
		}
		seen[id]++
	}
	var dup, lost int
	for _, n := range seen {
		switch {
		case n == 0:
			lost++
		case n > 1:
			dup++
		}
	}
	if dup > 0 || lost > 0 {
		t.Fatalf("%d records duplicated, %d lost", dup, lost)
	}
	if vout, err := exec.Command(bin, "verify", "--deep", "--sink", out, "--state", state).CombinedOutput(); err != nil {
		t.Fatalf("verify --deep: %v\n%s", err, vout)
	}
}
