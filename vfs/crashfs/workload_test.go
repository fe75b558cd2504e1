package crashfs

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/filesink/filesink/vfs"
)

// workload drives an FS with random operations under /w and keeps a model
// of every file: each state its content went through and the index of the
// state at its last successful Sync.
type workload struct {
	m      *FS
	rng    *rand.Rand
	dirs   []string
	files  []*mfile
	stable map[string]string // durable files never touched again
	serial int
}

type mfile struct {
	names   map[string]bool // every name the file had
	name    string          // current name
	removed bool
	history [][]byte // every state, oldest first; never modified
	synced  int      // index in history of the state at the last Sync
	h       vfs.File // open handle, or nil
	appends bool     // h was opened with OpenAppend
	off     int      // h's offset, if !appends
}

func (f *mfile) cur() []byte { return f.history[len(f.history)-1] }

// randomWorkload runs n random operations on a new FS and returns it with
// its model. Open handles are left open.
func randomWorkload(t *testing.T, seed int64, n int) (*FS, *workload) {
	t.Helper()
	w := &workload{
		m:      New(),
		rng:    rand.New(rand.NewPCG(uint64(seed), 42)),
		dirs:   []string{"/w", "/w/d1", "/w/d2", "/w/d3"},
		stable: map[string]string{},
	}
	for _, d := range w.dirs {
		must(t, vfs.MkdirAllSync(w.m, d))
	}
	for i := range 3 {
		p := fmt.Sprintf("%s/stable%d", w.dirs[i+1], i)
		data := fmt.Sprintf("stable-%d-%d", seed, i)
		must(t, vfs.WriteFileSync(w.m, p, []byte(data)))
		must(t, w.m.SyncDir(w.dirs[i+1]))
		w.stable[p] = data
	}
	for range n {
		w.step(t)
	}
	return w.m, w
}

func (w *workload) name(prefix string) string {
	w.serial++
	return fmt.Sprintf("%s/%s%d", w.dirs[w.rng.IntN(len(w.dirs))], prefix, w.serial)
}

// pick returns a random file satisfying ok, or nil.
func (w *workload) pick(ok func(*mfile) bool) *mfile {
	var c []*mfile
	for _, f := range w.files {
		if ok(f) {
			c = append(c, f)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[w.rng.IntN(len(c))]
}

func open(f *mfile) bool { return f.h != nil }
func live(f *mfile) bool { return !f.removed }

func (w *workload) step(t *testing.T) {
	t.Helper()
	m := w.m
	switch r := w.rng.IntN(100); {
	case r < 10:
		p := w.name("f")
		h, err := m.Create(p)
		must(t, err)
		w.files = append(w.files, &mfile{names: map[string]bool{p: true}, name: p, history: [][]byte{nil}, h: h})
	case r < 40:
		if f := w.pick(open); f != nil {
			p := make([]byte, 1+w.rng.IntN(16))
			for i := range p {
				p[i] = byte(w.rng.IntN(256))
			}
			off := f.off
			if f.appends {
				off = len(f.cur())
			}
			if n, err := f.h.Write(p); n != len(p) || err != nil {
				t.Fatalf("write: %d, %v", n, err)
			}
			next := make([]byte, max(len(f.cur()), off+len(p)))
			copy(next, f.cur())
			copy(next[off:], p)
			f.history = append(f.history, next)
			f.off = off + len(p)
		}
	case r < 48:
		if f := w.pick(open); f != nil {
			// A file written at an offset only shrinks, so that its writes
			// stay at or past its end; one opened for appending also grows.
			size := w.rng.IntN(len(f.cur()) + 1)
			if f.appends {
				size = w.rng.IntN(len(f.cur()) + 6)
			}
			must(t, f.h.Truncate(int64(size)))
			next := make([]byte, size)
			copy(next, f.cur())
			f.history = append(f.history, next)
		}
	case r < 60:
		if f := w.pick(open); f != nil {
			must(t, f.h.Sync())
			f.synced = len(f.history) - 1
		}
	case r < 66:
		if f := w.pick(open); f != nil {
			must(t, f.h.Close())
			f.h = nil
		}
	case r < 72:
		if f := w.pick(func(f *mfile) bool { return f.h == nil && !f.removed }); f != nil {
			h, err := m.OpenAppend(f.name)
			must(t, err)
			f.h, f.appends = h, true
		}
	case r < 80:
		if f := w.pick(live); f != nil {
			p := w.name("r")
			must(t, m.RenameNoReplace(f.name, p))
			f.name = p
			f.names[p] = true
		}
	case r < 84:
		if f := w.pick(live); f != nil {
			must(t, m.Remove(f.name))
			f.removed = true
		}
	case r < 96:
		must(t, m.SyncDir(w.dirs[w.rng.IntN(len(w.dirs))]))
	default:
		if f := w.pick(live); f != nil {
			got, err := vfs.ReadFile(m, f.name)
			must(t, err)
			if !bytes.Equal(got, f.cur()) {
				t.Fatalf("live %s = %q, model %q", f.name, got, f.cur())
			}
		}
	}
}

// syncAll makes everything durable: every file with unsynced data is synced
// and every directory too.
func (w *workload) syncAll(t *testing.T) {
	t.Helper()
	for _, f := range w.files {
		if f.removed || f.synced == len(f.history)-1 {
			continue
		}
		if f.h == nil {
			h, err := w.m.OpenAppend(f.name)
			must(t, err)
			f.h, f.appends = h, true
		}
		must(t, f.h.Sync())
		f.synced = len(f.history) - 1
	}
	for _, d := range w.dirs {
		must(t, w.m.SyncDir(d))
	}
}

// plausible reports whether content found at path p after a crash is a
// prefix of a state that a file named p went through since its last sync,
// no shorter than the shortest of those states.
func (w *workload) plausible(p string, content []byte) bool {
	for _, f := range w.files {
		if !f.names[p] {
			continue
		}
		minLen := len(f.history[f.synced])
		for _, s := range f.history[f.synced:] {
			minLen = min(minLen, len(s))
		}
		if len(content) < minLen {
			continue
		}
		for _, s := range f.history[f.synced:] {
			if bytes.HasPrefix(s, content) {
				return true
			}
		}
	}
	return false
}
