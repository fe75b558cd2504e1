package localfs_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/committer/drivertest"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/vfs"
	"github.com/filesink/filesink/vfs/crashfs"
)

var crashSeed = flag.Int64("localfs.crashseed", 0, "base seed of the random power-loss clones (0: from the clock; the seed used is logged)")

// TestConformance runs the backend conformance suite against the real file
// system (no power-loss simulation) and the crash-simulating file system,
// once keeping only the durable state at each power loss (the worst case)
// and once keeping a seeded random share of what was not durable.
func TestConformance(t *testing.T) {
	t.Run("OS", func(t *testing.T) {
		drivertest.RunConformanceTests(t, func(t *testing.T) drivertest.Harness {
			return &fsHarness{fsys: vfs.OS{}, root: t.TempDir()}
		})
	})
	t.Run("OS/direct-io", func(t *testing.T) {
		drivertest.RunConformanceTests(t, func(t *testing.T) drivertest.Harness {
			return &fsHarness{fsys: vfs.OS{}, root: t.TempDir(), opts: []localfs.Option{localfs.WithDirectIO(true)}}
		})
	})
	t.Run("crashfs/synced", func(t *testing.T) {
		drivertest.RunConformanceTests(t, func(t *testing.T) drivertest.Harness {
			m := crashfs.New()
			return &fsHarness{fsys: m, root: "/out", crash: &crashState{fs: m, synced: true}}
		})
	})
	t.Run("crashfs/random", func(t *testing.T) {
		base := *crashSeed
		if base == 0 {
			base = time.Now().UnixNano()
		}
		t.Logf("power-loss clones seeded from %d (reproduce with -localfs.crashseed=%d)", base, base)
		drivertest.RunConformanceTests(t, func(t *testing.T) drivertest.Harness {
			m := crashfs.New()
			return &fsHarness{fsys: m, root: "/out", crash: &crashState{fs: m, seed: new(base)}}
		})
	})
}

// fsHarness is a drivertest.Harness for localfs over any vfs.FS.
type fsHarness struct {
	fsys  vfs.FS
	root  string
	opts  []localfs.Option
	crash *crashState // nil: the file system cannot simulate a power loss
}

// crashState makes power-loss clones of a crashfs.FS.
type crashState struct {
	fs     *crashfs.FS
	synced bool   // CrashCloneSynced instead of CrashClone
	seed   *int64 // the next seed, shared by a case's clones
}

func (h *fsHarness) Backend() driver.Backend { return localfs.New(h.fsys, h.root, h.opts...) }

func (h *fsHarness) abs(rel string) string { return filepath.Join(h.root, filepath.FromSlash(rel)) }

func (h *fsHarness) ReadTarget(_ context.Context, target string) ([]byte, error) {
	return vfs.ReadFile(h.fsys, h.abs(target))
}

// Visible lists the files a reader of the output sees: every name under the
// root with no component starting with '.' or '_'.
func (h *fsHarness) Visible(context.Context) ([]string, error) {
	var out []string
	var walk func(rel string) error
	walk = func(rel string) error {
		ents, err := h.fsys.ReadDir(h.abs(rel))
		if err != nil {
			if rel == "" && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		for _, e := range ents {
			if n := e.Name(); n[0] == '.' || n[0] == '_' {
				continue
			}
			child := path.Join(rel, e.Name())
			if e.IsDir() {
				if err := walk(child); err != nil {
					return err
				}
				continue
			}
			out = append(out, child)
		}
		return nil
	}
	return out, walk("")
}

func (h *fsHarness) Crash(t *testing.T) (drivertest.Harness, bool) {
	if h.crash == nil {
		return nil, false
	}
	c := *h.crash
	if c.synced {
		c.fs = h.crash.fs.CrashCloneSynced()
		t.Log("power loss: CrashCloneSynced")
	} else {
		seed := *c.seed
		*c.seed++
		c.fs = h.crash.fs.CrashClone(seed)
		t.Logf("power loss: CrashClone(%d)", seed)
	}
	return &fsHarness{fsys: c.fs, root: h.root, crash: &c}, true
}

func (h *fsHarness) Tamper() (drivertest.Tamperer, bool) { return h, true }

func (h *fsHarness) staging(data json.RawMessage) (string, error) {
	_, staging, err := localfs.New(h.fsys, h.root).Describe(data)
	return h.abs(staging), err
}

func (h *fsHarness) remove(name string) error {
	if err := h.fsys.Remove(name); err != nil {
		return err
	}
	return h.fsys.SyncDir(filepath.Dir(name))
}

func (h *fsHarness) DeleteStaging(_ context.Context, data json.RawMessage) error {
	name, err := h.staging(data)
	if err != nil {
		return err
	}
	return h.remove(name)
}

func (h *fsHarness) TruncateStaging(_ context.Context, data json.RawMessage, size int64) error {
	name, err := h.staging(data)
	if err != nil {
		return err
	}
	f, err := h.fsys.OpenAppend(name)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (h *fsHarness) DeleteTarget(_ context.Context, target string) error {
	return h.remove(h.abs(target))
}

func (h *fsHarness) PutTarget(_ context.Context, target string, content []byte) error {
	name := h.abs(target)
	if err := vfs.MkdirAllSync(h.fsys, filepath.Dir(name)); err != nil {
		return err
	}
	if err := h.fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := vfs.WriteFileSync(h.fsys, name, content); err != nil {
		return err
	}
	return h.fsys.SyncDir(filepath.Dir(name))
}
