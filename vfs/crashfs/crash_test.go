package crashfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/filesink/filesink/vfs"
)

const seeds = 300

// snapshot returns every file and directory under root: a file maps to its
// content, a directory (path with a trailing slash) to "".
func snapshot(t *testing.T, fsys vfs.FS, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		ents, err := fsys.ReadDir(dir)
		if err != nil {
			t.Fatalf("ReadDir %s: %v", dir, err)
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			if e.IsDir() {
				out[p+"/"] = ""
				walk(p)
				continue
			}
			data, err := vfs.ReadFile(fsys, p)
			if err != nil {
				t.Fatalf("read %s: %v", p, err)
			}
			out[p] = string(data)
		}
	}
	walk(root)
	return out
}

func render(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s %q\n", k, m[k])
	}
	return b.String()
}

// readOpt reads name; ok is false if it does not exist.
func readOpt(t *testing.T, fsys vfs.FS, name string) (string, bool) {
	t.Helper()
	data, err := vfs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(data), true
}

// durableFile makes dir (durably) and a durable file name in it.
func durableFile(t *testing.T, m *FS, name, data string) {
	t.Helper()
	mkdirNew(t, m, filepath.Dir(name))
	must(t, vfs.WriteFileSync(m, name, []byte(data)))
	must(t, m.SyncDir(filepath.Dir(name)))
}

// mkdirNew makes the missing directories of dir and syncs the parent of
// each one it made, leaving existing ones as they are (unlike
// vfs.MkdirAllSync, which syncs every parent).
func mkdirNew(t *testing.T, m *FS, dir string) {
	t.Helper()
	if _, err := m.Stat(dir); err == nil {
		return
	}
	parent := filepath.Dir(dir)
	mkdirNew(t, m, parent)
	must(t, m.Mkdir(dir, 0o755))
	must(t, m.SyncDir(parent))
}

func TestSyncedDataNeverLost(t *testing.T) {
	m := New()
	durableFile(t, m, "/d/a", "")
	f, err := m.OpenAppend("/d/a")
	must(t, err)
	_, err = f.Write([]byte("synced."))
	must(t, err)
	must(t, f.Sync())
	_, err = f.Write([]byte("unsynced-1."))
	must(t, err)
	_, err = f.Write([]byte("unsynced-2."))
	must(t, err)

	if got, _ := readOpt(t, m.CrashCloneSynced(), "/d/a"); got != "synced." {
		t.Fatalf("CrashCloneSynced: %q, want exactly the synced data", got)
	}
	all := "synced.unsynced-1.unsynced-2."
	var lost, partial, kept int
	for seed := range int64(seeds) {
		got, ok := readOpt(t, m.CrashClone(seed), "/d/a")
		if !ok || !strings.HasPrefix(got, "synced.") || !strings.HasPrefix(all, got) {
			t.Fatalf("seed %d: %q (exists %v), want synced data plus a prefix of the rest", seed, got, ok)
		}
		switch len(got) {
		case len("synced."):
			lost++
		case len(all):
			kept++
		default:
			partial++
		}
	}
	if lost == 0 || partial == 0 || kept == 0 {
		t.Fatalf("over %d seeds: lost %d, partial %d, kept %d; want each outcome", seeds, lost, partial, kept)
	}

	// Once synced, nothing is lost whatever the seed.
	must(t, f.Sync())
	for seed := range int64(seeds) {
		if got, _ := readOpt(t, m.CrashClone(seed), "/d/a"); got != all {
			t.Fatalf("seed %d after Sync: %q", seed, got)
		}
	}
}

func TestFileWithoutSyncDirMayVanish(t *testing.T) {
	m := New()
	must(t, vfs.MkdirAllSync(m, "/d"))
	must(t, vfs.WriteFileSync(m, "/d/a", []byte("data"))) // no SyncDir
	wantMissing(t, m.CrashCloneSynced(), "/d/a")
	var gone, there int
	for seed := range int64(seeds) {
		got, ok := readOpt(t, m.CrashClone(seed), "/d/a")
		switch {
		case !ok:
			gone++
		case got == "data":
			there++
		default:
			t.Fatalf("seed %d: %q; the data was synced", seed, got)
		}
	}
	if gone == 0 || there == 0 {
		t.Fatalf("gone %d, there %d; want both", gone, there)
	}
	must(t, m.SyncDir("/d"))
	for seed := range int64(seeds) {
		if got, ok := readOpt(t, m.CrashClone(seed), "/d/a"); !ok || got != "data" {
			t.Fatalf("seed %d after SyncDir: %q, %v", seed, got, ok)
		}
	}
}

