package vfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/filesink/filesink/vfs"
)

// TestRenameNoReplace: the OS implementation publishes a file under a new
// name and never replaces an existing one, leaving both files as they were.
func TestRenameNoReplace(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.WriteFile(src, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsys := vfs.OS{}
	if err := fsys.RenameNoReplace(src, dst); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("rename onto an existing name: %v, want an error matching fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "old" {
		t.Fatalf("target replaced: %q", b)
	}
	if b, _ := os.ReadFile(src); string(b) != "new" {
		t.Fatalf("source changed: %q", b)
	}
	if err := os.Remove(dst); err != nil {
		t.Fatal(err)
	}
	if err := fsys.RenameNoReplace(src, dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "new" {
		t.Fatalf("target = %q, want %q", b, "new")
	}
	if _, err := os.Stat(src); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("source still there after the rename: %v", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}
