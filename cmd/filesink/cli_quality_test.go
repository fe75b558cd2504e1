package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// deadLetters reads the dead-letter output of out: origin -> its line.
func deadLetters(t *testing.T, out string) map[string]map[string]any {
	t.Helper()
	got := map[string]map[string]any{}
	for f := range scanOutput(t, out).deadLetter {
		lines, err := fileLines(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			var e map[string]any
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("dead-letter line %q: %v", l, err)
			}
			origin, _ := e["origin"].(string)
			if _, dup := got[origin]; dup {
				t.Errorf("bad record %s is in the dead-letter output twice", origin)
			}
			got[origin] = e
		}
	}
	return got
}

// TestInvalidUTF8: a JSON-lines record whose strings hold bytes that are
// not UTF-8 is a bad record (DuckDB and Python's json refuse such lines):
// it stops the run naming it, or goes to the dead letters with
// --on-bad-record skip; --invalid-utf8 replace writes U+FFFD for each such
// byte instead, and DuckDB reads the output.
func TestInvalidUTF8(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	lines := []string{
		`{"id":1,"s":"café"}`,
		"{\"id\":2,\"s\":\"caf\xe9\"}", // Latin-1
		`{"id":3,"s":"ok"}`,
		"{\"id\":4,\"k\xff\":\"x\"}",
	}
	writeLines(t, filepath.Join(in, "a.jsonl"), lines...)
	name := filepath.Join(in, "a.jsonl")

	out := filepath.Join(dir, "fail")
	r := cli(t, "run", "--source", in, "--sink", out)
	if last := lastLines(r.stderr, 1); r.code != 1 || !strings.Contains(last, name+":2") || !strings.Contains(last, "invalid UTF-8") {
		t.Fatalf("default: want exit 1 naming %s:2 and invalid UTF-8, got %v", name, r)
	}

	out = filepath.Join(dir, "skip")
	mustRun(t, "run", "--source", in, "--sink", out, "--on-bad-record", "skip")
	checkExactlyOnce(t, outputLines(t, out), []string{lines[0], lines[2]})
	dead := deadLetters(t, out)
	for _, i := range []int{1, 3} {
		e := dead[fmt.Sprintf("%s:%d", name, i+1)]
		raw, _ := e["record_base64"].(string)
		if e == nil || raw == "" || !strings.Contains(fmt.Sprint(e["error"]), "invalid UTF-8") {
			t.Errorf("dead letter of line %d: %v", i+1, e)
			continue
		}
		var b []byte
		if err := json.Unmarshal([]byte(`"`+raw+`"`), &b); err != nil || string(b) != lines[i] {
			t.Errorf("dead letter of line %d holds %q (%v), want the record's bytes", i+1, b, err)
		}
	}
	if len(dead) != 2 {
		t.Errorf("%d dead letters, want 2: %v", len(dead), dead)
	}
	mustRun(t, "verify", "--sink", out)

	out = filepath.Join(dir, "replace")
	mustRun(t, "run", "--source", in, "--sink", out, "--invalid-utf8", "replace")
	want := []string{lines[0], `{"id":2,"s":"caf` + "\uFFFD" + `"}`, lines[2], `{"id":4,"k` + "\uFFFD" + `":"x"}`}
	got := outputLines(t, out)
	checkExactlyOnce(t, got, want)
	for _, l := range got {
		if !utf8.ValidString(l.line) || !json.Valid([]byte(l.line)) {
			t.Errorf("output line %q is not valid UTF-8 JSON", l.line)
		}
	}
	if len(scanOutput(t, out).deadLetter) != 0 {
		t.Error("replace: dead letters written")
	}
	query := duckDB(t)
	row, err := query(fmt.Sprintf(`SELECT count(*) AS n, string_agg(s, '|' ORDER BY id) AS s
		FROM read_json('%s/*.jsonl', format='newline_delimited', columns={id: 'INTEGER', s: 'VARCHAR'})`, out))
	if err != nil {
		t.Fatal(err)
	}
	if row["n"] != "4" || row["s"] != "café|caf\uFFFD|ok" {
		t.Errorf("DuckDB reads %v", row)
	}
	// The same query over the input fails: the check is not vacuous.
	if _, err := query(fmt.Sprintf(`SELECT count(*) AS n FROM read_json('%s', format='newline_delimited')`, name)); err == nil {
		t.Error("DuckDB read the input with invalid UTF-8 without an error")
	}
}

