package icebergsink

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	icecommit "github.com/filesink/filesink/committer/iceberg"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/filesink/bulk"
	"github.com/filesink/filesink/internal/testutil/icebergtest"
)

func testSchema(t testing.TB, doc string) *bulk.Schema {
	t.Helper()
	s, err := bulk.ParseSchema([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const eventsDoc = `{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"country","type":"string"},{"name":"ts","type":"timestamp_us"}]}`

func TestTableSchemaRefusesOtherTimestampUnits(t *testing.T) {
	_, err := TableSchema(testSchema(t, `{"fields":[{"name":"s","type":"struct","fields":[{"name":"at","type":"timestamp_ms"}]}]}`))
	if err == nil || !strings.Contains(err.Error(), "field s.at") || !strings.Contains(err.Error(), "timestamp_us") {
		t.Fatalf("a timestamp_ms field: %v, want an error naming s.at and timestamp_us", err)
	}
	sc, err := TableSchema(testSchema(t, eventsDoc))
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := sc.FindFieldByName("id"); !f.Required {
		t.Errorf("id is not required in %s", sc)
	}
}

func TestPartitioningSpecs(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"none", "none"}, {"", "none"}, {"field:country", "field:country"},
		{"eventtime:ts", "eventtime:ts:day"}, {"eventtime:ts:hour", "eventtime:ts:hour"},
	} {
		p, err := ParsePartitioning(tc.spec)
		if err != nil || p.String() != tc.want {
			t.Errorf("ParsePartitioning(%q) = %v, %v; want %s", tc.spec, p, err, tc.want)
		}
	}
	for _, bad := range []string{"datetime", "hive:a,b", "eventtime:ts:minute", "field:", "eventtime:"} {
		if _, err := ParsePartitioning(bad); err == nil {
			t.Errorf("ParsePartitioning(%q) accepted", bad)
		}
	}
	sc, err := TableSchema(testSchema(t, eventsDoc))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Partitioning{{"id", Day}, {"ts", Identity}, {"nope", Identity}} {
		if _, err := p.Spec(sc); err == nil {
			t.Errorf("%v: a spec was made", p)
		}
	}
}

// The partition value a record's file directory holds reads back as the
// value of the transform: days and hours since the epoch, the string.
func TestPartitionValuesRoundTrip(t *testing.T) {
	sc, err := TableSchema(testSchema(t, eventsDoc))
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		p      Partitioning
		record string
		dir    string
		value  string
	}{
		{Partitioning{"ts", Day}, `{"ts":"2026-03-04T05:06:07Z"}`, "data/ts_day=2026-03-04", fmt.Sprint(ts.Unix() / 86400)},
		{Partitioning{"ts", Hour}, fmt.Sprintf(`{"ts":%d}`, ts.UnixMicro()), "data/ts_hour=2026-03-04-05", fmt.Sprint(ts.Unix() / 3600)},
		{Partitioning{"ts", Day}, `{"ts":"1969-12-31T23:00:00Z"}`, "data/ts_day=1969-12-31", "-1"},
		{Partitioning{"country", Identity}, `{"country":"a/b=c"}`, "data/country=a%2Fb%3Dc", `"a/b=c"`},
		{Partitioning{}, `{}`, "data", ""},
	} {
		spec, err := tc.p.Spec(sc)
		if err != nil {
			t.Fatal(err)
		}
		var typ iceberg.Type
		if tc.p.Column != "" {
			f, _ := sc.FindFieldByName(tc.p.Column)
			typ = f.Type
		}
		dir, err := tc.p.Assigner(typ).Bucket([]byte(tc.record), time.Time{})
		if err != nil || dir != tc.dir {
			t.Errorf("%v: record %s goes to %q (%v), want %q", tc.p, tc.record, dir, err, tc.dir)
			continue
		}
		vals, err := tc.p.Values(dir+"/part-0-x-0.parquet", spec, sc)
		if err != nil {
			t.Fatalf("%v: %v", tc.p, err)
		}
		if tc.p.Column == "" {
			if len(vals) != 0 {
				t.Errorf("unpartitioned: values %v", vals)
			}
			continue
		}
		if got := string(vals[spec.Field(0).FieldID]); got != tc.value {
			t.Errorf("%v: value %s, want %s", tc.p, got, tc.value)
		}
	}
	if _, err := (Partitioning{"ts", Day}).Assigner(nil).Bucket([]byte(`{"ts":"yesterday"}`), time.Time{}); err == nil {
		t.Errorf("a record whose event time does not parse got a partition")
	}
}

