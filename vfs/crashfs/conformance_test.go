package crashfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/filesink/filesink/vfs"
)

// The behaviour table below runs against the operating system and against
// crashfs, so that crashfs behaves like the real thing in every case the
// sink relies on.

type harness struct {
	name string
	// make returns a filesystem and an existing, empty directory in it.
	make func(t *testing.T) (vfs.FS, string)
}

func harnesses() []harness {
	return []harness{
		{"os", func(t *testing.T) (vfs.FS, string) { return vfs.OS{}, t.TempDir() }},
		{"crashfs", func(t *testing.T) (vfs.FS, string) {
			m := New()
			if err := m.Mkdir("/root", 0o755); err != nil {
				t.Fatal(err)
			}
			return m, "/root"
		}},
		{"crashfs-relative", func(t *testing.T) (vfs.FS, string) {
			m := New()
			if err := m.Mkdir("rel", 0o755); err != nil {
				t.Fatal(err)
			}
			return m, "rel"
		}},
	}
}

type behaviour struct {
	name string
	run  func(t *testing.T, fsys vfs.FS, root string)
}

func TestBehaviourMatchesOS(t *testing.T) {
	for _, h := range harnesses() {
		t.Run(h.name, func(t *testing.T) {
			for _, b := range behaviours() {
				t.Run(b.name, func(t *testing.T) {
					fsys, root := h.make(t)
					b.run(t, fsys, root)
				})
			}
		})
	}
}

// Helpers for the table.

func mustWrite(t *testing.T, fsys vfs.FS, name, data string) {
	t.Helper()
	if err := vfs.WriteFileSync(fsys, name, []byte(data)); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
}

func wantContent(t *testing.T, fsys vfs.FS, name, want string) {
	t.Helper()
	got, err := vfs.ReadFile(fsys, name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	if string(got) != want {
		t.Fatalf("%s = %q, want %q", name, got, want)
	}
}

func wantErr(t *testing.T, what string, err error, targets ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: nil error, want %v", what, targets)
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("%s: error %v does not match %v", what, err, target)
		}
	}
}

