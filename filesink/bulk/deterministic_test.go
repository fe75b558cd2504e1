package bulk

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
)

// TestDeterministicBytes checks that the bulk formats give the same bytes
// for the same records, as a part rebuilt from the source must: no wall
// clock in the metadata, row groups cut at the same rows.
func TestDeterministicBytes(t *testing.T) {
	schema, err := ParseSchema([]byte(benchSchemaDoc))
	if err != nil {
		t.Fatal(err)
	}
	jsonl, ends := MakeBenchLines(20_000)
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"parquet", []Option{WithRowGroupBytes(256 << 10)}},
		{"parquet", []Option{WithCompression(Zstd), WithRowGroupRows(3000)}},
		{"parquet", []Option{WithCompression(Gzip), WithDictionary(DictOff)}},
		{"arrow", nil},
		{"arrow", []Option{WithCompression(Zstd), WithRowGroupRows(4000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var files [2][]byte
			for i := range files {
				format, err := NewFormat(tc.name, schema, tc.opts...)
				if err != nil {
					t.Fatal(err)
				}
				root := t.TempDir()
				w, err := filesink.New(localfs.New(vfs.OS{}, root), 0, filesink.WithBulkFormat(format), filesink.WithRunID("fixed"))
				if err != nil {
					t.Fatal(err)
				}
				from := 0
				for k, end := range ends {
					if err := w.Write(context.Background(), jsonl[from:end], source.Origin{Name: "test", Num: int64(k + 1)}); err != nil {
						t.Fatal(err)
					}
					from = end + 1
				}
				if n := commitFinal(t, w); n != 1 {
					t.Fatalf("%d parts, want 1", n)
				}
				w.Close()
				names, _ := filepath.Glob(filepath.Join(root, "part-*"))
				if len(names) != 1 {
					t.Fatalf("files %v, want 1", names)
				}
				if files[i], err = os.ReadFile(names[0]); err != nil {
					t.Fatal(err)
				}
			}
			if len(files[0]) == 0 || !bytes.Equal(files[0], files[1]) {
				t.Fatalf("the same records gave different bytes (%d and %d)", len(files[0]), len(files[1]))
			}
		})
	}
}
