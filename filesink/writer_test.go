package filesink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/internal/testutil/testjob"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
	"github.com/filesink/filesink/vfs/crashfs"
)

// ---- helpers ----

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newLocal(t *testing.T) (*localfs.Backend, string) {
	t.Helper()
	root := t.TempDir()
	return localfs.New(vfs.OS{}, root), root
}

func newWriter(t *testing.T, be driver.Backend, subtask int, opts ...filesink.Option) *filesink.Writer {
	t.Helper()
	w, err := filesink.New(be, subtask, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

var writeSeq int64

func mustWrite(t *testing.T, w *filesink.Writer, rec []byte) {
	t.Helper()
	writeSeq++
	if err := w.Write(context.Background(), rec, source.Origin{Name: "test", Num: writeSeq}); err != nil {
		t.Fatalf("Write(%.60s): %v", rec, err)
	}
}

func prepare(t *testing.T, w *filesink.Writer, id uint64, final bool) committer.Snapshot {
	t.Helper()
	snap, err := committer.PrepareNow(context.Background(), w, id, final)
	if err != nil {
		t.Fatalf("Prepare(%d, final=%v): %v", id, final, err)
	}
	return snap
}

func commitAll(t *testing.T, w *filesink.Writer, cs []json.RawMessage) {
	t.Helper()
	for _, c := range cs {
		if err := w.Commit(context.Background(), c); err != nil {
			t.Fatalf("Commit(%s): %v", c, err)
		}
	}
}

// published returns the finished files under root (relative slash paths),
// skipping names that start with '.' or '_' (staging, state, dead letters).
func published(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		if n := d.Name(); n[0] == '.' || n[0] == '_' {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		data, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// hidden returns the names of the files under root whose names start with
// '.', relative to root.
func hidden(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name()[0] == '.' {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(out)
	return out
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func readFile(t *testing.T, root, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeFile decompresses by extension and returns the lines.
func decodeFile(t *testing.T, name string, data []byte) []string {
	t.Helper()
	kind := ""
	switch {
	case strings.HasSuffix(name, ".gz"):
		kind = "gzip"
	case strings.HasSuffix(name, ".zst"):
		kind = "zstd"
	}
	out, err := decompress(kind, data)
	if err != nil {
		t.Fatalf("%s does not decode: %v", name, err)
	}
	if len(out) == 0 {
		return nil
	}
	if out[len(out)-1] != '\n' {
		t.Errorf("%s does not end with a newline", name)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}

// idsOf returns the "id" of every record in files, in file order.
func idsOf(t *testing.T, files map[string][]byte) map[int][]string {
	t.Helper()
	seen := map[int][]string{}
	for name, data := range files {
		for _, line := range decodeFile(t, name, data) {
			var r struct{ ID *int }
			if err := json.Unmarshal([]byte(line), &r); err != nil || r.ID == nil {
				t.Fatalf("%s: line %.80q is not a record", name, line)
			}
			seen[*r.ID] = append(seen[*r.ID], name)
		}
	}
	return seen
}

// checkIDs checks that files hold the ids 0..n-1 exactly once.
func checkIDs(t *testing.T, files map[string][]byte, n int) {
	t.Helper()
	checkIDSet(t, files, func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	})
}

func checkIDSet(t *testing.T, files map[string][]byte, want func(func(int) bool)) {
	t.Helper()
	seen := idsOf(t, files)
	wantSet := map[int]bool{}
	for id := range want {
		wantSet[id] = true
		if len(seen[id]) != 1 {
			t.Errorf("id %d published %d times %v", id, len(seen[id]), seen[id])
		}
	}
	for id := range seen {
		if !wantSet[id] {
			t.Errorf("unexpected id %d in %v", id, seen[id])
		}
	}
}

type stateEntry struct {
	DeadLetter bool            `json:"dead_letter"`
	Bucket     string          `json:"bucket"`
	Part       json.RawMessage `json:"part"`
}

func stateParts(t *testing.T, state json.RawMessage) []stateEntry {
	t.Helper()
	if state == nil {
		return nil
	}
	var st struct{ Parts []stateEntry }
	if err := json.Unmarshal(state, &st); err != nil {
		t.Fatalf("state %s: %v", state, err)
	}
	return st.Parts
}

// targetsOf returns the publish targets of committables.
func targetsOf(t *testing.T, be driver.Backend, cs []json.RawMessage) []string {
	t.Helper()
	var out []string
	for _, c := range cs {
		var e stateEntry
		if err := json.Unmarshal(c, &e); err != nil {
			t.Fatal(err)
		}
		target, _, err := be.Describe(e.Part)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, target)
	}
	slices.Sort(out)
	return out
}

// recBackend records every PartWriter.Write.
type recBackend struct {
	driver.Backend
	mu      sync.Mutex
	writes  map[string][][]byte // target -> written chunks
	written int64
}

func newRecBackend(be driver.Backend) *recBackend {
	return &recBackend{Backend: be, writes: map[string][][]byte{}}
}

func (b *recBackend) Open(ctx context.Context, target string) (driver.PartWriter, error) {
	pw, err := b.Backend.Open(ctx, target)
	if err != nil {
		return nil, err
	}
	return &recPartWriter{PartWriter: pw, b: b, target: target}, nil
}

func (b *recBackend) Resume(ctx context.Context, r json.RawMessage) (driver.PartWriter, error) {
	pw, err := b.Backend.Resume(ctx, r)
	if err != nil {
		return nil, err
	}
	target, _, _ := b.Backend.Describe(r)
	return &recPartWriter{PartWriter: pw, b: b, target: target}, nil
}

func (b *recBackend) Written() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.written
}

type recPartWriter struct {
	driver.PartWriter
	b      *recBackend
	target string
}

func (p *recPartWriter) Write(data []byte) (int, error) {
	n, err := p.PartWriter.Write(data)
	p.b.mu.Lock()
	p.b.writes[p.target] = append(p.b.writes[p.target], bytes.Clone(data[:n]))
	p.b.written += int64(n)
	p.b.mu.Unlock()
	return n, err
}

// newCoordinator returns a recovered coordinator over a DirStore in
// root/_filesink.
func newCoordinator(t *testing.T, root string, parts ...committer.Participant) (*committer.Coordinator, *recovery.DirStore) {
	t.Helper()
	ctx := context.Background()
	store, err := recovery.OpenDir(ctx, vfs.OS{}, filepath.Join(root, "_filesink"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c, err := committer.New(store, parts, committer.WithRetry(1, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	return c, store
}

// ---- construction and names ----

func TestNewValidation(t *testing.T) {
	be, _ := newLocal(t)
	tests := []struct {
		name    string
		be      driver.Backend
		subtask int
		opts    []filesink.Option
		wantErr bool
	}{
		{"defaults", be, 0, nil, false},
		{"nil backend", nil, 0, nil, true},
		{"negative subtask", be, -1, nil, true},
		{"nil encoder", be, 0, []filesink.Option{filesink.WithEncoder(nil)}, true},
		{"nil assigner", be, 0, []filesink.Option{filesink.WithAssigner(nil)}, true},
		{"nil policy", be, 0, []filesink.Option{filesink.WithRollingPolicy(nil)}, true},
		{"nil clock", be, 0, []filesink.Option{filesink.WithClock(nil)}, true},
		{"budget below minimum", be, 0, []filesink.Option{filesink.WithBufferBudget(1 << 10)}, true},
		{"budget at minimum", be, 0, []filesink.Option{filesink.WithBufferBudget(16 << 10)}, false},
		{"prefix ok", be, 0, []filesink.Option{filesink.WithPrefix("data")}, false},
		{"prefix with dot inside", be, 0, []filesink.Option{filesink.WithPrefix("my.part_x")}, false},
		{"prefix empty", be, 0, []filesink.Option{filesink.WithPrefix("")}, true},
		{"prefix with slash", be, 0, []filesink.Option{filesink.WithPrefix("a/b")}, true},
		{"prefix slash", be, 0, []filesink.Option{filesink.WithPrefix("/")}, true},
		{"prefix trailing slash", be, 0, []filesink.Option{filesink.WithPrefix("part/")}, true},
		{"prefix leading dot", be, 0, []filesink.Option{filesink.WithPrefix(".part")}, true},
		{"prefix dotdot", be, 0, []filesink.Option{filesink.WithPrefix("..")}, true},
		{"prefix leading underscore", be, 0, []filesink.Option{filesink.WithPrefix("_part")}, true},
	}
	for _, tc := range tests {
		w, err := filesink.New(tc.be, tc.subtask, tc.opts...)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%s: New succeeded, want an error", tc.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		w.Close()
	}
}

func TestPartNames(t *testing.T) {
	gz, _ := filesink.NewCompression("gzip")
	zs, _ := filesink.NewCompression("zstd")
	tests := []struct {
		name    string
		subtask int
		opts    []filesink.Option
		record  string
		want    string // regexp of the first part's name
	}{
		{"default", 0, nil, `{"id":0}`, `^part-0-[0-9a-f]{8}-0\.jsonl$`},
		{"fixed run id", 7, []filesink.Option{filesink.WithRunID("run1")}, `{"id":0}`, `^part-7-run1-0\.jsonl$`},
		{"prefix", 12, []filesink.Option{filesink.WithRunID("r"), filesink.WithPrefix("data")}, `{"id":0}`, `^data-12-r-0\.jsonl$`},
		{"gzip", 0, []filesink.Option{filesink.WithRunID("r"), filesink.WithCompression(gz)}, `{"id":0}`, `^part-0-r-0\.jsonl\.gz$`},
		{"zstd", 0, []filesink.Option{filesink.WithRunID("r"), filesink.WithCompression(zs)}, `{"id":0}`, `^part-0-r-0\.jsonl\.zst$`},
		{"csv", 0, []filesink.Option{filesink.WithRunID("r"), filesink.WithEncoder(filesink.CSV{})}, `{"id":0}`, `^part-0-r-0\.csv$`},
		{"text", 0, []filesink.Option{filesink.WithRunID("r"), filesink.WithEncoder(filesink.Text{})}, `{"id":0}`, `^part-0-r-0\.txt$`},
		{"suffix override", 0, []filesink.Option{filesink.WithRunID("r"), filesink.WithCompression(gz), filesink.WithSuffix(".log.gz")}, `{"id":0}`, `^part-0-r-0\.log\.gz$`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			be, root := newLocal(t)
			w := newWriter(t, be, tc.subtask, tc.opts...)
			mustWrite(t, w, []byte(tc.record))
			commitAll(t, w, prepare(t, w, 1, true).Committables)
			files := published(t, root)
			if len(files) != 1 {
				t.Fatalf("published %v, want one file", keys(files))
			}
			name := keys(files)[0]
			if !regexp.MustCompile(tc.want).MatchString(name) {
				t.Errorf("part name %q does not match %s", name, tc.want)
			}
		})
	}
}

// The counter increases within a run, across buckets.
func TestPartNamesCounter(t *testing.T) {
	be, root := newLocal(t)
	w := newWriter(t, be, 2, filesink.WithRunID("abc"), filesink.WithAssigner(bucketing.Field("key")),
		filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 30}))
	for i, k := range []string{"a", "b", "a", "a"} {
		mustWrite(t, w, fmt.Appendf(nil, `{"id":%d,"key":"%s"}`, i, k))
	}
	commitAll(t, w, prepare(t, w, 1, true).Committables)
	want := []string{"a/part-2-abc-0.jsonl", "a/part-2-abc-2.jsonl", "a/part-2-abc-3.jsonl", "b/part-2-abc-1.jsonl"}
	if got := keys(published(t, root)); !slices.Equal(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
}

// Two Writers of the same subtask over the same output (a restart) never
// produce the same name, so neither clobbers the other.
func TestPartNamesUniqueAcrossRestarts(t *testing.T) {
	be, root := newLocal(t)
	var all []string
	for run := range 10 {
		w := newWriter(t, be, 0)
		mustWrite(t, w, fmt.Appendf(nil, `{"id":%d}`, run))
		cs := prepare(t, w, 1, true).Committables
		all = append(all, targetsOf(t, be, cs)...)
		commitAll(t, w, cs)
		w.Close()
	}
	files := published(t, root)
	if len(files) != 10 {
		t.Errorf("%d files after 10 runs, want 10: %v", len(files), keys(files))
	}
	checkIDs(t, files, 10)
	slices.Sort(all)
	if len(slices.Compact(all)) != 10 {
		t.Errorf("names reused across runs: %v", all)
	}
}

// With the same run id (what WithRunID allows tests to do), the second
// Writer's part collides: it must fail and never replace the first file.
func TestPartNameCollisionNeverClobbers(t *testing.T) {
	be, root := newLocal(t)
	w1 := newWriter(t, be, 0, filesink.WithRunID("same"))
	mustWrite(t, w1, []byte(`{"id":1}`))
	commitAll(t, w1, prepare(t, w1, 1, true).Committables)
	before := published(t, root)

	w2 := newWriter(t, be, 0, filesink.WithRunID("same"))
	mustWrite(t, w2, []byte(`{"id":2}`))
	_, err := committer.PrepareNow(context.Background(), w2, 1, true)
	if !errors.Is(err, committer.ErrAlreadyExists) {
		t.Fatalf("second writer with the same name: %v, want ErrAlreadyExists", err)
	}
	after := published(t, root)
	if len(after) != 1 || !bytes.Equal(after["part-0-same-0.jsonl"], before["part-0-same-0.jsonl"]) {
		t.Errorf("the first file changed: %q -> %q", before, after)
	}
}

// A restored in-progress part keeps its recorded name; bytes written after
// the checkpoint are discarded; new parts use the new run id.
func TestRestoredPartKeepsName(t *testing.T) {
	ctx := context.Background()
	be, root := newLocal(t)
	w1 := newWriter(t, be, 0, filesink.WithRunID("old"))
	for i := range 3 {
		mustWrite(t, w1, fmt.Appendf(nil, `{"id":%d}`, i))
	}
	state := prepare(t, w1, 1, false).State
	// Records 100, 101 reach the disk in a phase 1 that is never decided.
	mustWrite(t, w1, []byte(`{"id":100}`))
	mustWrite(t, w1, []byte(`{"id":101}`))
	prepare(t, w1, 2, false)
	w1.Close()

	w2 := newWriter(t, be, 0, filesink.WithRunID("new"), filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 40}))
	if err := w2.Restore(ctx, state); err != nil {
		t.Fatal(err)
	}
	if w2.OpenBuckets() != 1 {
		t.Errorf("%d open buckets after Restore, want 1", w2.OpenBuckets())
	}
	mustWrite(t, w2, []byte(`{"id":3}`))
	mustWrite(t, w2, []byte(`{"id":4,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)) // rolls: size
	commitAll(t, w2, prepare(t, w2, 2, true).Committables)
	files := published(t, root)
	want := []string{"part-0-new-0.jsonl", "part-0-old-0.jsonl"}
	if got := keys(files); !slices.Equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	if got := string(files["part-0-old-0.jsonl"]); got != "{\"id\":0}\n{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n" {
		t.Errorf("restored part = %q", got)
	}
	checkIDs(t, files, 5)
}

// ---- compression ----

func TestCompressedPartsAreMultiFrame(t *testing.T) {
	for _, kind := range []string{"gzip", "zstd"} {
		t.Run(kind, func(t *testing.T) {
			comp, err := filesink.NewCompression(kind)
			if err != nil {
				t.Fatal(err)
			}
			lb, root := newLocal(t)
			be := newRecBackend(lb)
			w := newWriter(t, be, 0, filesink.WithCompression(comp), filesink.WithBufferBudget(16<<10))
			const n = 3000
			var want []string
			for i := range n {
				r := recordOf(i, 100)
				want = append(want, string(r))
				mustWrite(t, w, r)
			}
			commitAll(t, w, prepare(t, w, 1, true).Committables)
			files := published(t, root)
			if len(files) != 1 {
				t.Fatalf("published %v, want one part", keys(files))
			}
			name := keys(files)[0]
			if ext := map[string]string{"gzip": ".jsonl.gz", "zstd": ".jsonl.zst"}[kind]; !strings.HasSuffix(name, ext) {
				t.Errorf("%s does not end with %s", name, ext)
			}
			if got := decodeFile(t, name, files[name]); !slices.Equal(got, want) {
				t.Fatalf("decoded %d lines, want the %d records in order", len(got), len(want))
			}
			chunks := be.writes[name]
			if len(chunks) < 10 {
				t.Errorf("only %d flushes of ~300 KB with a 16 KiB budget", len(chunks))
			}
			if nf := countFrames(t, kind, files[name]); nf != len(chunks) {
				t.Errorf("%d frames, %d flushes: want one frame per flush", nf, len(chunks))
			}
			for i, c := range chunks {
				if _, err := decompress(kind, c); err != nil {
					t.Errorf("flush %d is not a complete frame: %v", i, err)
				}
			}
		})
	}
}

// A compressed part persisted at a checkpoint, with more (undecided) frames
// after it, is resumed by a new Writer (a new compressor) and still decodes
// completely to exactly the decided and the new records.
func TestCompressedPartResumed(t *testing.T) {
	for _, kind := range []string{"gzip", "zstd"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			be, root := newLocal(t)
			c1, _ := filesink.NewCompression(kind)
			w1 := newWriter(t, be, 0, filesink.WithCompression(c1), filesink.WithBufferBudget(16<<10))
			for i := range 1000 {
				mustWrite(t, w1, recordOf(i, 100))
			}
			snap := prepare(t, w1, 1, false)
			if len(snap.Committables) != 0 || len(stateParts(t, snap.State)) != 1 {
				t.Fatalf("non-final Prepare: %d committables, state %s", len(snap.Committables), snap.State)
			}
			for i := 1000; i < 1500; i++ { // never decided
				mustWrite(t, w1, recordOf(i, 100))
			}
			prepare(t, w1, 2, false)
			w1.Close()

			c2, _ := filesink.NewCompression(kind)
			w2 := newWriter(t, be, 0, filesink.WithCompression(c2), filesink.WithBufferBudget(16<<10))
			if err := w2.Restore(ctx, snap.State); err != nil {
				t.Fatal(err)
			}
			for i := 1500; i < 2500; i++ {
				mustWrite(t, w2, recordOf(i, 100))
			}
			commitAll(t, w2, prepare(t, w2, 2, true).Committables)
			files := published(t, root)
			if len(files) != 1 {
				t.Fatalf("published %v, want the one resumed part", keys(files))
			}
			for name, data := range files {
				if n := countFrames(t, kind, data); n < 10 {
					t.Errorf("%s: %d frames, want many", name, n)
				}
			}
			checkIDSet(t, files, func(yield func(int) bool) {
				for i := range 2500 {
					if (i < 1000 || i >= 1500) && !yield(i) {
						return
					}
				}
			})
		})
	}
}

// ---- buffer budget (invariant 10) ----

// With 1,000 open buckets the bytes a Writer holds in memory (accepted minus
// written to part files) never exceed the budget, although 1,000 buckets of
// the minimum per-bucket flush size would be far larger.
func TestBufferBudgetManyBuckets(t *testing.T) {
	tests := []struct {
		name    string
		buckets int
		budget  int64
		records int
	}{
		{"1000 buckets, 256 KiB", 1000, 256 << 10, 20_000},
		{"1000 buckets, 1 MiB", 1000, 1 << 20, 30_000},
		// 12 MB over 1,000 buckets stays below the minimum per-bucket flush
		// size (16 KiB) in every bucket: only the budget flushes.
		{"1000 buckets, 8 MiB", 1000, 8 << 20, 120_000},
		{"1 bucket, 16 KiB", 1, 16 << 10, 5_000},
		{"50 buckets, 64 KiB", 50, 64 << 10, 10_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.records > 50_000 {
				t.Skip("large case skipped in -short mode")
			}
			// In memory: 1,000 fsyncs of a real disk would only slow the test.
			mem := crashfs.New()
			be := newRecBackend(localfs.New(mem, testjob.Out))
			w := newWriter(t, be, 0, filesink.WithBufferBudget(tc.budget), filesink.WithAssigner(bucketing.Field("key")))
			var accepted, peak int64
			for i := range tc.records {
				r := fmt.Appendf(nil, `{"id":%d,"key":"k-%d","pad":"%s"}`, i, i%tc.buckets, strings.Repeat("p", 60))
				mustWrite(t, w, r)
				accepted += int64(len(r) + 1)
				buffered := accepted - be.Written()
				peak = max(peak, buffered)
				if buffered > tc.budget {
					t.Fatalf("after record %d: %d bytes buffered with %d buckets open, budget %d", i, buffered, w.OpenBuckets(), tc.budget)
				}
			}
			if w.OpenBuckets() != tc.buckets {
				t.Errorf("%d open buckets, want %d", w.OpenBuckets(), tc.buckets)
			}
			if accepted <= tc.budget {
				t.Fatalf("test wrote only %d bytes: the budget was never at stake", accepted)
			}
			commitAll(t, w, prepare(t, w, 1, true).Committables)
			if be.Written() != accepted {
				t.Errorf("after the final checkpoint %d bytes written, %d accepted", be.Written(), accepted)
			}
			if n := len(testjob.Files(mem)); n != tc.buckets {
				t.Errorf("%d files, want one per bucket (%d)", n, tc.buckets)
			}
			if p := testjob.Check(mem, int64(tc.records)); len(p) > 0 {
				t.Errorf("not exactly once: %v", p)
			}
			t.Logf("peak buffered %d of %d", peak, tc.budget)
		})
	}
}

// TestPartWritesInPieces: the Writer hands its part writer at most 256 KiB
// at a time (so that the part writer's passes over the bytes find them in
// the CPU cache), also from its 4 MiB buffers, and the output and the
// manifest's CRC-32C are those of the whole part.
func TestPartWritesInPieces(t *testing.T) {
	ctx := context.Background()
	lb, root := newLocal(t)
	be := newRecBackend(lb)
	w := newWriter(t, be, 0) // default budget: 4 MiB buffers with one bucket
	coord, store := newCoordinator(t, root, w)
	const records = 6000
	pad := strings.Repeat("p", 1000)
	var want []byte
	for i := range records {
		r := fmt.Appendf(nil, `{"id":%d,"pad":"%s"}`, i, pad)
		mustWrite(t, w, r)
		want = append(append(want, r...), '\n')
	}
	if _, err := coord.Checkpoint(ctx, nil, true); err != nil {
		t.Fatal(err)
	}
	largest := 0
	for target, writes := range be.writes {
		for _, c := range writes {
			if len(c) > 256<<10 {
				t.Errorf("%s: a write of %d bytes, want at most 256 KiB", target, len(c))
			}
			largest = max(largest, len(c))
		}
	}
	if largest != 256<<10 {
		t.Errorf("largest write %d bytes: the 4 MiB buffers were not cut into 256 KiB pieces", largest)
	}
	out := published(t, root)
	if len(out) != 1 {
		t.Fatalf("%d files published, want 1", len(out))
	}
	for target, got := range out {
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, not the %d written", target, len(got), len(want))
		}
	}
	vs, err := recovery.Verify(ctx, store, filesink.Checker{Backend: lb})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 0 {
		t.Errorf("verify: %v", vs)
	}
}

// shortBackend's part writers write one byte less than asked, once, and
// report no error.
type shortBackend struct{ driver.Backend }

func (b shortBackend) Open(ctx context.Context, target string) (driver.PartWriter, error) {
	pw, err := b.Backend.Open(ctx, target)
	if err != nil {
		return nil, err
	}
	return &shortPartWriter{PartWriter: pw}, nil
}

type shortPartWriter struct {
	driver.PartWriter
	done bool
}

func (p *shortPartWriter) Write(data []byte) (int, error) {
	if !p.done && len(data) > 1 {
		p.done = true
		return p.PartWriter.Write(data[:len(data)-1])
	}
	return p.PartWriter.Write(data)
}

// TestPartShortWrite: a part writer that writes less than it was given
// without an error breaks the Writer with io.ErrShortWrite; nothing is
// committed.
func TestPartShortWrite(t *testing.T) {
	ctx := context.Background()
	lb, root := newLocal(t)
	w := newWriter(t, shortBackend{lb}, 0)
	coord, _ := newCoordinator(t, root, w)
	mustWrite(t, w, []byte(`{"id":1}`))
	_, err := coord.Checkpoint(ctx, nil, true)
	if !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("checkpoint after a short write: %v, want io.ErrShortWrite", err)
	}
	if n := len(published(t, root)); n != 0 {
		t.Errorf("%d files published after a short write", n)
	}
}

// ---- bad records ----

// rawAssigner is a custom Assigner that returns its path unchecked.
type rawAssigner string

func (a rawAssigner) Bucket([]byte, time.Time) (string, error) { return string(a), nil }

func TestBadRecords(t *testing.T) {
	field := bucketing.Field("key")
	origin := source.Origin{Name: "in/a.jsonl", Num: 3}
	tests := []struct {
		name   string
		opts   []filesink.Option
		record string
	}{
		{"invalid JSON", nil, `{"id":1,`},
		{"not JSON", nil, `hello`},
		{"newline", nil, "{\"id\":\n1}"},
		{"csv extra field", []filesink.Option{filesink.WithEncoder(filesink.CSV{Columns: []string{"id"}})}, `{"id":1,"x":2}`},
		{"text newline", []filesink.Option{filesink.WithEncoder(filesink.Text{})}, "a\nb"},
		{"bucket ..", []filesink.Option{filesink.WithAssigner(field)}, `{"id":1,"key":"../x"}`},
		{"bucket .. inside", []filesink.Option{filesink.WithAssigner(field)}, `{"id":1,"key":"a/../../x"}`},
		{"bucket absolute", []filesink.Option{filesink.WithAssigner(field)}, `{"id":1,"key":"/tmp/x"}`},
		{"bucket dot component", []filesink.Option{filesink.WithAssigner(field)}, `{"id":1,"key":"a/.hidden"}`},
		{"bucket underscore component", []filesink.Option{filesink.WithAssigner(field)}, `{"id":1,"key":"_filesink"}`},
		{"bucket field missing", []filesink.Option{filesink.WithAssigner(field)}, `{"id":1}`},
		// A custom Assigner is not bound to sanitize its result; the Writer
		// promises (doc.go) that an invalid bucket path is a bad record.
		{"custom assigner ..", []filesink.Option{filesink.WithAssigner(rawAssigner("../x"))}, `{"id":1}`},
		{"custom assigner absolute", []filesink.Option{filesink.WithAssigner(rawAssigner("/tmp/x"))}, `{"id":1}`},
		{"custom assigner reserved", []filesink.Option{filesink.WithAssigner(rawAssigner("_filesink"))}, `{"id":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			parent := t.TempDir()
			root := filepath.Join(parent, "out")
			be := localfs.New(vfs.OS{}, root)
			w := newWriter(t, be, 0, append([]filesink.Option{filesink.WithBufferBudget(16 << 10)}, tc.opts...)...)
			err := w.Write(ctx, []byte(tc.record), origin)
			var bre *source.BadRecordError
			if !errors.As(err, &bre) {
				// Finish the checkpoint to show where the bad path surfaces.
				_, perr := committer.PrepareNow(ctx, w, 1, true)
				t.Fatalf("Write(%q) = %v, want a *BadRecordError (the final Prepare then gives: %v)", tc.record, err, perr)
			}
			if !errors.Is(err, source.ErrBadRecord) {
				t.Errorf("error %v does not match ErrBadRecord", err)
			}
			if bre.Origin != "in/a.jsonl:3" || !strings.Contains(err.Error(), "in/a.jsonl:3") {
				t.Errorf("error %q (origin %q) does not name in/a.jsonl:3", err, bre.Origin)
			}
			if bre.Err == nil {
				t.Errorf("no cause in %v", err)
			}
			if w.Stats().Records.Load() != 0 {
				t.Errorf("a bad record was counted as written")
			}
		})
	}
}

// After a bad record the Writer goes on; nothing escapes the output.
func TestBadRecordKeepsWriterUsable(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	root := filepath.Join(parent, "out")
	be := localfs.New(vfs.OS{}, root)
	w := newWriter(t, be, 0, filesink.WithAssigner(bucketing.Field("key")))
	mustWrite(t, w, []byte(`{"id":0,"key":"a"}`))
	if err := w.Write(ctx, []byte(`{"id":99,"key":"../x"}`), source.Origin{Name: "in", Num: 2}); !errors.Is(err, source.ErrBadRecord) {
		t.Fatalf("bad bucket: %v", err)
	}
	if err := w.Write(ctx, []byte(`{"id":98,"key":`), source.Origin{Name: "in", Num: 3}); !errors.Is(err, source.ErrBadRecord) {
		t.Fatalf("bad JSON: %v", err)
	}
	mustWrite(t, w, []byte(`{"id":1,"key":"b"}`))
	commitAll(t, w, prepare(t, w, 1, true).Committables)
	files := published(t, root)
	checkIDs(t, files, 2)
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Errorf("something was written outside the output: %v", ents)
	}
	if got := w.Stats().Records.Load(); got != 2 {
		t.Errorf("Stats.Records = %d, want 2", got)
	}
}

// failEncoder rejects every record; its extension is empty (the suffix is
// set with WithSuffix).
type failEncoder struct{}

func (failEncoder) Encode(dst, _ []byte) ([]byte, error) { return dst, errors.New("cannot encode") }
func (failEncoder) Header() []byte                       { return nil }
func (failEncoder) Extension() string                    { return "" }

// A custom encoder with no extension of its own must still report a bad
// record, not panic.
func TestBadRecordCustomEncoderWithoutExtension(t *testing.T) {
	be, _ := newLocal(t)
	w := newWriter(t, be, 0, filesink.WithEncoder(failEncoder{}), filesink.WithSuffix(".out"))
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		err = w.Write(context.Background(), []byte("x"), source.Origin{Name: "in", Num: 1})
	}()
	if !errors.Is(err, source.ErrBadRecord) {
		t.Fatalf("Write with an encoder error = %v, want a bad record error", err)
	}
}

// deadLetterLine is one line of the dead-letter output.
type deadLetterLine struct {
	Origin *string `json:"origin"`
	Error  *string `json:"error"`
	Record *string `json:"record"`
}

func readDeadLetters(t *testing.T, dlRoot string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, data := range published(t, dlRoot) {
		for _, line := range decodeFile(t, name, data) {
			var l deadLetterLine
			if err := json.Unmarshal([]byte(line), &l); err != nil || l.Origin == nil || l.Error == nil || l.Record == nil {
				t.Fatalf("%s: line %q is not {origin, error, record}: %v", name, line, err)
			}
			if *l.Error == "" {
				t.Errorf("%s: empty error for %s", name, *l.Origin)
			}
			if _, dup := out[*l.Origin]; dup {
				t.Errorf("%s is in the dead-letter output twice", *l.Origin)
			}
			out[*l.Origin] = *l.Record
		}
	}
	return out
}

func TestDeadLetter(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dlRoot := filepath.Join(root, "_dead-letter")
	be, dl := localfs.New(vfs.OS{}, root), localfs.New(vfs.OS{}, dlRoot)
	var reported []string // origins given to WithBadRecordFunc
	opts := []filesink.Option{filesink.WithDeadLetter(dl), filesink.WithAssigner(bucketing.Field("key")),
		filesink.WithBadRecordFunc(func(e *source.BadRecordError) {
			if !errors.Is(e, source.ErrBadRecord) {
				t.Errorf("reported bad record %v does not match source.ErrBadRecord", e)
			}
			reported = append(reported, e.Origin)
		})}

	w := newWriter(t, be, 0, opts...)
	coord, store := newCoordinator(t, root, w)
	recs := []struct {
		rec string
		bad bool
	}{
		{`{"id":0,"key":"a"}`, false},
		{`{"id":1,"key":`, true},
		{`{"id":2,"key":"../etc"}`, true},
		{`{"id":3,"key":"b"}`, false},
	}
	write := func(w *filesink.Writer, i int) {
		t.Helper()
		if err := w.Write(ctx, []byte(recs[i].rec), source.Origin{Name: "in/a.jsonl", Num: int64(i + 1)}); err != nil {
			t.Fatalf("record %d with a dead-letter output: %v", i, err)
		}
	}
	for i := range 2 {
		write(w, i)
	}
	if got := w.Stats().BadRecords.Load(); got != 1 {
		t.Errorf("Stats.BadRecords = %d, want 1", got)
	}
	if want := []string{"in/a.jsonl:2"}; !slices.Equal(reported, want) {
		t.Errorf("bad records reported %q, want %q", reported, want)
	}
	if _, err := coord.Prepare(ctx, json.RawMessage(`{"n":2}`), false); err != nil { // decided, not committed
		t.Fatal(err)
	}
	if len(published(t, dlRoot)) != 0 {
		t.Errorf("dead letters visible before their checkpoint committed")
	}
	write(w, 2)   // after the decided checkpoint: lost in the crash below, replayed
	w.Close()     // crash,
	store.Close() // which drops the process's lock of the state directory

	w2 := newWriter(t, be, 0, opts...)
	coord2, store2 := newCoordinator(t, root, w2)
	for i := 2; i < len(recs); i++ {
		write(w2, i)
	}
	if _, err := coord2.Checkpoint(ctx, nil, true); err != nil {
		t.Fatal(err)
	}
	good := idsOf(t, published(t, root))
	if len(good) != 2 || len(good[0]) != 1 || len(good[3]) != 1 {
		t.Errorf("good records published: %v", good)
	}
	got := readDeadLetters(t, dlRoot)
	want := map[string]string{"in/a.jsonl:2": recs[1].rec, "in/a.jsonl:3": recs[2].rec}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dead letters %v, want %v", got, want)
	}
	// Running again publishes nothing new.
	store2.Close()
	w3 := newWriter(t, be, 0, opts...)
	coord3, _ := newCoordinator(t, root, w3)
	if _, err := coord3.Checkpoint(ctx, nil, true); err != nil {
		t.Fatal(err)
	}
	if got2 := readDeadLetters(t, dlRoot); fmt.Sprint(got2) != fmt.Sprint(want) {
		t.Errorf("after another run, dead letters %v", got2)
	}
}

// Dead-letter files hold plain JSON lines whatever the sink's format and
// compression; their names must say so, or a reader going by the
// extension cannot read them.
func TestDeadLetterFileNames(t *testing.T) {
	gz, _ := filesink.NewCompression("gzip")
	tests := []struct {
		name string
		opts []filesink.Option
	}{
		{"jsonl", nil},
		{"gzip", []filesink.Option{filesink.WithCompression(gz)}},
		{"csv", []filesink.Option{filesink.WithEncoder(filesink.CSV{Columns: []string{"id"}})}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dlRoot := filepath.Join(root, "_dead-letter")
			be, dl := localfs.New(vfs.OS{}, root), localfs.New(vfs.OS{}, dlRoot)
			w := newWriter(t, be, 0, append([]filesink.Option{filesink.WithDeadLetter(dl)}, tc.opts...)...)
			if err := w.Write(context.Background(), []byte(`{"id":`), source.Origin{Name: "in", Num: 1}); err != nil {
				t.Fatal(err)
			}
			commitAll(t, w, prepare(t, w, 1, true).Committables)
			files := published(t, dlRoot)
			if len(files) != 1 {
				t.Fatalf("dead-letter files %v, want 1", keys(files))
			}
			name := keys(files)[0]
			if !strings.HasSuffix(name, ".jsonl") {
				t.Errorf("dead-letter file %s holds plain JSON lines %q but its name does not end with .jsonl", name, files[name])
			}
		})
	}
}

// ---- participant ----

func TestCommitIsIdempotent(t *testing.T) {
	be, root := newLocal(t)
	w := newWriter(t, be, 0, filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 50}))
	for i := range 6 {
		mustWrite(t, w, recordOf(i, 30))
	}
	cs := prepare(t, w, 1, true).Committables
	commitAll(t, w, cs)
	first := published(t, root)
	commitAll(t, w, cs)
	// A new Writer (after a restart) commits them again, too.
	w2 := newWriter(t, be, 0)
	commitAll(t, w2, cs)
	if second := published(t, root); fmt.Sprint(second) != fmt.Sprint(first) {
		t.Errorf("output changed by re-commits")
	}
	checkIDs(t, first, 6)
	if got := w.Stats().Committed.Load() + w2.Stats().Committed.Load(); got > int64(len(cs)) {
		t.Errorf("Stats.Committed counts re-commits: %d for %d parts", got, len(cs))
	}
}