func wantMissing(t *testing.T, fsys vfs.FS, name string) {
	t.Helper()
	_, err := fsys.Stat(name)
	wantErr(t, "stat "+name, err, fs.ErrNotExist)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func behaviours() []behaviour {
	return []behaviour{
		{"CreateIsExclusive", func(t *testing.T, fsys vfs.FS, root string) {
			a := filepath.Join(root, "a")
			mustWrite(t, fsys, a, "first")
			_, err := fsys.Create(a)
			wantErr(t, "create existing", err, fs.ErrExist)
			var pe *fs.PathError
			if !errors.As(err, &pe) {
				t.Fatalf("create existing: %T is not *fs.PathError", err)
			}
			wantErr(t, "WriteFileSync existing", vfs.WriteFileSync(fsys, a, []byte("second")), fs.ErrExist)
			wantContent(t, fsys, a, "first")
			must(t, fsys.Mkdir(filepath.Join(root, "d"), 0o755))
			_, err = fsys.Create(filepath.Join(root, "d"))
			wantErr(t, "create over dir", err, fs.ErrExist)
		}},
		{"CreateMissingParent", func(t *testing.T, fsys vfs.FS, root string) {
			_, err := fsys.Create(filepath.Join(root, "nodir", "a"))
			wantErr(t, "create", err, fs.ErrNotExist)
			mustWrite(t, fsys, filepath.Join(root, "f"), "x")
			_, err = fsys.Create(filepath.Join(root, "f", "a"))
			wantErr(t, "create under file", err, syscall.ENOTDIR)
		}},
		{"CreateReadWrite", func(t *testing.T, fsys vfs.FS, root string) {
			f, err := fsys.Create(filepath.Join(root, "a"))
			must(t, err)
			defer f.Close()
			if n, err := f.Write([]byte("abcdef")); n != 6 || err != nil {
				t.Fatalf("write = %d, %v", n, err)
			}
			buf := make([]byte, 4)
			if n, err := f.ReadAt(buf, 1); n != 4 || err != nil || string(buf) != "bcde" {
				t.Fatalf("ReadAt = %d, %v, %q", n, err, buf)
			}
			// The offset is at the end after the write.
			if n, err := f.Read(buf); n != 0 || err != io.EOF {
				t.Fatalf("Read at end = %d, %v", n, err)
			}
			if n, err := f.ReadAt(buf, 4); n != 2 || err != io.EOF || string(buf[:2]) != "ef" {
				t.Fatalf("short ReadAt = %d, %v, %q", n, err, buf[:n])
			}
			if n, err := f.ReadAt(buf, 100); n != 0 || err != io.EOF {
				t.Fatalf("ReadAt past end = %d, %v", n, err)
			}
			fi, err := f.Stat()
			must(t, err)
			if fi.Size() != 6 || fi.Name() != "a" || fi.IsDir() || !fi.Mode().IsRegular() {
				t.Fatalf("File.Stat = %s %d %v %v", fi.Name(), fi.Size(), fi.IsDir(), fi.Mode())
			}
		}},
		{"CreateTruncateKeepsOffset", func(t *testing.T, fsys vfs.FS, root string) {
			a := filepath.Join(root, "a")
			f, err := fsys.Create(a)
			must(t, err)
			_, err = f.Write([]byte("abcdef"))
			must(t, err)
			must(t, f.Truncate(2))
			_, err = f.Write([]byte("X"))
			must(t, err)
			must(t, f.Close())
			wantContent(t, fsys, a, "ab\x00\x00\x00\x00X")
			f, err = fsys.OpenAppend(a)
			must(t, err)
			must(t, f.Truncate(10)) // grows with zeros
			must(t, f.Close())
			wantContent(t, fsys, a, "ab\x00\x00\x00\x00X\x00\x00\x00")
		}},
		{"OpenAppendAppendsAfterTruncate", func(t *testing.T, fsys vfs.FS, root string) {
			a := filepath.Join(root, "a")
			mustWrite(t, fsys, a, "hello world")
			f, err := fsys.OpenAppend(a)
			must(t, err)
			_, err = f.Write([]byte("!"))
			must(t, err)
			must(t, f.Truncate(5))
			_, err = f.Write([]byte(", you"))
			must(t, err)
			must(t, f.Truncate(3))
			_, err = f.Write([]byte("p"))
			must(t, err)
			fi, err := f.Stat()
			must(t, err)
			if fi.Size() != 4 {
				t.Fatalf("size %d, want 4", fi.Size())
			}
			must(t, f.Sync())
			must(t, f.Close())
			wantContent(t, fsys, a, "help")
			_, err = fsys.OpenAppend(filepath.Join(root, "missing"))
			wantErr(t, "OpenAppend missing", err, fs.ErrNotExist)
		}},
		{"OpenIsReadOnly", func(t *testing.T, fsys vfs.FS, root string) {
			a := filepath.Join(root, "a")
			mustWrite(t, fsys, a, "data")
			f, err := fsys.Open(a)
			must(t, err)
			defer f.Close()
			if _, err := f.Write([]byte("x")); err == nil {
				t.Fatal("write to a file opened with Open succeeded")
			}
			if err := f.Truncate(0); err == nil {
				t.Fatal("truncate of a file opened with Open succeeded")
			}
			got, err := io.ReadAll(f)
			must(t, err)
			if string(got) != "data" {
				t.Fatalf("read %q", got)
			}
			must(t, f.Sync()) // fsync of a read-only descriptor is allowed
			wantContent(t, fsys, a, "data")
			_, err = fsys.Open(filepath.Join(root, "missing"))
			wantErr(t, "open missing", err, fs.ErrNotExist)
		}},
		{"ClosedFile", func(t *testing.T, fsys vfs.FS, root string) {
			f, err := fsys.Create(filepath.Join(root, "a"))
			must(t, err)
			must(t, f.Close())
			_, err = f.Write([]byte("x"))
			wantErr(t, "write after close", err, fs.ErrClosed)
			_, err = f.Read(make([]byte, 1))
			wantErr(t, "read after close", err, fs.ErrClosed)
			wantErr(t, "sync after close", f.Sync(), fs.ErrClosed)
			wantErr(t, "second close", f.Close(), fs.ErrClosed)
		}},
		{"Stat", func(t *testing.T, fsys vfs.FS, root string) {
			a := filepath.Join(root, "a")
			mustWrite(t, fsys, a, "12345")
			fi, err := fsys.Stat(a)
			must(t, err)
			if fi.Name() != "a" || fi.Size() != 5 || fi.IsDir() || !fi.Mode().IsRegular() {
				t.Fatalf("Stat file = %s %d %v %v", fi.Name(), fi.Size(), fi.IsDir(), fi.Mode())
			}
			d := filepath.Join(root, "d")
			must(t, fsys.Mkdir(d, 0o755))
			fi, err = fsys.Stat(d + "/")
			must(t, err)
			if fi.Name() != "d" || !fi.IsDir() || !fi.Mode().IsDir() {
				t.Fatalf("Stat dir = %s %v %v", fi.Name(), fi.IsDir(), fi.Mode())
			}
			wantMissing(t, fsys, filepath.Join(root, "missing"))
			_, err = fsys.Stat(filepath.Join(a, "x"))
			wantErr(t, "stat under file", err, syscall.ENOTDIR)
			_, err = fsys.Stat(filepath.Join(root, "missing", "x"))
			wantErr(t, "stat under missing", err, fs.ErrNotExist)
		}},
		{"Mkdir", func(t *testing.T, fsys vfs.FS, root string) {
			d := filepath.Join(root, "d")
			must(t, fsys.Mkdir(d, 0o755))
			wantErr(t, "mkdir existing", fsys.Mkdir(d, 0o755), fs.ErrExist)
			mustWrite(t, fsys, filepath.Join(root, "f"), "")
			wantErr(t, "mkdir over file", fsys.Mkdir(filepath.Join(root, "f"), 0o755), fs.ErrExist)
			wantErr(t, "mkdir missing parent", fsys.Mkdir(filepath.Join(root, "x", "y"), 0o755), fs.ErrNotExist)
			must(t, vfs.MkdirAllSync(fsys, filepath.Join(root, "p", "q", "r")))
			fi, err := fsys.Stat(filepath.Join(root, "p", "q", "r"))
			must(t, err)
			if !fi.IsDir() {
				t.Fatal("MkdirAllSync did not make a directory")
			}
			wantErr(t, "MkdirAllSync over file",
				vfs.MkdirAllSync(fsys, filepath.Join(root, "f")), syscall.ENOTDIR)
		}},
		{"ReadDirSorted", func(t *testing.T, fsys vfs.FS, root string) {
			for _, n := range []string{"b", "a", "c10", "c2"} {
				mustWrite(t, fsys, filepath.Join(root, n), n)
			}
			must(t, fsys.Mkdir(filepath.Join(root, "B"), 0o755))
			ents, err := fsys.ReadDir(root)
			must(t, err)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
				info, err := e.Info()
				must(t, err)
				if e.Name() == "B" {
					if !e.IsDir() || e.Type() != fs.ModeDir || !info.IsDir() {
						t.Fatalf("B: IsDir %v Type %v", e.IsDir(), e.Type())
					}
					continue
				}
				if e.IsDir() || e.Type() != 0 || info.Size() != int64(len(e.Name())) || info.Name() != e.Name() {
					t.Fatalf("%s: IsDir %v Type %v Size %d", e.Name(), e.IsDir(), e.Type(), info.Size())
				}
			}
			if want := []string{"B", "a", "b", "c10", "c2"}; !slices.Equal(names, want) {
				t.Fatalf("ReadDir = %v, want %v", names, want)
			}
			_, err = fsys.ReadDir(filepath.Join(root, "missing"))
			wantErr(t, "ReadDir missing", err, fs.ErrNotExist)
			_, err = fsys.ReadDir(filepath.Join(root, "a"))
			wantErr(t, "ReadDir file", err, syscall.ENOTDIR)
			ents, err = fsys.ReadDir(filepath.Join(root, "B"))
			must(t, err)
			if len(ents) != 0 {
				t.Fatalf("empty dir lists %v", ents)
			}
		}},
		{"Remove", func(t *testing.T, fsys vfs.FS, root string) {
			d := filepath.Join(root, "d")
			must(t, fsys.Mkdir(d, 0o755))
			mustWrite(t, fsys, filepath.Join(d, "x"), "x")
			wantErr(t, "remove non-empty dir", fsys.Remove(d), syscall.ENOTEMPTY)
			wantContent(t, fsys, filepath.Join(d, "x"), "x")
			must(t, fsys.Remove(filepath.Join(d, "x")))
			wantMissing(t, fsys, filepath.Join(d, "x"))
			must(t, fsys.Remove(d))
			wantMissing(t, fsys, d)
			wantErr(t, "remove missing", fsys.Remove(d), fs.ErrNotExist)
		}},
		{"RemoveOpenFile", func(t *testing.T, fsys vfs.FS, root string) {
			a := filepath.Join(root, "a")
			f, err := fsys.Create(a)
			must(t, err)
			defer f.Close()
			_, err = f.Write([]byte("ab"))
			must(t, err)
			must(t, fsys.Remove(a))
			wantMissing(t, fsys, a)
			_, err = f.Write([]byte("c"))
			must(t, err)
			must(t, f.Sync())
			buf := make([]byte, 3)
			if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "abc" {
				t.Fatalf("ReadAt after remove = %q, %v", buf, err)
			}
			// The name is free again.
			mustWrite(t, fsys, a, "new")
			wantContent(t, fsys, a, "new")
		}},
		{"RenameNoReplaceNeverClobbers", func(t *testing.T, fsys vfs.FS, root string) {
			a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
			mustWrite(t, fsys, a, "A")
			mustWrite(t, fsys, b, "B")
			err := fsys.RenameNoReplace(a, b)
			wantErr(t, "rename onto existing", err, fs.ErrExist)
			var le *os.LinkError
			if !errors.As(err, &le) {
				t.Fatalf("rename error %T is not *os.LinkError", err)
			}
			wantContent(t, fsys, a, "A")
			wantContent(t, fsys, b, "B")
			wantErr(t, "rename onto itself", fsys.RenameNoReplace(a, a), fs.ErrExist)
			d := filepath.Join(root, "d")
			must(t, fsys.Mkdir(d, 0o755))
			wantErr(t, "rename onto dir", fsys.RenameNoReplace(a, d), fs.ErrExist)
			wantContent(t, fsys, a, "A")
		}},
		{"RenameMoves", func(t *testing.T, fsys vfs.FS, root string) {
			a, c := filepath.Join(root, "a"), filepath.Join(root, "c")
			mustWrite(t, fsys, a, "A")
			must(t, fsys.RenameNoReplace(a, c))
			wantMissing(t, fsys, a)
			wantContent(t, fsys, c, "A")
			wantErr(t, "rename missing", fsys.RenameNoReplace(a, filepath.Join(root, "z")), fs.ErrNotExist)
			wantErr(t, "rename into missing dir",
				fsys.RenameNoReplace(c, filepath.Join(root, "nodir", "c")), fs.ErrNotExist)
			d1, d2 := filepath.Join(root, "d1"), filepath.Join(root, "d2")
			must(t, fsys.Mkdir(d1, 0o755))
			must(t, fsys.Mkdir(d2, 0o755))
			must(t, fsys.RenameNoReplace(c, filepath.Join(d1, "c")))
			must(t, fsys.RenameNoReplace(filepath.Join(d1, "c"), filepath.Join(d2, "c")))
			wantContent(t, fsys, filepath.Join(d2, "c"), "A")
			wantMissing(t, fsys, filepath.Join(d1, "c"))
		}},
		{"RenameOpenFile", func(t *testing.T, fsys vfs.FS, root string) {
			a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
			f, err := fsys.Create(a)
			must(t, err)
			_, err = f.Write([]byte("x"))
			must(t, err)
			must(t, fsys.RenameNoReplace(a, b))
			_, err = f.Write([]byte("y"))
			must(t, err)
			must(t, f.Sync())
			must(t, f.Close())
			wantMissing(t, fsys, a)
			wantContent(t, fsys, b, "xy")
		}},
		{"RenameDir", func(t *testing.T, fsys vfs.FS, root string) {
			d, e := filepath.Join(root, "d"), filepath.Join(root, "e")
			must(t, fsys.Mkdir(d, 0o755))
			mustWrite(t, fsys, filepath.Join(d, "x"), "x")
			must(t, fsys.RenameNoReplace(d, e))
			wantContent(t, fsys, filepath.Join(e, "x"), "x")
			wantMissing(t, fsys, d)
			// Linux says EINVAL; vfs.OS where renameat2 is unsupported
			// falls back to link(2), which says EPERM for a directory.
			if err := fsys.RenameNoReplace(e, filepath.Join(e, "sub")); err == nil {
				t.Fatal("renaming a directory into itself succeeded")
			}
			wantContent(t, fsys, filepath.Join(e, "x"), "x")
		}},
		{"SyncDir", func(t *testing.T, fsys vfs.FS, root string) {
			must(t, fsys.SyncDir(root))
			wantErr(t, "SyncDir missing", fsys.SyncDir(filepath.Join(root, "missing")), fs.ErrNotExist)
		}},
		{"ReadFileHelpers", func(t *testing.T, fsys vfs.FS, root string) {
			dir := filepath.Join(root, "x", "y")
			must(t, vfs.MkdirAllSync(fsys, dir))
			must(t, vfs.MkdirAllSync(fsys, dir)) // idempotent
			data := bytes.Repeat([]byte("0123456789"), 1000)
			must(t, vfs.WriteFileSync(fsys, filepath.Join(dir, "big"), data))
			got, err := vfs.ReadFile(fsys, filepath.Join(dir, "big"))
			must(t, err)
			if !bytes.Equal(got, data) {
				t.Fatal("ReadFile returned different bytes")
			}
		}},
	}
}
