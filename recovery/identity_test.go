package recovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/filesink/filesink/vfs"
)

func TestCheckIdentity(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenDir(ctx, vfs.OS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := Identity{Source: "file:///in/a", Sink: "file:///out/a", Format: "jsonl", Bucketing: "none"}
	r, err := CheckIdentity(ctx, s, a, nil)
	if err != nil || r.Version != 1 || r.Identity != a || r.Adopted {
		t.Fatalf("first check = %+v, %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "job-00000001.json")); err != nil {
		t.Fatal(err)
	}
	if r, err := CheckIdentity(ctx, s, a, nil); err != nil || r.Version != 1 {
		t.Fatalf("same identity = %+v, %v", r, err)
	}
	// Another job's run: refused, naming both, and nothing written.
	b := a
	b.Source, b.Sink = "file:///in/b", "file:///out/b"
	_, err = CheckIdentity(ctx, s, b, []string{"sink"})
	var ie *IdentityError
	if !errors.As(err, &ie) || !errors.Is(err, ErrIdentity) || !slices.Equal(ie.Fields, []string{"source"}) {
		t.Fatalf("other job = %v", err)
	}
	for _, want := range []string{dir, `"file:///in/a"`, `"file:///in/b"`, "--allow-change source"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if recs, _ := s.JobRecords(ctx); len(recs) != 1 {
		t.Fatalf("a refused run wrote a record: %d records", len(recs))
	}
	// A deliberate change: the next version, with its fields, and the old
	// version kept as history.
	c := a
	c.Format = "parquet compression=zstd"
	r, err = CheckIdentity(ctx, s, c, []string{"format"})
	if err != nil || r.Version != 2 || !slices.Equal(r.Changed, []string{"format"}) {
		t.Fatalf("allowed change = %+v, %v", r, err)
	}
	recs, err := s.JobRecords(ctx)
	if err != nil || len(recs) != 2 || recs[0].Identity != a || recs[1].Identity != c {
		t.Fatalf("history = %+v, %v", recs, err)
	}
	// Back to the old format without the flag: refused.
	if _, err := CheckIdentity(ctx, s, a, nil); !errors.Is(err, ErrIdentity) {
		t.Fatalf("undoing the change without the flag = %v", err)
	}
	if _, err := CheckIdentity(ctx, s, a, []string{"colour"}); err == nil || !strings.Contains(err.Error(), `"colour"`) {
		t.Fatalf("unknown field = %v", err)
	}
	// A record that does not decode is a *CorruptError naming it.
	if err := os.WriteFile(filepath.Join(dir, "job-00000003.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptError
	if _, err := CheckIdentity(ctx, s, c, nil); !errors.As(err, &ce) || !strings.Contains(ce.File, "job-00000003.json") {
		t.Fatalf("corrupt record = %v", err)
	}
}

func TestCheckIdentityAdopts(t *testing.T) {
	ctx := context.Background()
	s, err := OpenDir(ctx, vfs.OS{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(ctx, &Checkpoint{ID: 7}); err != nil {
		t.Fatal(err)
	}
	r, err := CheckIdentity(ctx, s, Identity{Source: "gen://", Sink: "file:///o"}, nil)
	if err != nil || !r.Adopted || r.Version != 1 {
		t.Fatalf("store with records and no job record = %+v, %v", r, err)
	}
	if err := s.AddJobRecord(ctx, r); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second write of version 1 = %v, want ErrExist", err)
	}
}
