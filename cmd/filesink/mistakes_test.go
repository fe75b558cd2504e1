package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeJSONInput writes n records {"id":from+i} as DIR/name and returns
// the lines.
func writeJSONInput(t *testing.T, dir, name string, from, n int) []string {
	t.Helper()
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"id":%d,"pad":"%s"}`, from+i, strings.Repeat("x", 40))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeLines(t, filepath.Join(dir, name), lines...)
	return lines
}

// oneLineErr checks that r failed with exactly one line on stderr that
// holds every one of want.
func oneLineErr(t *testing.T, what string, r cliResult, want ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	var errLines []string
	for _, l := range lines {
		if strings.HasPrefix(l, "filesink:") {
			errLines = append(errLines, l)
		}
	}
	if r.code == 0 || len(errLines) != 1 {
		t.Fatalf("%s: want a failure with one error line, got %v", what, r)
	}
	for _, w := range want {
		if !strings.Contains(errLines[0], w) {
			t.Errorf("%s: the error %q does not name %q", what, errLines[0], w)
		}
	}
}

func verifyDeep(t *testing.T, out string) {
	t.Helper()
	if r := cli(t, "verify", "--deep", "--sink", out); r.code != 0 {
		t.Fatalf("verify --deep %s: %v", out, r)
	}
}

// Another job's state is refused before anything is written, naming both
// jobs, and the right state then runs the job exactly once.
func TestRefusesAnotherJobsState(t *testing.T) {
	root := t.TempDir()
	inA, inB := filepath.Join(root, "inA"), filepath.Join(root, "inB")
	outA, outB := filepath.Join(root, "oA"), filepath.Join(root, "oB")
	wantA := writeJSONInput(t, inA, "a.jsonl", 0, 300)
	wantB := writeJSONInput(t, inB, "b.jsonl", 1000, 2001)
	mustRun(t, "run", "--source", inA, "--sink", outA, "--progress", "off")
	before := snapshot(t, outA)

	r := cli(t, "run", "--source", inB, "--sink", outB, "--state", filepath.Join(outA, "_filesink"), "--progress", "off")
	oneLineErr(t, "job B on job A's state", r, filepath.Join(outA, "_filesink"), "file://"+inA, "file://"+inB, "--allow-change")
	if d := diffSnapshots(before, snapshot(t, outA)); d != "" {
		t.Errorf("the refused run changed job A's output: %s", d)
	}
	if s := scanOutput(t, outB); len(s.files) > 0 {
		t.Errorf("the refused run wrote %d files into its sink", len(s.files))
	}
	mustRun(t, "run", "--source", inB, "--sink", outB, "--progress", "off")
	checkExactlyOnce(t, outputLines(t, outA), wantA)
	checkExactlyOnce(t, outputLines(t, outB), wantB)
	verifyDeep(t, outA)
	verifyDeep(t, outB)

	// A deliberate change of format is allowed with the flag and kept in
	// the job record's history.
	r = cli(t, "run", "--source", inA, "--sink", outA, "--compression", "gzip", "--progress", "off")
	oneLineErr(t, "a new compression without the flag", r, "format", "--allow-change format")
	mustRun(t, "run", "--source", inA, "--sink", outA, "--compression", "gzip", "--allow-change", "format", "--progress", "off")
	for _, v := range []string{"job-00000001.json", "job-00000002.json"} {
		if _, err := os.Stat(filepath.Join(outA, "_filesink", v)); err != nil {
			t.Errorf("job record history: %v", err)
		}
	}
	b, err := os.ReadFile(filepath.Join(outA, "_filesink", "job-00000002.json"))
	if err != nil || !strings.Contains(string(b), `"format"`) || !strings.Contains(string(b), "compression=gzip") {
		t.Errorf("job record version 2 = %s, %v", b, err)
	}
}

// A run with an empty state into an output that holds published files is
// refused (a forgotten --state, a deleted state directory), and
// --resume-from-output goes on from the output's manifests: every record
// exactly once.
func TestRefusesLostState(t *testing.T) {
	root := t.TempDir()
	in, out, st := filepath.Join(root, "in"), filepath.Join(root, "out"), filepath.Join(root, "stC")
	want := writeJSONInput(t, in, "a.jsonl", 0, 5000)
	mustRun(t, "run", "--source", in, "--sink", out, "--state", st, "--progress", "off")
	before := snapshot(t, out)

	// The state forgotten: the default state is empty.
	r := cli(t, "run", "--source", in, "--sink", out, "--progress", "off")
	oneLineErr(t, "forgotten --state", r, filepath.Join(out, "_filesink"), "holds no checkpoint", "--resume-from-output")
	if d := diffSnapshots(before, snapshot(t, out)); d != "" {
		t.Errorf("the refused run changed the output: %s", d)
	}
	// The state deleted.
	if err := os.RemoveAll(st); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "run", "--source", in, "--sink", out, "--state", st, "--progress", "off")
	oneLineErr(t, "deleted state", r, st, "holds no checkpoint")
	if d := diffSnapshots(before, snapshot(t, out)); d != "" {
		t.Errorf("the refused run changed the output: %s", d)
	}
	// The way out: the records the output holds are skipped, new ones
	// written once.
	want = append(want, writeJSONInput(t, in, "b.jsonl", 5000, 700)...)
	mustRun(t, "run", "--source", in, "--sink", out, "--state", st, "--resume-from-output", "--progress", "off")
	checkExactlyOnce(t, outputLines(t, out), want)
	verifyDeep(t, out)
	// rm -rf OUT/_filesink with the default state: the manifests went
	// too; the files are still found, and the run refused.
	out2 := filepath.Join(root, "out2")
	mustRun(t, "run", "--source", in, "--sink", out2, "--progress", "off")
	if err := os.RemoveAll(filepath.Join(out2, "_filesink")); err != nil {
		t.Fatal(err)
	}
	before2 := snapshot(t, out2)
	r = cli(t, "run", "--source", in, "--sink", out2, "--progress", "off")
	oneLineErr(t, "rm -rf OUT/_filesink", r, "holds no checkpoint", "files no manifest lists")
	if d := diffSnapshots(before2, snapshot(t, out2)); d != "" {
		t.Errorf("the refused run changed the output: %s", d)
	}
	checkExactlyOnce(t, outputLines(t, out2), want)
	// --resume-from-output with a state that holds checkpoints is refused.
	r = cli(t, "run", "--source", in, "--sink", out, "--state", st, "--resume-from-output", "--progress", "off")
	oneLineErr(t, "resume with a state", r, "not lost")
}