func TestCommitBadCommittable(t *testing.T) {
	be, _ := newLocal(t)
	w := newWriter(t, be, 0)
	for _, c := range []string{`nope`, `{"dead_letter":true,"bucket":"","part":{"target":"part-0-x-0.jsonl","staging":".part-0-x-0.jsonl.inprogress","length":1}}`} {
		err := w.Commit(context.Background(), json.RawMessage(c))
		if err == nil || !committer.IsPermanent(err) {
			t.Errorf("Commit(%s) = %v, want a permanent error", c, err)
		}
	}
}

// Restore(nil) drops the open and rolled parts without publishing them;
// their staging files stay until Sweep.
func TestRestoreNilDropsOpenParts(t *testing.T) {
	ctx := context.Background()
	be, root := newLocal(t)
	w := newWriter(t, be, 0, filesink.WithBufferBudget(16<<10), filesink.WithAssigner(bucketing.Field("key")),
		filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 8 << 10}))
	for i := range 500 {
		mustWrite(t, w, fmt.Appendf(nil, `{"id":%d,"key":"k%d","pad":"%s"}`, i, i%2, strings.Repeat("z", 80)))
	}
	if len(hidden(t, root)) == 0 {
		t.Fatal("nothing reached the disk: the test needs staging files")
	}
	if err := w.Restore(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if w.OpenBuckets() != 0 {
		t.Errorf("%d open buckets after Restore(nil)", w.OpenBuckets())
	}
	snap := prepare(t, w, 1, true)
	if len(snap.Committables) != 0 || snap.State != nil {
		t.Fatalf("after Restore(nil): %d committables, state %s", len(snap.Committables), snap.State)
	}
	if files := published(t, root); len(files) != 0 {
		t.Errorf("published after Restore(nil): %v", keys(files))
	}
	if len(hidden(t, root)) == 0 {
		t.Errorf("Restore deleted staging files (a checkpoint may reference them)")
	}
	if _, err := w.Sweep(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if h := hidden(t, root); len(h) != 0 {
		t.Errorf("Sweep left orphans: %v", h)
	}
	// The writer is usable after Restore.
	mustWrite(t, w, []byte(`{"id":0,"key":"k0"}`))
	commitAll(t, w, prepare(t, w, 2, true).Committables)
	checkIDs(t, published(t, root), 1)
}

func TestSweep(t *testing.T) {
	ctx := context.Background()
	be, root := newLocal(t)
	clk := newClock()
	// A checkpoint that references an in-progress part (state) and a
	// pending part of subtask 0, written by an earlier run.
	old := newWriter(t, be, 0, filesink.WithRunID("kept"), filesink.WithAssigner(bucketing.Field("key")), filesink.WithClock(clk.Now))
	mustWrite(t, old, []byte(`{"id":0,"key":"a"}`))
	mustWrite(t, old, []byte(`{"id":1,"key":"b"}`))
	if err := old.Tick(ctx, clk.Now().Add(time.Hour)); err != nil { // rolls both (rollover)
		t.Fatal(err)
	}
	mustWrite(t, old, []byte(`{"id":2,"key":"a"}`))
	snap := prepare(t, old, 1, false)
	if len(snap.Committables) != 2 || len(stateParts(t, snap.State)) != 1 {
		t.Fatalf("setup: %d committables, state %s", len(snap.Committables), snap.State)
	}
	old.Close()
	retained := []*recovery.Checkpoint{{ID: 1, Participants: []recovery.Participant{{
		Name: "filesink/0", State: snap.State,
		Pending: []recovery.Committable{{Checkpoint: 1, Data: snap.Committables[0]}, {Checkpoint: 1, Data: snap.Committables[1]}},
	}}}}
	referenced := hidden(t, root)
	if len(referenced) != 3 {
		t.Fatalf("setup: staging files %v, want 3", referenced)
	}
	orphans := []string{".part-0-dead0001-0.jsonl.inprogress", "a/.part-0-dead0001-1.jsonl.inprogress"}
	others := []string{
		".part-1-dead0001-0.jsonl.inprogress",    // subtask 1
		"a/.part-10-dead0001-0.jsonl.inprogress", // subtask 10
		".other-0-dead0001-0.jsonl.inprogress",   // another sink's prefix
		".part-0-dead0001-5.jsonl.tmp",           // not an in-progress file
		"part-0-visible.jsonl",                   // finished output
	}
	for _, f := range append(slices.Clone(orphans), others...) {
		if err := os.WriteFile(filepath.Join(root, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := newWriter(t, be, 0)
	if _, err := w.Sweep(ctx, retained); err != nil {
		t.Fatal(err)
	}
	for _, f := range orphans {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			t.Errorf("orphan %s not swept", f)
		}
	}
	for _, f := range append(slices.Clone(referenced), others...) {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("Sweep removed %s: %v", f, err)
		}
	}
	// The retained checkpoint is still fully recoverable.
	w2 := newWriter(t, be, 0, filesink.WithAssigner(bucketing.Field("key")))
	commitAll(t, w2, snap.Committables)
	if err := w2.Restore(ctx, snap.State); err != nil {
		t.Fatal(err)
	}
	commitAll(t, w2, prepare(t, w2, 2, true).Committables)
	files := published(t, root)
	delete(files, "part-0-visible.jsonl")
	checkIDs(t, files, 3)
}

// Sweep must not delete the staging data of the Writer's own open or
// rolled (not yet prepared) parts: Writer.Sweep's documentation says it
// deletes only files "that neither a retained checkpoint nor an open part
// references", and the Participant contract excludes the current state.
func TestSweepKeepsLiveParts(t *testing.T) {
	ctx := context.Background()
	be, root := newLocal(t)
	w := newWriter(t, be, 0, filesink.WithBufferBudget(16<<10), filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 20 << 10}))
	for i := range 400 {
		mustWrite(t, w, recordOf(i, 100)) // ~40 KB: one rolled part, one open part on disk
	}
	before := hidden(t, root)
	if len(before) != 2 {
		t.Fatalf("setup: staging files %v, want 2", before)
	}
	if _, err := w.Sweep(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if after := hidden(t, root); !slices.Equal(after, before) {
		t.Errorf("Sweep on a live writer removed its parts: %v -> %v", before, after)
	}
	snap, err := committer.PrepareNow(ctx, w, 1, true)
	if err == nil {
		for _, c := range snap.Committables {
			if err = w.Commit(ctx, c); err != nil {
				break
			}
		}
	}
	if err != nil {
		t.Fatalf("records lost after Sweep: %v", err)
	}
	checkIDs(t, published(t, root), 400)
}

// ---- checker ----

func TestChecker(t *testing.T) {
	type setup struct {
		root, target string // target: one published file
	}
	tests := []struct {
		name   string
		mutate func(t *testing.T, s setup)
		want   string // substring of a violation; "" for none
	}{
		{"clean", func(*testing.T, setup) {}, ""},
		{"another prefix's staging", func(t *testing.T, s setup) {
			os.WriteFile(filepath.Join(s.root, ".other-0-x-0.jsonl.inprogress"), nil, 0o644)
		}, ""},
		{"visible staging file", func(t *testing.T, s setup) {
			os.WriteFile(filepath.Join(s.root, "a", "part-0-x-9.jsonl.inprogress"), []byte("{}\n"), 0o644)
		}, "part-0-x-9.jsonl.inprogress"},
		{"truncated committed file", func(t *testing.T, s setup) {
			p := filepath.Join(s.root, filepath.FromSlash(s.target))
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, fi.Size()-1); err != nil {
				t.Fatal(err)
			}
		}, "bytes"},
		{"missing committed file", func(t *testing.T, s setup) {
			os.Remove(filepath.Join(s.root, filepath.FromSlash(s.target)))
		}, "missing"},
		{"orphan", func(t *testing.T, s setup) {
			os.WriteFile(filepath.Join(s.root, "b", ".part-1-x-0.jsonl.inprogress"), []byte("{}\n"), 0o644)
		}, "orphan"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			be, root := newLocal(t)
			w := newWriter(t, be, 0, filesink.WithAssigner(bucketing.Field("key")),
				filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 50})) // two records per part
			coord, store := newCoordinator(t, root, w)
			for i := range 40 {
				mustWrite(t, w, fmt.Appendf(nil, `{"id":%d,"key":"%c"}`, i, 'a'+i%2))
				if i%10 == 9 {
					if _, err := coord.Checkpoint(ctx, nil, false); err != nil {
						t.Fatal(err)
					}
				}
			}
			// The in-progress parts are referenced by the newest
			// checkpoint: not orphans.
			if h := hidden(t, root); len(h) == 0 {
				t.Fatal("setup: no in-progress parts")
			}
			// A file committed by the newest checkpoint, which Verify checks.
			latest, err := recovery.Latest(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			targets := targetsOf(t, be, pendingData(latest))
			if len(targets) == 0 {
				t.Fatal("setup: the newest checkpoint published nothing")
			}
			target := targets[0]
			if _, ok := published(t, root)[target]; !ok {
				t.Fatalf("setup: %s not published", target)
			}
			tc.mutate(t, setup{root: root, target: target})
			vs, err := recovery.Verify(ctx, store, filesink.Checker{Backend: be})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if len(vs) != 0 {
					t.Errorf("violations on a clean output: %v", vs)
				}
				return
			}
			found := false
			for _, v := range vs {
				if strings.Contains(v.String(), tc.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("violations %v, want one mentioning %q", vs, tc.want)
			}
		})
	}
}

