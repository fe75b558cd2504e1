package bulk

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
)

// batchesOf converts JSON records to Arrow record batches of size rows.
func batchesOf(t testing.TB, s *Schema, recs [][]byte, size int) []arrow.Record {
	t.Helper()
	conv := dropConverter(s, memory.NewGoAllocator())
	defer conv.release()
	var out []arrow.Record
	for i, r := range recs {
		if err := conv.add(r); err != nil {
			t.Fatal(err)
		}
		if (i+1)%size == 0 || i == len(recs)-1 {
			out = append(out, conv.record())
		}
	}
	return out
}

// TestWriteBatch: Arrow record batches written through filesink.Writer
// (WriteBatch) come out as the same rows as their JSON records, in
// Parquet and Arrow IPC parts of the bucket given, counted in Stats; a
// batch of another schema, or not a batch, is a bad record that adds
// nothing and leaves the Writer usable; a row format refuses batches.
func TestWriteBatch(t *testing.T) {
	s := loadSchema(t, "all_types.json")
	recs := genRecords(2500, 7)
	want := expectRows(t, s, recs)
	for _, name := range []string{"parquet", "arrow"} {
		t.Run(name, func(t *testing.T) {
			var format filesink.BulkFormat
			var err error
			if name == "parquet" {
				format, err = Parquet(s, WithCompression(Snappy), WithRowGroupRows(1000), WithUnknownFields(DropUnknown))
			} else {
				format, err = ArrowIPC(s, WithRowGroupRows(1000), WithUnknownFields(DropUnknown))
			}
			if err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			w, err := filesink.New(localfs.New(vfs.OS{}, root), 0, filesink.WithBulkFormat(format))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			ctx := context.Background()
			batches := batchesOf(t, s, recs, 300)
			other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
			ob := array.NewRecordBuilder(memory.NewGoAllocator(), other)
			ob.Field(0).(*array.Int64Builder).Append(1)
			wrong := ob.NewRecord()
			defer wrong.Release()
			num := int64(1)
			for i, b := range batches {
				if i == 3 {
					for _, bad := range []arrow.Record{wrong, nil} {
						err := w.WriteBatch(ctx, "day=1", bad, source.Origin{Name: "in", Num: num})
						if !errors.Is(err, source.ErrBadRecord) || !strings.Contains(err.Error(), "in:") {
							t.Fatalf("WriteBatch(%T): %v, want a bad record naming its origin", bad, err)
						}
					}
				}
				if err := w.WriteBatch(ctx, "day=1", b, source.Origin{Name: "in", Num: num}); err != nil {
					t.Fatal(err)
				}
				num += b.NumRows()
				b.Release()
			}
			if got := w.Stats().Records.Load(); got != int64(len(recs)) {
				t.Errorf("Stats.Records = %d, want %d", got, len(recs))
			}
			commitFinal(t, w)
			files, err := filepath.Glob(filepath.Join(root, "day=1", "part-*"))
			if err != nil || len(files) != 1 {
				t.Fatalf("parts in day=1: %v, %v; want one", files, err)
			}
			data, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			var got []arrow.Record
			if name == "parquet" {
				got, _ = readParquet(t, s, data)
			} else {
				got = readArrowIPC(t, data)
			}
			compareRecords(t, s, got, want)
		})
	}
	w, err := filesink.New(localfs.New(vfs.OS{}, t.TempDir()), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.WriteBatch(context.Background(), "x", batchesOf(t, s, recs[:1], 1)[0], source.Origin{Name: "in", Num: 1}); err == nil {
		t.Error("a Writer with a row format took a batch")
	}
}
