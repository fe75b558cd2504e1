package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filesink/filesink/internal/testutil/icebergrest"
	"github.com/filesink/filesink/internal/testutil/icebergtest"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
)

// icebergRows reads the table demo.events of the embedded catalog of wh
// with the independent reader, the columns cols of every row.
func icebergRows(t *testing.T, wh string, cols ...string) (*icebergtest.Table, []map[string]any) {
	t.Helper()
	loc := icebergSQLite(filepath.Join(wh, "catalog.db")).metadataLocation(t, "demo", "events")
	tbl := icebergtest.MustRead(t, strings.TrimPrefix(loc, "file://"), icebergtest.WithColumns(cols...))
	if len(tbl.Errors) > 0 || len(tbl.DuplicatePaths) > 0 {
		t.Fatalf("the reader found %v, paths twice: %v", tbl.Errors, tbl.DuplicatePaths)
	}
	rows := make([]map[string]any, len(tbl.Data))
	for i, r := range tbl.Data {
		if err := json.Unmarshal(r, &rows[i]); err != nil {
			t.Fatal(err)
		}
	}
	return tbl, rows
}

// The embedded default: gen:// into a new table with nothing else given
// but the warehouse; one snapshot per checkpoint, each naming the job and
// the lane's checkpoint; a further run appends nothing.
func TestIcebergEmbedded(t *testing.T) {
	wh := filepath.Join(t.TempDir(), "lake")
	args := []string{"run", "--source", "gen://?count=10000", "--sink", "iceberg://demo.events", "--warehouse", wh, "--checkpoint-records", "2500"}
	mustRun(t, args...)
	tbl, rows := icebergRows(t, wh, "id", "ts")
	ids := map[string]int{}
	for _, r := range rows {
		ids[fmt.Sprint(r["id"])]++
	}
	if len(rows) != 10000 || len(ids) != 10000 {
		t.Fatalf("%d rows, %d distinct ids; want 10000 of each", len(rows), len(ids))
	}
	if len(tbl.Snapshots) < 4 {
		t.Errorf("%d snapshots, want one per checkpoint of 2,500 records (4 or more)", len(tbl.Snapshots))
	}
	var last uint64
	for _, s := range tbl.Snapshots {
		var lanes map[string]uint64
		if err := json.Unmarshal([]byte(s.Summary["filesink.lanes"]), &lanes); err != nil || s.Summary["filesink.job-id"] == "" {
			t.Fatalf("snapshot %s summary %v: want the job id and the lanes' checkpoints (%v)", s.ID, s.Summary, err)
		}
		if cp := lanes["filesink/0"]; cp <= last {
			t.Errorf("snapshot %s holds checkpoint %d of lane filesink/0 after %d", s.ID, cp, last)
		} else {
			last = cp
		}
	}
	mustRun(t, args...)
	if again, _ := icebergRows(t, wh, "id"); len(again.Snapshots) != len(tbl.Snapshots) {
		t.Errorf("a further run of the finished job made %d snapshot(s)", len(again.Snapshots)-len(tbl.Snapshots))
	}

	v := mustRun(t, "verify", "--sink", "iceberg://demo.events", "--warehouse", wh)
	if !strings.HasPrefix(v.stdout, "OK: iceberg://demo.events") || !strings.Contains(v.stdout, fmt.Sprintf("%d live data file(s)", len(tbl.Files))) {
		t.Errorf("verify: %v", v)
	}
	st := mustRun(t, "state", "--sink", "iceberg://demo.events", "--warehouse", wh)
	if want := fmt.Sprintf("lane filesink/0: checkpoint %d", last); !strings.Contains(st.stdout, want) {
		t.Errorf("state does not show %q:\n%s", want, st.stdout)
	}
	// A mistyped warehouse is refused, and no empty catalog is made there.
	typo := filepath.Join(t.TempDir(), "lakes")
	if r := cli(t, "verify", "--sink", "iceberg://demo.events", "--warehouse", typo); r.code != 2 || !strings.Contains(r.stderr, "no embedded catalog") {
		t.Errorf("verify of a mistyped warehouse: %v", r)
	}
	if _, err := os.Stat(typo); !os.IsNotExist(err) {
		t.Errorf("verify of a mistyped warehouse made %s (%v)", typo, err)
	}
	// A live data file lost from the warehouse is a violation naming it.
	lost := strings.TrimPrefix(tbl.Files[0].Path, "file://")
	if err := os.Remove(lost); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "verify", "--sink", "iceberg://demo.events", "--warehouse", wh); r.code != 1 || !strings.Contains(r.stdout, "VIOLATION data file "+tbl.Files[0].Path) {
		t.Errorf("verify after a data file was deleted: want a violation naming it: %v", r)
	}
}

