package localfs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/vfs"
	"github.com/filesink/filesink/vfs/crashfs"
	"github.com/filesink/filesink/vfs/errorfs"
)

const root = "/out"

// recorder is an errorfs injector that records every operation and fails
// those that fail selects (nil: none).
type recorder struct {
	mu   sync.Mutex
	ops  []errorfs.Op
	fail func(op errorfs.Op, seen []errorfs.Op) bool
}

func (r *recorder) MaybeError(op errorfs.Op) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	fail := r.fail != nil && r.fail(op, r.ops)
	r.ops = append(r.ops, op)
	if fail {
		return errorfs.ErrInjected
	}
	return nil
}

// mark returns the number of operations recorded so far.
func (r *recorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// since returns the operations recorded after mark m.
func (r *recorder) since(m int) []errorfs.Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops[m:])
}

// find returns the position in ops of the first operation of kind on path
// at or after from, or -1.
func find(ops []errorfs.Op, from int, kind errorfs.OpKind, path string) int {
	for i := max(from, 0); i < len(ops); i++ {
		if ops[i].Kind == kind && filepath.Clean(ops[i].Path) == filepath.Clean(path) {
			return i
		}
	}
	return -1
}

func findLast(ops []errorfs.Op, kind errorfs.OpKind, path string) int {
	for i := len(ops) - 1; i >= 0; i-- {
		if ops[i].Kind == kind && filepath.Clean(ops[i].Path) == filepath.Clean(path) {
			return i
		}
	}
	return -1
}

func opsString(ops []errorfs.Op) string {
	var b strings.Builder
	for _, op := range ops {
		b.WriteString("\n\t")
		b.WriteString(op.String())
	}
	return b.String()
}

func stagingOf(target string) string { return filepath.Join(root, localfs.StagingName(target)) }

// durable returns the content of name after a power loss that keeps only
// the durable state, or an error matching fs.ErrNotExist.
func durable(m *crashfs.FS, name string) ([]byte, error) {
	return vfs.ReadFile(m.CrashCloneSynced(), name)
}

func wantDurable(t *testing.T, m *crashfs.FS, name string, want []byte) {
	t.Helper()
	got, err := durable(m, name)
	if err != nil {
		t.Fatalf("after a power loss, %s: %v; want %q", name, err, want)
	}
	if string(got) != string(want) {
		t.Fatalf("after a power loss, %s holds %q, want %q", name, got, want)
	}
}