// newTable makes an unpartitioned table of eventsDoc in an embedded
// catalog and returns a committer of job "j" to it.
func newTable(t testing.TB) (*Committer, string) { return newTableOn(t, "", "j") }

// newTableOn makes an unpartitioned table of eventsDoc in the catalog uri
// (OpenCatalog's; "": an embedded one) and returns a committer of job to
// it and the table location.
func newTableOn(t testing.TB, uri, job string) (*Committer, string) {
	t.Helper()
	ctx := context.Background()
	cat, err := icecommit.OpenCatalog(ctx, uri, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	sc, err := TableSchema(testSchema(t, eventsDoc))
	if err != nil {
		t.Fatal(err)
	}
	ident := []string{"demo", "events"}
	tbl, err := icecommit.EnsureTable(ctx, cat, ident, sc, catalog.WithPartitionSpec(iceberg.UnpartitionedSpec))
	if err != nil {
		t.Fatal(err)
	}
	c := NewCommitter(cat, ident, tbl, Partitioning{})
	c.SetJob(job)
	return c, trimFile(tbl.Location())
}

func trimFile(loc string) string { return strings.TrimPrefix(loc, "file://") }

// dataFile writes a one-row Parquet data file of c's table at
// data/name under the table location loc, with the table's field ids
// shifted by shift (0: the right ids), and returns what a checkpoint
// records of it.
func dataFile(t testing.TB, c *Committer, loc, name string, shift int) filesink.ManifestFile {
	t.Helper()
	as, err := table.SchemaToArrowSchema(c.meta.Schema(), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	fields := as.Fields()
	for i := range fields {
		fields[i].Metadata = icebergtest.FieldID(c.meta.Schema().Field(i).ID + shift)
	}
	as = arrow.NewSchema(fields, nil)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, as, strings.NewReader(`[{"id":1,"country":"x","ts":null}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	p := filepath.Join(loc, "data", name)
	icebergtest.WriteParquet(t, p, rec)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return filesink.ManifestFile{Path: "data/" + name, PartStats: filesink.PartStats{Size: fi.Size(), Records: 1}}
}

// Lanes that commit at the same time share snapshots; each lane's
// checkpoint is in the table once; a lane whose file is missing fails
// alone; a second commit of a checkpoint is a verified no-op.
func TestCommitterGathersLanes(t *testing.T) {
	c, loc := newTable(t)
	ctx := context.Background()
	const lanes, rounds = 8, 3
	var wg sync.WaitGroup
	errs := make([]error, lanes*rounds)
	for l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				f := dataFile(t, c, loc, fmt.Sprintf("l%d-c%d.parquet", l, r), 0)
				errs[l*rounds+r] = c.Commit(ctx, fmt.Sprintf("lane/%d", l), uint64(r+1), []filesink.ManifestFile{f})
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	st := c.Stats()
	if st.Appended != lanes*rounds || st.Snapshots > st.Appended || st.Snapshots == 0 {
		t.Errorf("stats %+v: want %d lane checkpoints appended in at most as many snapshots", st, lanes*rounds)
	}
	t.Logf("%d lane checkpoints in %d snapshots (%d attempts)", st.Appended, st.Snapshots, st.Attempts)

	// Again: a no-op.
	if err := c.Commit(ctx, "lane/0", 3, []filesink.ManifestFile{dataFile(t, c, loc, "again.parquet", 0)}); err != nil {
		t.Fatal(err)
	}
	if c.Stats().Snapshots != st.Snapshots {
		t.Errorf("a second commit of checkpoint 3 of lane/0 made a snapshot")
	}
	// A missing file fails its lane only, named; the other lane lands.
	missing := filesink.ManifestFile{Path: "data/gone.parquet", PartStats: filesink.PartStats{Size: 3, Records: 1}}
	ok := dataFile(t, c, loc, "ok.parquet", 0)
	var bad, good error
	wg.Add(2)
	go func() { defer wg.Done(); bad = c.Commit(ctx, "lane/0", 4, []filesink.ManifestFile{missing}) }()
	go func() { defer wg.Done(); good = c.Commit(ctx, "lane/1", 4, []filesink.ManifestFile{ok}) }()
	wg.Wait()
	if good != nil || bad == nil || !strings.Contains(bad.Error(), "gone.parquet") {
		t.Errorf("a missing file: lane/0 %v, lane/1 %v; want lane/0 to fail naming the file and lane/1 to land", bad, good)
	}
	var derr = icecommit.ErrDataLoss
	if bad != nil && !strings.Contains(bad.Error(), derr.Error()) {
		t.Errorf("a missing file is not reported as data loss: %v", bad)
	}
	// A file written with other field ids is refused, naming the column.
	odd := dataFile(t, c, loc, "odd.parquet", 100)
	if err := c.Commit(ctx, "lane/2", 4, []filesink.ManifestFile{odd}); err == nil || !strings.Contains(err.Error(), "field id 101") {
		t.Errorf("a file with other field ids: %v, want it refused naming the id", err)
	}
	raw, _ := json.Marshal(c.Stats())
	t.Logf("stats: %s", raw)
}

// A map<string,T> makes an Iceberg map of string keys and optional values
// (of structs too), and back through WriteSchema the writer's map; a
// timestamp in a map's value must be in microseconds.
func TestTableSchemaMaps(t *testing.T) {
	doc := testSchema(t, `{"fields":[{"name":"id","type":"int64","nullable":false},
		{"name":"counts","type":"map<string,int64>","nullable":false},
		{"name":"lines","type":"map<string,struct>","fields":[{"name":"sku","type":"string","nullable":false},{"name":"at","type":"timestamp_us"}]},
		{"name":"tags","type":"list<map<string,string>>"}]}`)
	sc, err := TableSchema(doc)
	if err != nil {
		t.Fatal(err)
	}
	counts, _ := sc.FindFieldByName("counts")
	mt, ok := counts.Type.(*iceberg.MapType)
	if !ok || !counts.Required || !mt.KeyType.Equals(iceberg.PrimitiveTypes.String) || !mt.ValueType.Equals(iceberg.PrimitiveTypes.Int64) || mt.ValueRequired {
		t.Errorf("counts is %s (required %v), want a required map<string, long> of optional values", counts.Type, counts.Required)
	}
	lines, _ := sc.FindFieldByName("lines")
	if lt, ok := lines.Type.(*iceberg.MapType); !ok || lt.ValueType.Type() != "struct" {
		t.Errorf("lines is %s, want a map of structs", lines.Type)
	}
	if got, want := sc.Field(3).Type.String(), "list<map<string, string>>"; got != want {
		t.Errorf("tags is %s, want %s", got, want)
	}
	ws, err := WriteSchema(sc, doc)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range ws.Fields() {
		if want := doc.Fields()[i]; f.Type != want.Type || f.Nullable != want.Nullable {
			t.Errorf("write schema field %s is %s (nullable %v), want %s (%v)", f.Name, f.Type, f.Nullable, want.Type, want.Nullable)
		}
	}
	if _, err := TableSchema(testSchema(t, `{"fields":[{"name":"m","type":"map<string,struct>","fields":[{"name":"at","type":"timestamp_ms"}]}]}`)); err == nil || !strings.Contains(err.Error(), "field m{}.at:") {
		t.Errorf("a timestamp_ms in a map's values: %v, want an error naming m{}.at", err)
	}
}