func pendingData(c *recovery.Checkpoint) []json.RawMessage {
	var out []json.RawMessage
	for _, p := range c.Participants {
		for _, pc := range p.Pending {
			out = append(out, pc.Data)
		}
	}
	return out
}

// ---- stats ----

func TestStats(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	be := localfs.New(vfs.OS{}, root)
	w := newWriter(t, be, 0, filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 100}))
	coord, _ := newCoordinator(t, root, w)
	var bytesIn int64
	for i := range 10 {
		r := recordOf(i, 40)
		bytesIn += int64(len(r) + 1)
		mustWrite(t, w, r)
	}
	if _, err := coord.Checkpoint(ctx, nil, true); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Records.Load() != 10 || st.Bytes.Load() != bytesIn || st.BadRecords.Load() != 0 {
		t.Errorf("stats records %d bytes %d bad %d; want 10 %d 0", st.Records.Load(), st.Bytes.Load(), st.BadRecords.Load(), bytesIn)
	}
	if n := int64(len(published(t, root))); st.Committed.Load() != n {
		t.Errorf("Stats.Committed = %d, %d files published", st.Committed.Load(), n)
	}
	if w.Name() != "filesink/0" {
		t.Errorf("Name() = %q", w.Name())
	}
}

// gatedBackend's part writers persist asynchronously: the persist
// is taken at once (the length at the barrier) and reported only when the
// gate opens, as an S3 upload would be.
type gatedBackend struct {
	driver.Backend
	gate chan struct{}
}

