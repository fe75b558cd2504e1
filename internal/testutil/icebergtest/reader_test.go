package icebergtest

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go
)

// row is one row of the test tables: id long (required), category string
// (required), note string (optional, "" written as null).
type row struct {
	id       int64
	category string
	note     string
}

// json is the row as the reader returns it (DuckDB's JSON: BIGINT as a
// string).
func (r row) json() string {
	note := "null"
	if r.note != "" {
		note = strconv.Quote(r.note)
	}
	return fmt.Sprintf(`{"id":"%d","category":%q,"note":%s}`, r.id, r.category, note)
}

// rows returns n rows of one category with ids from first.
func rows(first int64, n int, category string) []row {
	out := make([]row, n)
	for i := range out {
		out[i] = row{id: first + int64(i), category: category}
		if i%3 != 0 {
			out[i].note = fmt.Sprintf("note %d", first+int64(i))
		}
	}
	return out
}

// fixture is a table in a SQL catalog on SQLite, made and appended to with
// iceberg-go, under a test's temporary directory.
type fixture struct {
	dir string
	tbl *table.Table
}

// newTable creates the table db.events in a local warehouse, partitioned
// by identity(category) if partitioned.
func newTable(t *testing.T, partitioned bool) *fixture {
	t.Helper()
	dir := t.TempDir()
	return newTableIn(t, dir, partitioned, iceberg.Properties{"warehouse": "file://" + filepath.Join(dir, "warehouse")})
}

// newTableIn creates the table db.events with the catalog's database in
// dir and the catalog properties props (the warehouse, its IO's settings).
func newTableIn(t *testing.T, dir string, partitioned bool, props iceberg.Properties) *fixture {
	t.Helper()
	ctx := t.Context()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "catalog.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cat, err := sqlcat.NewCatalog("test", db, sqlcat.SQLite, props)
	if err != nil {
		t.Fatalf("iceberg SQL catalog: %v", err)
	}
	t.Cleanup(func() { cat.Close() })
	if err := cat.CreateNamespace(ctx, table.Identifier{"db"}, nil); err != nil {
		t.Fatal(err)
	}
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "category", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 3, Name: "note", Type: iceberg.PrimitiveTypes.String},
	)
	var opts []catalog.CreateTableOpt
	if partitioned {
		spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{2}, FieldID: 1000, Name: "category", Transform: iceberg.IdentityTransform{}})
		opts = append(opts, catalog.WithPartitionSpec(&spec))
	}
	tbl, err := cat.CreateTable(ctx, table.Identifier{"db", "events"}, schema, opts...)
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	return &fixture{dir: dir, tbl: tbl}
}

// writeParquet writes rs as a Parquet file with the table's field ids and
// returns its file:// location.
func (f *fixture) writeParquet(t *testing.T, name string, rs []row) string {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Metadata: FieldID(1)},
		{Name: "category", Type: arrow.BinaryTypes.String, Metadata: FieldID(2)},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: FieldID(3)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, r := range rs {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.category)
		if r.note == "" {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.StringBuilder).Append(r.note)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	path := filepath.Join(f.dir, "data", name)
	WriteParquet(t, path, rec)
	return "file://" + path
}

// addFiles commits one append snapshot of the files with AddFiles, which
// reads their footers (and refuses files the table already has).
func (f *fixture) addFiles(t *testing.T, locations ...string) {
	t.Helper()
	tx := f.tbl.NewTransaction()
	if err := tx.AddFiles(t.Context(), locations, nil, false); err != nil {
		t.Fatalf("AddFiles %v: %v", locations, err)
	}
	f.commit(t, tx)
}

// addDataFiles commits one append snapshot of the files with
// AddDataFiles, as a writer that built the DataFiles itself does.
func (f *fixture) addDataFiles(t *testing.T, opts []table.WriteOption, locations ...string) error {
	t.Helper()
	ctx := t.Context()
	fs, err := f.tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var dfs []iceberg.DataFile
	for _, loc := range locations {
		df, err := table.FileToDataFile(ctx, fs, loc, f.tbl.Schema(), f.tbl.Spec(), 0, f.tbl.Properties())
		if err != nil {
			t.Fatalf("FileToDataFile %s: %v", loc, err)
		}
		dfs = append(dfs, df)
	}
	tx := f.tbl.NewTransaction()
	if err := tx.AddDataFiles(ctx, dfs, nil, opts...); err != nil {
		return err
	}
	f.commit(t, tx)
	return nil
}

