package iceberg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go

	ice "github.com/filesink/filesink/committer/iceberg"
	"github.com/filesink/filesink/internal/testutil/icebergtest"
)

var ident = table.Identifier{"db", "events"}

// env is a table db.events (testSchema) in the embedded catalog of a local
// warehouse under a test's temporary directory.
type env struct {
	t   *testing.T
	cat *ice.Catalog
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cat, err := ice.OpenCatalog(t.Context(), "", filepath.Join(t.TempDir(), "warehouse"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return envOn(t, cat)
}

// envOn is the env of the table db.events (testSchema) in cat, which it
// makes if missing; cat is closed when t ends.
func envOn(t *testing.T, cat *ice.Catalog) *env {
	t.Helper()
	t.Cleanup(func() { cat.Close() })
	if _, err := ice.EnsureTable(t.Context(), cat, ident, testSchema); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, cat: cat}
}

// file writes the records [first, first+n) of lane as a Parquet data file
// of the table and returns its DataFile.
func (e *env) file(lane string, first int64, n int) iceberg.DataFile {
	e.t.Helper()
	return writeFile(e.t, e.load(), lane, first, n)
}

// writeFile writes the records [first, first+n) of lane as a Parquet data
// file with tbl's field ids under its location (local), and returns its
// DataFile.
func writeFile(t *testing.T, tbl *table.Table, lane string, first int64, n int) iceberg.DataFile {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Metadata: icebergtest.FieldID(1)},
		{Name: "lane", Type: arrow.BinaryTypes.String, Metadata: icebergtest.FieldID(2)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range int64(n) {
		b.Field(0).(*array.Int64Builder).Append(first + i)
		b.Field(1).(*array.StringBuilder).Append(lane)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	loc := tbl.Location() + "/data/" + fmt.Sprintf("%s-%d.parquet", strings.ReplaceAll(lane, "/", "."), first)
	icebergtest.WriteParquet(t, strings.TrimPrefix(loc, "file://"), rec)
	fs, err := tbl.FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	df, err := table.FileToDataFile(t.Context(), fs, loc, tbl.Schema(), tbl.Spec(), 0, tbl.Properties())
	if err != nil {
		t.Fatal(err)
	}
	return df
}

func (e *env) load() *table.Table {
	e.t.Helper()
	tbl, err := e.cat.LoadTable(e.t.Context(), ident)
	if err != nil {
		e.t.Fatal(err)
	}
	return tbl
}

// read reads the table with the independent reader and checks that it
// holds exactly the ids [0, n), once each, in the given snapshots.
func (e *env) read(n int, snapshots int) *icebergtest.Table {
	e.t.Helper()
	loc := strings.TrimPrefix(e.load().MetadataLocation(), "file://")
	got := icebergtest.MustRead(e.t, loc, icebergtest.WithRows())
	if len(got.Errors) > 0 || len(got.DuplicatePaths) > 0 {
		e.t.Fatalf("reader: errors %v, paths live twice %v", got.Errors, got.DuplicatePaths)
	}
	if len(got.Snapshots) != snapshots {
		e.t.Errorf("%d snapshots, want %d", len(got.Snapshots), snapshots)
	}
	seen := map[string]int{}
	for _, row := range got.Data {
		var r struct{ ID string }
		if err := json.Unmarshal(row, &r); err != nil {
			e.t.Fatal(err)
		}
		seen[r.ID]++
	}
	for i := range n {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			e.t.Errorf("id %d: %d times", i, c)
		}
	}
	if len(seen) != n || got.Rows != int64(n) {
		e.t.Errorf("%d rows, %d distinct ids; want %d", got.Rows, len(seen), n)
	}
	return got
}

// lost is the catalog as a client sees it when, once armed, the reply of
// a commit the catalog applied is lost.
type lost struct {
	*ice.Catalog
	mu    sync.Mutex
	armed int
}

func (l *lost) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	tbl, err := l.Catalog.LoadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, l), nil
}