func (b *gatedBackend) Open(ctx context.Context, target string) (driver.PartWriter, error) {
	pw, err := b.Backend.Open(ctx, target)
	if err != nil {
		return nil, err
	}
	return &gatedPartWriter{PartWriter: pw, gate: b.gate}, nil
}

type gatedPartWriter struct {
	driver.PartWriter
	gate chan struct{}
}

func (p *gatedPartWriter) PersistAsync(ctx context.Context) (func(context.Context) (json.RawMessage, error), error) {
	r, err := p.Persist(ctx)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (json.RawMessage, error) {
		select {
		case <-p.gate:
			return r, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}, nil
}

// TestPrepareOverlapsWrites: records written while phase 1 waits
// (including parts that roll meanwhile) belong to the next checkpoint; the
// snapshot holds exactly the barrier's records.
func TestPrepareOverlapsWrites(t *testing.T) {
	ctx := context.Background()
	local, root := newLocal(t)
	gate := make(chan struct{})
	be := &gatedBackend{Backend: local, gate: gate}
	w := newWriter(t, be, 0, filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 200}))
	rec := func(i int) []byte { return fmt.Appendf(nil, `{"id":%d,"pad":"%040d"}`, i, i) }
	for i := range 10 {
		mustWrite(t, w, rec(i))
	}
	wait, err := w.Prepare(ctx, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		snap committer.Snapshot
		err  error
	}
	done := make(chan result, 1)
	go func() {
		snap, err := wait(ctx)
		done <- result{snap, err}
	}()
	for i := 10; i < 100; i++ { // parts roll every few records meanwhile
		mustWrite(t, w, rec(i))
	}
	select {
	case r := <-done:
		t.Fatalf("phase 1 completed before its persists did: %+v", r)
	default:
	}
	close(gate)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	commitAll(t, w, r.snap.Committables)
	for id := range idsOf(t, published(t, root)) {
		if id >= 10 {
			t.Fatalf("checkpoint 1 published record %d, written after its barrier", id)
		}
	}
	if len(r.snap.State) == 0 {
		t.Fatal("checkpoint 1 has no open part in its state")
	}
	snap := prepare(t, w, 2, true)
	commitAll(t, w, snap.Committables)
	checkIDs(t, published(t, root), 100)
}