func TestDirectoryWithoutParentSyncVanishes(t *testing.T) {
	m := New()
	must(t, m.Mkdir("/d", 0o755)) // "/" not synced
	durableFile(t, m, "/d/a", "x")
	c := m.CrashCloneSynced()
	wantMissing(t, c, "/d")
	if _, err := c.Stat("/"); err != nil {
		t.Fatalf("root missing after crash: %v", err)
	}
	must(t, m.SyncDir("/"))
	for seed := range int64(seeds) {
		if got, ok := readOpt(t, m.CrashClone(seed), "/d/a"); !ok || got != "x" {
			t.Fatalf("seed %d: %q, %v", seed, got, ok)
		}
	}
}

func TestRenameWithoutSyncDirMayBeUndone(t *testing.T) {
	m := New()
	durableFile(t, m, "/d/tmp", "content")
	must(t, m.RenameNoReplace("/d/tmp", "/d/final"))

	c := m.CrashCloneSynced()
	wantMissing(t, c, "/d/final")
	wantContent(t, c, "/d/tmp", "content")

	var undone, done int
	for seed := range int64(seeds) {
		c := m.CrashClone(seed)
		_, oldOK := readOpt(t, c, "/d/tmp")
		got, newOK := readOpt(t, c, "/d/final")
		switch {
		case oldOK && !newOK:
			undone++
		case newOK && !oldOK && got == "content":
			done++
		default:
			t.Fatalf("seed %d: old %v new %v (%q): a rename is atomic\n%s", seed, oldOK, newOK, got, c)
		}
	}
	if undone == 0 || done == 0 {
		t.Fatalf("undone %d, done %d; want both", undone, done)
	}

	must(t, m.SyncDir("/d"))
	for seed := range int64(seeds) {
		c := m.CrashClone(seed)
		wantMissing(t, c, "/d/tmp")
		wantContent(t, c, "/d/final", "content")
	}
}

func TestCrossDirectoryRenameIsAtomic(t *testing.T) {
	setup := func() *FS {
		m := New()
		durableFile(t, m, "/src/a", "A")
		must(t, vfs.MkdirAllSync(m, "/dst"))
		must(t, m.RenameNoReplace("/src/a", "/dst/a"))
		return m
	}

	m := setup()
	for seed := range int64(seeds) {
		c := m.CrashClone(seed)
		_, inSrc := readOpt(t, c, "/src/a")
		_, inDst := readOpt(t, c, "/dst/a")
		if inSrc == inDst {
			t.Fatalf("seed %d: in src %v, in dst %v; want exactly one\n%s", seed, inSrc, inDst, c)
		}
	}

	// Syncing either directory makes the whole rename durable.
	for _, dir := range []string{"/src", "/dst"} {
		m := setup()
		must(t, m.SyncDir(dir))
		for seed := range int64(seeds) {
			c := m.CrashClone(seed)
			wantMissing(t, c, "/src/a")
			wantContent(t, c, "/dst/a", "A")
		}
	}
}

func TestSyncDirCommitsEarlierChangesOfTheOtherDirectory(t *testing.T) {
	// A rename made durable by SyncDir of its target carries with it the
	// changes made before it in its source directory: per-directory
	// journals commit in order.
	m := New()
	must(t, vfs.MkdirAllSync(m, "/src"))
	must(t, vfs.MkdirAllSync(m, "/dst"))
	must(t, vfs.WriteFileSync(m, "/src/first", []byte("1")))
	must(t, vfs.WriteFileSync(m, "/src/moved", []byte("2")))
	must(t, vfs.WriteFileSync(m, "/src/after", []byte("3")))
	must(t, m.RenameNoReplace("/src/moved", "/dst/moved"))
	must(t, m.SyncDir("/dst"))
	c := m.CrashCloneSynced()
	wantContent(t, c, "/src/first", "1")
	wantContent(t, c, "/dst/moved", "2")
	wantMissing(t, c, "/src/moved")
	wantContent(t, c, "/src/after", "3") // created before the rename
}

func TestRemoveWithoutSyncDirMayBeUndone(t *testing.T) {
	m := New()
	durableFile(t, m, "/d/a", "A")
	f, err := m.OpenAppend("/d/a")
	must(t, err)
	_, err = f.Write([]byte("-unsynced"))
	must(t, err)
	must(t, m.Remove("/d/a"))
	wantContent(t, m.CrashCloneSynced(), "/d/a", "A")
	for seed := range int64(seeds) {
		if got, ok := readOpt(t, m.CrashClone(seed), "/d/a"); ok && !strings.HasPrefix("A-unsynced", got) {
			t.Fatalf("seed %d: %q", seed, got)
		}
	}
	must(t, m.SyncDir("/d"))
	for seed := range int64(seeds) {
		wantMissing(t, m.CrashClone(seed), "/d/a")
	}
	// The removed file stays usable through its open File.
	_, err = f.Write([]byte("!"))
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
}