// TestSyncOrder checks invariant 4 on the operations localfs sends to the
// file system: the staging file is fsynced after its last write and before
// Persist or CloseForCommit returns a length, its directory is fsynced after
// the file was created and before the first length is returned, and Commit
// fsyncs the directory after the rename. Each step is also checked against a
// power loss keeping only the durable state.
func TestSyncOrder(t *testing.T) {
	ctx := t.Context()
	m := crashfs.New()
	rec := &recorder{}
	b := localfs.New(errorfs.Wrap(m, rec), root)
	const target = "a/b/part-0-r1-1.txt"
	staging, final, dir := stagingOf(target), filepath.Join(root, target), filepath.Join(root, "a/b")

	// Open makes every missing directory; they become durable (parent
	// synced after child made) before the first length is returned.
	w, err := b.Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	ops := rec.since(0)
	for _, d := range []string{root, filepath.Join(root, "a"), dir} {
		if find(ops, 0, errorfs.OpMkdir, d) < 0 {
			t.Fatalf("Open: no mkdir %s:%s", d, opsString(ops))
		}
	}
	if find(ops, 0, errorfs.OpCreate, staging) < 0 {
		t.Fatalf("Open: no create %s:%s", staging, opsString(ops))
	}

	// First Persist: file sync after the last write, directory sync after
	// the create, both before the length is returned.
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	r1, err := w.Persist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ops = rec.since(0)
	lastWrite := findLast(ops, errorfs.OpFileWrite, staging)
	sync1 := find(ops, lastWrite+1, errorfs.OpFileSync, staging)
	if lastWrite < 0 || sync1 < 0 {
		t.Fatalf("first Persist: no fsync of %s after its last write:%s", staging, opsString(ops))
	}
	create := find(ops, 0, errorfs.OpCreate, staging)
	if find(ops, create+1, errorfs.OpSyncDir, dir) < 0 {
		t.Fatalf("first Persist: directory %s not fsynced after creating %s:%s", dir, staging, opsString(ops))
	}
	for _, d := range []string{root, filepath.Join(root, "a"), dir} {
		mk := find(ops, 0, errorfs.OpMkdir, d)
		if find(ops, mk+1, errorfs.OpSyncDir, filepath.Dir(d)) < 0 {
			t.Errorf("first Persist: mkdir %s not followed by syncdir %s:%s", d, filepath.Dir(d), opsString(ops))
		}
	}
	wantDurable(t, m, staging, []byte("hello"))
	wantLength(t, r1, 5)

	// Second Persist: the file again.
	mk := rec.mark()
	if _, err := w.Write([]byte(", world")); err != nil {
		t.Fatal(err)
	}
	r2, err := w.Persist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ops = rec.since(mk)
	if find(ops, find(ops, 0, errorfs.OpFileWrite, staging)+1, errorfs.OpFileSync, staging) < 0 {
		t.Fatalf("second Persist: no fsync after the write:%s", opsString(ops))
	}
	wantDurable(t, m, staging, []byte("hello, world"))
	wantLength(t, r2, 12)

	// CloseForCommit: sync before close and before returning.
	mk = rec.mark()
	if _, err := w.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	p, err := w.CloseForCommit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ops = rec.since(mk)
	s := find(ops, find(ops, 0, errorfs.OpFileWrite, staging)+1, errorfs.OpFileSync, staging)
	c := find(ops, 0, errorfs.OpFileClose, staging)
	if s < 0 || c < 0 || c < s {
		t.Fatalf("CloseForCommit: want write, sync, close of %s:%s", staging, opsString(ops))
	}
	wantDurable(t, m, staging, []byte("hello, world!"))
	wantLength(t, p, 13)

	// Commit: a no-replace rename, then the directory synced.
	mk = rec.mark()
	if err := b.Commit(ctx, p); err != nil {
		t.Fatal(err)
	}
	ops = rec.since(mk)
	rn := find(ops, 0, errorfs.OpRename, staging)
	if rn < 0 || filepath.Clean(ops[rn].NewPath) != final {
		t.Fatalf("Commit: no rename %s -> %s:%s", staging, final, opsString(ops))
	}
	if find(ops, rn+1, errorfs.OpSyncDir, dir) < 0 {
		t.Fatalf("Commit: directory %s not fsynced after the rename:%s", dir, opsString(ops))
	}
	wantDurable(t, m, final, []byte("hello, world!"))
	if _, err := durable(m, staging); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after Commit and a power loss, staging %s: %v; want it gone", staging, err)
	}

	// Re-commit of a published part makes the rename durable too.
	mk = rec.mark()
	if err := b.Commit(ctx, p); err != nil {
		t.Fatal(err)
	}
	if ops := rec.since(mk); find(ops, 0, errorfs.OpSyncDir, dir) < 0 {
		t.Fatalf("re-Commit: directory %s not fsynced:%s", dir, opsString(ops))
	}
}

// TestResumeSyncOrder checks that a resumed writer's truncation and new
// bytes are durable once CloseForCommit returns.
func TestResumeSyncOrder(t *testing.T) {
	ctx := t.Context()
	m := crashfs.New()
	rec := &recorder{}
	b := localfs.New(errorfs.Wrap(m, rec), root)
	const target = "part-0-r1-1"
	staging := stagingOf(target)
	w, err := b.Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("abc"))
	r, err := w.Persist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("JUNKJUNK"))
	if _, err := w.Persist(ctx); err != nil { // the junk is durable too
		t.Fatal(err)
	}
	w.Close()
	wantDurable(t, m, staging, []byte("abcJUNKJUNK"))

	w, err = b.Resume(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("d"))
	mk := rec.mark()
	p, err := w.CloseForCommit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ops := rec.since(mk); find(ops, 0, errorfs.OpFileSync, staging) < 0 {
		t.Fatalf("CloseForCommit of a resumed writer: no fsync:%s", opsString(ops))
	}
	wantDurable(t, m, staging, []byte("abcd"))
	wantLength(t, p, 4)
}

func wantLength(t *testing.T, data json.RawMessage, n int64) {
	t.Helper()
	var r struct {
		Length *int64 `json:"length"`
	}
	if err := json.Unmarshal(data, &r); err != nil || r.Length == nil {
		t.Fatalf("record %s: no length (%v)", data, err)
	}
	if *r.Length != n {
		t.Fatalf("record %s: length %d, want %d", data, *r.Length, n)
	}
}

