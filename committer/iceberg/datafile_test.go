package iceberg_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"

	ice "github.com/filesink/filesink/committer/iceberg"
)

// A data file recorded in a checkpoint (JSON) becomes, at commit, the
// data file of the table's partition spec with its partition values;
// what does not fit the spec is refused naming the file.
func TestFileRecord(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if err := e.cat.DropTable(ctx, ident); err != nil {
		t.Fatal(err)
	}
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{2}, FieldID: 1000, Name: "lane", Transform: iceberg.IdentityTransform{}})
	tbl, err := e.cat.CreateTable(ctx, ident, testSchema, catalog.WithPartitionSpec(&spec))
	if err != nil {
		t.Fatal(err)
	}
	tspec := tbl.Spec()
	var lanes []ice.LaneCommit
	for i, lane := range []string{"events/0", "events/1"} {
		df := writeFile(t, tbl, lane, int64(i*50), 50)
		rec := ice.FileRecord{Path: df.FilePath(), Size: df.FileSizeBytes(), Records: df.Count(), SpecID: tspec.ID(),
			Partition: map[int]json.RawMessage{1000: json.RawMessage(`"` + lane + `"`)}}
		doc, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var back ice.FileRecord
		if err := json.Unmarshal(doc, &back); err != nil {
			t.Fatal(err)
		}
		got, err := back.DataFile(e.load())
		if err != nil {
			t.Fatal(err)
		}
		lanes = append(lanes, ice.LaneCommit{Lane: lane, Checkpoint: 1, Files: []iceberg.DataFile{got}})

		bad := []struct {
			rec  ice.FileRecord
			want string
		}{
			{ice.FileRecord{Path: rec.Path, SpecID: 7, Partition: rec.Partition}, "no partition spec 7"},
			{ice.FileRecord{Path: rec.Path, SpecID: rec.SpecID}, "no value for partition field lane"},
			{ice.FileRecord{Path: rec.Path, SpecID: rec.SpecID, Partition: map[int]json.RawMessage{1000: json.RawMessage(`17`)}}, "partition field lane"},
		}
		for _, b := range bad {
			if _, err := b.rec.DataFile(e.load()); err == nil || !strings.Contains(err.Error(), b.want) || !strings.Contains(err.Error(), rec.Path) {
				t.Errorf("%+v: %v; want an error naming the file and %q", b.rec, err, b.want)
			}
		}
	}
	if _, err := ice.NewTable(e.cat, ident, "job1").Commit(ctx, lanes); err != nil {
		t.Fatal(err)
	}
	got := e.read(100, 1)
	for _, f := range got.Files {
		if lane := f.Partition["lane"]; !strings.Contains(f.Path, strings.ReplaceAll(lane.(string), "/", ".")) {
			t.Errorf("%s: partition %v", f.Path, f.Partition)
		}
	}
}
