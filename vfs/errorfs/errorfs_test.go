package errorfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/filesink/filesink/vfs"
	"github.com/filesink/filesink/vfs/crashfs"
	"github.com/filesink/filesink/vfs/errorfs"
)

// workload publishes /out/a through a temporary file, then reads it back.
// It stops at the first error. It makes exactly workloadOps operations.
func workload(fsys vfs.FS) error {
	if err := fsys.Mkdir("/out", 0o755); err != nil { // 1
		return err
	}
	if err := fsys.SyncDir("/"); err != nil { // 2
		return err
	}
	f, err := fsys.Create("/out/a.tmp") // 3
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte("hello")); err != nil { // 4
		return err
	}
	if err := f.Sync(); err != nil { // 5
		return err
	}
	if err := f.Close(); err != nil { // 6
		return err
	}
	if err := fsys.RenameNoReplace("/out/a.tmp", "/out/a"); err != nil { // 7
		return err
	}
	if err := fsys.SyncDir("/out"); err != nil { // 8
		return err
	}
	g, err := fsys.Open("/out/a") // 9
	if err != nil {
		return err
	}
	buf := make([]byte, 5)
	if _, err := g.ReadAt(buf, 0); err != nil { // 10
		return err
	}
	if _, err := g.Stat(); err != nil { // 11
		return err
	}
	return g.Close() // 12
}

const workloadOps = 12

var workloadKinds = []errorfs.OpKind{
	errorfs.OpMkdir, errorfs.OpSyncDir, errorfs.OpCreate, errorfs.OpFileWrite,
	errorfs.OpFileSync, errorfs.OpFileClose, errorfs.OpRename, errorfs.OpSyncDir,
	errorfs.OpOpen, errorfs.OpFileReadAt, errorfs.OpFileStat, errorfs.OpFileClose,
}

// recorder is an injector that records every op and fails none.
type recorder struct {
	mu  sync.Mutex
	ops []errorfs.Op
}

func (r *recorder) MaybeError(op errorfs.Op) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	return nil
}

func TestCountsEveryOperation(t *testing.T) {
	rec := &recorder{}
	efs := errorfs.Wrap(crashfs.New(), rec)
	if err := workload(efs); err != nil {
		t.Fatal(err)
	}
	if efs.Ops() != workloadOps {
		t.Fatalf("Ops() = %d, want %d", efs.Ops(), workloadOps)
	}
	if efs.Fired() || efs.Injected() != 0 {
		t.Fatal("an injector that returns nil fired")
	}
	var kinds []errorfs.OpKind
	for i, op := range rec.ops {
		kinds = append(kinds, op.Kind)
		if op.Index != int64(i+1) {
			t.Errorf("op %d (%v) has Index %d", i+1, op, op.Index)
		}
	}
	if !slices.Equal(kinds, workloadKinds) {
		t.Fatalf("kinds = %v, want %v", kinds, workloadKinds)
	}
	if op := rec.ops[6]; op.Path != "/out/a.tmp" || op.NewPath != "/out/a" || op.String() != "#7 rename /out/a.tmp -> /out/a" {
		t.Fatalf("rename op = %+v (%s)", op, op)
	}
	if op := rec.ops[4]; op.Path != "/out/a.tmp" || op.String() != "#5 sync /out/a.tmp" {
		t.Fatalf("file op = %+v (%s)", op, op)
	}

	// A nil injector only counts.
	efs = errorfs.Wrap(crashfs.New(), nil)
	if err := workload(efs); err != nil || efs.Ops() != workloadOps {
		t.Fatalf("nil injector: %v, %d ops", err, efs.Ops())
	}
}

func TestOnIndexSweep(t *testing.T) {
	for k := int64(1); ; k++ {
		efs := errorfs.Wrap(crashfs.New(), errorfs.OnIndex(k))
		err := workload(efs)
		if !efs.Fired() {
			if err != nil {
				t.Fatalf("k=%d: no injection, but error %v", k, err)
			}
			if k != workloadOps+1 || efs.Ops() != workloadOps {
				t.Fatalf("sweep ended at k=%d with %d ops, want k=%d", k, efs.Ops(), workloadOps+1)
			}
			return
		}
		if !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("k=%d: error %v, want ErrInjected", k, err)
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist) {
			t.Fatalf("k=%d: injected error %v matches a fs sentinel", k, err)
		}
		op, ok := efs.FirstInjected()
		if !ok || op.Index != k || op.Kind != workloadKinds[k-1] {
			t.Fatalf("k=%d: first injected %v, %v", k, op, ok)
		}
		if efs.Ops() != k || efs.Injected() != 1 {
			t.Fatalf("k=%d: Ops %d Injected %d; the workload stops at the first error", k, efs.Ops(), efs.Injected())
		}
	}
}