func (f *fixture) commit(t *testing.T, tx *table.Transaction) {
	t.Helper()
	tbl, err := tx.Commit(t.Context())
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	f.tbl = tbl
}

// read reads the table's newest metadata file with the reader; it checks
// that Latest finds the metadata file the catalog points at.
func (f *fixture) read(t *testing.T, opts ...Option) *Table {
	t.Helper()
	meta, err := Latest(strings.TrimPrefix(f.tbl.Location(), "file://"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimPrefix(f.tbl.MetadataLocation(), "file://"); meta != want {
		t.Fatalf("Latest = %s, the catalog's metadata location is %s", meta, want)
	}
	return MustRead(t, meta, opts...)
}

// checkData compares the rows the reader returned with want, in any order.
func checkData(t *testing.T, got []json.RawMessage, want []row) {
	t.Helper()
	var g, w []string
	for _, r := range got {
		g = append(g, string(r))
	}
	for _, r := range want {
		w = append(w, r.json())
	}
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("the reader returned %d rows, want %d:\ngot  %s\nwant %s", len(g), len(w), strings.Join(g, "\n     "), strings.Join(w, "\n     "))
	}
}

// TestReadAppends builds a partitioned table in three append snapshots
// (AddFiles twice, AddDataFiles once) and requires the reader to see the
// snapshots, the files with their partitions, and exactly the rows written.
func TestReadAppends(t *testing.T) {
	t.Parallel()
	f := newTable(t, true)
	a, b, c, d := rows(1, 5, "a"), rows(6, 3, "b"), rows(9, 4, "a"), rows(13, 7, "c")
	fa, fb := f.writeParquet(t, "a.parquet", a), f.writeParquet(t, "b.parquet", b)
	fc, fd := f.writeParquet(t, "c.parquet", c), f.writeParquet(t, "d.parquet", d)
	f.addFiles(t, fa, fb)
	f.addFiles(t, fc)
	if err := f.addDataFiles(t, nil, fd); err != nil {
		t.Fatalf("AddDataFiles: %v", err)
	}
	got := f.read(t, WithRows())

	if len(got.Errors) > 0 || len(got.DuplicatePaths) > 0 {
		t.Fatalf("errors %q, duplicate paths %q, want none", got.Errors, got.DuplicatePaths)
	}
	if got.FormatVersion != 2 || len(got.Snapshots) != 3 {
		t.Fatalf("format version %d, %d snapshots, want 2 and 3: %+v", got.FormatVersion, len(got.Snapshots), got.Snapshots)
	}
	for i, s := range got.Snapshots {
		if s.Operation != "append" || (i > 0 && s.Parent != got.Snapshots[i-1].ID) || (i == 0 && s.Parent != "") {
			t.Errorf("snapshot %d: %+v, want an append whose parent is the snapshot before", i, s)
		}
	}
	if want := strconv.FormatInt(f.tbl.CurrentSnapshot().SnapshotID, 10); got.CurrentSnapshotID != want || got.Snapshots[2].ID != want {
		t.Errorf("current snapshot %s (last listed %s), want %s", got.CurrentSnapshotID, got.Snapshots[2].ID, want)
	}
	wantFiles := map[string]struct {
		rows     int
		category string
	}{fa: {5, "a"}, fb: {3, "b"}, fc: {4, "a"}, fd: {7, "c"}}
	if len(got.Files) != len(wantFiles) {
		t.Fatalf("%d live files, want %d: %+v", len(got.Files), len(wantFiles), got.Files)
	}
	for _, file := range got.Files {
		w, ok := wantFiles[file.Path]
		if !ok || file.Records != int64(w.rows) || file.Partition["category"] != w.category {
			t.Errorf("file %+v, want one of %v", file, wantFiles)
		}
		if n := got.RecordsByFile[file.Path]; n == nil || *n != int64(w.rows) {
			t.Errorf("records_by_file[%s] = %v, want %d", file.Path, n, w.rows)
		}
	}
	if got.Rows != 19 {
		t.Errorf("rows %d, want 19", got.Rows)
	}
	checkData(t, got.Data, slices.Concat(a, b, c, d))
}

// TestReadDuplicateFile registers one data file twice (AddDataFiles with
// WithoutDuplicateCheck, after checking that the check refuses it) and
// requires the reader to name it and count its rows twice.
func TestReadDuplicateFile(t *testing.T) {
	t.Parallel()
	f := newTable(t, false)
	a := rows(1, 4, "a")
	fa := f.writeParquet(t, "a.parquet", a)
	f.addFiles(t, fa)
	if err := f.addDataFiles(t, nil, fa); err == nil || !strings.Contains(err.Error(), "already referenced") {
		t.Fatalf("AddDataFiles of a file the table has: %v, want iceberg-go's duplicate check to refuse it", err)
	}
	if err := f.addDataFiles(t, []table.WriteOption{table.WithoutDuplicateCheck()}, fa); err != nil {
		t.Fatalf("AddDataFiles WithoutDuplicateCheck: %v", err)
	}
	got := f.read(t, WithRows())
	if !slices.Equal(got.DuplicatePaths, []string{fa}) {
		t.Errorf("duplicate paths %q, want [%s]", got.DuplicatePaths, fa)
	}
	if len(got.Files) != 2 || got.Rows != 8 || len(got.Snapshots) != 2 {
		t.Errorf("%d files, %d rows, %d snapshots; want 2, 8 and 2", len(got.Files), got.Rows, len(got.Snapshots))
	}
	if len(got.Errors) > 0 {
		t.Errorf("errors %q, want none (the metadata is consistent; only the path repeats)", got.Errors)
	}
	checkData(t, got.Data, slices.Concat(a, a))
}

// TestReadDamagedFiles truncates one committed data file and removes
// another, and requires the reader to report both.
func TestReadDamagedFiles(t *testing.T) {
	t.Parallel()
	f := newTable(t, false)
	fa := f.writeParquet(t, "a.parquet", rows(1, 50, "a"))
	fb := f.writeParquet(t, "b.parquet", rows(51, 5, "b"))
	fc := f.writeParquet(t, "c.parquet", rows(56, 6, "c"))
	f.addFiles(t, fa, fb)
	f.addFiles(t, fc)
	pa, pb := strings.TrimPrefix(fa, "file://"), strings.TrimPrefix(fb, "file://")
	fi, err := os.Stat(pa)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(pa, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(pb); err != nil {
		t.Fatal(err)
	}
	got := f.read(t)
	want := []string{
		fmt.Sprintf("data file %s: %d bytes, its manifest entry says %d", fa, fi.Size()/2, fi.Size()),
		fmt.Sprintf("data file %s: DuckDB cannot read it", fa),
		fmt.Sprintf("data file %s: missing", fb),
	}
	errs := strings.Join(got.Errors, "\n")
	for _, w := range want {
		if !strings.Contains(errs, w) {
			t.Errorf("errors do not say %q:\n%s", w, errs)
		}
	}
	if len(got.Errors) != len(want) {
		t.Errorf("%d errors, want %d:\n%s", len(got.Errors), len(want), errs)
	}
	if got.RecordsByFile[fa] != nil || got.RecordsByFile[fb] != nil || got.Rows != 6 {
		t.Errorf("records_by_file %v, rows %d; want a and b unread, 6 rows (c)", got.RecordsByFile, got.Rows)
	}
}

// TestReadDeletedEntries deletes one partition's file (copy-on-write, a
// "delete" snapshot whose manifest marks the file DELETED) and requires the
// reader to drop it; a merge-on-read delete, which writes a delete file,
// must be refused.
func TestReadDeletedEntries(t *testing.T) {
	t.Parallel()
	f := newTable(t, true)
	a := rows(1, 5, "a")
	fa, fb := f.writeParquet(t, "a.parquet", a), f.writeParquet(t, "b.parquet", rows(6, 3, "b"))
	f.addFiles(t, fa, fb)
	tx := f.tbl.NewTransaction()
	if err := tx.Delete(t.Context(), iceberg.EqualTo(iceberg.Reference("category"), "b"), nil); err != nil {
		t.Fatalf("copy-on-write delete: %v", err)
	}
	f.commit(t, tx)
	got := f.read(t, WithRows())
	if len(got.Errors) > 0 || len(got.Files) != 1 || got.Files[0].Path != fa || got.Rows != 5 {
		t.Errorf("errors %q, files %+v, rows %d; want no error and a.parquet alone, 5 rows", got.Errors, got.Files, got.Rows)
	}
	if len(got.Snapshots) != 2 || got.Snapshots[1].Operation != "delete" {
		t.Errorf("snapshots %+v, want an append, then a delete", got.Snapshots)
	}
	checkData(t, got.Data, a)

	tx = f.tbl.NewTransaction()
	if err := tx.SetProperties(iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeMergeOnRead}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Delete(t.Context(), iceberg.EqualTo(iceberg.Reference("id"), int64(2)), nil); err != nil {
		t.Fatalf("merge-on-read delete: %v", err)
	}
	f.commit(t, tx)
	_, err := Read(t.Context(), strings.TrimPrefix(f.tbl.MetadataLocation(), "file://"))
	unavailable(t, err)
	if err == nil || !strings.Contains(err.Error(), "delete files are not supported") {
		t.Errorf("Read of a table with a delete file: %v, want an error saying delete files are not supported", err)
	}
}

// TestReadInconsistentMetadata edits a committed metadata file (a summary
// total and the main branch) and requires the reader to report both.
func TestReadInconsistentMetadata(t *testing.T) {
	t.Parallel()
	f := newTable(t, false)
	f.addFiles(t, f.writeParquet(t, "a.parquet", rows(1, 4, "a")))
	f.addFiles(t, f.writeParquet(t, "b.parquet", rows(5, 6, "b")))
	meta := strings.TrimPrefix(f.tbl.MetadataLocation(), "file://")
	data, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	cur := f.tbl.CurrentSnapshot()
	parent := strconv.FormatInt(*cur.ParentSnapshotID, 10)
	edited := string(data)
	for _, r := range [][2]string{
		{`"total-records":"10"`, `"total-records":"11"`},
		{`"refs":{"main":{"snapshot-id":` + strconv.FormatInt(cur.SnapshotID, 10), `"refs":{"main":{"snapshot-id":` + parent},
	} {
		if !strings.Contains(edited, r[0]) {
			t.Fatalf("the metadata has no %s:\n%s", r[0], data)
		}
		edited = strings.Replace(edited, r[0], r[1], 1)
	}
	bad := filepath.Join(filepath.Dir(meta), "99999-edited.metadata.json")
	if err := os.WriteFile(bad, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	got := MustRead(t, bad)
	want := []string{
		fmt.Sprintf("snapshot %d: summary total-records 11, its live files give 10", cur.SnapshotID),
		fmt.Sprintf("metadata: refs.main is at snapshot %s, current-snapshot-id is %d", parent, cur.SnapshotID),
	}
	slices.Sort(want)
	slices.Sort(got.Errors)
	if !slices.Equal(got.Errors, want) {
		t.Errorf("errors %q, want %q", got.Errors, want)
	}
}

// TestReadRefusesBadInput checks that input the reader cannot read ends it
// with an error naming the input.
func TestReadRefusesBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "00001-x.metadata.json")
	if err := os.WriteFile(notJSON, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	noManifestList := filepath.Join(dir, "00002-x.metadata.json")
	md := `{"format-version": 2, "current-snapshot-id": 1234567890123456789,
		"snapshots": [{"snapshot-id": 1234567890123456789, "manifest-list": "file://` + dir + `/snap.avro"}]}`
	if err := os.WriteFile(noManifestList, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.metadata.json"), "missing.metadata.json: missing"},
		{notJSON, "00001-x.metadata.json: not JSON"},
		{noManifestList, "manifest list file://" + dir + "/snap.avro (" + dir + "/snap.avro): missing"},
	} {
		_, err := Read(t.Context(), tc.path)
		unavailable(t, err)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Read(%s): %v, want one line containing %q", tc.path, err, tc.want)
		}
	}
}

// TestNewest checks the choice of the newest metadata file by name.
func TestNewest(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string // "" for an error
	}{
		{[]string{"00000-a.metadata.json", "00002-c.metadata.json", "00001-b.metadata.json", "snap-1.avro"}, "00002-c.metadata.json"},
		{[]string{"v1.metadata.json", "v10.metadata.json", "v9.metadata.json", "version-hint.text"}, "v10.metadata.json"},
		{[]string{"00001-a.metadata.json", "00001-b.metadata.json"}, ""},
		{[]string{"x.avro"}, ""},
	} {
		got, err := newest("dir", tc.names)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("newest(%q) = %q, %v; want %q", tc.names, got, err, tc.want)
		}
	}
}
