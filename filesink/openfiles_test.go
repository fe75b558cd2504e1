package filesink_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/internal/testutil/testjob"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
)

// openCountFS is vfs.OS that counts the part files (in-progress staging
// files) open at once, and keeps the most there ever were.
type openCountFS struct {
	vfs.OS
	mu         sync.Mutex
	open, peak int
	opened     int // staging files opened in all
}

func isStaging(name string) bool {
	base := filepath.Base(name)
	return strings.HasPrefix(base, ".") && strings.HasSuffix(base, localfs.StagingSuffix)
}

func (c *openCountFS) count(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil || !isStaging(name) {
		return f, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open++
	c.opened++
	c.peak = max(c.peak, c.open)
	return &countedFile{File: f, fs: c}, nil
}

func (c *openCountFS) Create(name string) (vfs.File, error) {
	f, err := c.OS.Create(name)
	return c.count(f, name, err)
}

func (c *openCountFS) OpenAppend(name string) (vfs.File, error) {
	f, err := c.OS.OpenAppend(name)
	return c.count(f, name, err)
}

func (c *openCountFS) Open(name string) (vfs.File, error) {
	f, err := c.OS.Open(name)
	return c.count(f, name, err)
}

func (c *openCountFS) stats() (open, peak, opened int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.peak, c.opened
}

type countedFile struct {
	vfs.File
	fs     *openCountFS
	closed bool
}

func (f *countedFile) Close() error {
	if !f.closed {
		f.closed = true
		f.fs.mu.Lock()
		f.fs.open--
		f.fs.mu.Unlock()
	}
	return f.File.Close()
}

func TestMaxOpenPartsValidation(t *testing.T) {
	be, _ := newLocal(t)
	for _, n := range []int{0, -1} {
		if w, err := filesink.New(be, 0, filesink.WithMaxOpenParts(n)); err == nil {
			w.Close()
			t.Errorf("WithMaxOpenParts(%d) accepted", n)
		} else if !strings.Contains(err.Error(), "below the minimum") {
			t.Errorf("WithMaxOpenParts(%d): %v", n, err)
		}
	}
	w := newWriter(t, be, 0, filesink.WithMaxOpenParts(filesink.MinOpenParts))
	if w.OpenFiles() != 0 {
		t.Errorf("a new Writer holds %d open files", w.OpenFiles())
	}
}

func TestMaxOpenPartsFor(t *testing.T) {
	for _, c := range []struct {
		limit uint64
		want  int
	}{
		{0, 1}, {8, 2}, {64, 16}, {100, 25}, {256, 160}, {1024, 832}, {4096, 3520},
		{1 << 20, 917440}, {^uint64(0), 1 << 20},
	} {
		if got := filesink.MaxOpenPartsFor(c.limit); got != c.want {
			t.Errorf("MaxOpenPartsFor(%d) = %d, want %d", c.limit, got, c.want)
		}
	}
	if n := filesink.DefaultMaxOpenParts(); n < filesink.MinOpenParts {
		t.Errorf("DefaultMaxOpenParts() = %d", n)
	}
}

// openLimitJob writes records to buckets round robin through a writer
// over fsys with at most limit open part files, checkpointing (phase 1,
// decide, phase 2) every ckptEvery records, from record from on (a
// restart resumes at the newest checkpoint's position). It returns the
// writer and the position of the last record written; with crashAt > 0 it
// stops after that record without a final checkpoint, as a crash would.
type openLimitJob struct {
	fsys      *openCountFS
	out       string
	buckets   int
	limit     int
	ckptEvery int
	records   int
	opts      []filesink.Option
}

func (j *openLimitJob) record(i int) []byte {
	return fmt.Appendf(nil, `{"id":%d,"key":"k%04d","pad":%q}`, i, i%j.buckets, strings.Repeat("x", 150+i%50))
}

// run returns the records written and the writer's stats.
func (j *openLimitJob) run(t *testing.T, crashAt int, check func(w *filesink.Writer)) (released int64) {
	t.Helper()
	ctx := context.Background()
	be := localfs.New(j.fsys, j.out)
	opts := append([]filesink.Option{filesink.WithAssigner(bucketing.Field("key")), filesink.WithMaxOpenParts(j.limit),
		filesink.WithBufferBudget(128 << 10)}, j.opts...)
	w, err := filesink.New(be, 0, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	store, err := recovery.OpenDir(ctx, vfs.OS{}, filepath.Join(j.out, "_filesink"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	coord, err := committer.New(store, []committer.Participant{w})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := coord.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check(w)
	from := 0
	if rec != nil {
		if err := json.Unmarshal(rec.Source, &from); err != nil {
			t.Fatal(err)
		}
	}
	for i := from; i < j.records; i++ {
		if err := w.Write(ctx, j.record(i), source.Origin{Name: "t", Num: int64(i)}); err != nil {
			t.Fatal(err)
		}
		check(w)
		if i+1 == crashAt {
			return w.Stats().Released.Load()
		}
		if (i+1)%j.ckptEvery == 0 && i+1 < j.records {
			if _, err := coord.Checkpoint(ctx, fmt.Appendf(nil, "%d", i+1), false); err != nil {
				t.Fatal(err)
			}
			check(w)
		}
	}
	if _, err := coord.Checkpoint(ctx, fmt.Appendf(nil, "%d", j.records), true); err != nil {
		t.Fatal(err)
	}
	check(w)
	return w.Stats().Released.Load()
}

// TestMaxOpenPartsNeverExceeded writes 3,000 records round robin to 200
// buckets with at most 8 part files open, counting the open files in the
// filesystem, crashes after the second checkpoint, recovers (200 parts to
// resume) and finishes: never more than 8 part files are open, every
// record is published exactly once, and each bucket has one file per run
// (a released part is resumed, not rolled).
func TestMaxOpenPartsNeverExceeded(t *testing.T) {
	const limit = 8
	j := &openLimitJob{fsys: &openCountFS{}, out: t.TempDir(), buckets: 200, limit: limit, ckptEvery: 1000, records: 3000}
	check := func(w *filesink.Writer) {
		t.Helper()
		if n := w.OpenFiles(); n > limit {
			t.Fatalf("the writer holds %d open part files, the limit is %d", n, limit)
		}
		if _, peak, _ := j.fsys.stats(); peak > limit {
			t.Fatalf("%d part files were open at once, the limit is %d", peak, limit)
		}
	}
	released := j.run(t, 2500, check)
	if released == 0 {
		t.Fatal("no part was released: the test does not reach the limit")
	}
	if open, _, _ := j.fsys.stats(); open != 0 {
		t.Fatalf("%d part files open after Close", open)
	}
	_, _, before := j.fsys.stats()
	j.run(t, 0, check)
	_, peak, opened := j.fsys.stats()
	if opened-before < 200 {
		t.Errorf("the recovery opened %d part files, want the 200 of the checkpoint at least", opened-before)
	}
	files := published(t, j.out)
	checkIDs(t, files, j.records)
	// Run 1 published a file per bucket at no checkpoint but its crash;
	// run 2 resumed the 200 parts and closed them at its final checkpoint.
	if len(files) != 200 {
		t.Errorf("%d files published, want one per bucket (200): a released part must be resumed, not rolled", len(files))
	}
	t.Logf("peak %d open part files (limit %d), %d released in the first run", peak, limit, released)
}

// TestMaxOpenPartsBulk: bulk parts cannot be resumed, so at the limit the
// least recently written one rolls; every record once, never more than
// the limit open.
func TestMaxOpenPartsBulk(t *testing.T) {
	const limit = 3
	j := &openLimitJob{fsys: &openCountFS{}, out: t.TempDir(), buckets: 20, limit: limit, ckptEvery: 400, records: 1000,
		opts: []filesink.Option{filesink.WithBulkFormat(testjob.FakeBulk{RowGroupBytes: 1 << 10})}}
	j.run(t, 0, func(w *filesink.Writer) {
		t.Helper()
		if _, peak, _ := j.fsys.stats(); peak > limit || w.OpenFiles() > limit {
			t.Fatalf("%d part files open at once (the writer counts %d), the limit is %d", peak, w.OpenFiles(), limit)
		}
	})
	files := published(t, j.out)
	checkBulkIDs(t, files, j.records)
	if len(files) <= 20*3 {
		t.Errorf("%d files for 20 buckets over 3 checkpoints: the limit rolled no bulk part", len(files))
	}
}

// TestMaxOpenPartsRollSeam: the benchmarks' alternative (rolling instead of
// releasing) is exactly once too, with more files.
func TestMaxOpenPartsRollSeam(t *testing.T) {
	j := &openLimitJob{fsys: &openCountFS{}, out: t.TempDir(), buckets: 50, limit: 4, ckptEvery: 500, records: 1500,
		opts: []filesink.Option{filesink.WithEvictByRolling()}}
	j.run(t, 0, func(*filesink.Writer) {})
	files := published(t, j.out)
	checkIDs(t, files, j.records)
	if len(files) <= 50 {
		t.Errorf("%d files for 50 buckets: rolling at the limit made no extra file", len(files))
	}
	if _, peak, _ := j.fsys.stats(); peak > 4 {
		t.Errorf("%d part files open at once, the limit is 4", peak)
	}
}

// strictBackend's part writers refuse a Persist while a PersistAsync's
// wait has not returned (the PartWriter contract: the wait is called, or
// abandoned, before the next persist), and hold that wait until gate
// opens, as a slow fsync or upload would.
type strictBackend struct {
	driver.Backend
	gate chan struct{}
}

func (b *strictBackend) wrap(pw driver.PartWriter, err error) (driver.PartWriter, error) {
	if err != nil {
		return nil, err
	}
	return &strictPartWriter{PartWriter: pw, gate: b.gate}, nil
}

func (b *strictBackend) Open(ctx context.Context, target string) (driver.PartWriter, error) {
	return b.wrap(b.Backend.Open(ctx, target))
}

func (b *strictBackend) Resume(ctx context.Context, r json.RawMessage) (driver.PartWriter, error) {
	return b.wrap(b.Backend.Resume(ctx, r))
}

type strictPartWriter struct {
	driver.PartWriter
	gate    chan struct{}
	mu      sync.Mutex
	pending bool
}

func (p *strictPartWriter) PersistAsync(ctx context.Context) (func(context.Context) (json.RawMessage, error), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending {
		return nil, errors.New("PersistAsync while a PersistAsync is pending")
	}
	wait, err := p.PartWriter.PersistAsync(ctx)
	if err != nil {
		return nil, err
	}
	p.pending = true
	return func(ctx context.Context) (json.RawMessage, error) {
		<-p.gate
		r, err := wait(ctx)
		p.mu.Lock()
		p.pending = false
		p.mu.Unlock()
		return r, err
	}, nil
}

func (p *strictPartWriter) Persist(ctx context.Context) (json.RawMessage, error) {
	p.mu.Lock()
	pending := p.pending
	p.mu.Unlock()
	if pending {
		return nil, errors.New("Persist while a PersistAsync is pending")
	}
	return p.PartWriter.Persist(ctx)
}

// TestReleaseDuringPendingPersist: a part whose checkpoint persist is
// still pending when the limit releases it waits for that persist
// (sharing its outcome with the checkpoint's wait) before its own; the
// checkpoint holds the barrier's records, and every record comes once.
func TestReleaseDuringPendingPersist(t *testing.T) {
	ctx := context.Background()
	local, root := newLocal(t)
	gate := make(chan struct{})
	be := &strictBackend{Backend: local, gate: gate}
	w := newWriter(t, be, 0, filesink.WithAssigner(bucketing.Field("key")), filesink.WithMaxOpenParts(2),
		filesink.WithBufferBudget(64<<10))
	// Records of 20 KB: every one is written out to its file at once.
	rec := func(i int) []byte {
		return fmt.Appendf(nil, `{"id":%d,"key":"k%d","pad":%q}`, i, i%4, strings.Repeat("p", 20000))
	}
	for i := range 2 { // buckets k0 and k1: the limit
		mustWrite(t, w, rec(i))
	}
	wait, err := w.Prepare(ctx, 1, false) // their persists wait for the gate
	if err != nil {
		t.Fatal(err)
	}
	// Buckets k2 and k3 need files: k0 and k1 are released, after their
	// pending persists.
	wrote := make(chan error, 1)
	go func() {
		for i := 2; i < 4; i++ {
			if err := w.Write(ctx, rec(i), source.Origin{Name: "t", Num: int64(i)}); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	close(gate)
	snap, err := wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if got := w.Stats().Released.Load(); got != 2 {
		t.Fatalf("%d parts released, want 2", got)
	}
	if parts := stateParts(t, snap.State); len(parts) != 2 {
		t.Fatalf("checkpoint 1 holds %d open parts, want k0 and k1: %+v", len(parts), parts)
	}
	final := prepare(t, w, 2, true) // reopens k0 and k1 to close them
	commitAll(t, w, final.Committables)
	files := published(t, root)
	checkIDs(t, files, 4)
	if len(files) != 4 {
		t.Errorf("%d files, want one per bucket", len(files))
	}
}

// TestSweepKeepsReleasedParts: the sweep keeps the staging file of a part
// released at the limit (it is resumed on its next record).
func TestSweepKeepsReleasedParts(t *testing.T) {
	ctx := context.Background()
	be, root := newLocal(t)
	w := newWriter(t, be, 0, filesink.WithAssigner(bucketing.Field("key")), filesink.WithMaxOpenParts(1))
	for i := range 6 {
		mustWrite(t, w, fmt.Appendf(nil, `{"id":%d,"key":"k%d"}`, i, i%3))
	}
	snap := prepare(t, w, 1, false) // opens all three, one at a time
	if w.Stats().Released.Load() == 0 {
		t.Fatal("no part was released")
	}
	if _, err := w.Sweep(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := hidden(t, root); len(got) != 3 {
		t.Fatalf("staging files after the sweep: %v, want the three open parts'", got)
	}
	for i := 6; i < 12; i++ {
		mustWrite(t, w, fmt.Appendf(nil, `{"id":%d,"key":"k%d"}`, i, i%3))
	}
	final := prepare(t, w, 2, true)
	commitAll(t, w, append(snap.Committables, final.Committables...))
	files := published(t, root)
	checkIDs(t, files, 12)
	if len(files) != 3 {
		t.Errorf("%d files, want one per bucket", len(files))
	}
}

// TestCrashLoopOpenLimit is the crash loop (a crash at every filesystem
// operation, power loss, crashed recovery, power loss, clean run) with an
// open-file limit below the number of buckets, so that parts are released
// and resumed, and rolled for a bulk format: every record exactly once.
func TestCrashLoopOpenLimit(t *testing.T) {
	jobs := map[string]testjob.Job{
		"released": {Count: 300, Keys: 5, Bucket: "field:key", MaxOpenParts: 2, PartSize: 1 << 20},
		"bulk":     {Count: 60, Keys: 3, Bucket: "field:key", MaxOpenParts: 2, Bulk: testjob.FakeBulk{RowGroupBytes: 1 << 10}},
	}
	for name, job := range jobs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := testjob.CrashLoop(t, job, rand.New(rand.NewPCG(crashSeed(t), 0)))
			t.Logf("swept %d fault points", k)
		})
	}
}
