package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/internal/testutil/testjob"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
	"github.com/filesink/filesink/vfs/crashfs"
)

// env is a job's output and checkpoint store on one filesystem.
type env struct {
	fs    vfs.FS
	root  string
	be    *localfs.Backend
	store *recovery.DirStore
}

// memEnv puts the output at testjob.Out on an in-memory filesystem, where
// testjob.Check reads it.
func memEnv(t *testing.T) (*env, *crashfs.FS) {
	t.Helper()
	mem := crashfs.New()
	return newEnv(t, mem, testjob.Out), mem
}

func newEnv(t *testing.T, fsys vfs.FS, root string) *env {
	t.Helper()
	store, err := recovery.OpenDir(context.Background(), fsys, root+"/_filesink")
	if err != nil {
		t.Fatal(err)
	}
	return &env{fs: fsys, root: root, be: localfs.New(fsys, root), store: store}
}

// sinks returns n fresh file-sink subtasks (small parts: many rolls).
func (e *env) sinks(t *testing.T, n int, opts ...filesink.Option) []pipeline.Sink {
	t.Helper()
	var out []pipeline.Sink
	for i := range n {
		o := append([]filesink.Option{filesink.WithBufferBudget(64 << 10),
			filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 4 << 10})}, opts...)
		w, err := filesink.New(e.be, i, o...)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	return out
}

// config is a job over open with checkpoints only where the test asks.
func (e *env) config(sinks []pipeline.Sink, open func(context.Context, json.RawMessage) (source.Source, error)) pipeline.Config {
	return pipeline.Config{
		OpenSource: open, Store: e.store, Sinks: sinks,
		CheckpointInterval: -1, TickInterval: 1 << 40, BatchSize: 25,
		CommitterOptions: []committer.Option{committer.WithRetry(1, 0)},
	}
}

func gen(count int64) func(context.Context, json.RawMessage) (source.Source, error) {
	return func(_ context.Context, pos json.RawMessage) (source.Source, error) {
		return source.NewGenerator(source.GenConfig{Count: count, Seed: 7, Keys: 5}, pos)
	}
}

func exactlyOnce(t *testing.T, mem *crashfs.FS, count int64) {
	t.Helper()
	if p := testjob.Check(mem, count); len(p) > 0 {
		t.Fatalf("not exactly once:\n%s\n%s", strings.Join(p, "\n"), mem)
	}
}

// visible returns the finished files of the output with their contents.
func visible(t *testing.T, e *env) map[string]string {
	t.Helper()
	out, err := snapshot(e)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func snapshot(e *env) (map[string]string, error) {
	out := map[string]string{}
	var walk func(string) error
	walk = func(dir string) error {
		ents, err := e.fs.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, d := range ents {
			if n := d.Name(); n[0] == '.' || n[0] == '_' {
				continue
			}
			p := dir + "/" + d.Name()
			if d.IsDir() {
				if err := walk(p); err != nil {
					return err
				}
				continue
			}
			b, err := vfs.ReadFile(e.fs, p)
			if err != nil {
				return err
			}
			out[strings.TrimPrefix(p, e.root+"/")] = string(b)
		}
		return nil
	}
	if _, err := e.fs.Stat(e.root); err != nil {
		return out, nil
	}
	return out, walk(e.root)
}

// idsIn returns how often each record id appears in files.
func idsIn(t *testing.T, files map[string]string) map[int64]int {
	t.Helper()
	seen := map[int64]int{}
	for name, data := range files {
		for _, line := range strings.Split(strings.TrimSuffix(data, "\n"), "\n") {
			var r struct{ ID *int64 }
			if err := json.Unmarshal([]byte(line), &r); err != nil || r.ID == nil {
				t.Fatalf("%s: %q is not a record", name, line)
			}
			seen[*r.ID]++
		}
	}
	return seen
}

// checkIDRange checks that files hold ids [0, n) exactly once.
func checkIDRange(t *testing.T, files map[string]string, n int64) {
	t.Helper()
	seen := idsIn(t, files)
	for id := range n {
		if seen[id] != 1 {
			t.Errorf("id %d published %d times", id, seen[id])
		}
	}
	for id := range seen {
		if id < 0 || id >= n {
			t.Errorf("id %d published, want only ids below %d", id, n)
		}
	}
}

func TestRunGeneratorOnOSFS(t *testing.T) {
	root := t.TempDir()
	e := newEnv(t, vfs.OS{}, root)
	const count = 1000
	cfg := e.config(e.sinks(t, 1), gen(count))
	cfg.CheckpointEvery = 100
	res, err := pipeline.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.EndOfInput || res.Records != count || res.Bytes != count*source.DefaultGenSize || res.Restored != 0 {
		t.Errorf("result %+v: want end of input, %d records, %d bytes, fresh start", res, count, count*source.DefaultGenSize)
	}
	if res.Checkpoint < count/100 {
		t.Errorf("last checkpoint %d, want at least %d (every 100 records and a final one)", res.Checkpoint, count/100)
	}
	files := visible(t, e)
	if len(files) < 2 {
		t.Errorf("%d files, want several (4 KiB parts)", len(files))
	}
	checkIDRange(t, files, count)
	// Nothing is left in progress.
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(d.Name(), localfs.StagingSuffix) {
			t.Errorf("staging file left after the final checkpoint: %s", p)
		}
		return nil
	})
	latest, err := recovery.Latest(context.Background(), e.store)
	if err != nil || latest == nil {
		t.Fatalf("latest checkpoint: %v, %v", latest, err)
	}
	if latest.ID != res.Checkpoint || string(latest.Source) != fmt.Sprintf(`{"next":%d}`, count) {
		t.Errorf("latest checkpoint %d at %s, want %d at next=%d", latest.ID, latest.Source, res.Checkpoint, count)
	}
	for _, p := range latest.Participants {
		if p.State != nil {
			t.Errorf("final checkpoint has in-progress state for %s: %s", p.Name, p.State)
		}
	}
}

