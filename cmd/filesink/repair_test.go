package main

// The repair commands against damaged state and output: state and verify
// go on past a corrupt checkpoint record or manifest, naming it.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rollingRun runs a job whose every checkpoint publishes a file (a
// checkpoint per 500 records, parts rolled at each) and returns its
// output directory and the retained checkpoint ids, oldest first.
func rollingRun(t *testing.T) (out string, ids []string) {
	t.Helper()
	out = filepath.Join(t.TempDir(), "out")
	mustRun(t, "run", "--source", "gen://?count=3000", "--sink", out, "--checkpoint-records", "500",
		"--checkpoint-interval", "1h", "--roll-on-checkpoint")
	ents, err := os.ReadDir(filepath.Join(out, "_filesink"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if rest, ok := strings.CutPrefix(e.Name(), "ckpt-"); ok {
			ids = append(ids, rest)
		}
	}
	if len(ids) != 3 {
		t.Fatalf("want 3 retained checkpoint records, got %v", ids)
	}
	return out, ids
}

// manifestFiles returns the paths a manifest of out lists.
func manifestFiles(t *testing.T, out, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "_filesink", "manifests", name))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Files []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("manifest %s: %v", name, err)
	}
	var paths []string
	for _, f := range m.Files {
		paths = append(paths, f.Path)
	}
	if len(paths) == 0 {
		t.Fatalf("manifest %s lists no file", name)
	}
	return paths
}

// violations returns the VIOLATION lines of a verify run.
func violations(r cliResult) []string {
	var vs []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "VIOLATION ") {
			vs = append(vs, l)
		}
	}
	return vs
}

// wantViolation fails t unless one of vs contains every one of parts.
func wantViolation(t *testing.T, vs []string, parts ...string) {
	t.Helper()
	for _, v := range vs {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(v, p)
		}
		if all {
			return
		}
	}
	t.Errorf("no violation names %q; violations:\n%s", parts, strings.Join(vs, "\n"))
}

// TestStateAndVerifyWithCorruptCheckpoint: with the middle record truncated
// and the newest one garbage, state prints the good record and names each
// bad one, verify reports each bad one as a violation and still checks
// the good record and the manifests (a deleted file that both know of is
// reported by both), and run still refuses the state.
func TestStateAndVerifyWithCorruptCheckpoint(t *testing.T) {
	t.Parallel()
	out, ids := rollingRun(t)
	state := filepath.Join(out, "_filesink")
	truncated := filepath.Join(state, "ckpt-"+ids[1])
	garbage := filepath.Join(state, "ckpt-"+ids[2])
	b, err := os.ReadFile(truncated)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(truncated, b[:7], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a record ", 20)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The file the oldest (good) record committed.
	gone := manifestFiles(t, out, ids[0]+"-part-0.json")[0]
	if err := os.Remove(filepath.Join(out, gone)); err != nil {
		t.Fatal(err)
	}
	good := strings.TrimLeft(ids[0], "0")

	r := cli(t, "state", "--state", state)
	if r.code != 1 || !strings.Contains(r.stdout, "checkpoint "+good+" ") || !strings.Contains(r.stdout, gone) {
		t.Errorf("state: want exit 1 and the good checkpoint %s (listing %s) printed, got %v", good, gone, r)
	}
	for _, bad := range []string{truncated, garbage} {
		if n := strings.Count(r.stdout, bad); n != 1 {
			t.Errorf("state: %s named on %d lines, want 1: %v", bad, n, r)
		}
	}
	r = cli(t, "state", "--state", state, "--json")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var c struct {
		ID json.Number `json:"id"`
	}
	if r.code != 1 || len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &c) != nil || c.ID.String() != good {
		t.Errorf("state --json: want exit 1 and the one good record %s on stdout, got %v", good, r)
	}
	if !strings.Contains(r.stderr, truncated) || !strings.Contains(r.stderr, garbage) {
		t.Errorf("state --json: stderr does not name both bad records: %v", r)
	}

	r = cli(t, "verify", "--sink", out)
	vs := violations(r)
	if r.code != 1 {
		t.Errorf("verify: want exit 1, got %v", r)
	}
	wantViolation(t, vs, truncated, "truncated")
	wantViolation(t, vs, garbage, "corrupt checkpoint record")
	wantViolation(t, vs, "checkpoint "+good+" (filesink/0)", gone)
	wantViolation(t, vs, gone, "missing", ids[0]+"-part-0.json")
	for _, v := range vs {
		if strings.Contains(v, "orphan") {
			t.Errorf("verify reports an orphan while a record is unreadable: %s", v)
		}
	}
	if len(vs) != 4 {
		t.Errorf("verify: %d violations, want 4:\n%s", len(vs), strings.Join(vs, "\n"))
	}

	// A run still refuses a defective newest record.
	r = cli(t, "run", "--source", "gen://?count=3000", "--sink", out)
	if r.code != 1 || !strings.Contains(r.stderr, "corrupt checkpoint record") {
		t.Errorf("run over a corrupt state: want exit 1 and the corrupt record named, got %v", r)
	}
	if err := os.Remove(truncated); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "run", "--source", "gen://?count=3000", "--sink", out)
	if r.code != 1 || !strings.Contains(r.stderr, garbage) {
		t.Errorf("run with a garbage newest record: want exit 1 naming %s, got %v", garbage, r)
	}
}

// TestVerifyCorruptManifest: a manifest cut short (corrupt JSON) and one of
// version 99 are each a violation naming it, and the other manifests are
// still audited (a file deleted from one of them is reported).
func TestVerifyCorruptManifest(t *testing.T) {
	t.Parallel()
	out, _ := rollingRun(t)
	dir := filepath.Join(out, "_filesink", "manifests")
	names, err := os.ReadDir(dir)
	if err != nil || len(names) < 4 {
		t.Fatalf("want at least 4 manifests: %v %v", names, err)
	}
	cut := filepath.Join(dir, names[1].Name())
	cutFiles := manifestFiles(t, out, names[1].Name())
	b, err := os.ReadFile(cut)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(dir, fmt.Sprintf("%020d-part-0.json", 9999))
	if err := os.WriteFile(newer, []byte(`{"version": 99, "checkpoint": 9999, "writer": "part-0", "files": [], "shards": {}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gone := manifestFiles(t, out, names[0].Name())[0]
	if err := os.Remove(filepath.Join(out, gone)); err != nil {
		t.Fatal(err)
	}

	r := cli(t, "verify", "--sink", out, "--deep")
	if r.code != 1 {
		t.Errorf("verify: want exit 1, got %v", r)
	}
	vs := violations(r)
	wantViolation(t, vs, cut, "corrupt commit manifest")
	wantViolation(t, vs, newer, "version 99")
	wantViolation(t, vs, gone, "listed in manifest", names[0].Name(), "missing")
	wantViolation(t, vs, cutFiles[0], "not listed in any manifest")
	if strings.Contains(r.stderr, "filesink: filesink") || !strings.Contains(r.stderr, fmt.Sprintf("%d violation(s)", len(vs))) {
		t.Errorf("verify: stderr should only count the violations: %v", r)
	}
	if slices.ContainsFunc(vs, func(v string) bool { return strings.Contains(v, "checkpoint") && strings.Contains(v, "filesink/0") }) {
		t.Errorf("verify: the checkpoint records (intact) report a violation: %v", vs)
	}
}