// TestMaxRecordSize: --max-record-size raises (or lowers) the longest line
// accepted; a longer line stops the run naming it, or, with
// --on-bad-record skip, goes to the dead letters (its first 64 KiB, its
// size, "truncated") and the run reads on from the next line, every other
// record exactly once.
func TestMaxRecordSize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	long := `{"id":2,"p":"` + strings.Repeat("x", 300<<10) + `"}`
	a := []string{`{"id":1}`, long, `{"id":3}`}
	b := []string{`{"id":4}`, `{"id":5}`}
	writeLines(t, filepath.Join(in, "a.jsonl"), a...)
	writeLines(t, filepath.Join(in, "b.jsonl"), b...)
	name := filepath.Join(in, "a.jsonl")

	out := filepath.Join(dir, "fail")
	r := cli(t, "run", "--source", in, "--sink", out, "--max-record-size", "100KiB")
	if last := lastLines(r.stderr, 1); r.code != 1 || !strings.Contains(last, name+":2") || !strings.Contains(last, "longer than 102400 bytes") {
		t.Fatalf("want exit 1 naming %s:2 and the maximum, got %v", name, r)
	}

	out = filepath.Join(dir, "skip")
	args := []string{"run", "--source", in, "--sink", out, "--max-record-size", "100KiB", "--on-bad-record", "skip", "--checkpoint-records", "1"}
	mustRun(t, args...)
	checkExactlyOnce(t, outputLines(t, out), []string{a[0], a[2], b[0], b[1]})
	dead := deadLetters(t, out)
	e := dead[name+":2"]
	if len(dead) != 1 || e == nil {
		t.Fatalf("dead letters %v, want one for %s:2", dead, name)
	}
	if e["record"] != long[:64<<10] || e["truncated"] != true || e["size"] != float64(len(long)) ||
		!strings.Contains(fmt.Sprint(e["error"]), fmt.Sprintf("line of %d bytes is longer than 102400 bytes", len(long))) {
		t.Errorf("dead letter: record of %d bytes, truncated %v, size %v, error %v", len(fmt.Sprint(e["record"])), e["truncated"], e["size"], e["error"])
	}
	mustRun(t, "verify", "--sink", out)
	before := snapshot(t, out)
	mustRun(t, args...)
	if d := diffSnapshots(before, snapshot(t, out)); d != "" {
		t.Errorf("a second run changed the output: %s", d)
	}

	// Above the default of 16 MiB.
	huge := `{"id":6,"p":"` + strings.Repeat("y", 17<<20) + `"}`
	in2 := filepath.Join(dir, "in2")
	writeLines(t, filepath.Join(in2, "c.jsonl"), `{"id":5}`, huge)
	r = cli(t, "run", "--source", in2, "--sink", filepath.Join(dir, "default"))
	if r.code != 1 || !strings.Contains(lastLines(r.stderr, 1), "longer than 16777216 bytes") {
		t.Fatalf("a 17 MiB line under the default maximum: %v", r)
	}
	out = filepath.Join(dir, "raised")
	mustRun(t, "run", "--source", in2, "--sink", out, "--max-record-size", "20MiB")
	var n int
	for _, l := range outputLines(t, out) {
		if l.line == huge {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the 17 MiB record is in the output %d times, want once", n)
	}
}