// TestPublishOnRoll: with WithPublishOnRoll a rolled part is visible before
// any checkpoint (at-least-once: a crash then replays its records), and
// the next checkpoint still lists it; without it, nothing is visible
// before the checkpoint is decided.
func TestPublishOnRoll(t *testing.T) {
	for _, early := range []bool{false, true} {
		be, root := newLocal(t)
		opts := []filesink.Option{filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 1000})}
		if early {
			opts = append(opts, filesink.WithPublishOnRoll())
		}
		w := newWriter(t, be, 0, opts...)
		for i := range 50 {
			mustWrite(t, w, fmt.Appendf(nil, `{"i":%d,"pad":"0123456789012345678901234567890123456789"}`, i))
		}
		if early {
			// The next Prepare waits for the rolled parts: they are
			// published already and stay so after the checkpoint.
			snap := prepare(t, w, 1, false)
			before := published(t, root)
			if len(before) == 0 || len(snap.Committables) != len(before) {
				t.Fatalf("publish on roll: %d files visible before the commit, %d committables", len(before), len(snap.Committables))
			}
			commitAll(t, w, snap.Committables) // verified no-ops
			if after := published(t, root); len(after) != len(before) {
				t.Errorf("%d files after the commit, %d before", len(after), len(before))
			}
			continue
		}
		w.Close() // a crash before any checkpoint
		if got := published(t, root); len(got) != 0 {
			t.Errorf("exactly-once: %d files visible before any checkpoint: %v", len(got), keys(got))
		}
	}
}

