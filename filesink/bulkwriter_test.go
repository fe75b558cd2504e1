package filesink_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/internal/testutil/testjob"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
	"github.com/filesink/filesink/vfs/crashfs"
)

// Tests of the bulk-format integration (WithBulkFormat) with
// testjob.FakeBulk, whose Buffered is exact and whose files fail to decode
// without their footer.

func bulkRecord(i int, key string, pad int) []byte {
	return fmt.Appendf(nil, `{"id":%d,"key":%q,"pad":%q}`, i, key, strings.Repeat("p", pad))
}

// bulkIDs decodes every published FakeBulk file (a file without its footer
// fails the test) and returns the files of each id.
func bulkIDs(t *testing.T, files map[string][]byte) map[int][]string {
	t.Helper()
	seen := map[int][]string{}
	for name, data := range files {
		if !strings.HasSuffix(name, testjob.FakeBulkExt) {
			t.Errorf("published file %s: want the extension %s", name, testjob.FakeBulkExt)
			continue
		}
		f, err := testjob.DecodeFakeBulk(data)
		if err != nil {
			t.Errorf("published file %s: %v", name, err)
			continue
		}
		for _, rec := range f.Records {
			var r struct{ ID *int }
			if err := json.Unmarshal(rec, &r); err != nil || r.ID == nil {
				t.Fatalf("%s: %q is not a record", name, rec)
			}
			seen[*r.ID] = append(seen[*r.ID], name)
		}
	}
	return seen
}

func checkBulkIDs(t *testing.T, files map[string][]byte, n int) {
	t.Helper()
	seen := bulkIDs(t, files)
	for i := range n {
		if len(seen[i]) != 1 {
			t.Errorf("id %d published %d times %v", i, len(seen[i]), seen[i])
		}
	}
	for id := range seen {
		if id < 0 || id >= n {
			t.Errorf("unexpected id %d in %v", id, seen[id])
		}
	}
}

func TestBulkOptionValidation(t *testing.T) {
	be, _ := newLocal(t)
	gz, _ := filesink.NewCompression("gzip")
	for name, opts := range map[string][]filesink.Option{
		"compression": {filesink.WithBulkFormat(testjob.FakeBulk{}), filesink.WithCompression(gz)},
		"encoder":     {filesink.WithEncoder(filesink.CSV{}), filesink.WithBulkFormat(testjob.FakeBulk{})},
	} {
		if _, err := filesink.New(be, 0, opts...); err == nil {
			t.Errorf("%s with a bulk format: New succeeded, want an error", name)
		}
	}
	w := newWriter(t, be, 0, filesink.WithBulkFormat(testjob.FakeBulk{}), filesink.WithSuffix(".x"))
	mustWrite(t, w, bulkRecord(0, "", 0))
	for _, c := range prepare(t, w, 1, true).Committables {
		if !strings.Contains(string(c), `.x"`) {
			t.Errorf("WithSuffix ignored with a bulk format: %s", c)
		}
	}
}

// Every bulk part rolls at every checkpoint, whatever the policy says;
// the state holds no in-progress part; a checkpoint without records in a
// bucket publishes nothing there.
func TestBulkRollsAtEveryCheckpoint(t *testing.T) {
	for name, policy := range map[string]filesink.RollingPolicy{
		"default":     filesink.NewDefaultPolicy(),
		"never rolls": filesink.DefaultPolicy{},
	} {
		t.Run(name, func(t *testing.T) {
			be, root := newLocal(t)
			w := newWriter(t, be, 0, filesink.WithBulkFormat(testjob.FakeBulk{RowGroupBytes: 1 << 10}),
				filesink.WithRollingPolicy(policy), filesink.WithAssigner(bucketing.Field("key")))
			id := 0
			write := func(n int, keys ...string) {
				for range n {
					for _, k := range keys {
						mustWrite(t, w, bulkRecord(id, k, 40))
						id++
					}
				}
			}
			write(10, "a", "b", "c")
			snap := prepare(t, w, 1, false)
			if snap.State != nil {
				t.Errorf("checkpoint 1: state %s, want none (bulk parts never stay in progress)", snap.State)
			}
			if len(snap.Committables) != 3 {
				t.Errorf("checkpoint 1: %d committables, want 3 (one per bucket)", len(snap.Committables))
			}
			commitAll(t, w, snap.Committables)
			if h := hidden(t, root); len(h) != 0 {
				t.Errorf("after checkpoint 1: in-progress files %v", h)
			}
			checkBulkIDs(t, published(t, root), id)

			if snap := prepare(t, w, 2, false); len(snap.Committables) != 0 || snap.State != nil {
				t.Errorf("checkpoint 2 without records: %d committables, state %s", len(snap.Committables), snap.State)
			}
			write(40, "a")
			snap = prepare(t, w, 3, false)
			if len(snap.Committables) != 1 || snap.State != nil {
				t.Errorf("checkpoint 3: %d committables, state %s; want 1, none", len(snap.Committables), snap.State)
			}
			commitAll(t, w, snap.Committables)
			files := published(t, root)
			if len(files) != 4 {
				t.Errorf("files %v, want 4", keys(files))
			}
			checkBulkIDs(t, files, id)
		})
	}
}