func TestTruncateAndSync(t *testing.T) {
	m := New()
	data := strings.Repeat("0123456789", 10)
	durableFile(t, m, "/d/a", data)
	f, err := m.OpenAppend("/d/a")
	must(t, err)
	must(t, f.Truncate(10))
	for seed := range int64(seeds) {
		got, _ := readOpt(t, m.CrashClone(seed), "/d/a")
		if got != data && got != data[:10] {
			t.Fatalf("seed %d: %q; a truncate is all or nothing", seed, got)
		}
	}
	must(t, f.Sync())
	for seed := range int64(seeds) {
		if got, _ := readOpt(t, m.CrashClone(seed), "/d/a"); got != data[:10] {
			t.Fatalf("seed %d after Sync: %q", seed, got)
		}
	}

	// Truncate then append, unsynced: the file is one of the states it went
	// through, the last append possibly torn.
	must(t, f.Truncate(3))
	_, err = f.Write([]byte("xyz"))
	must(t, err)
	valid := map[string]bool{data[:10]: true}
	for i := range 4 {
		valid[data[:3]+"xyz"[:i]] = true
	}
	seen := map[string]bool{}
	for seed := range int64(seeds) {
		got, _ := readOpt(t, m.CrashClone(seed), "/d/a")
		if !valid[got] {
			t.Fatalf("seed %d: %q is not a state the file went through", seed, got)
		}
		seen[got] = true
	}
	if len(seen) < 3 {
		t.Fatalf("only %d distinct outcomes: %v", len(seen), seen)
	}
	must(t, f.Close())

	// Growing by Truncate gives zeros, never stale bytes.
	g, err := m.OpenAppend("/d/a")
	must(t, err)
	must(t, g.Truncate(1))
	must(t, g.Truncate(8))
	must(t, g.Sync())
	must(t, g.Close())
	for seed := range int64(seeds) {
		if got, _ := readOpt(t, m.CrashClone(seed), "/d/a"); got != "0\x00\x00\x00\x00\x00\x00\x00" {
			t.Fatalf("seed %d: %q", seed, got)
		}
	}
}

func TestCrashCloneIsDeterministic(t *testing.T) {
	m, _ := randomWorkload(t, 1, 300)
	distinct := map[string]bool{}
	for seed := range int64(50) {
		a := render(snapshot(t, m.CrashClone(seed), "/"))
		b := render(snapshot(t, m.CrashClone(seed), "/"))
		if a != b {
			t.Fatalf("seed %d gives two different clones:\n%s\n---\n%s", seed, a, b)
		}
		distinct[a] = true
	}
	if len(distinct) < 10 {
		t.Fatalf("50 seeds gave only %d distinct clones", len(distinct))
	}
	if a, b := render(snapshot(t, m.CrashCloneSynced(), "/")), render(snapshot(t, m.CrashCloneSynced(), "/")); a != b {
		t.Fatal("CrashCloneSynced is not deterministic")
	}
}

func TestCloneIsIndependent(t *testing.T) {
	m := New()
	durableFile(t, m, "/d/a", "A")
	f, err := m.OpenAppend("/d/a")
	must(t, err)
	c := m.CrashCloneSynced()

	// Changes to the original after the clone do not reach the clone.
	_, err = f.Write([]byte("B"))
	must(t, err)
	must(t, f.Sync())
	must(t, m.RenameNoReplace("/d/a", "/d/b"))
	must(t, m.SyncDir("/d"))
	wantContent(t, c, "/d/a", "A")
	wantMissing(t, c, "/d/b")

	// Nor do changes to the clone reach the original.
	g, err := c.OpenAppend("/d/a")
	must(t, err)
	_, err = g.Write([]byte("C"))
	must(t, err)
	must(t, g.Close())
	must(t, c.Remove("/d/a"))
	wantContent(t, m, "/d/b", "AB")
	must(t, f.Close())

	// Everything in a clone is durable: crashing it again changes nothing.
	m2, _ := randomWorkload(t, 2, 200)
	c2 := m2.CrashClone(7)
	want := render(snapshot(t, c2, "/"))
	for seed := range int64(20) {
		if got := render(snapshot(t, c2.CrashClone(seed), "/")); got != want {
			t.Fatalf("crash of a clone lost something (seed %d):\n%s\nwant\n%s", seed, got, want)
		}
	}
}

func TestEverythingSyncedSurvivesEveryCrash(t *testing.T) {
	for ws := range int64(5) {
		m, w := randomWorkload(t, ws, 300)
		w.syncAll(t)
		want := render(snapshot(t, m, "/"))
		for seed := range int64(30) {
			if got := render(snapshot(t, m.CrashClone(seed), "/")); got != want {
				t.Fatalf("workload %d seed %d: after syncing everything, crash gives\n%s\nwant\n%s", ws, seed, got, want)
			}
		}
	}
}

