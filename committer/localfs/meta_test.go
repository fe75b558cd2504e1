package localfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/vfs"
)

func TestMetaStore(t *testing.T) {
	root := t.TempDir()
	b := New(vfs.OS{}, root)
	ctx := t.Context()
	if names, err := b.ListMeta(ctx, "manifests"); err != nil || names != nil {
		t.Fatalf("ListMeta of a missing directory = %v, %v; want none", names, err)
	}
	if err := b.PutMeta(ctx, "manifests/b.json", []byte("B")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutMeta(ctx, "manifests/a.json", []byte("A")); err != nil {
		t.Fatal(err)
	}
	// Again with the same bytes (a re-run phase 2): accepted.
	if err := b.PutMeta(ctx, "manifests/a.json", []byte("A")); err != nil {
		t.Fatalf("identical re-put: %v", err)
	}
	// Other bytes: refused, the object unchanged.
	if err := b.PutMeta(ctx, "manifests/a.json", []byte("X")); !errors.Is(err, committer.ErrAlreadyExists) {
		t.Fatalf("conflicting put: %v, want ErrAlreadyExists", err)
	}
	if got, err := b.GetMeta(ctx, "manifests/a.json"); err != nil || string(got) != "A" {
		t.Fatalf("GetMeta = %q, %v; want A", got, err)
	}
	if _, err := b.GetMeta(ctx, "manifests/none.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("GetMeta of a missing object: %v", err)
	}
	// A temporary file left by a crashed put is not listed.
	if err := os.WriteFile(filepath.Join(root, driver.MetaDir, "manifests", ".tmp-x-c.json"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	names, err := b.ListMeta(ctx, "manifests")
	if err != nil || !slices.Equal(names, []string{"manifests/a.json", "manifests/b.json"}) {
		t.Fatalf("ListMeta = %v, %v", names, err)
	}
	for _, bad := range []string{"", "/abs", "../up", "a/../../b", "."} {
		if err := b.PutMeta(ctx, bad, nil); err == nil {
			t.Errorf("PutMeta(%q) accepted", bad)
		}
	}

	// ListFiles: visible files only.
	for _, f := range []string{"x/part-1.jsonl", "part-2.jsonl", "x/.part-3.jsonl.inprogress", "_dead/y.jsonl", ".hidden"} {
		name := filepath.Join(root, filepath.FromSlash(f))
		os.MkdirAll(filepath.Dir(name), 0o755)
		if err := os.WriteFile(name, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	if err := b.ListFiles(ctx, func(target string, size int64) error {
		if size != int64(len(target)) {
			t.Errorf("%s: size %d", target, size)
		}
		got = append(got, target)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"part-2.jsonl", "x/part-1.jsonl"}) {
		t.Errorf("ListFiles = %v", got)
	}
	r, err := b.OpenFile(ctx, "x/part-1.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(r)
	r.Close()
	if string(data) != "x/part-1.jsonl" {
		t.Errorf("OpenFile read %q", data)
	}
}

// TestSweepRemovesInterruptedPuts: the temporary files that a crash left
// in the middle of PutMeta (this namespace's manifests only, and claims
// whose number is taken) and PutFile (markers) are removed by the sweep.
func TestSweepRemovesInterruptedPuts(t *testing.T) {
	root := t.TempDir()
	b := New(vfs.OS{}, root)
	mdir := filepath.Join(root, driver.MetaDir, "manifests")
	files := map[string]bool{ // name -> removed by Sweep("part-0-")
		filepath.Join(mdir, ".tmp-0a1b-00000000000000000002-part-0.json"):        true,
		filepath.Join(mdir, ".tmp-0a1c-00000000000000000002-part-1.json"):        false, // another writer's
		filepath.Join(mdir, "00000000000000000001-part-0.json"):                  false,
		filepath.Join(root, "2026-12-01--10", ".tmp-0a1d-_SUCCESS"):              true,
		filepath.Join(root, "2026-12-01--10", "_SUCCESS"):                        false,
		filepath.Join(root, "2026-12-01--10", "part-0-r-1.jsonl"):                false,
		filepath.Join(root, driver.MetaDir, "claims", "00000002.json"):           false,
		filepath.Join(root, driver.MetaDir, "claims", ".tmp-0a1e-00000002.json"): true,  // lost the claim, or died
		filepath.Join(root, driver.MetaDir, "claims", ".tmp-0a1f-00000001.json"): true,  // an older one
		filepath.Join(root, driver.MetaDir, "claims", ".tmp-0a20-00000003.json"): false, // being made now
	}
	for name := range files {
		os.MkdirAll(filepath.Dir(name), 0o755)
		if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Sweep(t.Context(), "part-0-", nil); err != nil {
		t.Fatal(err)
	}
	for name, removed := range files {
		_, err := os.Stat(name)
		if gone := errors.Is(err, fs.ErrNotExist); gone != removed {
			t.Errorf("%s: removed=%v, want %v", name, gone, removed)
		}
	}
}
