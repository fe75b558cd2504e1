package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filesink/filesink/internal/testutil/ci"
	"github.com/filesink/filesink/internal/testutil/testjob"
	"github.com/filesink/filesink/source"
)

// CLI tests of the bulk formats (--format parquet|arrow).

// writeGenSchema writes the generator's schema document into dir.
func writeGenSchema(t *testing.T, dir string) string {
	t.Helper()
	name := filepath.Join(dir, "gen.schema.json")
	if err := os.WriteFile(name, []byte(testjob.GenSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// genLines returns the generator's records as lines.
func genLines(t *testing.T, uri string) []string {
	t.Helper()
	ctx := context.Background()
	src, err := source.Open(ctx, uri, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var out []string
	for {
		rec, err := src.Next(ctx)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(rec.Value))
	}
}

// Every record comes back, every field, from part files a reader accepts,
// for each compression; parts roll on size and by bucket; verify agrees;
// a second run changes nothing.
func TestBulkFormatsRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	schema := writeGenSchema(t, dir)
	gen := "gen://?count=20000&seed=3&keys=5"
	want := genLines(t, gen)
	cases := []struct {
		format, compFlag, comp, ext string
	}{
		{"parquet", "--parquet-compression", "snappy", ".parquet"},
		{"parquet", "--parquet-compression", "zstd", ".parquet"},
		{"parquet", "--parquet-compression", "gzip", ".parquet"},
		{"parquet", "--parquet-compression", "none", ".parquet"},
		{"arrow", "--arrow-compression", "none", ".arrow"},
		{"arrow", "--arrow-compression", "lz4", ".arrow"},
		{"arrow", "--arrow-compression", "zstd", ".arrow"},
	}
	for _, c := range cases {
		t.Run(c.format+"-"+c.comp, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"run", "--source", gen, "--sink", out, "--format", c.format, "--schema", schema,
				c.compFlag, c.comp, "--bucket", "field:key", "--part-size", "48KiB", "--row-group-size", "2000rows"}
			mustRun(t, args...)
			s := scanOutput(t, out)
			if len(s.files) <= 5 {
				t.Errorf("%d files for 5 buckets: no part rolled on size", len(s.files))
			}
			if len(s.staging) > 0 || len(s.hidden) > 0 {
				t.Errorf("staging files left: %v %v", s.staging, s.hidden)
			}
			for f := range s.files {
				if !partNameOK(path.Base(f), c.ext, 1) {
					t.Errorf("output file %s: want a part file with extension %s", f, c.ext)
				}
			}
			checkExactlyOnce(t, outputLines(t, out), want)
			mustRun(t, "verify", "--sink", out)
			before := snapshot(t, out)
			mustRun(t, args...)
			if d := diffSnapshots(before, snapshot(t, out)); d != "" {
				t.Errorf("a second run changed the output: %s", d)
			}
		})
	}
}

// Nulls, every scalar type, lists and structs from JSON lines, read back
// as JSON lines.
func TestBulkParquetTypes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	schema := filepath.Join(dir, "s.json")
	writeLines(t, schema, `{"fields": [{"name": "id", "type": "int64", "nullable": false},
		{"name": "ts", "type": "timestamp_ms"}, {"name": "n", "type": "int32"}, {"name": "f", "type": "float64"},
		{"name": "ok", "type": "bool"}, {"name": "s", "type": "string"}, {"name": "tags", "type": "list<string>"},
		{"name": "addr", "type": "struct", "fields": [{"name": "city", "type": "string"}]}]}`)
	input := []string{
		`{"id":1,"ts":"2026-03-01T10:00:00.123Z","n":7,"f":1.5,"ok":true,"s":"héllo","tags":["a","b"],"addr":{"city":"Oslo"}}`,
		`{"id":2,"ts":null,"n":null,"f":null,"ok":null,"s":null,"tags":null,"addr":null}`,
	}
	in := filepath.Join(dir, "in")
	writeLines(t, filepath.Join(in, "a.jsonl"), input...)
	out := filepath.Join(dir, "out")
	mustRun(t, "run", "--source", in, "--sink", out, "--format", "parquet", "--schema", schema, "--parquet-dictionary", "on", "--parquet-page-size", "16KiB")
	got := outputLines(t, out)
	if len(got) != 2 {
		t.Fatalf("rows %v", got)
	}
	for i, g := range got {
		var a, b any
		json.Unmarshal([]byte(g.line), &a)
		json.Unmarshal([]byte(input[i]), &b)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("row %d:\n got %s\nwant %s", i, g.line, input[i])
		}
	}
}

func TestBulkUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	writeLines(t, filepath.Join(in, "a.jsonl"), `{"id":1}`)
	out := filepath.Join(dir, "out")
	schema := writeGenSchema(t, dir)
	badType := filepath.Join(dir, "bad-type.json")
	writeLines(t, badType, `{"fields": [{"name": "id", "type": "int64"}, {"name": "addr", "type": "struct", "fields": [{"name": "zip", "type": "uint128"}]}]}`)
	notJSON := filepath.Join(dir, "not-json.json")
	writeLines(t, notJSON, `{"fields": [`)
	run := func(extra ...string) []string {
		return append([]string{"run", "--source", in, "--sink", out}, extra...)
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"parquet without schema", run("--format", "parquet"), []string{"--format parquet", "--schema"}},
		{"arrow without schema", run("--format", "arrow"), []string{"--format arrow", "--schema"}},
		{"schema missing", run("--format", "parquet", "--schema", filepath.Join(dir, "nope.json")), []string{"--schema", "nope.json"}},
		{"schema bad type", run("--format", "parquet", "--schema", badType), []string{badType, `"addr.zip"`, "uint128"}},
		{"schema not JSON", run("--format", "parquet", "--schema", notJSON), []string{notJSON}},
		{"compression with parquet", run("--format", "parquet", "--schema", schema, "--compression", "gzip"), []string{"--compression", "--parquet-compression"}},
		{"bad parquet compression", run("--format", "parquet", "--schema", schema, "--parquet-compression", "brotli"), []string{"--parquet-compression", "brotli"}},
		{"bad dictionary", run("--format", "parquet", "--schema", schema, "--parquet-dictionary", "maybe"), []string{"--parquet-dictionary", "maybe"}},
		{"bad page size", run("--format", "parquet", "--schema", schema, "--parquet-page-size", "0"), []string{"--parquet-page-size", "positive"}},
		{"page size with arrow", run("--format", "arrow", "--schema", schema, "--parquet-page-size", "1MiB"), []string{"--parquet-page-size", "arrow"}},
		{"bad row group size", run("--format", "parquet", "--schema", schema, "--row-group-size", "lots"), []string{"--row-group-size"}},
		{"bad row group rows", run("--format", "parquet", "--schema", schema, "--row-group-size", "0rows"), []string{"--row-group-size"}},
		{"schema with jsonl", run("--schema", schema), []string{"--schema", "parquet or arrow"}},
		{"parquet flag with jsonl", run("--parquet-compression", "zstd"), []string{"--parquet-compression"}},
		{"parquet flag with arrow", run("--format", "arrow", "--schema", schema, "--parquet-stats=false"), []string{"--parquet-stats", "arrow"}},
		{"arrow flag with parquet", run("--format", "parquet", "--schema", schema, "--arrow-compression", "lz4"), []string{"--arrow-compression", "parquet"}},
		{"csv flag with parquet", run("--format", "parquet", "--schema", schema, "--csv-header"), []string{"--csv-header"}},
		{"bad unknown fields", run("--format", "parquet", "--schema", schema, "--unknown-fields", "ignore"), []string{"--unknown-fields", "ignore"}},
		{"unknown fields with jsonl", run("--unknown-fields", "drop"), []string{"--unknown-fields", "parquet or arrow"}},
	}
	for _, c := range cases {
		r := cli(t, c.args...)
		if r.code != 2 {
			t.Errorf("%s: want exit 2, got %v", c.name, r)
			continue
		}
		first, _, _ := strings.Cut(r.stderr, "\n")
		for _, w := range c.want {
			if !strings.Contains(first, w) {
				t.Errorf("%s: error line %q does not mention %q", c.name, first, w)
			}
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: a usage error created the sink directory", c.name)
			os.RemoveAll(out)
		}
	}
	r := cli(t, "run", "--help")
	for _, w := range []string{"parquet", "-schema", "-row-group-size", "-parquet-compression", "-parquet-dictionary", "-parquet-page-size", "-parquet-stats", "-unknown-fields", "timestamp_ms"} {
		if !strings.Contains(r.stdout+r.stderr, w) {
			t.Errorf("run --help does not mention %s", w)
		}
	}
}

