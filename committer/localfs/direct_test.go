package localfs

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/filesink/filesink/internal/vfs"
)

// TestDirectIOContent writes a part through the direct appender in chunks
// of odd sizes with checkpoints (PersistAsync and Persist) in between,
// resumes it from a checkpoint taken in the middle of a block (the bytes
// written after it are cut off), writes on and commits: the published file
// holds exactly the bytes of the checkpoint plus those written after the
// resume. With and without direct I/O, which must give the same file.
func TestDirectIOContent(t *testing.T) {
	ctx := context.Background()
	for _, direct := range []bool{true, false} {
		root := t.TempDir()
		b := New(vfs.OS{}, root, WithDirectIO(direct))
		pw, err := b.Open(ctx, "a/part-0")
		if err != nil {
			t.Fatal(err)
		}
		w := pw.(*writer)
		if direct && w.da == nil {
			t.Logf("%s: no direct I/O on this filesystem; testing the buffered path only", root)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		var want []byte
		write := func(w *writer, n int) {
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(rng.IntN(256))
			}
			if _, err := w.Write(p); err != nil {
				t.Fatal(err)
			}
			want = append(want, p...)
		}
		var mid json.RawMessage
		for i := range 40 {
			write(w, 1+rng.IntN(300_000))
			switch i {
			case 10, 25:
				wait, err := w.PersistAsync(ctx)
				if err != nil {
					t.Fatal(err)
				}
				write(w, 5000) // beside the fsync, rewriting its last block
				rec, err := wait(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if i == 25 {
					mid = rec
					want = want[:w.Size()-5000]
				}
			case 17:
				if _, err := w.Persist(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if i == 25 {
				break
			}
		}
		// What was written after the checkpoint "mid" is lost in a crash.
		kept := len(want)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if mid == nil {
			t.Fatal("no checkpoint")
		}
		pw, err = b.Resume(ctx, mid)
		if err != nil {
			t.Fatal(err)
		}
		w = pw.(*writer)
		if got := w.Size(); got != int64(kept) {
			t.Fatalf("resumed at %d bytes, want %d", got, kept)
		}
		for range 5 {
			write(w, 1+rng.IntN(700_000))
		}
		c, err := w.CloseForCommit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, "a", "part-0"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("direct=%v: published %d bytes, want %d (equal prefix %d)", direct, len(got), len(want), commonPrefix(got, want))
		}
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