// The part size counts the bytes written and the bulk writer's Buffered:
// parts roll on size even when nothing was written yet.
func TestBulkRollsOnSize(t *testing.T) {
	const partSize = 8 << 10
	for name, rg := range map[string]int{"row groups written": 1 << 10, "all buffered": 1 << 30} {
		t.Run(name, func(t *testing.T) {
			be, root := newLocal(t)
			w := newWriter(t, be, 0, filesink.WithBulkFormat(testjob.FakeBulk{RowGroupBytes: rg}),
				filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: partSize}))
			const n = 1000
			for i := range n {
				mustWrite(t, w, bulkRecord(i, "", 60)) // about 90 bytes
			}
			commitAll(t, w, prepare(t, w, 1, true).Committables)
			files := published(t, root)
			if len(files) < n*90/partSize/2 {
				t.Errorf("%d files of about 90 KB in all, want parts of at most %d bytes", len(files), partSize)
			}
			for name, data := range files {
				if len(data) > partSize+512 {
					t.Errorf("%s: %d bytes, part size %d", name, len(data), partSize)
				}
			}
			checkBulkIDs(t, files, n)
		})
	}
}

// Rollover and inactivity roll bulk parts, on Tick and on Write.
func TestBulkRollsOnTime(t *testing.T) {
	ctx := context.Background()
	be, root := newLocal(t)
	clk := newClock()
	w := newWriter(t, be, 0, filesink.WithBulkFormat(testjob.FakeBulk{}), filesink.WithClock(clk.Now),
		filesink.WithRollingPolicy(filesink.DefaultPolicy{Rollover: time.Minute, Inactivity: 30 * time.Second}))
	mustWrite(t, w, bulkRecord(0, "", 0))
	clk.Advance(31 * time.Second)
	if err := w.Tick(ctx, clk.Now()); err != nil { // inactive: rolls
		t.Fatal(err)
	}
	mustWrite(t, w, bulkRecord(1, "", 0))
	for i := 2; i < 5; i++ {
		clk.Advance(20 * time.Second)
		mustWrite(t, w, bulkRecord(i, "", 0)) // at 60 s: rollover before record 4
	}
	snap := prepare(t, w, 1, true)
	if len(snap.Committables) != 3 {
		t.Errorf("%d parts, want 3 (inactivity on Tick, rollover on Write, final)", len(snap.Committables))
	}
	commitAll(t, w, snap.Committables)
	checkBulkIDs(t, published(t, root), 5)
}

// nullBackend keeps no data: for budget tests with more bytes than a test
// should hold.
type nullBackend struct {
	mu      sync.Mutex
	written int64
	closed  int
}

type nullPart struct {
	b      *nullBackend
	target string
	size   int64
}

func (b *nullBackend) Open(_ context.Context, target string) (driver.PartWriter, error) {
	return &nullPart{b: b, target: target}, nil
}
func (b *nullBackend) Resume(context.Context, json.RawMessage) (driver.PartWriter, error) {
	return nil, errors.New("nullBackend: no resume")
}
func (b *nullBackend) Rebuild(context.Context, json.RawMessage) (driver.PartWriter, error) {
	return nil, errors.New("nullBackend: no rebuild")
}
func (b *nullBackend) Finalize(context.Context, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("nullBackend: no finalize")
}
func (b *nullBackend) Commit(context.Context, json.RawMessage) error { return nil }
func (b *nullBackend) Sweep(context.Context, string, []json.RawMessage) (map[string]int64, error) {
	return nil, nil
}
func (b *nullBackend) SweepEvery() int { return 0 }

func (b *nullBackend) Describe(data json.RawMessage) (string, string, error) {
	var d struct{ Target string }
	err := json.Unmarshal(data, &d)
	return d.Target, "." + d.Target, err
}