// TestResumeWithoutFigures: a part resumed from a checkpoint written before
// parts kept figures (no "stats" in the state) is committed without any:
// the manifest does not list it, rather than list a checksum of part of it.
func TestResumeWithoutFigures(t *testing.T) {
	be, _ := newLocal(t)
	w := newWriter(t, be, 0)
	mustWrite(t, w, []byte(`{"a":1}`))
	snap := prepare(t, w, 1, false)
	var st struct {
		Parts []map[string]json.RawMessage `json:"parts"`
	}
	if err := json.Unmarshal(snap.State, &st); err != nil || len(st.Parts) != 1 {
		t.Fatalf("state %s: %v", snap.State, err)
	}
	if _, ok := st.Parts[0]["stats"]; !ok {
		t.Fatalf("state %s has no figures", snap.State)
	}
	delete(st.Parts[0], "stats") // as an older version wrote it
	old, _ := json.Marshal(st)

	w2 := newWriter(t, be, 0)
	if err := w2.Restore(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, w2, []byte(`{"a":2}`))
	final := prepare(t, w2, 2, true)
	if len(final.Committables) != 1 {
		t.Fatalf("%d committables", len(final.Committables))
	}
	var e map[string]json.RawMessage
	json.Unmarshal(final.Committables[0], &e)
	if _, ok := e["stats"]; ok {
		t.Errorf("a part resumed without figures was committed with some: %s", final.Committables[0])
	}
	commitAll(t, w2, final.Committables)
	if err := w2.CommittedCheckpoint(context.Background(), 2, final.Committables); err != nil {
		t.Fatal(err)
	}
	if ms, err := filesink.ReadManifests(context.Background(), be); err != nil || len(ms) != 0 {
		t.Errorf("manifests %v, %v: want none", ms, err)
	}
}