func TestOnIndexKillsEveryLaterOperation(t *testing.T) {
	mem := crashfs.New()
	if err := vfs.WriteFileSync(mem, "/a", []byte("a")); err != nil {
		t.Fatal(err)
	}
	// Only syncs count; the second one kills the process.
	efs := errorfs.Wrap(mem, errorfs.OnIndex(2), errorfs.WithFilter(errorfs.OfKind(errorfs.OpFileSync, errorfs.OpSyncDir)))
	f, err := efs.OpenAppend("/a") // not counted
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("b")); err != nil { // not counted
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // #1
		t.Fatal(err)
	}
	if _, err := efs.Stat("/a"); err != nil { // not counted, before the crash
		t.Fatal(err)
	}
	if err := efs.SyncDir("/"); !errors.Is(err, errorfs.ErrInjected) { // #2
		t.Fatalf("second sync: %v", err)
	}
	// Dead: everything fails now, counted or not.
	checks := map[string]error{}
	_, checks["write"] = f.Write([]byte("c"))
	_, checks["read"] = f.Read(make([]byte, 1))
	_, checks["readat"] = f.ReadAt(make([]byte, 1), 0)
	checks["sync"] = f.Sync()
	checks["truncate"] = f.Truncate(0)
	_, checks["fstat"] = f.Stat()
	checks["close"] = f.Close()
	_, checks["create"] = efs.Create("/b")
	_, checks["open"] = efs.Open("/a")
	_, checks["openappend"] = efs.OpenAppend("/a")
	_, checks["stat"] = efs.Stat("/a")
	checks["remove"] = efs.Remove("/a")
	checks["rename"] = efs.RenameNoReplace("/a", "/c")
	checks["mkdir"] = efs.Mkdir("/d", 0o755)
	_, checks["readdir"] = efs.ReadDir("/")
	checks["syncdir"] = efs.SyncDir("/")
	for name, err := range checks {
		if !errors.Is(err, errorfs.ErrInjected) {
			t.Errorf("%s after the crash: %v", name, err)
		}
	}
	if want := int64(len(checks) + 1); efs.Injected() != want {
		t.Errorf("Injected() = %d, want %d", efs.Injected(), want)
	}
	if efs.Ops() != 4 { // #1, #2, and the two syncs above
		t.Errorf("Ops() = %d, want 4", efs.Ops())
	}
	// Nothing reached the inner filesystem after the crash.
	if got, err := vfs.ReadFile(mem, "/a"); err != nil || string(got) != "ab" {
		t.Fatalf("inner /a = %q, %v", got, err)
	}
	if _, err := mem.Stat("/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("inner /b: %v", err)
	}
}

func TestErrorTypes(t *testing.T) {
	efs := errorfs.Wrap(crashfs.New(), errorfs.InjectorFunc(func(errorfs.Op) error { return errorfs.ErrInjected }))
	err := efs.Mkdir("/x", 0o755)
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "mkdir" || pe.Path != "/x" || !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("Mkdir error %#v", err)
	}
	err = efs.RenameNoReplace("/x", "/y")
	var le *os.LinkError
	if !errors.As(err, &le) || le.Old != "/x" || le.New != "/y" || !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("rename error %#v", err)
	}
	// A custom error is passed on, wrapped.
	custom := fmt.Errorf("disk on fire: %w", errorfs.ErrInjected)
	efs = errorfs.Wrap(crashfs.New(), errorfs.InjectorFunc(func(errorfs.Op) error { return custom }))
	if err := efs.SyncDir("/"); !errors.Is(err, custom) {
		t.Fatalf("custom error lost: %v", err)
	}
	// Errors of the inner filesystem pass through untouched.
	efs = errorfs.Wrap(crashfs.New(), nil)
	if _, err := efs.Stat("/missing"); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("inner error: %v", err)
	}
}