// TestFailedSyncBreaksWriter checks invariant 4's "never retry fsync on the
// same descriptor": after one failed fsync every later Persist and
// CloseForCommit of that writer fails without another fsync reaching the
// file system, and recovery goes through Resume on a new descriptor.
func TestFailedSyncBreaksWriter(t *testing.T) {
	for _, at := range []string{"Persist", "CloseForCommit"} {
		t.Run(at, func(t *testing.T) {
			ctx := t.Context()
			m := crashfs.New()
			const target = "b/part-0-r1-1"
			staging := stagingOf(target)
			syncs := 0
			rec := &recorder{fail: func(op errorfs.Op, _ []errorfs.Op) bool {
				if op.Kind != errorfs.OpFileSync || op.Path != staging {
					return false
				}
				syncs++
				return syncs == 2 // the first succeeds (r1), the second fails
			}}
			b := localfs.New(errorfs.Wrap(m, rec), root)
			w, err := b.Open(ctx, target)
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte("abc"))
			r1, err := w.Persist(ctx)
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte("def"))
			if at == "Persist" {
				_, err = w.Persist(ctx)
			} else {
				_, err = w.CloseForCommit(ctx)
			}
			if !errors.Is(err, errorfs.ErrInjected) {
				t.Fatalf("%s with a failing fsync: %v; want the injected error", at, err)
			}
			// Every later attempt fails, and none reaches the file system.
			if _, err := w.Persist(ctx); err == nil {
				t.Error("Persist after a failed fsync succeeded")
			}
			if _, err := w.CloseForCommit(ctx); err == nil {
				t.Error("CloseForCommit after a failed fsync succeeded")
			}
			if syncs != 2 {
				t.Errorf("%d fsyncs of %s reached the file system, want 2 (no retry after the failure)", syncs, staging)
			}
			w.Close()

			// Recovery: resume from the last good record on a new descriptor.
			w, err = b.Resume(ctx, r1)
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte("xyz"))
			p, err := w.CloseForCommit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(ctx, p); err != nil {
				t.Fatal(err)
			}
			wantDurable(t, m, filepath.Join(root, target), []byte("abcxyz"))
		})
	}
}