// A later --schema that adds an optional column adds it to the table
// (with --allow-change schema) before any file has it: earlier rows read
// null, later ones their value. Removing or retyping a column, or adding
// a required one, is refused with one line.
func TestIcebergSchemaEvolution(t *testing.T) {
	dir := t.TempDir()
	src, wh := filepath.Join(dir, "in"), filepath.Join(dir, "lake")
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := write("v1.json", `{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"key","type":"string"}]}`)
	v2 := write("v2.json", `{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"key","type":"string"},{"name":"extra","type":"string"}]}`)
	write("in/a.jsonl", `{"id":1,"key":"a"}`+"\n"+`{"id":2,"key":"b"}`+"\n")
	run := func(schema string, extra ...string) cliResult {
		return cli(t, append([]string{"run", "--source", src, "--sink", "iceberg://demo.events", "--warehouse", wh, "--schema", schema}, extra...)...)
	}
	if r := run(v1); r.code != 0 {
		t.Fatal(r)
	}
	write("in/b.jsonl", `{"id":3,"key":"c","extra":"x"}`+"\n")
	r := run(v2)
	if r.code != 2 || !strings.Contains(r.stderr, "adds column(s) extra") || !strings.Contains(r.stderr, "--allow-change schema") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Fatalf("a --schema with a new column without --allow-change schema: want one line naming the column and the flag: %v", r)
	}
	if r := run(v2, "--allow-change", "schema"); r.code != 0 {
		t.Fatal(r)
	}
	_, rows := icebergRows(t, wh, "id", "extra")
	got := map[string]any{}
	for _, row := range rows {
		got[fmt.Sprint(row["id"])] = row["extra"]
	}
	if want := map[string]any{"1": nil, "2": nil, "3": "x"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rows after the new column: %v, want %v", got, want)
	}
	for _, tc := range []struct{ name, schema, want string }{
		{"dropped", `{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"extra","type":"string"}]}`, "column(s) key that --schema lacks"},
		{"retyped", `{"fields":[{"name":"id","type":"string","nullable":false},{"name":"key","type":"string"},{"name":"extra","type":"string"}]}`, "column id is long in the table, string in the schema"},
		{"required", `{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"key","type":"string"},{"name":"extra","type":"string"},{"name":"must","type":"int32","nullable":false}]}`, "new column must is required"},
	} {
		r := run(write(tc.name+".json", tc.schema), "--allow-change", "schema")
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%s column: want one line with %q: %v", tc.name, tc.want, r)
		}
	}
}

