package iceberg_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	ice "github.com/filesink/filesink/committer/iceberg"
)

// appendCheckpoints commits checkpoints first..first+n-1 of lane, each
// one data file of per records, the ids following on from
// (first-1)*per.
func (e *env) appendCheckpoints(c *ice.Table, lane string, first, n, per int) {
	e.t.Helper()
	for ck := first; ck < first+n; ck++ {
		lc := ice.LaneCommit{Lane: lane, Checkpoint: uint64(ck), Files: []iceberg.DataFile{e.file(lane, int64((ck-1)*per), per)}}
		if _, err := c.Commit(e.t.Context(), []ice.LaneCommit{lc}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// scanIDs reads the table's current snapshot with iceberg-go and checks
// that it holds the ids [0, n) once each.
func (e *env) scanIDs(n int) {
	e.t.Helper()
	arr, err := e.load().Scan(table.WithSelectedFields("id")).ToArrowTable(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	defer arr.Release()
	seen := map[int64]int{}
	for _, chunk := range arr.Column(0).Data().Chunks() {
		for _, id := range chunk.(*array.Int64).Int64Values() {
			seen[id]++
		}
	}
	for i := range int64(n) {
		if seen[i] != 1 {
			e.t.Errorf("iceberg-go scan: id %d %d times", i, seen[i])
		}
	}
	if len(seen) != n || arr.NumRows() != int64(n) {
		e.t.Errorf("iceberg-go scan: %d rows, %d distinct ids; want %d", arr.NumRows(), len(seen), n)
	}
}

// tableDir is the local directory of the table.
func (e *env) tableDir() string { return strings.TrimPrefix(e.load().Location(), "file://") }

// dataFiles lists the files under the table's data directory.
func (e *env) dataFiles() []string {
	e.t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(e.tableDir(), "data"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, "file://"+filepath.ToSlash(p))
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// referenced returns the data files any snapshot of the table names.
func (e *env) referenced() map[string]bool {
	e.t.Helper()
	tbl := e.load()
	fsys, err := tbl.FS(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range tbl.Metadata().Snapshots() {
		manifests, err := s.Manifests(fsys)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, m := range manifests {
			for entry, err := range m.Entries(fsys, false) {
				if err != nil {
					e.t.Fatal(err)
				}
				out[entry.DataFile().FilePath()] = true
			}
		}
	}
	return out
}

// unreferenced lists the data files on disk that no snapshot names.
func (e *env) unreferenced() []string {
	e.t.Helper()
	refs := e.referenced()
	var out []string
	for _, f := range e.dataFiles() {
		if !refs[f] {
			out = append(out, f)
		}
	}
	return out
}

// journal lists the entries of the compaction journal.
func (e *env) journal() []string {
	e.t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(e.tableDir(), filepath.FromSlash(ice.CompactDir)), func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func compact(t *testing.T, cat table.CatalogIO, opts ice.CompactOptions) ice.CompactResult {
	t.Helper()
	res, err := ice.Compact(t.Context(), cat, ident, opts)
	if err != nil {
		t.Fatalf("compact: %+v: %v", res, err)
	}
	return res
}

// Twelve small files become one in one replace snapshot that records the
// run; the rows stay, read by iceberg-go and by the independent reader;
// the journal is empty afterwards and a second run finds nothing to do.
func TestCompactSmallFiles(t *testing.T) {
	e := newEnv(t)
	e.appendCheckpoints(ice.NewTable(e.cat, ident, "job1"), "events/0", 1, 12, 50)
	res := compact(t, e.cat, ice.CompactOptions{})
	if res.SnapshotID == 0 || res.Removed != 12 || res.Added != 1 || res.FilesBefore != 12 || res.FilesAfter != 1 ||
		res.Attempts != 1 || res.Rewrites != 1 || res.Swept != 0 || res.BytesBefore <= 0 || res.BytesAfter <= 0 {
		t.Errorf("result %+v: want 12 files replaced by 1 in one attempt", res)
	}
	cur := e.load().CurrentSnapshot()
	if cur.SnapshotID != res.SnapshotID || cur.Summary.Operation != table.OpReplace ||
		cur.Summary.Properties[ice.SummaryCompaction] != res.Run || cur.Summary.Properties[ice.SummaryCompactionAttempt] != "1" {
		t.Errorf("current snapshot %d %+v: want the run's replace snapshot %d", cur.SnapshotID, cur.Summary, res.SnapshotID)
	}
	e.scanIDs(600)
	got := e.read(600, 13)
	if len(got.Files) != 1 {
		t.Errorf("%d live data files, want 1", len(got.Files))
	}
	if j := e.journal(); len(j) != 0 {
		t.Errorf("journal entries left: %v", j)
	}
	again := compact(t, e.cat, ice.CompactOptions{})
	if again.SnapshotID != 0 || again.FilesBefore != 1 || again.Attempts != 0 {
		t.Errorf("a second compaction: %+v; want nothing to do", again)
	}
}

// A checkpoint whose commit reply was lost is committed; then the table
// is compacted; then the job, recovering, commits the checkpoint again:
// a no-op, as it is once the snapshots that recorded it are expired.
func TestRecommitAfterCompaction(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := ice.NewTable(e.cat, ident, "job1")
	e.appendCheckpoints(c, "events/0", 1, 5, 20)
	ck6 := ice.LaneCommit{Lane: "events/0", Checkpoint: 6, Files: []iceberg.DataFile{e.file("events/0", 100, 20)}}
	if _, err := ice.NewTable(&lost{Catalog: e.cat, armed: 1}, ident, "job1").Commit(ctx, []ice.LaneCommit{ck6}); err != nil {
		t.Fatal(err)
	}
	if res := compact(t, e.cat, ice.CompactOptions{}); res.Removed != 6 {
		t.Fatalf("compaction %+v: want the 6 files replaced", res)
	}
	ck4 := ice.LaneCommit{Lane: "events/0", Checkpoint: 4, Files: []iceberg.DataFile{e.file("events/0", 60, 20)}}
	for _, lc := range []ice.LaneCommit{ck6, ck4} {
		res, err := c.Commit(ctx, []ice.LaneCommit{lc})
		if err != nil || len(res.Appended) != 0 || !slices.Equal(res.Skipped, []string{"events/0"}) {
			t.Fatalf("checkpoint %d again after compaction: %+v, %v", lc.Checkpoint, res, err)
		}
	}
	e.read(120, 7)
	txn := e.load().NewTransaction()
	if err := txn.ExpireSnapshots(table.WithRetainLast(1), table.WithOlderThan(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Commit(ctx, []ice.LaneCommit{ck6})
	if err != nil || len(res.Appended) != 0 {
		t.Fatalf("checkpoint 6 again after compaction and expiry: %+v, %v", res, err)
	}
	got := e.read(120, 1)
	if got.Snapshots[0].Operation != "replace" {
		t.Errorf("the one snapshot left is a %s", got.Snapshots[0].Operation)
	}
}

// hooked is the catalog as a compaction sees it, with hook run (once
// each, in order) before a commit reaches the catalog; fail makes the
// commit fail without reaching it, lose applies it and loses the reply,
// hold fails it and applies it late, before the next commit.
type hooked struct {
	*ice.Catalog
	mu               sync.Mutex
	hooks            []func()
	fail, lose, hold int
	commits          int
}

func (h *hooked) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	tbl, err := h.Catalog.LoadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, h), nil
}

func (h *hooked) CommitTable(ctx context.Context, id table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	h.mu.Lock()
	h.commits++
	var hook func()
	if len(h.hooks) > 0 {
		hook, h.hooks = h.hooks[0], h.hooks[1:]
	}
	fail, lose := h.fail > 0, h.lose > 0
	if fail {
		h.fail--
	} else if lose {
		h.lose--
	} else if h.hold > 0 {
		h.hold--
		h.hooks = append([]func(){func() {
			if _, _, err := h.Catalog.CommitTable(context.WithoutCancel(ctx), id, reqs, ups); err != nil {
				panic(err)
			}
		}}, h.hooks...)
		h.mu.Unlock()
		return nil, "", errors.New("read tcp: i/o timeout")
	}
	h.mu.Unlock()
	if hook != nil {
		hook()
	}
	if fail {
		return nil, "", errors.New("read tcp: connection reset by peer")
	}
	meta, loc, err := h.Catalog.CommitTable(ctx, id, reqs, ups)
	if err == nil && lose {
		return nil, "", errors.New("read tcp: connection reset by peer")
	}
	return meta, loc, err
}

// A job appends between the compaction's plan and its commit: the
// compare-and-swap fails, and since only an append came, the files
// written are committed on the new head without a second rewrite; the
// appended file stays live.
func TestCompactConcurrentAppend(t *testing.T) {
	e := newEnv(t)
	c := ice.NewTable(e.cat, ident, "job1")
	e.appendCheckpoints(c, "events/0", 1, 8, 25)
	cat := &hooked{Catalog: e.cat, hooks: []func(){func() { e.appendCheckpoints(c, "events/0", 9, 1, 25) }}}
	res := compact(t, cat, ice.CompactOptions{})
	if res.Attempts != 2 || res.Rewrites != 1 || res.Removed != 8 || res.Added != 1 || res.FilesBefore != 9 || res.FilesAfter != 2 {
		t.Errorf("result %+v: want 2 attempts, 1 rewrite, 8 files replaced by 1 beside the appended one", res)
	}
	appended := e.load().Metadata().SnapshotByID(*e.load().CurrentSnapshot().ParentSnapshotID)
	if appended.Summary.Operation != table.OpAppend || appended.Summary.Properties[ice.SummaryLanes] != `{"events/0":9}` {
		t.Errorf("the replace's parent is %+v, not the concurrent append", appended.Summary)
	}
	e.scanIDs(225)
	if got := e.read(225, 10); len(got.Files) != 2 {
		t.Errorf("%d live files, want the compacted one and the appended one", len(got.Files))
	}
	if u := e.unreferenced(); len(u) != 0 {
		t.Errorf("unreferenced data files: %v", u)
	}
}

// Another compaction commits between this one's plan and its commit: the
// other's sweep deletes this one's files (it can no longer commit them),
// this one loads the table, plans again and finds nothing left to do.
func TestCompactConcurrentCompaction(t *testing.T) {
	e := newEnv(t)
	e.appendCheckpoints(ice.NewTable(e.cat, ident, "job1"), "events/0", 1, 8, 25)
	var other ice.CompactResult
	cat := &hooked{Catalog: e.cat, hooks: []func(){func() { other = compact(t, e.cat, ice.CompactOptions{}) }}}
	res := compact(t, cat, ice.CompactOptions{})
	if other.SnapshotID == 0 || other.Swept != 1 {
		t.Errorf("the other compaction: %+v; want it committed and this one's file swept", other)
	}
	if res.SnapshotID != 0 || res.Attempts != 1 || res.Rewrites != 1 || res.FilesBefore != 1 {
		t.Errorf("result %+v: want one attempt, then nothing left to do", res)
	}
	e.scanIDs(200)
	e.read(200, 9)
	if u := e.unreferenced(); len(u) != 0 {
		t.Errorf("unreferenced data files: %v", u)
	}
}

// Appends and compactions at once: every row once, no file lost.
func TestCompactRacingAppends(t *testing.T) {
	e := newEnv(t)
	c := ice.NewTable(e.cat, ident, "job1")
	const checkpoints, per = 30, 10
	files := make([]iceberg.DataFile, checkpoints)
	for i := range files {
		files[i] = e.file("events/0", int64(i*per), per)
	}
	var wg sync.WaitGroup
	var appendErr error
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for i, f := range files {
			lc := ice.LaneCommit{Lane: "events/0", Checkpoint: uint64(i + 1), Files: []iceberg.DataFile{f}}
			if _, err := c.Commit(t.Context(), []ice.LaneCommit{lc}); err != nil {
				appendErr = err
				return
			}
		}
	})
	var compactions []ice.CompactResult
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true // one more, after the last append
		default:
		}
		res, err := ice.Compact(t.Context(), e.cat, ident, ice.CompactOptions{MinInputFiles: 2, MaxAttempts: 50})
		if err != nil {
			t.Error(err)
		}
		compactions = append(compactions, res)
	}
	wg.Wait()
	if appendErr != nil {
		t.Fatal(appendErr)
	}
	committed := 0
	for _, res := range compactions {
		if res.SnapshotID != 0 {
			committed++
		}
	}
	if committed == 0 {
		t.Error("no compaction committed")
	}
	for _, res := range compactions {
		if res.SnapshotID != 0 {
			t.Logf("compaction %s: %d -> %d files in %d attempts, %d rewrites", res.Run, res.FilesBefore, res.FilesAfter, res.Attempts, res.Rewrites)
		}
	}
	t.Logf("%d compactions, %d committed", len(compactions), committed)
	e.scanIDs(checkpoints * per)
	tbl := e.load()
	e.read(checkpoints*per, len(tbl.Metadata().Snapshots()))
	if u := e.unreferenced(); len(u) != 0 {
		t.Errorf("unreferenced data files: %v", u)
	}
}

// A compaction that dies after writing its file and before its commit
// lands (the process killed: its context ends as the commit is sent; or
// the catalog fails every commit) leaves the table as it was and its file
// journaled; the next compaction commits and sweeps it, and leaves the
// file sink's in-flight file alone.
func TestCompactCrashBeforeCommit(t *testing.T) {
	for _, crash := range []string{"killed", "commits fail"} {
		t.Run(crash, func(t *testing.T) {
			e := newEnv(t)
			e.appendCheckpoints(ice.NewTable(e.cat, ident, "job1"), "events/0", 1, 6, 30)
			inflight := filepath.Join(e.tableDir(), "data", "part-0-5f3e9a1c-7.parquet")
			if err := os.WriteFile(inflight, []byte("PAR1 in flight"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := e.load().MetadataLocation()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			cat := &hooked{Catalog: e.cat}
			if crash == "killed" {
				cat.hooks, cat.fail = []func(){cancel}, 1
			} else {
				cat.fail = 2
			}
			res, err := ice.Compact(ctx, cat, ident, ice.CompactOptions{MaxAttempts: 2})
			if err == nil || res.SnapshotID != 0 {
				t.Fatalf("compaction through a dying commit: %+v, %v", res, err)
			}
			if after := e.load().MetadataLocation(); after != before {
				t.Fatalf("the table moved from %s to %s", before, after)
			}
			orphans := e.unreferenced()
			if len(orphans) != 2 || len(e.journal()) != 1 {
				t.Fatalf("unreferenced files %v, journal %v: want the compaction's file journaled and the in-flight file", orphans, e.journal())
			}
			next := compact(t, e.cat, ice.CompactOptions{})
			if next.SnapshotID == 0 || next.Swept != 1 || next.Removed != 6 {
				t.Errorf("the next compaction: %+v; want it committed and the orphan swept", next)
			}
			if u := e.unreferenced(); !slices.Equal(u, []string{"file://" + filepath.ToSlash(inflight)}) {
				t.Errorf("unreferenced files after the sweep: %v; want only the file sink's in-flight file", u)
			}
			if j := e.journal(); len(j) != 0 {
				t.Errorf("journal entries left: %v", j)
			}
			e.scanIDs(180)
			e.read(180, 7)
		})
	}
}

// The catalog applies the compaction's commit and the reply is lost: the
// run finds its snapshot by its run id and commits nothing more.
func TestCompactLostReply(t *testing.T) {
	e := newEnv(t)
	e.appendCheckpoints(ice.NewTable(e.cat, ident, "job1"), "events/1", 1, 5, 10)
	cat := &hooked{Catalog: e.cat, lose: 1}
	res := compact(t, cat, ice.CompactOptions{})
	if res.SnapshotID == 0 || res.Attempts != 1 || cat.commits != 1 || res.Removed != 5 {
		t.Errorf("result %+v after %d commits: want the one commit found", res, cat.commits)
	}
	e.read(50, 6)
	if u, j := e.unreferenced(), e.journal(); len(u) != 0 || len(j) != 0 {
		t.Errorf("unreferenced files %v, journal %v", u, j)
	}
}

// The compaction's commit times out, the run finds the table without it
// and commits again, and the first commit lands just before: the second
// fails, and the run finds its snapshot, of its first attempt.
func TestCompactLateLanding(t *testing.T) {
	e := newEnv(t)
	e.appendCheckpoints(ice.NewTable(e.cat, ident, "job1"), "events/1", 1, 5, 10)
	cat := &hooked{Catalog: e.cat, hold: 1}
	res := compact(t, cat, ice.CompactOptions{})
	cur := e.load().CurrentSnapshot()
	if res.SnapshotID != cur.SnapshotID || res.Attempts != 2 || cur.Summary.Properties[ice.SummaryCompactionAttempt] != "1" || res.Removed != 5 || res.Added != 1 {
		t.Errorf("result %+v, current snapshot %+v: want the first attempt's snapshot found", res, cur.Summary)
	}
	e.read(50, 6)
	if u, j := e.unreferenced(), e.journal(); len(u) != 0 || len(j) != 0 {
		t.Errorf("unreferenced files %v, journal %v", u, j)
	}
}

// Tables iceberg-go would replay commits on, and bad options, are
// refused.
func TestCompactRefusals(t *testing.T) {
	e := newEnv(t)
	if _, err := ice.Compact(t.Context(), e.cat, ident, ice.CompactOptions{TargetSize: -1}); err == nil {
		t.Error("a negative target size was taken")
	}
	txn := e.load().NewTransaction()
	if err := txn.SetProperties(iceberg.Properties{"commit.retry.num-retries": "3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := ice.Compact(t.Context(), e.cat, ident, ice.CompactOptions{})
	if err == nil || !strings.Contains(err.Error(), "commit.retry.num-retries=3") {
		t.Errorf("error %v: want the retrying table refused", err)
	}
	if _, err := ice.Compact(t.Context(), e.cat, table.Identifier{"db", "missing"}, ice.CompactOptions{}); err == nil || !strings.Contains(err.Error(), "db.missing") {
		t.Errorf("a missing table: %v", err)
	}
}