// TestNoReplacingRename checks invariant 2 statically: the backend's
// sources never call a rename that replaces (os.Rename, syscall.Rename,
// unix.Rename...), and do no file I/O beside the vfs seam, whose only rename
// is RenameNoReplace.
func TestNoReplacingRename(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		n++
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), "os.Rename(") {
			t.Errorf("%s contains an os.Rename( call: it replaces an existing target silently", name)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			switch p, _ := strconv.Unquote(imp.Path.Value); p {
			case "os", "syscall", "golang.org/x/sys/unix":
				t.Errorf("%s imports %q: all file access must go through vfs.FS", fset.Position(imp.Pos()), p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && strings.Contains(strings.ToLower(sel.Sel.Name), "rename") && sel.Sel.Name != "RenameNoReplace" {
				t.Errorf("%s: uses %s, want only RenameNoReplace", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if n == 0 {
		t.Fatal("no non-test source files found")
	}
	ft := reflect.TypeFor[vfs.FS]()
	for i := range ft.NumMethod() {
		if name := ft.Method(i).Name; strings.Contains(name, "Rename") && name != "RenameNoReplace" || name == "Link" {
			t.Errorf("vfs.FS has method %s: publishing must have only RenameNoReplace to rename", name)
		}
	}
}

// TestCommitLeftoverOfLinkUnlink covers a publish by link+unlink (the
// fallback of vfs.OS.RenameNoReplace) that died between the two steps, and
// a foreign file at the target name.
func TestCommitLeftoverOfLinkUnlink(t *testing.T) {
	ctx := t.Context()
	const target = "b/part-0-r1-1"
	content := []byte("the recorded bytes\n")

	setup := func(t *testing.T, fsys vfs.FS, rootDir string) (b *localfs.Backend, p json.RawMessage, staging, final string) {
		b = localfs.New(fsys, rootDir)
		w, err := b.Open(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(content)
		p, err = w.CloseForCommit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return b, p, filepath.Join(rootDir, localfs.StagingName(target)), filepath.Join(rootDir, target)
	}
	read := func(t *testing.T, fsys vfs.FS, name string) []byte {
		t.Helper()
		b, err := vfs.ReadFile(fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	t.Run("OS/HardLink", func(t *testing.T) {
		b, p, staging, final := setup(t, vfs.OS{}, t.TempDir())
		if err := os.Link(staging, final); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(ctx, p); err != nil {
			t.Fatalf("Commit with the link done and the unlink not: %v", err)
		}
		if _, err := os.Stat(staging); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("staging %s after Commit: %v; want it removed", staging, err)
		}
		if got := read(t, vfs.OS{}, final); string(got) != string(content) {
			t.Fatalf("target holds %q", got)
		}
	})

	t.Run("crashfs/SameContent", func(t *testing.T) {
		m := crashfs.New()
		b, p, staging, final := setup(t, m, root)
		if err := vfs.WriteFileSync(m, final, content); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(ctx, p); err != nil {
			t.Fatalf("Commit with identical staging and target: %v", err)
		}
		if _, err := m.Stat(staging); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("staging after Commit: %v; want it removed", err)
		}
		if _, err := durable(m, staging); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("staging after Commit and a power loss: %v; want its removal durable", err)
		}
		wantDurable(t, m, final, content)
	})

	t.Run("crashfs/SameContentStagingLonger", func(t *testing.T) {
		// Bytes after the recorded length are not part of the part.
		m := crashfs.New()
		b, p, staging, final := setup(t, m, root)
		f, err := m.OpenAppend(staging)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("unrecorded tail"))
		f.Close()
		if err := vfs.WriteFileSync(m, final, content); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(ctx, p); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if got := read(t, m, final); string(got) != string(content) {
			t.Fatalf("target holds %q", got)
		}
	})

	for _, other := range [][]byte{[]byte("foreign"), []byte("THE RECORDED BYTES\n")} {
		t.Run(fmt.Sprintf("crashfs/OtherContent/len%d", len(other)), func(t *testing.T) {
			m := crashfs.New()
			b, p, staging, final := setup(t, m, root)
			if err := vfs.WriteFileSync(m, final, other); err != nil {
				t.Fatal(err)
			}
			err := b.Commit(ctx, p)
			if !errors.Is(err, committer.ErrAlreadyExists) {
				t.Fatalf("Commit over a foreign file: %v; want ErrAlreadyExists", err)
			}
			if !committer.IsPermanent(err) {
				t.Errorf("Commit over a foreign file: %v is not permanent", err)
			}
			if got := read(t, m, final); string(got) != string(other) {
				t.Fatalf("foreign target changed to %q", got)
			}
			if got := read(t, m, staging); string(got) != string(content) {
				t.Fatalf("staging changed to %q", got)
			}
		})
	}
}

// A part of the crash loop: what the workload recorded as durable for one
// target before the fault.
type partRecord struct {
	target  string
	kind    recordKind
	data    json.RawMessage
	content []byte // the bytes data records
}

type recordKind int

const (
	recNone      recordKind = iota // nothing recorded: the part may not survive
	recResumable                   // Persist returned data
	recPending                     // CloseForCommit returned data
	recCommitted                   // Commit of data returned nil
)

func (k recordKind) String() string {
	return [...]string{"nothing", "resumable", "pending", "committed"}[k]
}

// crashWorkload runs on b, stopping at the first error; it updates parts
// after each call that returned nil. setup, if set, runs before the fault
// injection starts, on the unwrapped file system.
type crashWorkload struct {
	name  string
	setup func(t *testing.T, b *localfs.Backend) []*partRecord
	run   func(ctx context.Context, b *localfs.Backend, parts []*partRecord) error
}

func bytesOf(tag string, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = tag[i%len(tag)]
	}
	return b
}

var crashWorkloads = []crashWorkload{
	{
		name: "OpenPersistCommit",
		setup: func(t *testing.T, b *localfs.Backend) []*partRecord {
			return []*partRecord{{target: "b/x/part-0-r1-1.txt"}}
		},
		run: func(ctx context.Context, b *localfs.Backend, parts []*partRecord) error {
			p := parts[0]
			a, more := bytesOf("A", 100), bytesOf("B", 50)
			w, err := b.Open(ctx, p.target)
			if err != nil {
				return err
			}
			defer w.Close()
			if _, err := w.Write(a); err != nil {
				return err
			}
			r, err := w.Persist(ctx)
			if err != nil {
				return err
			}
			*p = partRecord{p.target, recResumable, r, a}
			if _, err := w.Write(more); err != nil {
				return err
			}
			pd, err := w.CloseForCommit(ctx)
			if err != nil {
				return err
			}
			*p = partRecord{p.target, recPending, pd, concat(a, more)}
			if err := b.Commit(ctx, pd); err != nil {
				return err
			}
			p.kind = recCommitted
			return nil
		},
	},
	{
		name: "ResumePersistCommit",
		setup: func(t *testing.T, b *localfs.Backend) []*partRecord {
			ctx := t.Context()
			const target = "b/part-0-r1-1.txt"
			w, err := b.Open(ctx, target)
			if err != nil {
				t.Fatal(err)
			}
			a := bytesOf("A", 30)
			w.Write(a)
			r, err := w.Persist(ctx)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(bytesOf("junk", 40)) // written after the checkpoint
			w.Close()
			return []*partRecord{{target, recResumable, r, a}}
		},
		run: func(ctx context.Context, b *localfs.Backend, parts []*partRecord) error {
			p := parts[0]
			w, err := b.Resume(ctx, p.data)
			if err != nil {
				return err
			}
			defer w.Close()
			content := slices.Clone(p.content)
			for _, s := range []string{"B", "C"} {
				more := bytesOf(s, 20)
				if _, err := w.Write(more); err != nil {
					return err
				}
				content = concat(content, more)
				r, err := w.Persist(ctx)
				if err != nil {
					return err
				}
				*p = partRecord{p.target, recResumable, r, content}
			}
			more := bytesOf("D", 20)
			if _, err := w.Write(more); err != nil {
				return err
			}
			pd, err := w.CloseForCommit(ctx)
			if err != nil {
				return err
			}
			*p = partRecord{p.target, recPending, pd, concat(content, more)}
			if err := b.Commit(ctx, pd); err != nil {
				return err
			}
			p.kind = recCommitted
			return nil
		},
	},
	{
		name: "TwoPartsTwoBuckets",
		setup: func(t *testing.T, b *localfs.Backend) []*partRecord {
			return []*partRecord{{target: "b1/part-0-r1-1.txt"}, {target: "b2/c/part-0-r1-2.txt"}}
		},
		run: func(ctx context.Context, b *localfs.Backend, parts []*partRecord) error {
			var ws []driver.PartWriter
			defer func() {
				for _, w := range ws {
					w.Close()
				}
			}()
			for _, p := range parts {
				w, err := b.Open(ctx, p.target)
				if err != nil {
					return err
				}
				ws = append(ws, w)
			}
			contents := make([][]byte, len(parts))
			for round, s := range []string{"x", "y"} {
				for i, p := range parts {
					more := bytesOf(s+p.target, 10+i)
					if _, err := ws[i].Write(more); err != nil {
						return err
					}
					contents[i] = concat(contents[i], more)
					if round == 0 {
						r, err := ws[i].Persist(ctx)
						if err != nil {
							return err
						}
						*p = partRecord{p.target, recResumable, r, contents[i]}
					}
				}
			}
			var pds []json.RawMessage
			for i, p := range parts {
				pd, err := ws[i].CloseForCommit(ctx)
				if err != nil {
					return err
				}
				*p = partRecord{p.target, recPending, pd, contents[i]}
				pds = append(pds, pd)
			}
			for i, p := range parts {
				if err := b.Commit(ctx, pds[i]); err != nil {
					return err
				}
				p.kind = recCommitted
			}
			return nil
		},
	},
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestCrashLoop is the crash-point test of invariants 1, 3, 4 and 6 for
// localfs: for k = 1, 2, ... until the workload runs without a fault, the
// process dies at the k-th file system operation; then the machine loses
// power (a power-loss clone keeping only the durable state, and a seeded
// random one), or the process is merely restarted and the machine loses
// power after the recovery. Recovery commits what was recorded as pending,
// resumes what was recorded as resumable, sweeps the rest, and the
// published files must hold exactly the recorded bytes.
func TestCrashLoop(t *testing.T) {
	base := *crashSeed
	if base == 0 {
		base = time.Now().UnixNano()
	}
	t.Logf("power-loss clones seeded from %d (reproduce with -localfs.crashseed=%d)", base, base)
	for _, wl := range crashWorkloads {
		t.Run(wl.name, func(t *testing.T) {
			failed := 0
			for k := int64(1); ; k++ {
				if k > 10000 {
					t.Fatal("the workload never completed without a fault")
				}
				fired := true
				ok := t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
					fired = crashPoint(t, wl, k, base+k)
				})
				if !ok {
					if failed++; failed == 10 {
						t.Fatalf("stopping after %d failing crash points", failed)
					}
				}
				if !fired {
					return
				}
			}
		})
	}
}

// crashPoint runs wl with the process dying at operation k and checks
// every recovery; it reports whether the fault fired.
func crashPoint(t *testing.T, wl crashWorkload, k, seed int64) (fired bool) {
	m := crashfs.New()
	parts := wl.setup(t, localfs.New(m, root))
	efs := errorfs.Wrap(m, errorfs.OnIndex(k))
	err := wl.run(t.Context(), localfs.New(efs, root), parts)
	op, fired := efs.FirstInjected()
	if !fired && err != nil {
		t.Fatalf("workload failed without a fault: %v", err)
	}
	desc := fmt.Sprintf("died at %v", op)
	if !fired {
		desc = fmt.Sprintf("no fault, %d operations", efs.Ops())
	}
	var recs []string
	for _, p := range parts {
		recs = append(recs, p.target+": "+p.kind.String())
	}
	desc += ", recorded [" + strings.Join(recs, ", ") + "]"

	recoverAndCheck(t, desc+", power loss: synced state", m.CrashCloneSynced(), parts)
	recoverAndCheck(t, fmt.Sprintf("%s, power loss: CrashClone(%d)", desc, seed), m.CrashClone(seed), parts)
	// Process restart without a power loss (the page cache survives),
	// recovery, then a power loss: what recovery published must stay
	// published.
	if want := recoverAndCheck(t, desc+", restart", m, parts); want != nil {
		checkPublished(t, desc+", restart, recovery, power loss", m.CrashCloneSynced(), want)
	}
	return fired
}

// recoveredContent is what recovery writes for a part that had nothing
// recorded (the records are replayed from the source).
func recoveredContent(target string) []byte { return []byte("replayed " + target + "\n") }

// recoverAndCheck recovers on fsys as the file sink would after a crash and
// checks that every target holds exactly its recorded bytes and nothing
// else is visible.
func recoverAndCheck(t *testing.T, desc string, fsys vfs.FS, parts []*partRecord) (published map[string][]byte) {
	t.Helper()
	ctx := t.Context()
	b := localfs.New(fsys, root)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: %s", desc, fmt.Sprintf(format, args...))
	}

	var keep []json.RawMessage
	for _, p := range parts {
		if p.kind == recResumable || p.kind == recPending {
			keep = append(keep, p.data)
		}
	}
	// Phase 2 of the restored checkpoint comes first, then the sweep.
	for _, p := range parts {
		if p.kind == recPending || p.kind == recCommitted {
			if err := b.Commit(ctx, p.data); err != nil {
				fail("Commit of %s recorded as %v: %v", p.target, p.kind, err)
				return nil
			}
		}
	}
	if _, err := b.Sweep(ctx, "part-0-", keep); err != nil {
		fail("Sweep: %v", err)
		return nil
	}
	for _, p := range parts {
		switch p.kind {
		case recResumable:
			w, err := b.Resume(ctx, p.data)
			if err != nil {
				fail("Resume of %s: %v", p.target, err)
				return nil
			}
			if w.Size() != int64(len(p.content)) {
				fail("Resume of %s: Size() = %d, want %d", p.target, w.Size(), len(p.content))
			}
			pd, err := w.CloseForCommit(ctx)
			if err != nil {
				fail("CloseForCommit of %s: %v", p.target, err)
				return nil
			}
			if err := b.Commit(ctx, pd); err != nil {
				fail("Commit of resumed %s: %v", p.target, err)
				return nil
			}
		case recNone:
			if _, err := fsys.Stat(filepath.Join(root, p.target)); !errors.Is(err, fs.ErrNotExist) {
				fail("%s exists though nothing was committed (%v)", p.target, err)
			}
			// The name is free again after the sweep; the records are
			// replayed into it.
			w, err := b.Open(ctx, p.target)
			if err != nil {
				fail("Open of %s after the sweep: %v", p.target, err)
				return nil
			}
			w.Write(recoveredContent(p.target))
			pd, err := w.CloseForCommit(ctx)
			if err == nil {
				err = b.Commit(ctx, pd)
			}
			if err != nil {
				fail("publishing %s again: %v", p.target, err)
				return nil
			}
		}
	}
	published = map[string][]byte{}
	for _, p := range parts {
		published[p.target] = p.content
		if p.kind == recNone {
			published[p.target] = recoveredContent(p.target)
		}
	}
	checkPublished(t, desc, fsys, published)
	staging, problems, err := b.Scan(ctx)
	if err != nil || len(staging) > 0 || len(problems) > 0 {
		fail("Scan after recovery: staging %q, problems %q, %v; want none", staging, problems, err)
	}
	return published
}