// nullBackend's Output keeps nothing either: metadata puts succeed and
// are forgotten, listings are empty.
func (b *nullBackend) Check(context.Context, json.RawMessage) error       { return nil }
func (b *nullBackend) Scan(context.Context) ([]string, []string, error)   { return nil, nil, nil }
func (b *nullBackend) PutMeta(context.Context, string, []byte) error      { return nil }
func (b *nullBackend) PutFile(context.Context, string, []byte) error      { return nil }
func (b *nullBackend) MetaLocation(name string) string                    { return name }
func (b *nullBackend) FileLocation(target string) string                  { return target }
func (b *nullBackend) ListMeta(context.Context, string) ([]string, error) { return nil, nil }
func (b *nullBackend) GetMeta(context.Context, string) ([]byte, error)    { return nil, fs.ErrNotExist }
func (b *nullBackend) OpenFile(context.Context, string) (io.ReadCloser, error) {
	return nil, fs.ErrNotExist
}
func (b *nullBackend) ListMetaAfter(context.Context, string, string) ([]string, error) {
	return nil, nil
}
func (b *nullBackend) ListFiles(context.Context, func(string, int64) error) error { return nil }

func (p *nullPart) Write(data []byte) (int, error) {
	p.size += int64(len(data))
	p.b.mu.Lock()
	p.b.written += int64(len(data))
	p.b.mu.Unlock()
	return len(data), nil
}
func (p *nullPart) Size() int64 { return p.size }
func (p *nullPart) Persist(context.Context) (json.RawMessage, error) {
	return json.Marshal(map[string]any{"target": p.target, "size": p.size})
}
func (p *nullPart) PersistAsync(ctx context.Context) (func(context.Context) (json.RawMessage, error), error) {
	r, err := p.Persist(ctx)
	return func(context.Context) (json.RawMessage, error) { return r, err }, nil
}
func (p *nullPart) MustRoll() bool { return false }
func (p *nullPart) CloseForCommit(ctx context.Context) (json.RawMessage, error) {
	p.b.mu.Lock()
	p.b.closed++
	p.b.mu.Unlock()
	return p.Persist(ctx)
}
func (p *nullPart) Close() error { return nil }

// With 1,000 open buckets, the memory the Writer counts (bulk writers'
// Buffered, exact for FakeBulk, plus buffers) never exceeds the budget:
// row groups are flushed early, and a writer that keeps memory through
// Flush (Floor) has its part rolled.
func TestBulkBudgetManyBuckets(t *testing.T) {
	tests := []struct {
		name    string
		buckets int
		budget  int64
		records int
		pad     int
		rg      int
		floor   int64
		null    bool // nullBackend: no content check
	}{
		{name: "1000 buckets, 1 MiB", buckets: 1000, budget: 1 << 20, records: 40_000, pad: 60, rg: 1 << 20},
		{name: "1000 buckets, 8 MiB", buckets: 1000, budget: 8 << 20, records: 150_000, pad: 60, rg: 1 << 20},
		{name: "1000 buckets, default 64 MiB", buckets: 1000, budget: filesink.DefaultBufferBudget, records: 120_000, pad: 1000, rg: 128 << 20, null: true},
		{name: "1 bucket, 64 KiB, row groups larger than the budget", buckets: 1, budget: 64 << 10, records: 5_000, pad: 60, rg: 1 << 20},
		{name: "100 buckets, writers that keep 4 KiB", buckets: 100, budget: 64 << 10, records: 3_000, pad: 20, rg: 1 << 20, floor: 4 << 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.records*tc.pad > 10_000_000 {
				t.Skip("large case skipped in -short mode")
			}
			mem := crashfs.New()
			var be driver.Backend = localfs.New(mem, testjob.Out)
			nb := &nullBackend{}
			if tc.null {
				be = nb
			}
			w := newWriter(t, be, 0, filesink.WithBufferBudget(tc.budget), filesink.WithAssigner(bucketing.Field("key")),
				filesink.WithBulkFormat(testjob.FakeBulk{RowGroupBytes: tc.rg, Floor: tc.floor}))
			var accepted, peak int64
			for i := range tc.records {
				r := bulkRecord(i, fmt.Sprintf("k-%d", i%tc.buckets), tc.pad)
				mustWrite(t, w, r)
				accepted += int64(len(r) + 1)
				used := w.BufferedBytes()
				peak = max(peak, used)
				if used > tc.budget {
					t.Fatalf("after record %d: %d bytes held with %d buckets open, budget %d", i, used, w.OpenBuckets(), tc.budget)
				}
			}
			if accepted <= tc.budget {
				t.Fatalf("test wrote only %d bytes: the budget was never at stake", accepted)
			}
			if tc.floor == 0 && w.OpenBuckets() != tc.buckets {
				t.Errorf("%d open buckets, want %d", w.OpenBuckets(), tc.buckets)
			}
			cs := prepare(t, w, 1, true).Committables
			commitAll(t, w, cs)
			t.Logf("peak held %d of %d; %d parts", peak, tc.budget, len(cs))
			if tc.floor == 0 && len(cs) != tc.buckets {
				t.Errorf("%d parts, want one per bucket (%d): the budget should flush row groups, not roll", len(cs), tc.buckets)
			}
			if tc.null {
				return
			}
			if p := testjob.Check(mem, int64(tc.records)); len(p) > 0 {
				t.Errorf("not exactly once: %v", p[:min(5, len(p))])
			}
			if tc.floor > 0 {
				return
			}
			// Row groups were flushed early: more row groups than files.
			groups := 0
			for name := range testjob.Files(mem) {
				data, err := vfs.ReadFile(mem, name)
				if err != nil {
					t.Fatal(err)
				}
				f, err := testjob.DecodeFakeBulk(data)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				groups += len(f.RowGroups)
			}
			if groups <= tc.buckets {
				t.Errorf("%d row groups in %d files: the budget never flushed one early", groups, tc.buckets)
			}
		})
	}
}