func TestRunParallelism(t *testing.T) {
	for _, bucket := range []string{"none", "field:key"} {
		t.Run(bucket, func(t *testing.T) {
			e, mem := memEnv(t)
			assign, err := bucketing.Parse(bucket, nil)
			if err != nil {
				t.Fatal(err)
			}
			const count = 1000
			cfg := e.config(e.sinks(t, 3, filesink.WithAssigner(assign)), gen(count))
			cfg.CheckpointEvery = 150
			res, err := pipeline.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !res.EndOfInput || res.Records != count {
				t.Errorf("result %+v", res)
			}
			exactlyOnce(t, mem, count)
			perSubtask := map[string]int{}
			for name, data := range visible(t, e) {
				base := name[strings.LastIndexByte(name, '/')+1:]
				perSubtask[base[:len("part-0")]] += strings.Count(data, "\n")
			}
			for _, st := range []string{"part-0", "part-1", "part-2"} {
				// Subtask i takes records i, i+3, ... of every batch.
				if perSubtask[st] < count/3-count/10 || perSubtask[st] > count/3+count/10 {
					t.Errorf("subtask %s published %d records, want about a third of %d: %v", st, perSubtask[st], count, perSubtask)
				}
			}
		})
	}
}

func TestRunAgainPublishesNothing(t *testing.T) {
	ctx := context.Background()
	e, mem := memEnv(t)
	const count = 300
	cfg := e.config(e.sinks(t, 2), gen(count))
	cfg.CheckpointEvery = 50
	first, err := pipeline.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, mem, count)
	before := visible(t, e)

	cfg2 := e.config(e.sinks(t, 2), gen(count))
	cfg2.CheckpointEvery = 50
	second, err := pipeline.Run(ctx, cfg2)
	if err != nil {
		t.Fatal(err)
	}
	if second.Restored != first.Checkpoint || second.Records != 0 || !second.EndOfInput {
		t.Errorf("second run %+v, want restored %d, no records, end of input", second, first.Checkpoint)
	}
	after := visible(t, e)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("second run changed the output: %d files -> %d files", len(before), len(after))
	}
	exactlyOnce(t, mem, count)
}

// blockingSource yields the generator's records, then blocks (after limit
// records from where it was opened) until its context is done, like a
// source waiting for more input.
type blockingSource struct {
	*source.Generator
	limit, n int64
}

func (s *blockingSource) Next(ctx context.Context) (source.Record, error) {
	if s.n >= s.limit {
		<-ctx.Done()
		return source.Record{}, ctx.Err()
	}
	s.n++
	return s.Generator.Next(ctx)
}