func TestFailOnlyTheNthSync(t *testing.T) {
	// A custom injector: fail only the second File.Sync, and go on.
	var syncs atomic.Int64
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileSync && syncs.Add(1) == 2 {
			return errorfs.ErrInjected
		}
		return nil
	})
	efs := errorfs.Wrap(crashfs.New(), inj)
	f, err := efs.Create("/a")
	if err != nil {
		t.Fatal(err)
	}
	var errs []bool
	for range 4 {
		errs = append(errs, errors.Is(f.Sync(), errorfs.ErrInjected))
	}
	if !slices.Equal(errs, []bool{false, true, false, false}) {
		t.Fatalf("sync failures %v", errs)
	}
	if efs.Injected() != 1 || efs.Ops() != 5 {
		t.Fatalf("Injected %d Ops %d", efs.Injected(), efs.Ops())
	}

	// The same with OnceAt and a filter.
	efs = errorfs.Wrap(crashfs.New(), errorfs.OnceAt(2), errorfs.WithFilter(errorfs.OfKind(errorfs.OpFileSync)))
	f, err = efs.Create("/a")
	if err != nil {
		t.Fatal(err)
	}
	errs = nil
	for range 4 {
		errs = append(errs, errors.Is(f.Sync(), errorfs.ErrInjected))
	}
	if !slices.Equal(errs, []bool{false, true, false, false}) {
		t.Fatalf("OnceAt: sync failures %v", errs)
	}
	if efs.Ops() != 4 {
		t.Fatalf("Ops %d, want 4 syncs", efs.Ops())
	}
}