func (l *lost) CommitTable(ctx context.Context, id table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	meta, loc, err := l.Catalog.CommitTable(ctx, id, reqs, ups)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.armed > 0 {
		l.armed--
		return nil, "", errors.New("read tcp: connection reset by peer")
	}
	return meta, loc, err
}

// A checkpoint committed twice (a retry after a crash between commit and
// bookkeeping) is one snapshot; the next checkpoint appends.
func TestCommitOnce(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if fs, err := e.load().FS(ctx); err != nil || fmt.Sprintf("%T", fs) != "*iceberg.LocalIO" {
		t.Fatalf("the local warehouse's IO is %T (%v), not the package's LocalIO", fs, err)
	}
	c := ice.NewTable(e.cat, ident, "job1")
	ck1 := []ice.LaneCommit{{Checkpoint: 1, Files: []iceberg.DataFile{e.file("", 0, 100), e.file("", 100, 50)}}}
	for i, want := range [][]string{{""}, nil} {
		res, err := c.Commit(ctx, ck1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Appended, want) || (i == 1 && !slices.Equal(res.Skipped, []string{""})) {
			t.Errorf("commit %d of checkpoint 1: %+v", i+1, res)
		}
	}
	if _, err := c.Commit(ctx, []ice.LaneCommit{{Checkpoint: 2, Files: []iceberg.DataFile{e.file("", 150, 10)}}}); err != nil {
		t.Fatal(err)
	}
	got := e.read(160, 2)
	if s := got.Snapshots[1].Summary; s[ice.SummaryJob] != "job1" || s[ice.SummaryLanes] != `{"":2}` {
		t.Errorf("summary of the second snapshot: %v", s)
	}
}

// A zombie that commits checkpoint 3 of a lane after its new owner
// committed checkpoint 4 adds nothing.
func TestZombieCommitIsNoOp(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	owner, zombie := ice.NewTable(e.cat, ident, "job1"), ice.NewTable(e.cat, ident, "job1")
	if _, err := owner.Commit(ctx, []ice.LaneCommit{{Lane: "events/0", Checkpoint: 4, Files: []iceberg.DataFile{e.file("events/0", 0, 30)}}}); err != nil {
		t.Fatal(err)
	}
	res, err := zombie.Commit(ctx, []ice.LaneCommit{{Lane: "events/0", Checkpoint: 3, Files: []iceberg.DataFile{e.file("events/0", 1000, 30)}}})
	if err != nil || len(res.Appended) != 0 || !slices.Equal(res.Skipped, []string{"events/0"}) {
		t.Fatalf("zombie's commit: %+v, %v", res, err)
	}
	e.read(30, 1)
}