// A record that does not fit the schema stops the run naming the record's
// origin and the field; with --on-bad-record skip it goes to the JSON-lines
// dead-letter output and the rest is published.
func TestBulkBadRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	schema := writeGenSchema(t, dir)
	in := filepath.Join(dir, "in")
	good := `{"id":1,"key":"a","ts":"2026-01-01T00:00:00.000Z","payload":"x"}`
	writeLines(t, filepath.Join(in, "a.jsonl"), good, `{"id":"two","key":"b"}`, `{"key":"c"}`)
	out := filepath.Join(dir, "out")
	r := cli(t, "run", "--source", in, "--sink", out, "--format", "parquet", "--schema", schema)
	if r.code == 0 || !strings.Contains(r.stderr, "a.jsonl:2") || !strings.Contains(r.stderr, `"id"`) {
		t.Fatalf("a record with a string id: want an error naming a.jsonl:2 and field id, got %v", r)
	}
	if s := scanOutput(t, out); len(s.files) != 0 {
		t.Errorf("files published by a failed run: %v", s.files)
	}
	out2 := filepath.Join(dir, "out2")
	mustRun(t, "run", "--source", in, "--sink", out2, "--format", "parquet", "--schema", schema, "--on-bad-record", "skip")
	checkExactlyOnce(t, outputLines(t, out2), []string{good})
	s := scanOutput(t, out2)
	if len(s.deadLetter) != 1 {
		t.Fatalf("dead-letter files %v, want 1", s.deadLetter)
	}
	for f := range s.deadLetter {
		if !strings.HasSuffix(f, ".jsonl") {
			t.Errorf("dead-letter file %s is not .jsonl", f)
		}
		lines, err := fileLines(filepath.Join(out2, f))
		if err != nil || len(lines) != 2 || !strings.Contains(lines[0], "a.jsonl:2") || !strings.Contains(lines[1], "a.jsonl:3") {
			t.Errorf("dead letters %q (%v)", lines, err)
		}
	}
}

// A record with a key that is not in the schema stops the run naming the
// record's origin and the key (or goes to the dead letters with
// --on-bad-record skip); with --unknown-fields drop every record is
// written without such keys (DuckDB reads the schema's columns only), and
// the log counts them.
func TestBulkUnknownFields(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	schema := filepath.Join(dir, "s.json")
	writeLines(t, schema, `{"fields": [{"name": "id", "type": "int64", "nullable": false},
		{"name": "addr", "type": "struct", "fields": [{"name": "city", "type": "string"}]}]}`)
	in := filepath.Join(dir, "in")
	input := []string{`{"id":1,"addr":{"city":"Oslo"}}`, `{"id":2,"color":"red"}`, `{"id":3,"addr":{"city":"Rome","zip":"00100"},"color":"blue"}`, `{"id":4}`}
	writeLines(t, filepath.Join(in, "a.jsonl"), input...)
	for _, format := range []string{"parquet", "arrow"} {
		out := filepath.Join(dir, format+"-fail")
		r := cli(t, "run", "--source", in, "--sink", out, "--format", format, "--schema", schema)
		if r.code != 1 || !strings.Contains(r.stderr, "bad record "+filepath.Join(in, "a.jsonl")+":2") || !strings.Contains(r.stderr, `field "color": not in the schema`) {
			t.Fatalf("%s: want exit 1 naming a.jsonl:2 and field color, got %v", format, r)
		}
		out = filepath.Join(dir, format+"-skip")
		mustRun(t, "run", "--source", in, "--sink", out, "--format", format, "--schema", schema, "--on-bad-record", "skip")
		checkExactlyOnce(t, outputLines(t, out), []string{input[0], `{"id":4,"addr":null}`})
		var dead []string
		for f := range scanOutput(t, out).deadLetter {
			lines, err := fileLines(filepath.Join(out, f))
			if err != nil {
				t.Fatal(err)
			}
			dead = append(dead, lines...)
		}
		if len(dead) != 2 || !strings.Contains(dead[0]+dead[1], "a.jsonl:2") || !strings.Contains(dead[0]+dead[1], `field \"addr.zip\": not in the schema`) {
			t.Errorf("%s: dead letters %q, want a.jsonl:2 and a.jsonl:3 (addr.zip)", format, dead)
		}
		out = filepath.Join(dir, format+"-drop")
		r = mustRun(t, "run", "--source", in, "--sink", out, "--format", format, "--schema", schema, "--unknown-fields", "drop")
		checkExactlyOnce(t, outputLines(t, out), []string{input[0], `{"id":2,"addr":null}`, `{"id":3,"addr":{"city":"Rome"}}`, `{"id":4,"addr":null}`})
		for _, w := range []string{"records_with_unknown_fields=2 unknown_fields_dropped=3", "names=color,addr.zip"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: the log does not say %q:\n%s", format, w, r.stderr)
			}
		}
	}
	duck := duckDB(t)
	query := func(q string) map[string]string {
		t.Helper()
		got, err := duck(q)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	files := filepath.Join(dir, "parquet-drop") + "/**/*.parquet"
	got := query(fmt.Sprintf(`SELECT string_agg(column_name || ' ' || column_type, ', ') AS columns FROM (DESCRIBE SELECT * FROM read_parquet('%s'))`, files))
	got2 := query(fmt.Sprintf(`SELECT count(*) AS n, sum(id) AS ids, string_agg(addr.city, ',' ORDER BY id) AS cities FROM read_parquet('%s')`, files))
	if want := "id BIGINT, addr STRUCT(city VARCHAR)"; got["columns"] != want || got2["n"] != "4" || got2["ids"] != "10" || got2["cities"] != "Oslo,Rome" {
		t.Errorf("DuckDB reads columns %q (want %q) and %v (want 4 rows, ids summing to 10, cities Oslo,Rome)", got["columns"], want, got2)
	}
}