// TestFileAddedBeforeCheckpoint: a file added to the input directory after
// a run, whose name sorts before the checkpoint's file, would never be
// read: the next run stops (exit 1) with one line naming it, before it
// writes anything; renamed to sort after, it is read, every record once.
func TestFileAddedBeforeCheckpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	gen := func(from, n int) []string {
		var l []string
		for i := range n {
			l = append(l, fmt.Sprintf(`{"id":%d}`, from+i))
		}
		return l
	}
	b, c, early := gen(0, 5000), gen(5000, 5000), gen(10000, 5000)
	writeLines(t, filepath.Join(in, "b.jsonl"), b...)
	writeLines(t, filepath.Join(in, "c.jsonl"), c...)
	args := []string{"run", "--source", in, "--sink", out}
	mustRun(t, args...)
	before := snapshot(t, out)

	added := filepath.Join(in, "a_early.jsonl")
	writeLines(t, added, early...)
	r := cli(t, args...)
	if r.code != 1 {
		t.Fatalf("a run with a file added before the checkpoint's: want exit 1, got %v", r)
	}
	last := lastLines(r.stderr, 1)
	if !strings.HasPrefix(last, "filesink: ") || !strings.Contains(last, added+": added after the checkpoint") ||
		!strings.Contains(last, "c.jsonl") {
		t.Errorf("error line %q: want it to name %s and the checkpoint's file", last, added)
	}
	if d := diffSnapshots(before, snapshot(t, out)); d != "" {
		t.Errorf("the refused run changed the output: %s", d)
	}

	if err := os.Rename(added, filepath.Join(in, "d_late.jsonl")); err != nil {
		t.Fatal(err)
	}
	mustRun(t, args...)
	checkExactlyOnce(t, outputLines(t, out), append(append(b, c...), early...))
	mustRun(t, "verify", "--sink", out)
}

