package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filesink/filesink/filesink"
)

// CLI tests: runMain in process.

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"run", "verify", "state"} {
		r := cli(t, cmd, "--help")
		if r.code != 0 {
			t.Errorf("filesink %s --help: %v", cmd, r)
			continue
		}
		all := r.stdout + r.stderr
		if !strings.Contains(all, "Usage: filesink "+cmd) {
			t.Errorf("filesink %s --help does not print its usage: %v", cmd, r)
		}
		flagName := map[string]string{"run": "-source", "verify": "-sink", "state": "-state"}[cmd]
		if !strings.Contains(all, flagName) {
			t.Errorf("filesink %s --help does not list flag %s: %v", cmd, flagName, r)
		}
	}
	for _, arg := range []string{"help", "--help", "-h"} {
		r := cli(t, arg)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:") || !strings.Contains(r.stdout, "filesink run") {
			t.Errorf("filesink %s: want exit 0 and the usage on stdout, got %v", arg, r)
		}
	}
	if r := cli(t); r.code != 2 || !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("filesink without a command: want exit 2 and the usage on stderr, got %v", r)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	writeLines(t, filepath.Join(in, "a.jsonl"), `{"id":1}`)
	out := filepath.Join(dir, "out")
	run := func(extra ...string) []string {
		return append([]string{"run", "--source", in, "--sink", out}, extra...)
	}
	cases := []struct {
		name     string
		args     []string
		want     []string // substrings of the first line of stderr
		oneLine  bool     // stderr must be that one line
		noOutDir bool
	}{
		{"unknown command", []string{"bogus"}, []string{`unknown command "bogus"`}, false, true},
		{"missing source", []string{"run", "--sink", out}, []string{"--source"}, true, true},
		{"missing sink", []string{"run", "--source", in}, []string{"--sink"}, true, true},
		{"bad format", run("--format", "xml"), []string{"--format", "xml"}, true, true},
		{"bad bucket kind", run("--bucket", "weird"), []string{"--bucket", "weird"}, true, true},
		{"bad bucket field", run("--bucket", "field:"), []string{"--bucket"}, true, true},
		{"bad part size", run("--part-size", "12XB"), []string{"--part-size", "12XB"}, true, true},
		{"negative part size", run("--part-size", "-5MiB"), []string{"--part-size"}, true, true},
		{"bad compression", run("--compression", "lz4"), []string{"--compression", "lz4"}, true, true},
		{"bad on-bad-record", run("--on-bad-record", "ignore"), []string{"--on-bad-record", "ignore"}, true, true},
		{"bad invalid-utf8", run("--invalid-utf8", "ignore"), []string{"--invalid-utf8", "ignore"}, true, true},
		{"invalid-utf8 with csv", run("--invalid-utf8", "replace", "--format", "csv"), []string{"--invalid-utf8", "jsonl only"}, true, true},
		{"bad max-record-size", run("--max-record-size", "12XB"), []string{"--max-record-size", "12XB"}, true, true},
		{"max-record-size too large", run("--max-record-size", "2GiB"), []string{"--max-record-size", "1GiB"}, true, true},
		{"max-record-size zero", run("--max-record-size", "0"), []string{"--max-record-size"}, true, true},
		{"max-record-size with gen", []string{"run", "--source", "gen://?count=1", "--sink", out, "--max-record-size", "1MiB"},
			[]string{"--max-record-size", "gen://"}, true, true},
		{"bad parallelism", run("--parallelism", "0"), []string{"--parallelism"}, true, true},
		{"too few open files", run("--max-open-files", "8"), []string{"--max-open-files 8", "minimum 16"}, true, true},
		{"open files per subtask", run("--max-open-files", "16", "--parallelism", "17"), []string{"--max-open-files 16", "17 subtasks"}, true, true},
		{"bad time zone", run("--bucket", "datetime", "--bucket-tz", "Mars/Olympus"), []string{"--bucket-tz"}, true, true},
		{"stray argument", run("extra"), []string{`"extra"`}, true, true},
		{"verify without sink", []string{"verify"}, []string{"--sink"}, true, true},
		{"state without state", []string{"state"}, []string{"--state"}, true, true},
	}
	for _, c := range cases {
		r := cli(t, c.args...)
		if r.code != 2 {
			t.Errorf("%s: filesink %s: want exit 2, got %v", c.name, strings.Join(c.args, " "), r)
			continue
		}
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		first := lines[0]
		if !strings.HasPrefix(first, "filesink: ") {
			t.Errorf("%s: first line of stderr %q does not start with \"filesink: \"", c.name, first)
		}
		for _, w := range c.want {
			if !strings.Contains(first, w) {
				t.Errorf("%s: error line %q does not mention %q", c.name, first, w)
			}
		}
		if c.oneLine && len(lines) != 1 {
			t.Errorf("%s: want one line on stderr, got %d:\n%s", c.name, len(lines), r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("%s: unexpected stdout %q", c.name, r.stdout)
		}
		if _, err := os.Stat(out); c.noOutDir && err == nil {
			t.Errorf("%s: a usage error created the sink directory", c.name)
			os.RemoveAll(out)
		}
	}
}

