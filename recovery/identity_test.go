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

// TestPlanIdentity: the plan writes nothing; the UID comes from the
// store's location until a record keeps one, and stays the same when the
// state moves; a record written without a UID gets the next version with
// it and no change.
func TestPlanIdentity(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "st")
	s, err := OpenDir(ctx, vfs.OS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	a := Identity{Source: "gen://?count=1", Sink: "file:///out", Format: "jsonl"}
	rec, write, err := PlanIdentity(ctx, s, a, nil)
	if err != nil || !write || rec.Version != 1 || rec.UID == "" {
		t.Fatalf("plan on an empty store = %+v, %t, %v", rec, write, err)
	}
	if recs, err := s.JobRecords(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("the plan wrote %v, %v", recs, err)
	}
	again, _, _ := PlanIdentity(ctx, s, a, nil)
	if again.UID != rec.UID {
		t.Errorf("two plans of one state: UIDs %q and %q", rec.UID, again.UID)
	}
	other, err := OpenDir(ctx, vfs.OS{}, filepath.Join(root, "other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if o, _, _ := PlanIdentity(ctx, other, a, nil); o.UID == rec.UID {
		t.Errorf("two states share the UID %q", o.UID)
	}
	kept, err := CheckIdentity(ctx, s, a, nil)
	if err != nil || kept.UID != rec.UID {
		t.Fatalf("CheckIdentity = %+v, %v; want the planned UID %q", kept, err, rec.UID)
	}
	// Moved, the state keeps its UID.
	s.Close()
	moved := filepath.Join(root, "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	s, err = OpenDir(ctx, vfs.OS{}, moved)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r, write, err := PlanIdentity(ctx, s, a, nil); err != nil || write || r.UID != rec.UID {
		t.Errorf("plan on the moved state = %+v, %t, %v; want the kept UID %q, nothing to write", r, write, err, rec.UID)
	}
	// A record of a version that kept no UID.
	old, err := OpenDir(ctx, vfs.OS{}, filepath.Join(root, "old"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.AddJobRecord(ctx, &JobRecord{Format: JobRecordVersion, Version: 1, Identity: a}); err != nil {
		t.Fatal(err)
	}
	r, err := CheckIdentity(ctx, old, a, nil)
	if err != nil || r.Version != 2 || r.UID == "" || len(r.Changed) != 0 {
		t.Fatalf("CheckIdentity on a record without a UID = %+v, %v; want version 2 with a UID and no change", r, err)
	}
}