// A record the format rejects is a *BadRecordError naming its origin, or a
// dead letter (JSON lines); the writer goes on and no bulk file holds only
// rejected records.
func TestBulkBadRecord(t *testing.T) {
	ctx := context.Background()
	origin := source.Origin{Name: "in/a.jsonl", Num: 7}
	t.Run("fail", func(t *testing.T) {
		be, root := newLocal(t)
		w := newWriter(t, be, 0, filesink.WithBulkFormat(testjob.FakeBulk{}), filesink.WithAssigner(bucketing.Field("key")))
		mustWrite(t, w, bulkRecord(0, "a", 0))
		for _, rec := range []string{`{"key":"b"}`, `{"id":5,"key":"a","bad":true}`, `{"id":6,"key":"c",`} {
			err := w.Write(ctx, []byte(rec), origin)
			var bre *source.BadRecordError
			if !errors.As(err, &bre) || !errors.Is(err, source.ErrBadRecord) {
				t.Fatalf("Write(%s) = %v, want a *BadRecordError", rec, err)
			}
			if !strings.Contains(err.Error(), "in/a.jsonl:7") || !strings.Contains(err.Error(), testjob.FakeBulkExt) {
				t.Errorf("error %q names neither the origin nor the format", err)
			}
		}
		mustWrite(t, w, bulkRecord(1, "a", 0))
		snap := prepare(t, w, 1, true)
		if len(snap.Committables) != 1 {
			t.Errorf("%d parts, want 1 (bucket b had only a rejected record)", len(snap.Committables))
		}
		commitAll(t, w, snap.Committables)
		checkBulkIDs(t, published(t, root), 2)
		if h := hidden(t, root); len(h) != 0 {
			t.Errorf("staging files left: %v", h)
		}
	})
	t.Run("dead letter", func(t *testing.T) {
		root := t.TempDir()
		dlRoot := filepath.Join(root, "_dead-letter")
		be, dl := localfs.New(vfs.OS{}, root), localfs.New(vfs.OS{}, dlRoot)
		w := newWriter(t, be, 0, filesink.WithBulkFormat(testjob.FakeBulk{}), filesink.WithDeadLetter(dl))
		mustWrite(t, w, bulkRecord(0, "", 0))
		bad := `{"id":1,"bad":true}`
		if err := w.Write(ctx, []byte(bad), origin); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, w, bulkRecord(2, "", 0))
		snap := prepare(t, w, 1, false)
		commitAll(t, w, snap.Committables)
		// The dead-letter part is a row part: it stays in progress.
		if parts := stateParts(t, snap.State); len(parts) != 1 || !parts[0].DeadLetter {
			t.Errorf("state %s, want the dead-letter part only", snap.State)
		}
		commitAll(t, w, prepare(t, w, 2, true).Committables)
		dead := readDeadLetters(t, dlRoot)
		if len(dead) != 1 || dead["in/a.jsonl:7"] != bad {
			t.Errorf("dead letters %v", dead)
		}
		for name := range published(t, dlRoot) {
			if !strings.HasSuffix(name, ".jsonl") {
				t.Errorf("dead-letter file %s is not .jsonl", name)
			}
		}
		seen := bulkIDs(t, published(t, root))
		if len(seen) != 2 || len(seen[0]) != 1 || len(seen[2]) != 1 {
			t.Errorf("published ids %v, want 0 and 2", seen)
		}
		if got := w.Stats().BadRecords.Load(); got != 1 {
			t.Errorf("Stats.BadRecords = %d", got)
		}
	})
}