func blocking(count, limit int64) func(context.Context, json.RawMessage) (source.Source, error) {
	return func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
		g, err := source.NewGenerator(source.GenConfig{Count: count, Seed: 7, Keys: 5}, pos)
		if err != nil {
			return nil, err
		}
		return &blockingSource{Generator: g, limit: limit}, nil
	}
}

// Closing Stop takes a final checkpoint covering exactly the records the
// run read; a later run continues from there.
func TestRunStop(t *testing.T) {
	ctx := context.Background()
	e, mem := memEnv(t)
	const count, stopAt = 500, 100 // the source blocks after 110 records: 4 full batches and a partial one
	stop := make(chan struct{})
	var once sync.Once
	cfg := e.config(e.sinks(t, 2), blocking(count, stopAt+10))
	cfg.CheckpointEvery = 30
	cfg.Stop = stop
	cfg.Progress = func(p pipeline.Progress) {
		if p.Records >= stopAt {
			once.Do(func() { close(stop) })
		}
	}
	res, err := pipeline.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run after Stop: %v", err)
	}
	if res.EndOfInput || res.Records < stopAt || res.Records > stopAt+10 {
		t.Errorf("result %+v, want %d to %d records and not end of input", res, stopAt, stopAt+10)
	}
	checkIDRange(t, visible(t, e), res.Records)
	latest, err := recovery.Latest(ctx, e.store)
	if err != nil {
		t.Fatal(err)
	}
	if latest.ID != res.Checkpoint || string(latest.Source) != fmt.Sprintf(`{"next":%d}`, res.Records) {
		t.Errorf("final checkpoint %d at %s, want %d at next=%d", latest.ID, latest.Source, res.Checkpoint, res.Records)
	}
	for _, p := range latest.Participants {
		if p.State != nil {
			t.Errorf("stop checkpoint left %s in progress: %s", p.Name, p.State)
		}
	}
	// The next run reads the rest.
	cfg2 := e.config(e.sinks(t, 2), gen(count))
	res2, err := pipeline.Run(ctx, cfg2)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Restored != res.Checkpoint || res2.Records != count-res.Records || !res2.EndOfInput {
		t.Errorf("second run %+v", res2)
	}
	exactlyOnce(t, mem, count)
}

// Stop must take effect soon even when the source never blocks (the
// generator ignores its context, as the Source contract allows for a
// source that does not block): the run stops long before the end of a
// large input.
func TestRunStopNonBlockingSource(t *testing.T) {
	ctx := context.Background()
	e, _ := memEnv(t)
	const count, stopAt = 30_000, 100
	stop := make(chan struct{})
	var once sync.Once
	cfg := e.config(e.sinks(t, 1, filesink.WithRollingPolicy(filesink.NewDefaultPolicy())), gen(count))
	cfg.Stop = stop
	cfg.Progress = func(p pipeline.Progress) {
		if p.Records >= stopAt {
			once.Do(func() { close(stop) })
		}
	}
	res, err := pipeline.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.EndOfInput || res.Records >= count/2 {
		t.Errorf("Stop closed after %d records, but the run went on to read %d of %d (end of input %v)", stopAt, res.Records, count, res.EndOfInput)
	}
	checkIDRange(t, visible(t, e), res.Records)
}

// A non-replayable source cannot give records again: on Stop, every record
// it returned must be committed (records still in the pipe were never read).
func TestRunStopNonReplayableLosesNothing(t *testing.T) {
	ctx := context.Background()
	e, _ := memEnv(t)
	const sent, stopAt = 110, 100
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		for i := range sent {
			fmt.Fprintf(pw, "{\"id\":%d}\n", i)
		}
		// then keep the pipe open, like an idle producer
	}()
	stop := make(chan struct{})
	var once sync.Once
	var src *countingSource
	cfg := e.config(e.sinks(t, 2), func(context.Context, json.RawMessage) (source.Source, error) {
		r, err := source.NewReader(pr, "stdin")
		src = &countingSource{Source: r}
		return src, err
	})
	cfg.Stop = stop
	cfg.Progress = func(p pipeline.Progress) {
		if p.Records >= stopAt {
			once.Do(func() { close(stop) })
		}
	}
	res, err := pipeline.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.EndOfInput {
		t.Errorf("result %+v: the pipe is still open", res)
	}
	if src.n < stopAt || res.Records != src.n {
		t.Errorf("the source returned %d records, the run counted %d", src.n, res.Records)
	}
	checkIDRange(t, visible(t, e), src.n)
}

