package localfs_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/vfs"
)

// directSupported reports whether the filesystem of dir takes O_DIRECT
// writes (tmpfs on older kernels does not).
func directSupported(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.CreateTemp(dir, "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if vfs.SetDirect(f, true) != nil {
		return false
	}
	buf := vfs.AlignedBuffer(vfs.DirectAlign)[:vfs.DirectAlign]
	_, err = f.Write(buf)
	return err == nil
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeAll writes each of sizes bytes of random data to pw and returns
// them.
func writeAll(t *testing.T, r *rand.Rand, pw driver.PartWriter, sizes ...int) []byte {
	t.Helper()
	var all []byte
	for _, n := range sizes {
		b := randomBytes(r, n)
		if k, err := pw.Write(b); err != nil || k != n {
			t.Fatalf("Write(%d bytes) = %d, %v", n, k, err)
		}
		all = append(all, b...)
	}
	return all
}

func fileBytes(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDirectIO: with large writes a part writer goes to direct mode (where
// the filesystem allows it): the staging file holds every byte written at
// each persist, resuming at an unaligned persisted length works, and the
// published file is the bytes written, with small and unaligned writes in
// between.
func TestDirectIO(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	supported := directSupported(t, dir)
	b := localfs.New(vfs.OS{}, dir, localfs.WithDirectIO(true))
	r := rand.New(rand.NewPCG(1, 2))
	const target = "a/part-0.bin"
	staging := filepath.Join(dir, filepath.FromSlash(localfs.StagingName(target)))
	pw, err := b.Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	want := writeAll(t, r, pw, 100, 700<<10, 3<<20+123, 5, 1<<20)
	if supported && !localfs.InDirectMode(pw) {
		t.Fatal("not in direct mode after writes of 700 KiB and more")
	}
	wait, err := pw.PersistAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Writes beside the fsync.
	more := writeAll(t, r, pw, 2<<20, 77)
	resumable, err := wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantLength(t, resumable, int64(len(want)))
	if got := fileBytes(t, staging); !bytes.HasPrefix(got, want) {
		t.Fatalf("after the persist the staging file has %d bytes, not starting with the %d written before it", len(got), len(want))
	}
	want = append(want, more...)
	want = append(want, writeAll(t, r, pw, 300<<10)...)
	r2, err := pw.Persist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantLength(t, r2, int64(len(want)))
	if got := fileBytes(t, staging); !bytes.Equal(got, want) {
		t.Fatalf("after the second persist the staging file has %d bytes, want the %d written", len(got), len(want))
	}
	// Written after the persist and abandoned, as by a crash.
	writeAll(t, r, pw, 1<<20+5)
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	rw, err := b.Resume(ctx, r2)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, writeAll(t, r, rw, 9, 1<<20+4097, 512<<10)...)
	pending, err := rw.CloseForCommit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantLength(t, pending, int64(len(want)))
	if err := b.Commit(ctx, pending); err != nil {
		t.Fatal(err)
	}
	if got := fileBytes(t, filepath.Join(dir, filepath.FromSlash(target))); !bytes.Equal(got, want) {
		t.Fatalf("published %d bytes, not the %d written", len(got), len(want))
	}
	n := localfs.DirectWrites(b)
	if supported && n == 0 {
		t.Error("no write was made with O_DIRECT")
	}
	if !supported && !localfs.DirectOff(b) {
		t.Error("the filesystem refuses O_DIRECT but the backend did not turn it off")
	}
	t.Logf("O_DIRECT supported: %v; direct writes: %d", supported, n)
}

// TestDirectIORefused: where setting O_DIRECT fails, the writers go on
// buffered with the same bytes, and the backend stops trying.
func TestDirectIORefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := localfs.New(vfs.OS{}, dir, localfs.WithDirectIO(true))
	localfs.RefuseDirect(b)
	r := rand.New(rand.NewPCG(3, 4))
	pw, err := b.Open(ctx, "part-0.bin")
	if err != nil {
		t.Fatal(err)
	}
	want := writeAll(t, r, pw, 10, 2<<20, 3)
	pending, err := pw.CloseForCommit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, pending); err != nil {
		t.Fatal(err)
	}
	if got := fileBytes(t, filepath.Join(dir, "part-0.bin")); !bytes.Equal(got, want) {
		t.Fatalf("published %d bytes, not the %d written", len(got), len(want))
	}
	if n := localfs.DirectWrites(b); n != 0 {
		t.Errorf("%d direct writes with O_DIRECT refused", n)
	}
	if !localfs.DirectOff(b) {
		t.Error("direct I/O still on after the filesystem refused it")
	}
	pw2, err := b.Open(ctx, "part-1.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer pw2.Close()
	writeAll(t, r, pw2, 1<<20)
	if localfs.InDirectMode(pw2) {
		t.Error("a writer opened after the refusal is in direct mode")
	}
}

// TestDirectIOBound: at most MaxDirect writers of a backend are in direct
// mode at once; a buffer freed by a close goes to the next large write;
// WithDirectIO(false), the default, keeps every writer buffered.
func TestDirectIOBound(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	supported := directSupported(t, dir)
	if !supported {
		t.Logf("the filesystem of %s refuses O_DIRECT: checking only that nothing is direct", dir)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for k, opts := range [][]localfs.Option{{localfs.WithDirectIO(true)}, {localfs.WithDirectIO(false)}, nil} {
		on := k == 0
		b := localfs.New(vfs.OS{}, filepath.Join(dir, strconv.Itoa(k)), opts...)
		var pws []driver.PartWriter
		direct := 0
		for i := range localfs.MaxDirect + 3 {
			pw, err := b.Open(ctx, "part-"+strconv.Itoa(i)+".bin")
			if err != nil {
				t.Fatal(err)
			}
			pws = append(pws, pw)
			writeAll(t, r, pw, 300<<10)
			if localfs.InDirectMode(pw) {
				direct++
			}
		}
		want := 0
		if on && supported {
			want = localfs.MaxDirect
		}
		if direct != want {
			t.Errorf("options %d (direct I/O %v): %d writers in direct mode, want %d", k, on, direct, want)
		}
		last := pws[len(pws)-1]
		if on && supported {
			if localfs.InDirectMode(last) {
				t.Fatal("setup: the last writer is in direct mode")
			}
			if err := pws[0].Close(); err != nil {
				t.Fatal(err)
			}
			pws = pws[1:]
			writeAll(t, r, last, 300<<10)
			if !localfs.InDirectMode(last) {
				t.Error("the buffer a close freed did not go to the next large write")
			}
		}
		for _, pw := range pws {
			if err := pw.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