// After a crash, an in-progress bulk part (row groups already on disk, no
// footer) is discarded: the checkpoint holds no state for it, the sweep
// deletes its staging file, and its records come again from the source.
func TestBulkRestoreAfterCrash(t *testing.T) {
	ctx := context.Background()
	be, root := newLocal(t)
	opts := []filesink.Option{filesink.WithBulkFormat(testjob.FakeBulk{RowGroupBytes: 512}),
		filesink.WithAssigner(bucketing.Field("key")), filesink.WithBufferBudget(16 << 10)}
	w := newWriter(t, be, 0, opts...)
	coord, store := newCoordinator(t, root, w)
	const n = 2000
	for i := range 300 {
		mustWrite(t, w, bulkRecord(i, fmt.Sprint(i%3), 30))
	}
	if _, err := coord.Checkpoint(ctx, json.RawMessage(`{"next":300}`), false); err != nil {
		t.Fatal(err)
	}
	for i := 300; i < 1500; i++ {
		mustWrite(t, w, bulkRecord(i, fmt.Sprint(i%3), 30))
	}
	inProgress := hidden(t, root)
	if len(inProgress) == 0 {
		t.Fatal("no in-progress file on disk: the test needs row groups written before the crash")
	}
	w.Close()     // crash,
	store.Close() // which drops the process's lock of the state directory

	w2 := newWriter(t, be, 0, opts...)
	coord2, _ := newCoordinator(t, root, w2)
	if h := hidden(t, root); len(h) != 0 {
		t.Errorf("after recovery, staging files %v remain (in progress before the crash: %v)", h, inProgress)
	}
	checkBulkIDs(t, published(t, root), 300)
	for i := 300; i < n; i++ { // the source replays from its checkpointed position
		mustWrite(t, w2, bulkRecord(i, fmt.Sprint(i%3), 30))
	}
	if _, err := coord2.Checkpoint(ctx, json.RawMessage(`{"next":2000}`), true); err != nil {
		t.Fatal(err)
	}
	checkBulkIDs(t, published(t, root), n)
	if h := hidden(t, root); len(h) != 0 {
		t.Errorf("staging files after the final checkpoint: %v", h)
	}
}

// A checkpoint of a row-format run cannot be resumed by a bulk writer.
func TestBulkRestoreRefusesRowParts(t *testing.T) {
	ctx := context.Background()
	be, _ := newLocal(t)
	w := newWriter(t, be, 0)
	mustWrite(t, w, bulkRecord(0, "", 0))
	snap := prepare(t, w, 1, false)
	if snap.State == nil {
		t.Fatal("no in-progress row part in the state")
	}
	w2 := newWriter(t, be, 0, filesink.WithBulkFormat(testjob.FakeBulk{}))
	err := w2.Restore(ctx, snap.State)
	if err == nil || !strings.Contains(err.Error(), "bulk") {
		t.Errorf("Restore of a row part with a bulk format = %v, want an error", err)
	}
}

// Sweep keeps open bulk parts by rolling them (they have no resumable).
func TestBulkSweepRollsOpenParts(t *testing.T) {
	ctx := context.Background()
	be, root := newLocal(t)
	w := newWriter(t, be, 0, filesink.WithBulkFormat(testjob.FakeBulk{RowGroupBytes: 256}))
	for i := range 500 {
		mustWrite(t, w, bulkRecord(i, "", 40))
	}
	before := hidden(t, root)
	if len(before) == 0 {
		t.Fatal("nothing on disk")
	}
	if _, err := w.Sweep(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if after := hidden(t, root); !slices.Equal(before, after) {
		t.Errorf("Sweep changed the staging files of an open part: %v -> %v", before, after)
	}
	for i := 500; i < 510; i++ {
		mustWrite(t, w, bulkRecord(i, "", 40))
	}
	snap := prepare(t, w, 1, true)
	if len(snap.Committables) != 2 {
		t.Errorf("%d parts, want 2 (rolled by the sweep, final)", len(snap.Committables))
	}
	commitAll(t, w, snap.Committables)
	checkBulkIDs(t, published(t, root), 510)
	if _, err := os.Stat(root); err != nil {
		t.Fatal(err)
	}
}