// countingSource counts the records its Source returned.
type countingSource struct {
	source.Source
	n int64
}

func (s *countingSource) Next(ctx context.Context) (source.Record, error) {
	r, err := s.Source.Next(ctx)
	if err == nil {
		s.n++
	}
	return r, err
}

// Cancelling the context aborts without a final checkpoint; nothing is
// published, and a later run publishes everything once.
func TestRunCancel(t *testing.T) {
	e, mem := memEnv(t)
	const count = 300
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := e.config(e.sinks(t, 1), blocking(count, 60))
	cfg.Progress = func(p pipeline.Progress) {
		if p.Records >= 50 {
			cancel()
		}
		if p.Checkpoints > 0 {
			t.Errorf("a checkpoint was taken: %+v", p)
		}
	}
	_, err := pipeline.Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel = %v, want context.Canceled", err)
	}
	if ids, err := e.store.List(context.Background()); err != nil || len(ids) != 0 {
		t.Errorf("checkpoints after cancel: %v, %v; want none", ids, err)
	}
	if files := visible(t, e); len(files) != 0 {
		t.Errorf("published after cancel: %v", files)
	}
	res, err := pipeline.Run(context.Background(), e.config(e.sinks(t, 1), gen(count)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Restored != 0 || res.Records != count {
		t.Errorf("run after cancel %+v", res)
	}
	exactlyOnce(t, mem, count)
}

// sliceSource is a replayable source of fixed lines.
type sliceSource struct {
	name  string
	lines []string
	next  int
}

func (s *sliceSource) Next(context.Context) (source.Record, error) {
	if s.next >= len(s.lines) {
		return source.Record{}, io.EOF
	}
	s.next++
	return source.Record{Value: []byte(s.lines[s.next-1]), Origin: source.Origin{Name: s.name, Num: int64(s.next)}}, nil
}
func (s *sliceSource) Position() (json.RawMessage, error) {
	return json.RawMessage(fmt.Sprintf(`{"next":%d}`, s.next)), nil
}
func (s *sliceSource) Replayable() bool { return true }
func (s *sliceSource) Describe() string { return s.name }
func (s *sliceSource) Close() error     { return nil }

func lines(name string, ls []string) func(context.Context, json.RawMessage) (source.Source, error) {
	return func(_ context.Context, pos json.RawMessage) (source.Source, error) {
		s := &sliceSource{name: name, lines: ls}
		if pos != nil {
			var p struct{ Next int }
			if err := json.Unmarshal(pos, &p); err != nil {
				return nil, err
			}
			s.next = p.Next
		}
		return s, nil
	}
}

// A bad record stops the run with an error naming it; what earlier
// checkpoints committed stays exactly as it was, and fixing the input
// finishes the job exactly once.
func TestRunBadRecord(t *testing.T) {
	ctx := context.Background()
	e, mem := memEnv(t)
	const count, bad = 200, 157
	var recs []string
	for i := range count {
		recs = append(recs, fmt.Sprintf(`{"id":%d,"key":"k%d"}`, i, i%3))
	}
	broken := append([]string(nil), recs...)
	broken[bad] = `{"id":157,"key":`
	var mu sync.Mutex
	var committed map[string]string
	cfg := e.config(e.sinks(t, 2, filesink.WithRollingPolicy(filesink.OnCheckpointPolicy{})), lines("in/a.jsonl", broken))
	cfg.CheckpointEvery = 40
	cfg.BatchSize = 10
	cfg.CommitterOptions = append(cfg.CommitterOptions, committer.WithHook(func(point string) error {
		if point == "pruned" {
			snap, err := snapshot(e)
			mu.Lock()
			committed = snap
			mu.Unlock()
			return err
		}
		return nil
	}))
	_, err := pipeline.Run(ctx, cfg)
	if err == nil {
		t.Fatal("Run over a bad record succeeded")
	}
	if !errors.Is(err, source.ErrBadRecord) || !strings.Contains(err.Error(), fmt.Sprintf("in/a.jsonl:%d", bad+1)) {
		t.Errorf("error %q does not name the bad record in/a.jsonl:%d", err, bad+1)
	}
	mu.Lock()
	before := committed
	mu.Unlock()
	if len(before) == 0 {
		t.Fatal("no checkpoint committed before the bad record: the test proves nothing")
	}
	// Files committed stay as they were. A checkpoint decided before the
	// failure may still have published some of its files as the run
	// stopped (it runs beside the records after its barrier); the rest
	// follow at the next recovery. Nothing after the bad record is visible.
	after := visible(t, e)
	for name, data := range before {
		if after[name] != data {
			t.Errorf("the failed run changed committed file %s", name)
		}
	}
	n := int64(len(idsIn(t, before)))
	if n == 0 || n > bad {
		t.Errorf("%d records committed before the bad record %d", n, bad)
	}
	checkIDRange(t, before, n)
	for id, k := range idsIn(t, after) {
		if id >= bad || k != 1 {
			t.Errorf("after the failed run: id %d published %d times (the bad record is %d)", id, k, bad)
		}
	}

	cfg2 := e.config(e.sinks(t, 2), lines("in/a.jsonl", recs))
	if _, err := pipeline.Run(ctx, cfg2); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, mem, count)
}

