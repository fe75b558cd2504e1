package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