func TestRunDirSource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	// Lexical order of the relative slash paths: a.jsonl, b/c.jsonl, b/d.jsonl, z.jsonl.
	writeLines(t, filepath.Join(in, "z.jsonl"), `{"id":9,"f":"z"}`, `{"id":10,"f":"z"}`)
	writeLines(t, filepath.Join(in, "a.jsonl"), `{"id":1,"f":"a"}`, `{"id":2,"f":"a"}`, `{"id":3,"f":"a"}`)
	writeLines(t, filepath.Join(in, "b", "d.jsonl"), `{"id":6,"f":"b/d"}`, ``, `{"id":7,"f":"b/d"}`, `{"id":8,"f":"b/d"}`)
	writeLines(t, filepath.Join(in, "b", "c.jsonl"), `{"id":4,"f":"b/c"}`, `{"id":5,"f":"b/c"}`)
	// Hidden files are not input.
	writeLines(t, filepath.Join(in, ".hidden.jsonl"), `{"id":-1}`)
	writeLines(t, filepath.Join(in, "_skip", "x.jsonl"), `{"id":-2}`)
	var want []string
	for i := 1; i <= 10; i++ {
		f := map[int]string{1: "a", 2: "a", 3: "a", 4: "b/c", 5: "b/c", 6: "b/d", 7: "b/d", 8: "b/d", 9: "z", 10: "z"}[i]
		want = append(want, fmt.Sprintf(`{"id":%d,"f":"%s"}`, i, f))
	}

	args := []string{"run", "--source", in, "--sink", out}
	mustRun(t, args...)
	got := outputLines(t, out)
	checkExactlyOnce(t, got, want)
	// One subtask, no bucketing, nothing rolled before the end: one file
	// with the records in input order.
	var order []string
	for _, g := range got {
		order = append(order, g.line)
	}
	if len(scanOutput(t, out).files) == 1 && !slices.Equal(order, want) {
		t.Errorf("records are not in lexical file order:\n got %q\nwant %q", order, want)
	}
	mustRun(t, "verify", "--sink", out)

	before := snapshot(t, out)
	mustRun(t, args...)
	if d := diffSnapshots(before, snapshot(t, out)); d != "" {
		t.Errorf("a second run over the same input changed the output: %s", d)
	}
	checkExactlyOnce(t, outputLines(t, out), want)
	// file:// form of the same source and sink: also nothing new.
	mustRun(t, "run", "--source", "file://"+in, "--sink", "file://"+out)
	if d := diffSnapshots(before, snapshot(t, out)); d != "" {
		t.Errorf("a third run (file:// URIs) over the same input changed the output: %s", d)
	}
}