func TestRunProgress(t *testing.T) {
	e, _ := memEnv(t)
	const count = 480
	var got []pipeline.Progress
	cfg := e.config(e.sinks(t, 1), gen(count))
	cfg.CheckpointEvery = 100
	cfg.Progress = func(p pipeline.Progress) { got = append(got, p) }
	res, err := pipeline.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("Progress never called")
	}
	last := got[len(got)-1]
	if !last.Done || last.Records != count || last.Bytes != count*source.DefaultGenSize || last.Checkpoint != res.Checkpoint {
		t.Errorf("last progress %+v, result %+v", last, res)
	}
	// Checkpoints at 100, 200, 300, 400 records and a final one.
	if last.Checkpoints != 5 || res.Checkpoint != 5 {
		t.Errorf("%d checkpoints (last id %d), want 5", last.Checkpoints, res.Checkpoint)
	}
	batches := 0
	for i, p := range got {
		if i > 0 {
			prev := got[i-1]
			if p.Records < prev.Records || p.Bytes < prev.Bytes || p.Checkpoints < prev.Checkpoints {
				t.Errorf("progress went back: %+v -> %+v", prev, p)
			}
			if p.Records > prev.Records {
				batches++
			}
		}
		if p.Done && i != len(got)-1 {
			t.Errorf("Done before the end: %+v", p)
		}
		if p.Bytes != p.Records*source.DefaultGenSize {
			t.Errorf("progress %+v: bytes do not match records", p)
		}
	}
	if batches+1 < count/25 {
		t.Errorf("progress reported %d batches, want one per batch (%d)", batches+1, count/25)
	}
}

// TestRunBarrier: Barrier announces every checkpoint, in order, before
// the checkpoint completes, with the id Progress then reports, and the
// final one as final.
func TestRunBarrier(t *testing.T) {
	e, _ := memEnv(t)
	const count = 480
	type barrier struct {
		id    uint64
		final bool
	}
	var events []string
	var barriers []barrier
	cfg := e.config(e.sinks(t, 1), gen(count))
	cfg.CheckpointEvery = 100
	cfg.Barrier = func(id uint64, final bool) {
		barriers = append(barriers, barrier{id, final})
		events = append(events, fmt.Sprintf("barrier %d", id))
	}
	var lastCkpt uint64
	cfg.Progress = func(p pipeline.Progress) {
		if p.Checkpoint != lastCkpt {
			lastCkpt = p.Checkpoint
			events = append(events, fmt.Sprintf("completed %d", p.Checkpoint))
		}
	}
	res, err := pipeline.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(barriers) != int(res.Checkpoint) {
		t.Fatalf("%d barriers, %d checkpoints: %v", len(barriers), res.Checkpoint, events)
	}
	for i, b := range barriers {
		if b.id != uint64(i+1) || b.final != (i == len(barriers)-1) {
			t.Errorf("barrier %d: %+v", i, b)
		}
	}
	// Each checkpoint completes after its barrier and before the next one's
	// completion (the next barrier may come first: phase 2 overlaps).
	pos := map[string]int{}
	for i, ev := range events {
		pos[ev] = i
	}
	for id := uint64(1); id <= res.Checkpoint; id++ {
		b, okb := pos[fmt.Sprintf("barrier %d", id)]
		c, okc := pos[fmt.Sprintf("completed %d", id)]
		if !okb || !okc || b > c {
			t.Errorf("checkpoint %d: barrier and completion out of order: %v", id, events)
		}
	}
}

