package drivertest

import (
	"errors"
	"io"
	"io/fs"
	"slices"
	"testing"

	"github.com/filesink/filesink/committer"
)

// testPersistAsync: the function PersistAsync returns gives a resumable of
// exactly the bytes written before the call, even when more are written
// while it waits; Resume from it continues right after them.
func testPersistAsync(t *testing.T, e *env) {
	w := e.open(target1)
	e.write(w, hello)
	wait, err := w.PersistAsync(e.ctx)
	if err != nil {
		t.Fatalf("PersistAsync: %v", err)
	}
	e.write(w, world)
	r, err := wait(e.ctx)
	if err != nil {
		t.Fatalf("the wait of PersistAsync: %v", err)
	}
	if w.MustRoll() {
		t.Error("MustRoll() = true after a few bytes")
	}
	e.close(w)
	w = e.resume(r, int64(len(hello)))
	e.write(w, []byte("there\n"))
	e.commit(e.closeForCommit(w))
	e.wantTarget(target1, concat(hello, []byte("there\n")))
}

// testMetaPutGetList: PutMeta publishes at most once (the same bytes
// again are accepted, other bytes are ErrAlreadyExists and change
// nothing), GetMeta of a missing name matches fs.ErrNotExist, ListMeta and
// ListMetaAfter list sorted names, none for a missing directory, and
// metadata is never visible output.
func testMetaPutGetList(t *testing.T, e *env) {
	b := e.backend()
	names := []string{"m/b.json", "m/a.json", "m/c.json"}
	for _, n := range names {
		if err := b.PutMeta(e.ctx, n, []byte(n)); err != nil {
			t.Fatalf("PutMeta(%q): %v", n, err)
		}
	}
	if err := b.PutMeta(e.ctx, "m/a.json", []byte("m/a.json")); err != nil {
		t.Errorf("PutMeta of the same bytes again: %v", err)
	}
	wantErr(t, "PutMeta of other bytes", b.PutMeta(e.ctx, "m/a.json", []byte("other")), committer.ErrAlreadyExists)
	got, err := b.GetMeta(e.ctx, "m/a.json")
	if err != nil || string(got) != "m/a.json" {
		t.Errorf("GetMeta(m/a.json) = %q, %v; want the first bytes", got, err)
	}
	if _, err := b.GetMeta(e.ctx, "m/none.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("GetMeta of a missing name: %v, want an error matching fs.ErrNotExist", err)
	}
	list, err := b.ListMeta(e.ctx, "m")
	if want := []string{"m/a.json", "m/b.json", "m/c.json"}; err != nil || !slices.Equal(list, want) {
		t.Errorf("ListMeta(m) = %q, %v; want %q", list, err, want)
	}
	for after, want := range map[string][]string{
		"m/a.json": {"m/b.json", "m/c.json"},
		"m/a~":     {"m/b.json", "m/c.json"},
		"m/c.json": nil,
	} {
		list, err := b.ListMetaAfter(e.ctx, "m", after)
		if err != nil || !slices.Equal(list, want) {
			t.Errorf("ListMetaAfter(m, %q) = %q, %v; want %q", after, list, err, want)
		}
	}
	if list, err := b.ListMeta(e.ctx, "none"); err != nil || len(list) != 0 {
		t.Errorf("ListMeta of a missing directory = %q, %v; want none", list, err)
	}
	if b.MetaLocation("m/a.json") == "" {
		t.Error("MetaLocation is empty")
	}
	e.wantVisible()
}

// testFilesListOpen: ListFiles visits exactly the published files with
// their sizes (not hidden files put by PutFile), OpenFile reads them back.
func testFilesListOpen(t *testing.T, e *env) {
	b := e.backend()
	e.publish(target1, hello)
	e.publish("b2/part-0-r1-3.txt", world)
	if err := b.PutFile(e.ctx, "b1/_SUCCESS", []byte("{}")); err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	w := e.open(target2) // in progress: not listed
	e.write(w, hello)
	e.persist(w)
	defer e.close(w)
	sizes := map[string]int64{}
	err := b.ListFiles(e.ctx, func(target string, size int64) error {
		sizes[target] = size
		return nil
	})
	if err != nil {
		t.Fatalf("ListFiles: %v", err)
	}
	want := map[string]int64{target1: int64(len(hello)), "b2/part-0-r1-3.txt": int64(len(world))}
	if len(sizes) != len(want) {
		t.Errorf("ListFiles visited %v, want %v", sizes, want)
	}
	for k, n := range want {
		if sizes[k] != n {
			t.Errorf("ListFiles: %s has %d bytes, want %d", k, sizes[k], n)
		}
	}
	stop := errors.New("stop")
	if err := b.ListFiles(e.ctx, func(string, int64) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("ListFiles with fn failing: %v, want fn's error", err)
	}
	r, err := b.OpenFile(e.ctx, target1)
	if err != nil {
		t.Fatalf("OpenFile: %v", err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(got) != string(hello) {
		t.Errorf("OpenFile(%q) read %q, %v; want %q", target1, got, err, hello)
	}
	if r, err := b.OpenFile(e.ctx, "b9/part-0-r1-9.txt"); err == nil {
		r.Close()
		t.Error("OpenFile of a missing target succeeded")
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenFile of a missing target: %v, want an error matching fs.ErrNotExist", err)
	}
	if b.FileLocation(target1) == "" {
		t.Error("FileLocation is empty")
	}
}