// checkPublished checks that the visible output of fsys is exactly want.
func checkPublished(t *testing.T, desc string, fsys vfs.FS, want map[string][]byte) {
	t.Helper()
	for target, content := range want {
		got, err := vfs.ReadFile(fsys, filepath.Join(root, target))
		if err != nil {
			t.Errorf("%s: reading %s: %v", desc, target, err)
			continue
		}
		if string(got) != string(content) {
			t.Errorf("%s: %s holds %q, want %q", desc, target, got, content)
		}
	}
	vis, err := (&fsHarness{fsys: fsys, root: root}).Visible(t.Context())
	if err != nil {
		t.Errorf("%s: Visible: %v", desc, err)
		return
	}
	wantNames := slices.Sorted(maps.Keys(want))
	slices.Sort(vis)
	if !slices.Equal(vis, wantNames) {
		t.Errorf("%s: visible %q, want %q", desc, vis, wantNames)
	}
}

// TestDirDurableAfterInterruptedMkdir: a process dies after Open made a
// directory and before it fsynced the directory's parent; after a restart
// (no power loss: the directory is still there), the next Open into that
// directory must still make it durable before Persist or Commit return.
// Otherwise a power loss later loses a file whose length a checkpoint
// recorded (invariant 4), or a published file (invariant 1).
func TestDirDurableAfterInterruptedMkdir(t *testing.T) {
	ctx := t.Context()
	m := crashfs.New()
	if err := vfs.MkdirAllSync(m, root); err != nil {
		t.Fatal(err)
	}
	// Process 1 dies at the fsync of /out that follows its mkdir of /out/b.
	var made, dead atomic.Bool
	die := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpMkdir && op.Path == root+"/b" {
			made.Store(true)
		}
		if dead.Load() || made.Load() && op.Kind == errorfs.OpSyncDir && op.Path == root {
			dead.Store(true)
			return errorfs.ErrInjected
		}
		return nil
	})
	w1, err := localfs.New(errorfs.Wrap(m, die), root).Open(ctx, "b/part-0-r1-1")
	if err != nil {
		t.Fatal(err)
	}
	w1.Write([]byte("lost"))
	if _, err := w1.Persist(ctx); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("Persist in process 1: %v, want the injected fault at syncdir %s after mkdir %s/b", err, root, root)
	}
	if _, err := m.Stat(root + "/b"); err != nil {
		t.Fatalf("process 1 did not make %s/b: %v", root, err)
	}

	// Process 2 opens another part in the same bucket, persists it and
	// publishes a third.
	b := localfs.New(m, root)
	w, err := b.Open(ctx, "b/part-0-r2-1")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("recorded"))
	r, err := w.Persist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	w, err = b.Open(ctx, "b/part-0-r2-2")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("published"))
	p, err := w.CloseForCommit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, p); err != nil {
		t.Fatal(err)
	}

	// Power loss.
	c := localfs.New(m.CrashCloneSynced(), root)
	if w, err := c.Resume(ctx, r); err != nil {
		t.Errorf("BUG: a resumable returned by Persist is lost by a power loss: Resume: %v\n"+
			"(vfs.MkdirAllSync returns early when the directory exists and never fsyncs its parent, "+
			"so a directory whose creator died before that fsync is never made durable)", err)
	} else {
		w.Close()
	}
	if err := c.Commit(ctx, p); err != nil {
		t.Errorf("BUG: a part whose Commit returned nil is lost by a power loss: re-Commit: %v", err)
	}
}