func TestRunConfigErrors(t *testing.T) {
	e, _ := memEnv(t)
	sinks := e.sinks(t, 1)
	w0again, err := filesink.New(e.be, 0)
	if err != nil {
		t.Fatal(err)
	}
	openErr := errors.New("no such input")
	tests := []struct {
		name string
		cfg  pipeline.Config
		want string
	}{
		{"no source", pipeline.Config{Store: e.store, Sinks: sinks}, "OpenSource"},
		{"no store", pipeline.Config{OpenSource: gen(1), Sinks: sinks}, "Store"},
		{"no sinks", pipeline.Config{OpenSource: gen(1), Store: e.store}, "Sink"},
		{"duplicate sink names", pipeline.Config{OpenSource: gen(1), Store: e.store, Sinks: append(e.sinks(t, 1), w0again)}, "duplicate"},
		{"source fails to open", pipeline.Config{Store: e.store, Sinks: e.sinks(t, 1),
			OpenSource: func(context.Context, json.RawMessage) (source.Source, error) { return nil, openErr }}, "no such input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pipeline.Run(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	if ids, _ := e.store.List(context.Background()); len(ids) != 0 {
		t.Errorf("invalid configurations wrote checkpoints %v", ids)
	}
}

// A restart with another parallelism is refused: the checkpoint's states
// belong to the subtasks that wrote them.
func TestRunParallelismChangeRefused(t *testing.T) {
	ctx := context.Background()
	e, _ := memEnv(t)
	stop := make(chan struct{})
	close(stop)
	cfg := e.config(e.sinks(t, 1), blocking(100, 10))
	cfg.Stop = stop
	if _, err := pipeline.Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	_, err := pipeline.Run(ctx, e.config(e.sinks(t, 2), gen(100)))
	if !errors.Is(err, committer.ErrParticipantMismatch) {
		t.Errorf("restart with parallelism 2 after 1: %v, want ErrParticipantMismatch", err)
	}
}

// A non-replayable source (stdin) works; its position is nil and so is
// the checkpoints' source position.
func TestRunNonReplayable(t *testing.T) {
	ctx := context.Background()
	e, mem := memEnv(t)
	const count = 333
	var in bytes.Buffer
	for i := range count {
		fmt.Fprintf(&in, "{\"id\":%d}\n", i)
	}
	inputLen := in.Len()
	var opened *source.Reader
	cfg := e.config(e.sinks(t, 2), func(context.Context, json.RawMessage) (source.Source, error) {
		r, err := source.NewReader(&in, "stdin")
		opened = r
		return r, err
	})
	cfg.CheckpointEvery = 100
	res, err := pipeline.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.EndOfInput || res.Records != count {
		t.Errorf("result %+v", res)
	}
	if opened.Replayable() {
		t.Error("a reader source claims to be replayable")
	}
	if pos, err := opened.Position(); pos != nil || err != nil {
		t.Errorf("reader Position() = %s, %v; want nil, nil", pos, err)
	}
	ckpts, err := recovery.Retained(ctx, e.store)
	if err != nil || len(ckpts) == 0 {
		t.Fatalf("checkpoints: %v, %v", ckpts, err)
	}
	for _, c := range ckpts {
		if c.Source != nil {
			t.Errorf("checkpoint %d records source position %s for a non-replayable source", c.ID, c.Source)
		}
	}
	exactlyOnce(t, mem, count)
	// The bytes on disk are the input lines.
	var total int
	for _, data := range visible(t, e) {
		total += len(data)
	}
	if total != inputLen {
		t.Errorf("published %d bytes, the input has %d", total, inputLen)
	}
}

// Config.Partition sends every record of a key to one subtask.
func TestRunPartition(t *testing.T) {
	e, mem := memEnv(t)
	const count, subtasks = 1000, 3
	cfg := e.config(e.sinks(t, subtasks), gen(count))
	cfg.CheckpointEvery = 150
	keyOf := func(rec []byte) string {
		var r struct{ Key string }
		if err := json.Unmarshal(rec, &r); err != nil || r.Key == "" {
			t.Fatalf("record %s has no key", rec)
		}
		return r.Key
	}
	route := func(key string) int {
		h := 0
		for _, c := range []byte(key) {
			h = h*31 + int(c)
		}
		return h % subtasks
	}
	cfg.Partition = func(rec []byte, n int) int {
		if n != subtasks {
			t.Errorf("Partition got n=%d, want %d", n, subtasks)
		}
		return route(keyOf(rec))
	}
	if _, err := pipeline.Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, mem, count)
	used := map[int]bool{}
	for name, data := range visible(t, e) {
		base := name[strings.LastIndexByte(name, '/')+1:]
		sub := int(base[len("part-")] - '0')
		used[sub] = true
		for _, line := range strings.Split(strings.TrimSuffix(data, "\n"), "\n") {
			if k := keyOf([]byte(line)); route(k) != sub {
				t.Fatalf("%s (subtask %d) holds key %q, routed to subtask %d", name, sub, k, route(k))
			}
		}
	}
	if len(used) < 2 {
		t.Fatalf("only subtasks %v published: the keys were not spread, the test proves little", used)
	}
	// An index out of range is an error naming the record.
	e2, _ := memEnv(t)
	cfg = e2.config(e2.sinks(t, 2), gen(10))
	cfg.Partition = func([]byte, int) int { return 2 }
	if _, err := pipeline.Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "gen:0") {
		t.Fatalf("Run with an out-of-range partition: %v", err)
	}
}