// TestLinesAppendedToReadFile: lines appended to an input file that was
// read to its end (it sorts before the checkpoint's file) would never be
// read: the next run stops (exit 1) with one line naming the file, its
// sizes then and now and what to do, before it writes anything. Doing what
// it says (copy the new bytes with the tail command it gives, then start
// the grown file's name with '_') reads the new lines, every record once;
// removing the files that were read stays fine.
func TestLinesAppendedToReadFile(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tail"); err != nil {
		t.Skip("no tail command:", err)
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	gen := func(from, n int) []string {
		var l []string
		for i := range n {
			l = append(l, fmt.Sprintf(`{"id":%d}`, from+i))
		}
		return l
	}
	a, b, c, more := gen(0, 1000), gen(1000, 1000), gen(2000, 1000), gen(3000, 500)
	grown := filepath.Join(in, "a.jsonl")
	writeLines(t, grown, a...)
	writeLines(t, filepath.Join(in, "b.jsonl"), b...)
	writeLines(t, filepath.Join(in, "c.jsonl"), c...)
	args := []string{"run", "--source", in, "--sink", out}
	mustRun(t, args...)
	before := snapshot(t, out)
	fi, err := os.Stat(grown)
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()

	f, err := os.OpenFile(grown, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Join(more, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err = os.Stat(grown)
	if err != nil {
		t.Fatal(err)
	}
	r := cli(t, args...)
	if r.code != 1 {
		t.Fatalf("a run with lines appended to a file read to its end: want exit 1, got %v", r)
	}
	last := lastLines(r.stderr, 1)
	tailCmd := fmt.Sprintf("tail -c +%d %s > %s", size+1, grown, filepath.Join(in, "c.jsonl.more"))
	for _, want := range []string{
		"filesink: ",
		grown + fmt.Sprintf(": grew from %d to %d bytes after it was read to its end", size, fi.Size()),
		fmt.Sprintf("its %d new bytes would never be read", fi.Size()-size),
		"start its name with '_'",
		tailCmd,
	} {
		if !strings.Contains(last, want) {
			t.Errorf("error line %q: want it to say %q", last, want)
		}
	}
	if strings.Count(r.stderr, grown) != 2 { // once as the input, once in the tail command
		t.Errorf("stderr names %s %d times, want it on one line:\n%s", grown, strings.Count(r.stderr, grown), r.stderr)
	}
	if d := diffSnapshots(before, snapshot(t, out)); d != "" {
		t.Errorf("the refused run changed the output: %s", d)
	}
	mustRun(t, "verify", "--sink", out)

	// Copying the new lines is not enough: the grown file would still not
	// be read to its new end.
	if out, err := exec.Command("sh", "-c", tailCmd).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", tailCmd, err, out)
	}
	if r := cli(t, args...); r.code != 1 || !strings.Contains(r.stderr, grown+": grew from") {
		t.Fatalf("a run with the new lines copied and the file still there: want exit 1 naming it, got %v", r)
	}
	if err := os.Rename(grown, filepath.Join(in, "_a.jsonl")); err != nil {
		t.Fatal(err)
	}
	mustRun(t, args...)
	checkExactlyOnce(t, outputLines(t, out), append(append(append(a, b...), c...), more...))
	mustRun(t, "verify", "--sink", out)

	// Files that were read can go.
	for _, f := range []string{"_a.jsonl", "b.jsonl"} {
		if err := os.Remove(filepath.Join(in, f)); err != nil {
			t.Fatal(err)
		}
	}
	before = snapshot(t, out)
	mustRun(t, args...)
	if d := diffSnapshots(before, snapshot(t, out)); d != "" {
		t.Errorf("a run over read input with read files removed changed the output: %s", d)
	}
	mustRun(t, "verify", "--sink", out)
}

// TestLineEndings pins what the README says of the line reader: CRLF and
// LF lines, a final line without a newline, empty lines skipped (but
// counted in line numbers), a lone "\r" inside a line kept, a line of
// spaces a record (a bad one for jsonl).
func TestLineEndings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	data := "{\"id\":1}\r\n\r\n\n{\"id\":2}\n   \n{\"id\":3,\"s\":\"a\rb\"}\r\n{\"id\":4}"
	if err := os.WriteFile(filepath.Join(in, "a.jsonl"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "run", "--source", in, "--sink", out, "--format", "text", "--on-bad-record", "skip")
	if r.code != 0 {
		t.Fatalf("text: %v", r)
	}
	checkExactlyOnce(t, outputLines(t, out), []string{`{"id":1}`, `{"id":2}`, "   ", "{\"id\":3,\"s\":\"a\rb\"}", `{"id":4}`})
	out = filepath.Join(dir, "jsonl")
	mustRun(t, "run", "--source", in, "--sink", out, "--on-bad-record", "skip")
	checkExactlyOnce(t, outputLines(t, out), []string{`{"id":1}`, `{"id":2}`, `{"id":4}`})
	dead := deadLetters(t, out)
	name := filepath.Join(in, "a.jsonl")
	if len(dead) != 2 || dead[name+":5"]["record"] != "   " || dead[name+":6"] == nil {
		t.Errorf("dead letters %v, want %s:5 (spaces) and :6 (a raw CR in a string)", dead, name)
	}
	for f := range scanOutput(t, out).files {
		b, _ := os.ReadFile(filepath.Join(out, f))
		if bytes.Contains(b, []byte("\r")) {
			t.Errorf("%s holds a CR: %q", f, b)
		}
	}
}

// TestPartSizeCountsFileBytes pins what the README says --part-size
// counts: the bytes of the part file as written (compressed, with
// --compression), plus the records buffered for it and not yet written,
// at their own size. So a gzip part's file is at most --part-size, and
// (but the last) it holds at least --part-size bytes of records, less
// than one record; where in between depends on how much was still
// buffered when it rolled.
func TestPartSizeCountsFileBytes(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	const size, record = 4 << 20, 1200
	mustRun(t, "run", "--source", "gen://?count=30000&size=1024&seed=3", "--sink", out, "--compression", "gzip", "--part-size", "4MiB")
	files := scanOutput(t, out).files
	if len(files) < 3 {
		t.Fatalf("%d part files, want several", len(files))
	}
	var total, short int
	for f, n := range files {
		b, err := decodeFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		total += len(b)
		if n > size {
			t.Errorf("%s: %d bytes on disk, more than --part-size", f, n)
		}
		if len(b) < size-record {
			short++ // the last part
		}
	}
	if short > 1 {
		t.Errorf("%d parts hold less than --part-size of records: only the last one may", short)
	}
	if total < 30000*1024 {
		t.Errorf("%d bytes of records in all", total)
	}
}