// TestConcurrentOpenNewDirDurable: two writers in the same new directory
// persist concurrently; the one whose directory fsync is not the one in
// flight must not return a Persist length before the directory's entry in
// its parent is durable.
func TestConcurrentOpenNewDirDurable(t *testing.T) {
	ctx := t.Context()
	m := crashfs.New()
	if err := vfs.MkdirAllSync(m, root); err != nil {
		t.Fatal(err)
	}
	reached, release := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	// Hold the first fsync of /out (it makes /out/b durable), as the
	// scheduler may. Other calls pass.
	hold := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpSyncDir && op.Path == root && held.CompareAndSwap(false, true) {
			close(reached)
			<-release
		}
		return nil
	})
	b := localfs.New(errorfs.Wrap(m, hold), root)
	w1, err := b.Open(ctx, "b/part-0-r1-1")
	if err != nil {
		t.Fatal(err)
	}
	w2, err := b.Open(ctx, "b/part-0-r1-2")
	if err != nil {
		t.Fatal(err)
	}
	w1.Write([]byte("one"))
	w2.Write([]byte("recorded"))
	done := make(chan error, 1)
	go func() {
		_, err := w1.Persist(ctx)
		done <- err
	}()
	<-reached
	// Let w2's Persist run while w1's fsync of /out is held; release it a
	// little later. w2 must wait for it (or sync itself).
	go func() {
		time.Sleep(20 * time.Millisecond)
		close(release)
	}()
	r, err := w2.Persist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Persist returned: the checkpoint may record r now, and the power may
	// fail now.
	clone := m.CrashCloneSynced()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w1.Close()
	w2.Close()
	if w, err := localfs.New(clone, root).Resume(ctx, r); err != nil {
		t.Errorf("BUG: a resumable returned by Persist is lost by a power loss: Resume: %v\n"+
			"(a writer returned a length before the fsync that makes its new directory durable)", err)
	} else {
		w.Close()
	}
}