// TestRunCommittedHook: Config.Committed sees every checkpoint once, in
// order, after its phase 2 (the record is decided and its files are
// visible), and its error fails the run.
func TestRunCommittedHook(t *testing.T) {
	root := t.TempDir()
	e := newEnv(t, vfs.OS{}, root)
	cfg := e.config(e.sinks(t, 2), gen(1000))
	cfg.CheckpointEvery = 100
	var ids []uint64
	cfg.Committed = func(ctx context.Context, id uint64) error {
		latest, err := recovery.Latest(ctx, e.store)
		if err != nil || latest == nil || latest.ID < id {
			t.Errorf("Committed(%d) before the checkpoint was decided: latest %v, %v", id, latest, err)
		}
		ids = append(ids, id)
		return nil
	}
	res, err := pipeline.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if id != uint64(i+1) {
			t.Fatalf("Committed saw checkpoints %v, want 1..%d in order", ids, res.Checkpoint)
		}
	}
	if len(ids) != int(res.Checkpoint) {
		t.Fatalf("Committed saw checkpoints %v, want 1..%d", ids, res.Checkpoint)
	}
	// An error from the hook fails the run.
	e2 := newEnv(t, vfs.OS{}, t.TempDir())
	cfg2 := e2.config(e2.sinks(t, 1), gen(1000))
	cfg2.CheckpointEvery = 100
	boom := errors.New("boom")
	cfg2.Committed = func(context.Context, uint64) error { return boom }
	if _, err := pipeline.Run(context.Background(), cfg2); !errors.Is(err, boom) {
		t.Fatalf("Run with a failing Committed hook: %v, want %v", err, boom)
	}
}

// retainedGen is the generator with fresh memory for every value, which it
// declares retainable (source.Retained), as the Kafka source does.
type retainedGen struct {
	source.Source
}

func (g *retainedGen) Next(ctx context.Context) (source.Record, error) {
	r, err := g.Source.Next(ctx)
	if err != nil {
		return r, err
	}
	r.Value = bytes.Clone(r.Value)
	return r, nil
}

func (*retainedGen) ValuesRetained() bool { return true }

// TestRunRetainedValues: with a source whose values may be kept, the
// pipeline references them instead of copying, and the output is the
// same: every record once, over several subtasks and reused batches.
func TestRunRetainedValues(t *testing.T) {
	root := t.TempDir()
	e := newEnv(t, vfs.OS{}, root)
	const count = 3000
	cfg := e.config(e.sinks(t, 3), func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
		s, err := gen(count)(ctx, pos)
		return &retainedGen{Source: s}, err
	})
	cfg.CheckpointEvery = 500
	res, err := pipeline.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != count || res.Bytes != count*source.DefaultGenSize {
		t.Errorf("result %+v: want %d records, %d bytes", res, count, count*source.DefaultGenSize)
	}
	checkIDRange(t, visible(t, e), count)
}

