package iceberg_test

import (
	"context"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	ice "github.com/filesink/filesink/committer/iceberg"
)

// racing is the catalog as a client sees it when, once armed, another
// process commits to the table just before the client's commit reaches
// the catalog: the client's commit is from a stale head.
type racing struct {
	*ice.Catalog
	mu    sync.Mutex
	other func(context.Context) error // the other process's commit
}

func (r *racing) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	tbl, err := r.Catalog.LoadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, r), nil
}

func (r *racing) CommitTable(ctx context.Context, id table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	r.mu.Lock()
	other := r.other
	r.other = nil
	r.mu.Unlock()
	if other != nil {
		if err := other(ctx); err != nil {
			return nil, "", err
		}
	}
	return r.Catalog.CommitTable(ctx, id, reqs, ups)
}

// Two processes commit at once: the one whose head went stale ("branch
// main has changed") loads the table again and appends on the new head;
// both lanes land once.
func TestConflictingCommitters(t *testing.T) {
	e := newEnv(t)
	a := e.file("events/0", 0, 10)
	b := e.file("events/1", 10, 10)
	other := ice.NewTable(e.cat, ident, "job1")
	r := &racing{Catalog: e.cat, other: func(ctx context.Context) error {
		_, err := other.Commit(ctx, []ice.LaneCommit{{Lane: "events/1", Checkpoint: 1, Files: []iceberg.DataFile{b}}})
		return err
	}}
	res, err := ice.NewTable(r, ident, "job1").Commit(t.Context(), []ice.LaneCommit{{Lane: "events/0", Checkpoint: 1, Files: []iceberg.DataFile{a}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 2 || len(res.Appended) != 1 {
		t.Errorf("result %+v: want the stale append refused and the second one to land", res)
	}
	e.read(20, 2)
}

// A lane's checkpoint and its next one in one call, in either order: the
// table holds the later one, so a commit of either again is a no-op.
func TestLaneTwiceInOneCommit(t *testing.T) {
	e := newEnv(t)
	a := e.file("events/0", 0, 10)
	b := e.file("events/0", 10, 10)
	c := ice.NewTable(e.cat, ident, "job1")
	if _, err := c.Commit(t.Context(), []ice.LaneCommit{
		{Lane: "events/0", Checkpoint: 2, Files: []iceberg.DataFile{b}},
		{Lane: "events/0", Checkpoint: 1, Files: []iceberg.DataFile{a}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, cp := range []uint64{1, 2} {
		res, err := c.Commit(t.Context(), []ice.LaneCommit{{Lane: "events/0", Checkpoint: cp, Files: []iceberg.DataFile{a}}})
		if err != nil || len(res.Skipped) != 1 {
			t.Errorf("checkpoint %d again: %+v, %v; want it skipped", cp, res, err)
		}
	}
	e.read(20, 1)
}