// TestBeginBatchReadsTheClockOnce: between BeginBatch and EndBatch the
// writer reads its clock once, not once per record; after EndBatch, per
// record again.
func TestBeginBatchReadsTheClockOnce(t *testing.T) {
	be, _ := newLocal(t)
	reads := 0
	w := newWriter(t, be, 0, filesink.WithClock(func() time.Time { reads++; return t0 }))
	w.BeginBatch()
	for range 10 {
		mustWrite(t, w, []byte(`{"a":1}`))
	}
	w.EndBatch()
	if reads != 1 {
		t.Errorf("%d clock reads for a batch of 10 records, want 1", reads)
	}
	mustWrite(t, w, []byte(`{"a":2}`))
	if reads != 2 {
		t.Errorf("%d clock reads after one more record outside a batch, want 2", reads)
	}
}

// TestPublishOnRollRestore: a part open at a checkpoint that rolled and was
// published before a crash (at-least-once) is not resumed on restore: its
// records up to the checkpoint are visible, the later ones come again.
// Exactly-once mode still reports the missing staging file as data loss.
func TestPublishOnRollRestore(t *testing.T) {
	for _, early := range []bool{true, false} {
		be, root := newLocal(t)
		opts := []filesink.Option{filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 1000})}
		if early {
			opts = append(opts, filesink.WithPublishOnRoll())
		}
		w := newWriter(t, be, 0, opts...)
		mustWrite(t, w, []byte(`{"i":0}`))
		snap := prepare(t, w, 1, false) // the part is open: in the state
		if snap.State == nil {
			t.Fatal("no open part in the checkpoint")
		}
		for i := 1; i < 60; i++ { // roll it (and publish it, early)
			mustWrite(t, w, fmt.Appendf(nil, `{"i":%d,"pad":"0123456789012345678901234567890123456789"}`, i))
		}
		w.Close() // crash: the background closes finish, nothing else
		if !early {
			// Exactly-once never publishes before a checkpoint: simulate
			// the staging file vanishing to check the error is kept.
			ents, _ := filepath.Glob(filepath.Join(root, ".part-*.inprogress"))
			for _, f := range ents {
				os.Remove(f)
			}
		}
		w2 := newWriter(t, be, 0, opts...)
		err := w2.Restore(context.Background(), snap.State)
		if early && err != nil {
			t.Errorf("at-least-once restore of a part published early: %v", err)
		}
		if !early && !errors.Is(err, committer.ErrDataLoss) {
			t.Errorf("exactly-once restore with the staging file gone: %v, want ErrDataLoss", err)
		}
		if early && len(published(t, root)) == 0 {
			t.Errorf("nothing published early")
		}
	}
}

