package recovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filesink/filesink/vfs"
)

func TestDirStoreJobID(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenDir(ctx, vfs.OS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if id, err := s.JobID(ctx); id != "" || err != nil {
		t.Fatalf("empty store: JobID = %q, %v", id, err)
	}
	derived := 0
	derive := func() (string, error) { derived++; return "fs-1234", nil }
	id, err := KeepJobID(ctx, s, "", derive)
	if err != nil || id != "fs-1234" || derived != 1 {
		t.Fatalf("KeepJobID on an empty store = %q, %v (derived %d times)", id, err, derived)
	}
	// The on-disk format: DIR/JOB holds the id and a newline.
	if b, err := os.ReadFile(filepath.Join(dir, JobFile)); err != nil || string(b) != "fs-1234\n" {
		t.Fatalf("DIR/JOB = %q, %v", b, err)
	}
	if id, err := KeepJobID(ctx, s, "fs-1234", derive); err != nil || id != "fs-1234" || derived != 1 {
		t.Errorf("KeepJobID with the kept id = %q, %v", id, err)
	}
	_, err = KeepJobID(ctx, s, "other", derive)
	var je *JobIDError
	if !errors.As(err, &je) || je.Kept != "fs-1234" || je.Given != "other" || je.Location != filepath.Join(dir, JobFile) || je.Meanwhile {
		t.Errorf("KeepJobID with another id = %v; want a JobIDError", err)
	}
	// SetJobID never replaces a kept id.
	if err := s.SetJobID(ctx, "fs-1234"); err != nil {
		t.Errorf("SetJobID of the kept id: %v", err)
	}
	if err := s.SetJobID(ctx, "other"); !errors.As(err, &je) || !je.Meanwhile {
		t.Errorf("SetJobID over another id = %v; want a JobIDError", err)
	}
	if ids, err := s.List(ctx); err != nil || len(ids) != 0 {
		t.Errorf("the JOB and LOCK files are listed as records: %v, %v", ids, err)
	}
	// A JOB file of an older release (same format) is read; a read-only
	// store reads it and cannot write one.
	ro, err := OpenDir(ctx, vfs.OS{}, dir, ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	if id, err := ro.JobID(ctx); id != "fs-1234" || err != nil {
		t.Errorf("read-only JobID = %q, %v", id, err)
	}
	if err := ro.SetJobID(ctx, "x"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only SetJobID = %v; want ErrReadOnly", err)
	}
	os.WriteFile(filepath.Join(dir, JobFile), []byte(" \n"), 0o644)
	if _, err := s.JobID(ctx); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty JOB file: JobID error = %v", err)
	}
}