// duckDB returns a function that runs one SQL query with DuckDB (npm
// @duckdb/node-api, installed by scripts/duckdb into the cache) and
// returns the first row, its values as JSON text. Without node, or when
// the install fails, it skips the test, and fails it with CI=true.
func duckDB(t *testing.T) func(query string) (map[string]string, error) {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if ci.Enabled() {
			t.Fatalf("DuckDB check cannot run (CI=true): %s", msg)
		}
		t.Skipf("SKIPPED: DuckDB check cannot run: %s", msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable("node is not installed")
	}
	script, err := filepath.Abs("../../scripts/duckdb")
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd := exec.Command(script)
	cmd.Stderr = &stderr
	modules, err := cmd.Output()
	if err != nil {
		unavailable("scripts/duckdb: %v\n%s", err, stderr.String())
	}
	js := filepath.Join(t.TempDir(), "q.js")
	writeLines(t, js, `const { DuckDBInstance } = require('@duckdb/node-api');
(async () => {
  const db = await DuckDBInstance.create(':memory:');
  const con = await db.connect();
  const r = await con.runAndReadAll(process.argv[2]);
  console.log(JSON.stringify(r.getRowObjectsJson()[0]));
})().catch(e => { console.error(e.message || e); process.exit(1); });`)
	return func(query string) (map[string]string, error) {
		cmd := exec.Command(node, js, query)
		cmd.Env = append(os.Environ(), "NODE_PATH="+strings.TrimSpace(string(modules)))
		res, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("DuckDB: %v: %s", err, strings.TrimSpace(exitStderr(err)))
		}
		var row map[string]any
		if err := json.Unmarshal(res, &row); err != nil {
			return nil, fmt.Errorf("DuckDB output %q: %v", res, err)
		}
		got := map[string]string{}
		for k, v := range row {
			got[k] = fmt.Sprint(v)
		}
		return got, nil
	}
}

// TestParquetDuckDB reads the CLI's Parquet output with a second,
// independent implementation: DuckDB (duckDB).
func TestParquetDuckDB(t *testing.T) {
	t.Parallel()
	query := duckDB(t)
	dir := t.TempDir()
	schema := writeGenSchema(t, dir)
	const count = 30000
	gen := fmt.Sprintf("gen://?count=%d&seed=5&keys=4", count)
	var payload int64
	for _, l := range genLines(t, gen) {
		var r struct{ Payload string }
		json.Unmarshal([]byte(l), &r)
		payload += int64(len(r.Payload))
	}
	for _, comp := range []string{"snappy", "zstd", "gzip", "none"} {
		out := filepath.Join(dir, "out-"+comp)
		mustRun(t, "run", "--source", gen, "--sink", out, "--format", "parquet", "--schema", schema,
			"--parquet-compression", comp, "--bucket", "field:key", "--part-size", "128KiB", "--row-group-size", "3000rows")
		q := fmt.Sprintf(`SELECT count(*) AS n, count(DISTINCT id) AS distinct_ids, sum(id) AS id_sum,
			sum((id * 2654435761) %% 4294967296) AS id_hash, sum(length(payload)) AS payload_bytes,
			count(ts) AS ts_count, min(epoch_ms(ts)) AS ts_min, count(DISTINCT key) AS keys
			FROM read_parquet('%s/**/*.parquet')`, out)
		got, err := query(q)
		if err != nil {
			t.Fatalf("%s: %v", comp, err)
		}
		var hash int64
		for id := range int64(count) {
			hash += (id * 2654435761) % 4294967296
		}
		want := map[string]string{
			"n": fmt.Sprint(count), "distinct_ids": fmt.Sprint(count), "id_sum": fmt.Sprint(int64(count) * (count - 1) / 2),
			"id_hash": fmt.Sprint(hash), "payload_bytes": fmt.Sprint(payload), "ts_count": fmt.Sprint(count),
			"ts_min": "1767225600000", "keys": "4",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: DuckDB reads %v, want %v", comp, got, want)
		}
	}
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