// sweepingBackend is a local backend that declares that its staging must be
// swept every n checkpoints while the job runs, as S3's does.
type sweepingBackend struct {
	*localfs.Backend
	n int
}

func (b sweepingBackend) SweepEvery() int { return b.n }

// TestSweepEveryFromBackends: the writer's snapshots carry the smallest
// positive sweep interval its backends (the output's and the dead
// letters') declare, so that the coordinator sweeps while the job runs.
func TestSweepEveryFromBackends(t *testing.T) {
	for _, tc := range []struct{ out, dead, want int }{
		{0, -1, 0}, {10, -1, 10}, {10, 0, 10}, {0, 7, 7}, {10, 7, 7}, {3, 7, 3},
	} {
		be, _ := newLocal(t)
		var opts []filesink.Option
		if tc.dead >= 0 {
			dl, _ := newLocal(t)
			opts = append(opts, filesink.WithDeadLetter(sweepingBackend{dl, tc.dead}))
		}
		w := newWriter(t, sweepingBackend{be, tc.out}, 0, opts...)
		mustWrite(t, w, []byte(`{"a":1}`))
		if got := prepare(t, w, 1, false).SweepEvery; got != tc.want {
			t.Errorf("output every %d, dead letters every %d: snapshot asks every %d, want %d", tc.out, tc.dead, got, tc.want)
		}
	}
}

// TestBudgetPool: writers of one pool together stay within it, whatever
// their number, also after a recovery restored them; a writer closed gives
// its share back.
func TestBudgetPool(t *testing.T) {
	const pool = 1 << 20
	p := filesink.NewBudgetPool(pool)
	mem := crashfs.New()
	var ws []*filesink.Writer
	for i := range 4 {
		be := localfs.New(mem, fmt.Sprintf("%s/%d", testjob.Out, i))
		ws = append(ws, newWriter(t, be, 0, filesink.WithBudgetPool(p), filesink.WithBufferBudget(64<<20),
			filesink.WithAssigner(bucketing.Field("key"))))
	}
	// A recovery restores every writer first: each keeps its share.
	for _, w := range ws {
		if err := w.Restore(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
	}
	total := func() int64 {
		var n int64
		for _, w := range ws {
			n += w.BufferedBytes()
		}
		return n
	}
	for i := range 40_000 {
		w := ws[i%len(ws)]
		mustWrite(t, w, fmt.Appendf(nil, `{"id":%d,"key":"k-%d","pad":"%s"}`, i, i%200, strings.Repeat("p", 60)))
		if n := total(); n > pool {
			t.Fatalf("after record %d: the pool's writers buffer %d bytes, pool %d", i, n, pool)
		}
	}
	if err := ws[3].Close(); err != nil {
		t.Fatal(err)
	}
	ws = ws[:3]
	var peak int64
	for i := range 30_000 {
		mustWrite(t, ws[i%3], fmt.Appendf(nil, `{"id":%d,"key":"k-%d","pad":"%s"}`, i, i%200, strings.Repeat("p", 60)))
		peak = max(peak, ws[i%3].BufferedBytes())
		if n := total(); n > pool {
			t.Fatalf("after a writer closed, record %d: %d bytes buffered, pool %d", i, n, pool)
		}
	}
	if peak <= pool/4 {
		t.Errorf("a writer never used more than a quarter of the pool (peak %d) after one of four closed", peak)
	}
}