// Operator mistakes, each one line, with nothing committed lost.
func TestIcebergMistakes(t *testing.T) {
	dir := t.TempDir()
	wh := filepath.Join(dir, "lake")
	mustRun(t, "run", "--source", "gen://?count=100", "--sink", "iceberg://demo.events", "--warehouse", wh)
	schema := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(schema, []byte(genIcebergSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	maria := mariadbtest.Shared(t)
	long := filepath.Join(dir, strings.Repeat("w", 200))
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no namespace", []string{"--source", "gen://?count=1", "--sink", "iceberg://events", "--warehouse", wh}, "want iceberg://NAMESPACE.TABLE"},
		{"no warehouse", []string{"--source", "gen://?count=1", "--sink", "iceberg://demo.events"}, "no warehouse"},
		{"warehouse of another kind", []string{"--source", "gen://?count=1", "--sink", "iceberg://demo.events", "--warehouse", "ftp://host/x"}, "give a local directory or s3://"},
		{"warehouse flag on a file sink", []string{"--source", "gen://?count=1", "--sink", filepath.Join(dir, "out"), "--warehouse", wh}, "--warehouse applies to an iceberg:// sink only"},
		{"not parquet", []string{"--source", "gen://?count=1", "--sink", "iceberg://demo.events", "--warehouse", wh, "--format", "csv"}, "writes Parquet data files"},
		{"a file source without a schema", []string{"--source", dir, "--sink", "iceberg://demo.events", "--warehouse", wh}, "needs --schema FILE"},
		{"catalog unreachable", []string{"--source", "gen://?count=1", "--sink", "iceberg://demo.events", "--warehouse", wh, "--catalog", "mysql://root:s3cret@tcp(127.0.0.1:1)/x"}, "unreachable"},
		{"another job on the table", []string{"--source", dir, "--schema", schema, "--sink", "iceberg://demo.events", "--warehouse", wh}, "source"},
		{"metadata location too long", []string{"--source", "gen://?count=1", "--sink", "iceberg://demo.events", "--warehouse", long, "--catalog", "mysql://" + maria.DSN(maria.NewDatabase(t))}, "longer than the 255 characters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, append([]string{"run"}, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code == 0 || !strings.Contains(lines[len(lines)-1], tc.want) || strings.Contains(r.stderr, "s3cret") {
				t.Fatalf("want a failure whose last line names %q, without the password: %v", tc.want, r)
			}
			if n := strings.Count(r.stderr, "filesink:"); n != 1 {
				t.Errorf("%d error lines: %v", n, r)
			}
		})
	}
	if _, rows := icebergRows(t, wh, "id"); len(rows) != 100 {
		t.Errorf("the table holds %d rows after the mistakes, want the first job's 100", len(rows))
	}
}

// A REST catalog that answers 409 to a commit and loses the replies of
// two applied ones (503): the run still puts every checkpoint in the
// table once.
func TestIcebergRESTCatalog(t *testing.T) {
	srv := icebergrest.New(t)
	srv.Conflict(1)
	srv.FailAfterApply(2, 503)
	args := []string{"run", "--source", "gen://?count=20000", "--sink", "iceberg://demo.events", "--warehouse", srv.Warehouse(),
		"--catalog", srv.URL(), "--checkpoint-records", "4000"}
	mustRun(t, args...)
	dir := filepath.Join(strings.TrimPrefix(srv.Warehouse(), "file://"), "demo.db", "events")
	loc, err := icebergtest.Latest(dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl := icebergtest.MustRead(t, loc, icebergtest.WithColumns("id"))
	ids := map[string]int{}
	for _, row := range tbl.Data {
		var r struct{ ID json.Number }
		if err := json.Unmarshal(row, &r); err != nil {
			t.Fatal(err)
		}
		ids[r.ID.String()]++
	}
	if len(tbl.Errors) > 0 || len(tbl.DuplicatePaths) > 0 || tbl.Rows != 20000 || len(ids) != 20000 {
		t.Fatalf("table: %d rows, %d distinct ids, errors %v, paths twice %v", tbl.Rows, len(ids), tbl.Errors, tbl.DuplicatePaths)
	}
	c := srv.Counts()
	t.Logf("%d snapshots; commits %+v", len(tbl.Snapshots), c)
	if c.Conflicts != 1 || c.Lost != 2 || len(tbl.Snapshots) != c.Applied {
		t.Errorf("commits %+v, %d snapshots: want the conflict, both lost replies and one snapshot per applied commit", c, len(tbl.Snapshots))
	}
}
