package bulk

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
)

// A Parquet part rolls near the policy's part size: the rows its writer
// holds count at their estimated encoded size (Pending), not at their
// Arrow memory and the capacity reserved for a whole row group, which
// would roll parts well under the size when the row groups are a good
// share of it. The sizes are checked with row groups encoded on the
// caller's goroutine (sequential), where they do not depend on how far an
// encode has got; pipelined, only the bound above them and the rows.
func TestParquetPartsNearPartSize(t *testing.T) {
	for _, sequential := range []bool{true, false} {
		t.Run(map[bool]string{true: "sequential", false: "pipelined"}[sequential], func(t *testing.T) {
			testParquetPartSizes(t, sequential)
		})
	}
}

func testParquetPartSizes(t *testing.T, sequential bool) {
	const partSize = 1 << 20
	schema, err := ParseSchema([]byte(benchSchemaDoc))
	if err != nil {
		t.Fatal(err)
	}
	format, err := Parquet(schema, WithCompression(Snappy), WithRowGroupBytes(512<<10))
	if err != nil {
		t.Fatal(err)
	}
	format.sequential = sequential
	root := t.TempDir()
	w, err := filesink.New(localfs.New(vfs.OS{}, root), 0, filesink.WithBulkFormat(format),
		filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: partSize}))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	jsonl, ends := MakeBenchLines(60_000)
	from := 0
	for k, end := range ends {
		if err := w.Write(ctx, jsonl[from:end], source.Origin{Name: "test", Num: int64(k + 1)}); err != nil {
			t.Fatal(err)
		}
		from = end + 1
	}
	commitFinal(t, w)
	var sizes []int64
	var rows int64
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sizes = append(sizes, int64(len(data)))
		recs, _ := readParquet(t, schema, data)
		for _, r := range recs {
			rows += r.NumRows()
			r.Release()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rows != int64(len(ends)) {
		t.Fatalf("%d rows in %d parts, want %d", rows, len(sizes), len(ends))
	}
	if len(sizes) < 3 {
		t.Fatalf("%d parts (%v): want several of about %d bytes", len(sizes), sizes, partSize)
	}
	for _, n := range sizes {
		if n > partSize*9/8 {
			t.Errorf("a part of %d bytes, over the part size %d by more than an eighth (sizes %v)", n, partSize, sizes)
		}
	}
	if !sequential {
		return
	}
	// The parts are near the part size, but for the last and the first
	// (rolled before a row group was written, on the writer's Buffered).
	slices.Sort(sizes)
	if median := sizes[len(sizes)/2]; median < partSize*15/16 {
		t.Errorf("median part %d bytes, under 15/16 of the part size %d (sizes %v)", median, partSize, sizes)
	}
	for _, n := range sizes[2:] {
		if n < partSize*7/8 {
			t.Errorf("a part of %d bytes, under 7/8 of the part size %d (sizes %v)", n, partSize, sizes)
		}
	}
}

// Before its first row group is written, a Parquet writer estimates its
// pending bytes from the bytes per row another writer of the same format
// measured, not from its rows' Arrow memory (about twice as large, and
// more with the capacity reserved for a row group); the first writer of a
// format has only Buffered.
func TestPendingBeforeFirstRowGroup(t *testing.T) {
	schema, err := ParseSchema([]byte(benchSchemaDoc))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parquet(schema, WithCompression(Snappy), WithRowGroupRows(10_000))
	if err != nil {
		t.Fatal(err)
	}
	f.sequential = true
	jsonl, ends := MakeBenchLines(3000)
	add := func(w *ParquetWriter, n int) {
		from := 0
		for _, end := range ends[:n] {
			if err := w.Add(jsonl[from:end]); err != nil {
				t.Fatal(err)
			}
			from = end + 1
		}
	}
	var out countWriter
	first, err := f.NewParquetWriter(&out)
	if err != nil {
		t.Fatal(err)
	}
	add(first, 2000)
	if p, b := first.Pending(), first.Buffered(); p != b {
		t.Fatalf("first writer, no row group written: Pending %d, want Buffered %d", p, b)
	}
	if err := first.Flush(); err != nil {
		t.Fatal(err)
	}
	perRow := float64(out.n) / 2000
	first.Pending() // measures the rate, as a filesink.Writer's every Add does
	second, err := f.NewParquetWriter(&countWriter{})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	add(second, 1000)
	want := int64(1000 * perRow)
	if p := second.Pending(); p < want*9/10 || p > want*11/10 {
		t.Errorf("second writer, no row group written: Pending %d, want about %d (1,000 rows at %.0f bytes; Buffered %d)", p, want, perRow, second.Buffered())
	}
	first.Close()
}