func TestFormatsAndCompression(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	input := []string{
		`{"id":1,"key":"a","v":"plain"}`,
		`{"id":2,"key":"b","v":"with, comma"}`,
		`{"v":"quote \" inside","id":3,"key":"c"}`,
		`{"id":4,"key":"d","v":null}`,
	}
	writeLines(t, filepath.Join(in, "a.jsonl"), input...)
	csvRows := []string{`1,a,plain`, `2,b,"with, comma"`, `3,c,"quote "" inside"`, `4,d,`}
	cases := []struct {
		format, compression, ext string
		want                     []string
		magic                    []byte
	}{
		{"jsonl", "none", ".jsonl", input, nil},
		{"jsonl", "gzip", ".jsonl.gz", input, []byte{0x1f, 0x8b}},
		{"jsonl", "zstd", ".jsonl.zst", input, []byte{0x28, 0xb5, 0x2f, 0xfd}},
		{"csv", "none", ".csv", csvRows, nil},
		{"csv", "gzip", ".csv.gz", csvRows, []byte{0x1f, 0x8b}},
		{"text", "none", ".txt", input, nil},
		{"text", "zstd", ".txt.zst", input, []byte{0x28, 0xb5, 0x2f, 0xfd}},
	}
	for _, c := range cases {
		t.Run(c.format+"-"+c.compression, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"run", "--source", in, "--sink", out, "--format", c.format, "--compression", c.compression}
			mustRun(t, args...)
			s := scanOutput(t, out)
			if len(s.files) == 0 {
				t.Fatal("no output files")
			}
			for f := range s.files {
				if !partNameOK(path.Base(f), c.ext, 1) {
					t.Errorf("output file %s: want a part file with extension %s", f, c.ext)
				}
				raw, err := os.ReadFile(filepath.Join(out, f))
				if err != nil {
					t.Fatal(err)
				}
				if c.magic != nil && !bytes.HasPrefix(raw, c.magic) {
					t.Errorf("%s does not start with the %s magic %x: %x", f, c.compression, c.magic, raw[:min(8, len(raw))])
				}
			}
			checkExactlyOnce(t, outputLines(t, out), c.want)
			mustRun(t, "verify", "--sink", out)
			before := snapshot(t, out)
			mustRun(t, args...)
			if d := diffSnapshots(before, snapshot(t, out)); d != "" {
				t.Errorf("a second run changed the output: %s", d)
			}
		})
	}
}

// TestBadJSONStopsRun: an invalid JSON line stops the run with an error
// naming file and line; what an earlier run committed is untouched; after
// the line is fixed, a rerun completes exactly once.
func TestBadJSONStopsRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	a := []string{`{"id":1}`, `{"id":2}`, `{"id":3}`}
	writeLines(t, filepath.Join(in, "a.jsonl"), a...)
	args := []string{"run", "--source", in, "--sink", out}
	mustRun(t, args...)
	committed := scanOutput(t, out).files
	contents := readContents(t, out, committed)

	b := []string{`{"id":4}`, `{"id":5}`, `{"id":6,`, `{"id":7}`}
	writeLines(t, filepath.Join(in, "b.jsonl"), b...)
	r := cli(t, args...)
	if r.code == 0 {
		t.Fatalf("a run over an invalid JSON line exited 0: %v", r)
	}
	where := filepath.Join(in, "b.jsonl") + ":3"
	if !strings.Contains(lastLines(r.stderr, 1), where) {
		t.Errorf("the error does not name the bad record %s: %v", where, r)
	}
	for f, want := range contents {
		got, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("committed file %s changed by the failed run (err %v)", f, err)
		}
	}
	// Whatever the failed run published is good records, once.
	vis := outputLines(t, out)
	seen := map[string]bool{}
	for _, l := range vis {
		if seen[l.line] || !slices.Contains(append(slices.Clone(a), b[0], b[1], b[3]), l.line) {
			t.Errorf("after the failed run: line %q in %s is a duplicate or not a good record", l.line, l.file)
		}
		seen[l.line] = true
	}

	b[2] = `{"id":6}`
	writeLines(t, filepath.Join(in, "b.jsonl"), b...)
	mustRun(t, args...)
	checkExactlyOnce(t, outputLines(t, out), append(a, b...))
	for f, want := range contents {
		got, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("committed file %s changed by the rerun (err %v)", f, err)
		}
	}
	mustRun(t, "verify", "--sink", out)
}