func TestFilters(t *testing.T) {
	ops := []errorfs.Op{
		{Kind: errorfs.OpSyncDir, Path: "/"},
		{Kind: errorfs.OpMkdir, Path: "/out"},
		{Kind: errorfs.OpCreate, Path: "/out/a"},
		{Kind: errorfs.OpFileWrite, Path: "/out/a"},
		{Kind: errorfs.OpStat, Path: "/outside/a"},
		{Kind: errorfs.OpRename, Path: "/tmp/x", NewPath: "/out/x"},
		{Kind: errorfs.OpFileRead, Path: "/out/a/"},
	}
	cases := []struct {
		name string
		f    errorfs.Filter
		want []bool
	}{
		{"PathPrefix", errorfs.PathPrefix("/out/"), []bool{false, true, true, true, false, true, true}},
		{"PathPrefixRoot", errorfs.PathPrefix("/"), []bool{true, true, true, true, true, true, true}},
		{"Mutating", errorfs.Mutating, []bool{true, true, true, true, false, true, false}},
		{"OfKind", errorfs.OfKind(errorfs.OpFileWrite, errorfs.OpStat), []bool{false, false, false, true, true, false, false}},
		{"And", errorfs.And(errorfs.PathPrefix("/out"), errorfs.Mutating), []bool{false, true, true, true, false, true, false}},
	}
	for _, c := range cases {
		var got []bool
		for _, op := range ops {
			got = append(got, c.f(op))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	// Only counted operations get an index; the others have Index 0.
	rec := &recorder{}
	efs := errorfs.Wrap(crashfs.New(), rec, errorfs.WithFilter(errorfs.PathPrefix("/out")))
	if err := workload(efs); err != nil {
		t.Fatal(err)
	}
	if efs.Ops() != workloadOps-1 { // SyncDir("/") is not under /out
		t.Fatalf("Ops() = %d, want %d", efs.Ops(), workloadOps-1)
	}
	if len(rec.ops) != workloadOps || rec.ops[1].Index != 0 || rec.ops[2].Index != 2 {
		t.Fatalf("the injector must see every op, with Index 0 when not counted: %v", rec.ops)
	}
}

func TestOpKindNames(t *testing.T) {
	seen := map[string]bool{}
	for k := errorfs.OpCreate; k <= errorfs.OpFileStat; k++ {
		s := k.String()
		if seen[s] || s == "" || s[0] == 'O' {
			t.Errorf("kind %d has name %q", k, s)
		}
		seen[s] = true
		if k.IsFileOp() != (k >= errorfs.OpFileWrite) {
			t.Errorf("%s: IsFileOp %v", s, k.IsFileOp())
		}
	}
	if got := errorfs.OpKind(200).String(); got != "OpKind(200)" {
		t.Errorf("unknown kind: %q", got)
	}
}

// closeSpy records whether files it handed out were closed.
type closeSpy struct {
	vfs.FS
	closed atomic.Int64
}

type spyFile struct {
	vfs.File
	spy *closeSpy
}

func (s *closeSpy) Create(name string) (vfs.File, error) {
	f, err := s.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return spyFile{f, s}, nil
}

func (f spyFile) Close() error {
	f.spy.closed.Add(1)
	return f.File.Close()
}

func TestInjectedCloseStillCloses(t *testing.T) {
	spy := &closeSpy{FS: crashfs.New()}
	efs := errorfs.Wrap(spy, errorfs.OnIndex(2))
	f, err := efs.Create("/a") // #1
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, errorfs.ErrInjected) { // #2
		t.Fatalf("close: %v", err)
	}
	if spy.closed.Load() != 1 {
		t.Fatal("the inner file was not closed")
	}
}

func TestConcurrentCounting(t *testing.T) {
	mem := crashfs.New()
	if err := vfs.WriteFileSync(mem, "/a", nil); err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 16, 100
	efs := errorfs.Wrap(mem, errorfs.OnIndex(800))
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				if _, err := efs.Stat("/a"); errors.Is(err, errorfs.ErrInjected) {
					failed.Add(1)
				} else if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if efs.Ops() != goroutines*each {
		t.Fatalf("Ops() = %d, want %d", efs.Ops(), goroutines*each)
	}
	// Operations 800 and later all fail; some earlier ones may too, if they
	// reach the injector after it fired.
	if f := failed.Load(); f < goroutines*each-799 || f != efs.Injected() {
		t.Fatalf("%d failed, Injected() = %d, want at least %d", f, efs.Injected(), goroutines*each-799)
	}
}

// atomicPublish is the create-sync-rename-syncdir protocol; skipSyncDir
// leaves out the last step, which is a bug.
func atomicPublish(fsys vfs.FS, data []byte, skipSyncDir bool) error {
	if err := vfs.MkdirAllSync(fsys, "/out"); err != nil {
		return err
	}
	if err := vfs.WriteFileSync(fsys, "/out/.tmp", data); err != nil {
		return err
	}
	if err := fsys.RenameNoReplace("/out/.tmp", "/out/final"); err != nil {
		return err
	}
	if skipSyncDir {
		return nil
	}
	return fsys.SyncDir("/out")
}

// crashLoop crashes atomicPublish at every operation and checks on several
// crash clones that /out/final is either absent or complete, and present
// once atomicPublish returned nil. It returns the first violation.
func crashLoop(t *testing.T, skipSyncDir bool) error {
	data := bytes.Repeat([]byte("payload "), 100)
	for k := int64(1); ; k++ {
		mem := crashfs.New()
		efs := errorfs.Wrap(mem, errorfs.OnIndex(k))
		err := atomicPublish(efs, data, skipSyncDir)
		for seed := range int64(20) {
			got, rerr := vfs.ReadFile(mem.CrashClone(seed), "/out/final")
			switch {
			case errors.Is(rerr, fs.ErrNotExist):
				if err == nil {
					return fmt.Errorf("k=%d seed %d: published, but lost in the crash", k, seed)
				}
			case rerr != nil:
				t.Fatal(rerr)
			case !bytes.Equal(got, data):
				return fmt.Errorf("k=%d seed %d: partial file of %d bytes", k, seed, len(got))
			}
		}
		if !efs.Fired() {
			if k < 5 {
				t.Fatalf("sweep ended at k=%d", k)
			}
			return nil
		}
	}
}

func TestCrashLoop(t *testing.T) {
	if err := crashLoop(t, false); err != nil {
		t.Fatal(err)
	}
	if err := crashLoop(t, true); err == nil {
		t.Fatal("the crash loop did not catch the missing SyncDir")
	} else {
		t.Logf("missing SyncDir caught as expected: %v", err)
	}
}