// TestCrashNeverInventsBytes runs random workloads and checks that each
// file found after a crash is a state its file went through since its last
// sync (possibly a prefix of one, for a torn write), under a name the file
// had, and that files made fully durable are always there.
func TestCrashNeverInventsBytes(t *testing.T) {
	for ws := range int64(8) {
		m, w := randomWorkload(t, ws, 400)
		for seed := range int64(60) {
			c := m.CrashClone(seed)
			got := snapshot(t, c, "/w")
			for p, content := range got {
				if _, ok := w.stable[p]; ok || strings.HasSuffix(p, "/") {
					continue
				}
				if !w.plausible(p, []byte(content)) {
					t.Fatalf("workload %d seed %d: %s = %q was never a state of a file with that name\n%s",
						ws, seed, p, content, m)
				}
			}
			for p, content := range w.stable {
				if got[p] != content {
					t.Fatalf("workload %d seed %d: durable %s = %q, want %q", ws, seed, p, got[p], content)
				}
			}
		}
	}
}

func TestInternalStateConsistent(t *testing.T) {
	for ws := range int64(5) {
		m, _ := randomWorkload(t, ws, 400)
		m.mu.Lock()
		seen := map[*inode]bool{}
		var check func(n *inode)
		check = func(n *inode) {
			if seen[n] {
				return
			}
			seen[n] = true
			if n.dir {
				replayed := maps.Clone(n.syncedChildren)
				for _, c := range n.log {
					applyChange(replayed, c)
				}
				if !maps.Equal(replayed, n.children) {
					t.Errorf("directory: synced entries plus log differ from live entries")
				}
				for _, c := range n.children {
					check(c)
				}
				for _, c := range n.syncedChildren {
					check(c)
				}
				return
			}
			data := slices.Clone(n.synced)
			for _, op := range n.pending {
				data = op.apply(data)
			}
			if !bytes.Equal(data, n.data) {
				t.Errorf("file: synced data plus pending ops %q differ from data %q", data, n.data)
			}
		}
		check(m.root)
		m.mu.Unlock()
	}
}

func TestConcurrentUse(t *testing.T) {
	m := New()
	must(t, vfs.MkdirAllSync(m, "/c"))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			dir := fmt.Sprintf("/c/g%d", g)
			if err := m.Mkdir(dir, 0o755); err != nil {
				t.Error(err)
				return
			}
			for i := range 50 {
				tmp := fmt.Sprintf("%s/tmp%d", dir, i)
				f, err := m.Create(tmp)
				if err != nil {
					t.Error(err)
					return
				}
				f.Write([]byte("data"))
				f.Sync()
				f.Close()
				if err := m.RenameNoReplace(tmp, fmt.Sprintf("%s/f%d", dir, i)); err != nil {
					t.Error(err)
				}
				m.SyncDir(dir)
				m.ReadDir(dir)
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			m.CrashClone(int64(i))
			_ = m.String()
		}
	})
	wg.Wait()
	must(t, m.SyncDir("/c"))
	c := m.CrashCloneSynced()
	for g := range 8 {
		ents, err := c.ReadDir(fmt.Sprintf("/c/g%d", g))
		must(t, err)
		if len(ents) != 50 {
			t.Fatalf("g%d has %d entries after crash, want 50", g, len(ents))
		}
	}
}

func TestRelativeAndAbsolutePathsAgree(t *testing.T) {
	m := New()
	must(t, m.Mkdir("a", 0o755))
	mustWrite(t, m, "a/./b", "x")
	wantContent(t, m, "/a/b", "x")
	wantContent(t, m, "/a/../a/b", "x")
	fi, err := m.Stat("/")
	must(t, err)
	if !fi.IsDir() {
		t.Fatal("root is not a directory")
	}
	wantErr(t, "mkdir root", m.Mkdir("/", 0o755), fs.ErrExist)
	if err := m.Remove("/"); err == nil {
		t.Fatal("removing the root succeeded")
	}
	_, err = m.Stat("")
	wantErr(t, "stat empty name", err, fs.ErrNotExist)
}

func TestStringListsFiles(t *testing.T) {
	m := New()
	durableFile(t, m, "/d/a", "abc")
	f, err := m.OpenAppend("/d/a")
	must(t, err)
	_, err = f.Write([]byte("de"))
	must(t, err)
	must(t, m.Mkdir("/d/sub", 0o755))
	s := m.String()
	for _, want := range []string{"/d/a size=5 synced=3 pending=1", "/d/ unsynced: +sub", "/d/sub/"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() lacks %q:\n%s", want, s)
		}
	}
}