// TestScanAcceptsPublishedParts: Scan (the verify command's view) must not
// report a problem for a part that Open accepted and Commit published, such
// as one written with the file sink's WithSuffix(".tmpl") or a prefix
// containing ".tmp".
func TestScanAcceptsPublishedParts(t *testing.T) {
	ctx := t.Context()
	b := localfs.New(crashfs.New(), root)
	for _, target := range []string{"b/part-0-r1-1.jsonl", "b/part-0-r1-2.tmpl", "b/my.tmp.data-0-r1-3.csv"} {
		w, err := b.Open(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		p, err := w.CloseForCommit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	staging, problems, err := b.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(staging) > 0 || len(problems) > 0 {
		t.Errorf("BUG: Scan of published parts only: staging %q, problems %q; want none\n"+
			"(Scan flags every visible name containing \".tmp\", which Open accepts and Commit publishes)", staging, problems)
	}
}

// TestPersistAsync: the length is the one at PersistAsync; writes go on
// while the fsync runs; after the wait that length is durable (a power loss
// keeps it); a resume truncates the bytes written after it; a close for
// commit while the fsync runs waits for it.
func TestPersistAsync(t *testing.T) {
	ctx := context.Background()
	m := crashfs.New()
	b := localfs.New(m, root)
	pw, err := b.Open(ctx, "a/part-0.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Write([]byte("barrier|")); err != nil {
		t.Fatal(err)
	}
	wait, err := pw.PersistAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			if _, err := pw.Write([]byte("after|")); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	r, err := wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	wantLength(t, r, int64(len("barrier|")))
	got, err := durable(m, stagingOf("a/part-0.txt"))
	if err != nil || len(got) < len("barrier|") || string(got[:8]) != "barrier|" {
		t.Fatalf("after a power loss the staging file holds %q (%v), want at least %q", got, err, "barrier|")
	}
	// A second persist, then a close for commit before its wait.
	wait2, err := pw.PersistAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := pw.CloseForCommit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantLength(t, pending, int64(len("barrier|")+100*len("after|")))
	if _, err := wait2(ctx); err != nil {
		t.Fatalf("wait of a persist overtaken by a close: %v", err)
	}
	// Resuming the first resumable truncates to the barrier.
	rw, err := b.Resume(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if rw.Size() != int64(len("barrier|")) {
		t.Fatalf("resumed at %d, want %d", rw.Size(), len("barrier|"))
	}
	rw.Close()
}

// TestBackgroundSync: a part writer fsyncs on its own every 16 MiB
// written, beside the writing (so that a checkpoint's fsync has little
// left to do); a failure of that fsync breaks the writer, and the next
// Persist says so, naming the file.
func TestBackgroundSync(t *testing.T) {
	ctx := context.Background()
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	for _, failSync := range []bool{false, true} {
		m := crashfs.New()
		rec := &recorder{}
		if failSync {
			rec.fail = func(op errorfs.Op, _ []errorfs.Op) bool { return op.Kind == errorfs.OpFileSync }
		}
		b := localfs.New(errorfs.Wrap(m, rec), root)
		pw, err := b.Open(ctx, "a/part-0.bin")
		if err != nil {
			t.Fatal(err)
		}
		staging := stagingOf("a/part-0.bin")
		for range 20 {
			if _, err = pw.Write(chunk); err != nil {
				break
			}
		}
		if failSync {
			if err == nil { // the fsync had not ended by the last Write
				_, err = pw.Persist(ctx)
			}
			if err == nil || !strings.Contains(err.Error(), "fsync") || !strings.Contains(err.Error(), staging) {
				t.Fatalf("after a failed background fsync: %v; want the fsync error naming %s", err, staging)
			}
			if _, err := pw.Write(chunk); err == nil {
				t.Fatal("Write after a failed fsync succeeded")
			}
			pw.Close()
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := pw.Close(); err != nil { // waits for the fsync
			t.Fatal(err)
		}
		if find(rec.since(0), 0, errorfs.OpFileSync, staging) < 0 {
			t.Fatalf("no fsync of %s after 20 MiB written; ops:%s", staging, opsString(rec.since(0)))
		}
		got, err := durable(m, staging)
		if err != nil || len(got) < 16<<20 {
			t.Fatalf("after a power loss %s holds %d bytes (%v), want at least 16 MiB", staging, len(got), err)
		}
	}
}