// TestBadRecordNamed: records that cannot be bucketed stop the run with an
// error naming the file and line, and nothing is written outside the sink.
func TestBadRecordNamed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, bucket, bad string
	}{
		{"missing field", "field:key", `{"id":2}`},
		{"escaping bucket", "field:key", `{"id":2,"key":"../x"}`},
		{"missing hive field", "hive:key", `{"id":2,"other":"k"}`},
		{"absolute bucket", "field:key", `{"id":2,"key":"/x"}`},
		{"dot bucket", "field:key", `{"id":2,"key":".."}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			in, out := filepath.Join(dir, "in"), filepath.Join(dir, "sub", "out")
			writeLines(t, filepath.Join(in, "a.jsonl"), `{"id":1,"key":"k"}`, c.bad, `{"id":3,"key":"k"}`)
			r := cli(t, "run", "--source", in, "--sink", out, "--bucket", c.bucket)
			if r.code == 0 {
				t.Fatalf("bad record %s accepted: %v", c.bad, r)
			}
			where := filepath.Join(in, "a.jsonl") + ":2"
			if !strings.Contains(lastLines(r.stderr, 1), where) {
				t.Errorf("the error does not name the bad record %s: %v", where, r)
			}
			for _, p := range []string{filepath.Join(dir, "sub", "x"), filepath.Join(dir, "x")} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("a bucket escaped the sink: %s exists", p)
				}
			}
			s := scanOutput(t, out)
			for f := range s.files {
				if strings.Contains(f, "..") {
					t.Errorf("output file %s", f)
				}
			}
		})
	}
}

// TestOnBadRecordSkip: with --on-bad-record skip, the run exits 0, the good
// records are all in the output once and the bad ones are in the
// dead-letter output with origin, error and record.
func TestOnBadRecordSkip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	a := []string{`{"id":1,"key":"k1"}`, `{"id":2,`, `{"id":3,"key":"k2"}`, `{"id":4}`}
	b := []string{`{"id":5,"key":"../x"}`, `{"id":6,"key":"k1"}`, `not json at all`, `{"id":8,"key":"k2"}`}
	writeLines(t, filepath.Join(in, "a.jsonl"), a...)
	writeLines(t, filepath.Join(in, "b.jsonl"), b...)
	good := []string{a[0], a[2], b[1], b[3]}
	bad := map[string]string{ // origin -> record
		filepath.Join(in, "a.jsonl") + ":2": a[1],
		filepath.Join(in, "a.jsonl") + ":4": a[3],
		filepath.Join(in, "b.jsonl") + ":1": b[0],
		filepath.Join(in, "b.jsonl") + ":3": b[2],
	}
	args := []string{"run", "--source", in, "--sink", out, "--bucket", "field:key", "--on-bad-record", "skip"}
	mustRun(t, args...)
	checkExactlyOnce(t, outputLines(t, out), good)

	s := scanOutput(t, out)
	if len(s.deadLetter) == 0 {
		t.Fatalf("no dead-letter files under %s", filepath.Join(out, "_dead-letter"))
	}
	got := map[string]string{}
	for f := range s.deadLetter {
		if !partNameOK(path.Base(f), ".jsonl", 1) {
			t.Errorf("dead-letter file %s is not a part file", f)
		}
		lines, err := fileLines(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			var e struct {
				Origin *string `json:"origin"`
				Error  *string `json:"error"`
				Record *string `json:"record"`
			}
			if err := json.Unmarshal([]byte(l), &e); err != nil || e.Origin == nil || e.Error == nil || e.Record == nil {
				t.Errorf("dead-letter line %q: want a JSON object with origin, error and record (%v)", l, err)
				continue
			}
			if *e.Error == "" {
				t.Errorf("dead-letter line %q: empty error", l)
			}
			if _, dup := got[*e.Origin]; dup {
				t.Errorf("bad record %s is in the dead-letter output twice", *e.Origin)
			}
			got[*e.Origin] = *e.Record
		}
	}
	for origin, rec := range bad {
		if got[origin] != rec {
			t.Errorf("dead-letter output for %s: record %q, want %q", origin, got[origin], rec)
		}
	}
	for origin := range got {
		if _, ok := bad[origin]; !ok {
			t.Errorf("unexpected dead-letter record from %s: %q", origin, got[origin])
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Errorf("a bucket escaped the sink")
	}
	mustRun(t, "verify", "--sink", out)
	before := snapshot(t, out)
	mustRun(t, args...)
	if d := diffSnapshots(before, snapshot(t, out)); d != "" {
		t.Errorf("a second run changed the output: %s", d)
	}
}

func TestStateCommand(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	stateDir := filepath.Join(out, "_filesink")
	mustRun(t, "run", "--source", "gen://?count=3000", "--sink", out, "--checkpoint-records", "500", "--checkpoint-interval", "1h")
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	var files []uint64
	for _, e := range ents {
		if rest, ok := strings.CutPrefix(e.Name(), "ckpt-"); ok {
			id, err := strconv.ParseUint(rest, 10, 64)
			if err != nil {
				t.Fatalf("checkpoint file %s", e.Name())
			}
			files = append(files, id)
		}
	}
	if len(files) < 2 {
		t.Fatalf("want several retained checkpoint records, got %v", files)
	}

	r := mustRun(t, "state", "--state", stateDir)
	var printed []uint64
	for _, m := range regexp.MustCompile(`(?m)^checkpoint (\d+)\b`).FindAllStringSubmatch(r.stdout, -1) {
		id, _ := strconv.ParseUint(m[1], 10, 64)
		printed = append(printed, id)
	}
	if !slices.Equal(printed, files) {
		t.Errorf("state printed checkpoints %v, the directory holds %v:\n%s", printed, files, r.stdout)
	}
	if !strings.Contains(r.stdout, `"next":3000`) {
		t.Errorf("state does not print the final source position {\"next\":3000}:\n%s", r.stdout)
	}

	r = mustRun(t, "state", "--state", stateDir, "--json")
	var ids []uint64
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var c struct {
			ID uint64 `json:"id"`
		}
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("state --json line %q: %v", l, err)
		}
		ids = append(ids, c.ID)
	}
	if !slices.Equal(ids, files) {
		t.Errorf("state --json printed checkpoints %v, want %v", ids, files)
	}

	if r := cli(t, "state", "--state", filepath.Join(out, "nope")); r.code == 0 || !strings.Contains(r.stderr, "nope") {
		t.Errorf("state of a missing directory: want an error naming it, got %v", r)
	}
	if _, err := os.Stat(filepath.Join(out, "nope")); err == nil {
		t.Errorf("state created the missing directory")
	}
}

func TestVerifyDetects(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (out, part string) {
		out = filepath.Join(t.TempDir(), "out")
		mustRun(t, "run", "--source", "gen://?count=1000", "--sink", out)
		r := mustRun(t, "verify", "--sink", out)
		if !strings.HasPrefix(r.stdout, "OK") {
			t.Errorf("verify of a clean output: %v", r)
		}
		files := scanOutput(t, out).files
		if len(files) != 1 {
			t.Fatalf("want one output file, got %v", files)
		}
		for f := range files {
			part = f
		}
		// The final checkpoint's record lists the file it committed.
		st := mustRun(t, "state", "--state", filepath.Join(out, "_filesink"))
		if !strings.Contains(st.stdout, part) {
			t.Fatalf("the retained checkpoint records do not list %s:\n%s", part, st.stdout)
		}
		return out, part
	}
	dropInprogress := func(t *testing.T, out string) string {
		if err := os.WriteFile(filepath.Join(out, "x.inprogress"), []byte("junk\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return "x.inprogress"
	}
	truncate := func(t *testing.T, out, part string) string {
		name := filepath.Join(out, part)
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(name, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
		return part
	}
	check := func(t *testing.T, out string, want ...string) {
		t.Helper()
		r := cli(t, "verify", "--sink", out)
		if r.code != 1 {
			t.Fatalf("verify: want exit 1, got %v", r)
		}
		var vs []string
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, "VIOLATION") {
				vs = append(vs, l)
			}
		}
		// Each problem is seen by the manifest audit and, with the
		// checkpoint store there, by the check against the records.
		for _, v := range vs {
			named := false
			for _, w := range want {
				named = named || strings.Contains(v, w)
			}
			if !named {
				t.Errorf("verify: violation line names none of %v: %s", want, v)
			}
		}
		for _, w := range want {
			found := false
			for _, v := range vs {
				found = found || strings.Contains(v, w)
			}
			if !found {
				t.Errorf("verify: no violation line names %s: %v", w, r)
			}
		}
	}
	t.Run("visible inprogress", func(t *testing.T) {
		t.Parallel()
		out, _ := setup(t)
		check(t, out, dropInprogress(t, out))
	})
	t.Run("truncated", func(t *testing.T) {
		t.Parallel()
		out, part := setup(t)
		check(t, out, truncate(t, out, part))
	})
	t.Run("both", func(t *testing.T) {
		t.Parallel()
		out, part := setup(t)
		check(t, out, dropInprogress(t, out), truncate(t, out, part))
	})
	t.Run("deleted", func(t *testing.T) {
		t.Parallel()
		out, part := setup(t)
		if err := os.Remove(filepath.Join(out, part)); err != nil {
			t.Fatal(err)
		}
		check(t, out, part)
	})
	// The manifest audit also catches what the checkpoint
	// records cannot see.
	manifests := func(t *testing.T, out string) []string {
		names, err := filepath.Glob(filepath.Join(out, "_filesink", "manifests", "*.json"))
		if err != nil || len(names) == 0 {
			t.Fatalf("no manifest in %s: %v", out, err)
		}
		return names
	}
	t.Run("copied", func(t *testing.T) {
		t.Parallel()
		out, part := setup(t)
		data, err := os.ReadFile(filepath.Join(out, part))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "copy-of-part.jsonl"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		check(t, out, "copy-of-part.jsonl")
	})
	t.Run("changed content", func(t *testing.T) {
		t.Parallel()
		out, part := setup(t)
		name := filepath.Join(out, part)
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		data[10] ^= 1 // same size
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		check(t, out, part+": CRC-32C")
	})
	t.Run("manifest deleted", func(t *testing.T) {
		t.Parallel()
		out, part := setup(t)
		for _, m := range manifests(t, out) {
			if err := os.Remove(m); err != nil {
				t.Fatal(err)
			}
		}
		check(t, out, part+": not listed in any manifest", "no commit manifest")
	})
	t.Run("overlapping manifests", func(t *testing.T) {
		t.Parallel()
		out, _ := setup(t)
		// A second manifest claims the same source records for another file.
		data, err := os.ReadFile(manifests(t, out)[0])
		if err != nil {
			t.Fatal(err)
		}
		var m filesink.Manifest
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		m.Checkpoint, m.Writer, m.Files[0].Path = 99, "part-7", "ghost.jsonl"
		data, _ = json.Marshal(m)
		if err := os.WriteFile(filepath.Join(out, "_filesink", "manifests", "00000000000000000099-part-7.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		check(t, out, "ghost.jsonl", "duplicated")
	})
}

// progressWatcher is a stderr that reports when the progress line shows at
// least min records.
type progressWatcher struct {
	syncBuffer
	min  int64
	once sync.Once
	hit  chan struct{}
}

var progressRE = regexp.MustCompile(`(\d+) records \(`)

func newProgressWatcher(n int64) *progressWatcher {
	return &progressWatcher{min: n, hit: make(chan struct{})}
}

func (p *progressWatcher) Write(b []byte) (int, error) {
	n, err := p.syncBuffer.Write(b)
	for _, m := range progressRE.FindAllSubmatch(b, -1) {
		if v, _ := strconv.ParseInt(string(m[1]), 10, 64); v >= p.min {
			p.once.Do(func() { close(p.hit) })
		}
	}
	return n, err
}

var doneRecordsRE = regexp.MustCompile(`msg=done .*\brecords=(\d+)`)

// doneRecords returns the records=N of the run's final log line.
func doneRecords(t *testing.T, stderr string) int64 {
	t.Helper()
	m := doneRecordsRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no \"done\" log line with records=N in:\n%s", stderr)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// runInBackground starts runMain on a goroutine.
func runInBackground(args []string, stdin io.Reader, stderr *progressWatcher, sig <-chan os.Signal) <-chan cliResult {
	res := make(chan cliResult, 1)
	go func() {
		var stdout syncBuffer
		code := runMain(context.Background(), args, stdin, &stdout, stderr, sig)
		res <- cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}()
	return res
}

// TestSIGTERMGenerator: SIGTERM makes a run take a final checkpoint and exit
// 0 with the records read so far committed; a rerun completes the rest
// exactly once.
func TestSIGTERMGenerator(t *testing.T) {
	t.Parallel()
	const count = 20000
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"run", "--source", fmt.Sprintf("gen://?count=%d&seed=3", count), "--sink", out, "--checkpoint-interval", "1h"}
	sig := make(chan os.Signal, 1)
	stderr := newProgressWatcher(1)
	res := runInBackground(append(args, "--progress", "on"), nil, stderr, sig)
	var r cliResult
	select {
	case <-stderr.hit:
		sig <- syscall.SIGTERM
		r = <-res
	case r = <-res:
		t.Logf("the run ended before any progress line")
	}
	if r.code != 0 {
		t.Fatalf("run stopped by SIGTERM: %v", r)
	}
	read := doneRecords(t, r.stderr)
	ids := outputIDs(t, out)
	k := int64(len(ids))
	for i, id := range ids {
		if id != int64(i) {
			t.Fatalf("after SIGTERM, the output ids are not 0..%d without duplicates: position %d has id %d", k-1, i, id)
		}
	}
	if k != read {
		t.Errorf("after SIGTERM: %d records read, %d committed", read, k)
	}
	if k == count {
		t.Logf("the run finished all %d records before SIGTERM took effect", count)
	}
	t.Logf("SIGTERM after %d of %d records", k, count)
	mustRun(t, "verify", "--sink", out)

	r2 := mustRun(t, args...)
	if got := doneRecords(t, r2.stderr); got != count-k {
		t.Errorf("the rerun read %d records, want the remaining %d", got, count-k)
	}
	ids = outputIDs(t, out)
	if int64(len(ids)) != count {
		t.Errorf("after the rerun: %d records in the output, want %d", len(ids), count)
	}
	for i, id := range ids {
		if id != int64(i) {
			t.Fatalf("after the rerun: sorted output ids have %d at position %d (missing or duplicated records)", id, i)
		}
	}
	mustRun(t, "verify", "--sink", out)
}

// outputIDs returns the sorted ids of every output record.
func outputIDs(t *testing.T, out string) []int64 {
	t.Helper()
	var ids []int64
	for _, l := range outputLines(t, out) {
		id, err := recordID(l.line)
		if err != nil {
			t.Fatalf("%s: %v", l.file, err)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// TestSIGTERMStdin: records read from stdin before SIGTERM are committed by
// the final checkpoint, while the pipe is still open.
func TestSIGTERMStdin(t *testing.T) {
	t.Parallel()
	const n = 100
	out := filepath.Join(t.TempDir(), "out")
	pr, pw := io.Pipe()
	defer pw.Close()
	sig := make(chan os.Signal, 1)
	stderr := newProgressWatcher(n)
	res := runInBackground([]string{"run", "--source", "-", "--sink", out, "--checkpoint-interval", "1h", "--progress", "on"}, pr, stderr, sig)
	var want []string
	var input bytes.Buffer
	for i := range n {
		l := fmt.Sprintf(`{"id":%d,"v":"stdin"}`, i)
		want = append(want, l)
		input.WriteString(l + "\n")
	}
	// io.Pipe: Write returns when the run has read all the lines.
	if _, err := pw.Write(input.Bytes()); err != nil {
		t.Fatal(err)
	}
	// Give the pipeline a moment to hand the records to the sink (the
	// progress line shows them); SIGTERM comes in any case.
	select {
	case <-stderr.hit:
	case <-time.After(2 * time.Second):
		t.Logf("the progress line did not show %d records within 2s of their being read; sending SIGTERM anyway", n)
	}
	sig <- syscall.SIGTERM
	var r cliResult
	select {
	case r = <-res:
	case <-time.After(2 * time.Minute):
		pw.Close()
		t.Fatalf("the run did not stop after SIGTERM while stdin stayed open; stderr:\n%s", stderr.String())
	}
	if r.code != 0 {
		t.Fatalf("run stopped by SIGTERM: %v", r)
	}
	checkExactlyOnce(t, outputLines(t, out), want)
	if t.Failed() {
		t.Logf("stderr:\n%s", r.stderr)
	}
}

// TestRunDirectIOFlag: --direct-io on and off (the default) write the same
// records (the local backend's tests check the O_DIRECT writes
// themselves); it is refused with an S3 sink.
func TestRunDirectIOFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var outs []map[string]bool
	for _, v := range []string{"true", "false"} {
		out := filepath.Join(dir, v)
		mustRun(t, "run", "--source", "gen://?count=20000&size=512", "--sink", out, "--direct-io="+v, "--checkpoint-records", "7000")
		mustRun(t, "verify", "--sink", out)
		lines := map[string]bool{}
		for _, l := range outputLines(t, out) {
			if lines[l.line] {
				t.Fatalf("--direct-io=%s: %s written twice", v, l.line)
			}
			lines[l.line] = true
		}
		if len(lines) != 20000 {
			t.Fatalf("--direct-io=%s: %d distinct records, want 20000", v, len(lines))
		}
		outs = append(outs, lines)
	}
	if !maps.Equal(outs[0], outs[1]) {
		t.Error("--direct-io=true and false wrote different records")
	}
	r := cli(t, "run", "--source", "gen://?count=1", "--sink", "s3://bucket/prefix", "--direct-io=false")
	if r.code != 2 || !strings.Contains(r.stderr, "--direct-io") {
		t.Errorf("--direct-io with an S3 sink: want exit 2 naming the flag, got %v", r)
	}
}

// TestRefusesSelfFeeding: a sink inside its file source (here the source
// itself) is refused before anything is written: one line naming both,
// exit 2, the input untouched, and a second run reads nothing twice.
func TestRefusesSelfFeeding(t *testing.T) {
	in := t.TempDir()
	if err := os.WriteFile(filepath.Join(in, "a.jsonl"), []byte("{\"id\":1}\n{\"id\":2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sink := range []string{in, filepath.Join(in, "out")} {
		r := cli(t, "run", "--source", in, "--sink", sink, "--progress", "off")
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], "--sink "+sink+" is inside --source "+in) {
			t.Errorf("--sink %s with --source %s: want exit 2 and one line naming both, got %v", sink, in, r)
		}
	}
	entries, err := os.ReadDir(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("the refused runs wrote into the source: %v", entries)
	}
}