// The catalog applies a commit and its reply is lost: the committer
// reloads the table, finds the checkpoint there and appends nothing more.
func TestLostReplyAfterAppliedCommit(t *testing.T) {
	e := newEnv(t)
	cat := &lost{Catalog: e.cat, armed: 1}
	res, err := ice.NewTable(cat, ident, "job1").Commit(t.Context(), []ice.LaneCommit{{Lane: "events/1", Checkpoint: 1, Files: []iceberg.DataFile{e.file("events/1", 0, 40)}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 1 || len(res.Appended) != 0 || !slices.Equal(res.Recovered, []string{"events/1"}) {
		t.Errorf("result %+v: want one attempt, the lane recovered", res)
	}
	e.read(40, 1)
}

// Lanes committed by several committers at once (processes of a group)
// all land, each checkpoint in one snapshot: a conflict on the table's
// head makes the loser load and append again.
func TestConcurrentCommitters(t *testing.T) {
	concurrentCommitters(t, newEnv(t))
}

// concurrentCommitters commits 3 lanes of 5 checkpoints each from 3
// committers at once to e's table, then reads it.
func concurrentCommitters(t *testing.T, e *env) {
	t.Helper()
	const lanes, checkpoints, per = 3, 5, 10
	files := make([][]iceberg.DataFile, lanes)
	for l := range lanes {
		for c := range checkpoints {
			files[l] = append(files[l], e.file(fmt.Sprintf("events/%d", l), int64((l*checkpoints+c)*per), per))
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, lanes)
	for l := range lanes {
		wg.Go(func() {
			c := ice.NewTable(e.cat, ident, "job1")
			for ck := range checkpoints {
				lc := ice.LaneCommit{Lane: fmt.Sprintf("events/%d", l), Checkpoint: uint64(ck + 1), Files: files[l][ck : ck+1]}
				if _, err := c.Commit(t.Context(), []ice.LaneCommit{lc}); err != nil {
					errs[l] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	e.read(lanes*checkpoints*per, lanes*checkpoints)
}

// A table whose commits iceberg-go would replay by itself is refused with
// one line naming the table and the property.
func TestRefusesRetryingTable(t *testing.T) {
	e := newEnv(t)
	txn := e.load().NewTransaction()
	if err := txn.SetProperties(iceberg.Properties{"commit.retry.num-retries": "4"}); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := ice.NewTable(e.cat, ident, "job1").Commit(t.Context(), []ice.LaneCommit{{Checkpoint: 1, Files: []iceberg.DataFile{e.file("", 0, 5)}}})
	if err == nil || !strings.Contains(err.Error(), "db.events") || !strings.Contains(err.Error(), "commit.retry.num-retries=4") {
		t.Fatalf("error %v: want the table and the property named", err)
	}
	if e.load().CurrentSnapshot() != nil {
		t.Error("a snapshot was committed")
	}
}

// A decided data file that is gone or shorter than recorded fails the
// commit with a data-loss error naming it; nothing is committed.
func TestMissingOrShortDataFile(t *testing.T) {
	for _, damage := range []string{"missing", "short"} {
		t.Run(damage, func(t *testing.T) {
			e := newEnv(t)
			df := e.file("events/2", 0, 20)
			path := strings.TrimPrefix(df.FilePath(), "file://")
			var err error
			if damage == "missing" {
				err = os.Remove(path)
			} else {
				err = os.Truncate(path, df.FileSizeBytes()-1)
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = ice.NewTable(e.cat, ident, "job1").Commit(t.Context(), []ice.LaneCommit{{Lane: "events/2", Checkpoint: 7, Files: []iceberg.DataFile{df}}})
			if !errors.Is(err, ice.ErrDataLoss) || !strings.Contains(err.Error(), filepath.Base(path)) {
				t.Fatalf("error %v: want a data-loss error naming the file", err)
			}
			if e.load().CurrentSnapshot() != nil {
				t.Error("a snapshot was committed")
			}
		})
	}
}

// Snapshot expiry removes the summary that recorded a lane's checkpoint;
// the table property still does, so a late retry of it adds nothing.
func TestCommittedSurvivesSnapshotExpiry(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := ice.NewTable(e.cat, ident, "job1")
	ck := ice.LaneCommit{Lane: "events/0", Checkpoint: 1, Files: []iceberg.DataFile{e.file("events/0", 0, 10)}}
	for _, lc := range []ice.LaneCommit{ck, {Lane: "events/1", Checkpoint: 1, Files: []iceberg.DataFile{e.file("events/1", 10, 10)}}} {
		if _, err := c.Commit(ctx, []ice.LaneCommit{lc}); err != nil {
			t.Fatal(err)
		}
	}
	txn := e.load().NewTransaction()
	if err := txn.ExpireSnapshots(table.WithRetainLast(1), table.WithOlderThan(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.load().Metadata().Snapshots()); n != 1 {
		t.Fatalf("%d snapshots after expiry, want 1", n)
	}
	res, err := c.Commit(ctx, []ice.LaneCommit{ck})
	if err != nil || len(res.Appended) != 0 {
		t.Fatalf("retry of an expired snapshot's checkpoint: %+v, %v", res, err)
	}
	e.read(20, 1)
}