// gatedSink holds its first checkpoint's phase 1 until it has received
// more records after the barrier: a pipeline that stopped the records
// while a checkpoint runs would never release it.
type gatedSink struct {
	committer.NopPostCommit
	mu       sync.Mutex
	records  int
	barrier  int           // records at the first barrier; -1 before
	gate     chan struct{} // closed once more records came after the barrier
	released bool
}

func (g *gatedSink) Name() string { return "gated" }
func (g *gatedSink) Write(_ context.Context, _ []byte, _ source.Origin) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.records++
	if g.barrier >= 0 && !g.released && g.records >= g.barrier+5000 {
		g.released = true
		close(g.gate)
	}
	return nil
}
func (g *gatedSink) Tick(context.Context, time.Time) error { return nil }
func (g *gatedSink) Close() error                          { return nil }
func (g *gatedSink) OverlapsCheckpoints() bool             { return true }
func (g *gatedSink) BeginBatch()                           {}
func (g *gatedSink) EndBatch()                             {}
func (g *gatedSink) Counters() committer.Counters          { return committer.Counters{} }
func (g *gatedSink) Prepare(ctx context.Context, id uint64, final bool) (committer.Wait, error) {
	g.mu.Lock()
	first := g.barrier < 0
	if first {
		g.barrier = g.records
	}
	g.mu.Unlock()
	return func(ctx context.Context) (committer.Snapshot, error) {
		if first && !final {
			select {
			case <-g.gate:
			case <-ctx.Done():
				return committer.Snapshot{}, ctx.Err()
			}
		}
		return committer.Snapshot{}, nil
	}, nil
}
func (g *gatedSink) Commit(context.Context, json.RawMessage) error  { return nil }
func (g *gatedSink) Restore(context.Context, json.RawMessage) error { return nil }
func (g *gatedSink) Sweep(context.Context, []*recovery.Checkpoint) (committer.Swept, error) {
	return nil, nil
}

// TestIntervalCheckpointDoesNotStopRecords: while a checkpoint's phase 1
// runs, the next interval checkpoint falls due; the records keep flowing
// (the running checkpoint needs them to finish here) and the due
// checkpoint is taken after it.
func TestIntervalCheckpointDoesNotStopRecords(t *testing.T) {
	e := newEnv(t, vfs.OS{}, t.TempDir())
	g := &gatedSink{barrier: -1, gate: make(chan struct{})}
	cfg := e.config([]pipeline.Sink{g}, gen(50000))
	cfg.CheckpointInterval = time.Millisecond
	cfg.BatchSize = 10
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := pipeline.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v (the records stopped while a checkpoint ran)", err)
	}
	if res.Records != 50000 || res.Checkpoint < 2 {
		t.Errorf("result %+v: want 50000 records and at least 2 checkpoints", res)
	}
}

// batchSink records the BeginBatch/EndBatch calls around its writes.
type batchSink struct {
	pipeline.Sink
	calls []string
}

func (b *batchSink) BeginBatch() { b.calls = append(b.calls, "begin") }
func (b *batchSink) EndBatch()   { b.calls = append(b.calls, "end") }
func (b *batchSink) Write(ctx context.Context, r []byte, o source.Origin) error {
	if n := len(b.calls); n == 0 || b.calls[n-1] == "end" {
		b.calls = append(b.calls, "write outside a batch")
	} else if b.calls[n-1] != "write" {
		b.calls = append(b.calls, "write")
	}
	return b.Sink.Write(ctx, r, o)
}

// TestRunBatcher: every sink (a pipeline.Sink is a pipeline.Batcher) gets every record
// between a BeginBatch and an EndBatch.
func TestRunBatcher(t *testing.T) {
	e := newEnv(t, vfs.OS{}, t.TempDir())
	bs := &batchSink{Sink: e.sinks(t, 1)[0]}
	cfg := e.config([]pipeline.Sink{bs}, gen(300))
	if _, err := pipeline.Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	batches := 0
	for i, c := range bs.calls {
		switch c {
		case "write outside a batch":
			t.Fatalf("a record was written outside BeginBatch/EndBatch: %v", bs.calls)
		case "begin":
			batches++
			if i+1 < len(bs.calls) && bs.calls[i+1] == "begin" {
				t.Fatalf("BeginBatch twice: %v", bs.calls)
			}
		}
	}
	if batches < 300/25 {
		t.Errorf("%d batches of 25 records for 300 records", batches)
	}
}
