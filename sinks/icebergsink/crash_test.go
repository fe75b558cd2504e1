package icebergsink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/filesink/filesink/committer"
	icecommit "github.com/filesink/filesink/committer/iceberg"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/filesink/bulk"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
)

var errCrash = errors.New("crash")

// rig is a table and what a process needs to write it.
type rig struct {
	t      *testing.T
	c      *Committer
	loc    string
	format filesink.BulkFormat
}

func newRig(t *testing.T) *rig {
	t.Helper()
	c, loc := newTable(t)
	tbl, err := c.cat.LoadTable(t.Context(), c.ident)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := WriteSchema(tbl.Schema(), testSchema(t, eventsDoc))
	if err != nil {
		t.Fatal(err)
	}
	format, err := bulk.NewFormat("parquet", ws)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, c: c, loc: loc, format: format}
}

// process starts a process on the table: a recovered coordinator of one
// lane whose committer reaches the catalog through cat (nil: directly).
func (r *rig) process(cat table.CatalogIO, opts ...committer.Option) (*committer.Coordinator, *filesink.Writer, func()) {
	t, ctx := r.t, r.t.Context()
	t.Helper()
	store, err := recovery.OpenDir(ctx, vfs.OS{}, filepath.Join(r.loc, "_filesink"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := filesink.New(localfs.New(vfs.OS{}, r.loc), 0, filesink.WithBulkFormat(r.format), filesink.WithAssigner(Partitioning{}.Assigner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if cat == nil {
		cat = r.c.cat
	}
	nc := NewCommitter(cat, r.c.ident, r.c.meta, Partitioning{})
	nc.SetJob("j")
	co, err := committer.New(store, []committer.Participant{NewParticipant(w, "filesink/0", nc)}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	return co, w, func() { w.Close(); store.Close() }
}

// write hands records from to to-1 to w.
func (r *rig) write(w *filesink.Writer, from, to int) {
	r.t.Helper()
	for i := from; i < to; i++ {
		rec := fmt.Sprintf(`{"id":%d,"country":"c%d","ts":"2026-01-01T00:00:0%dZ"}`, i, i%2, i%10)
		if err := w.Write(r.t.Context(), []byte(rec), source.Origin{Name: "gen", Num: int64(i)}); err != nil {
			r.t.Fatal(err)
		}
	}
}

// check inspects the table: rows in its live files, lane checkpoints.
func (r *rig) check(rows int64, lane []uint64) {
	t := r.t
	t.Helper()
	tbl, err := r.c.cat.LoadTable(t.Context(), r.c.ident)
	if err != nil {
		t.Fatal(err)
	}
	in, err := icecommit.Inspect(t.Context(), tbl, "j")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range in.Files {
		n += f.Records
	}
	if n != rows || len(in.Violations) > 0 || fmt.Sprint(in.Lanes["filesink/0"]) != fmt.Sprint(lane) {
		t.Errorf("table: %d rows, lane checkpoints %v, violations %v; want %d rows, checkpoints %v", n, in.Lanes["filesink/0"], in.Violations, rows, lane)
	}
}

// A process that stops at a named point of checkpoint 1 (before its
// decision is durable, after it, after the data file is published but
// before the Iceberg append, after the append but before the record
// bookkeeping) and a new process that recovers and finishes: the table
// holds the checkpoint's records once, in one snapshot of the lane, or
// (no decision) the records of the new run's first checkpoint, which
// takes the undecided one's id.
func TestCrashPoints(t *testing.T) {
	for _, point := range []string{"prepared:filesink/0", "decided", "committed:1", "phase2", "pruned"} {
		t.Run(point, func(t *testing.T) {
			ctx := context.Background()
			r := newRig(t)
			co, w, stop := r.process(nil, committer.WithHook(func(p string) error {
				if p == point {
					return errCrash
				}
				return nil
			}))
			r.write(w, 0, 3)
			if _, err := co.Checkpoint(ctx, json.RawMessage(`{"next":3}`), false); !errors.Is(err, errCrash) {
				t.Fatalf("checkpoint 1: %v, want the crash at %s", err, point)
			}
			stop()
			co, w, stop = r.process(nil)
			defer stop()
			last, err := recovery.Latest(ctx, mustStore(t, r.loc))
			if err != nil {
				t.Fatal(err)
			}
			want := []uint64{1, 2}
			if last == nil {
				r.write(w, 0, 3)   // the source gives them again
				want = []uint64{1} // and the undecided id is used again
			}
			r.write(w, 3, 5)
			if _, err := co.Checkpoint(ctx, json.RawMessage(`{"next":5}`), true); err != nil {
				t.Fatal(err)
			}
			r.check(5, want)
		})
	}
}

// down is the catalog when it does not answer: every call fails until
// up is set.
type down struct {
	table.CatalogIO
	mu sync.Mutex
	up bool
}

func (d *down) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.up {
		return nil
	}
	return errors.New("dial tcp 127.0.0.1:3306: connect: connection refused")
}

func (d *down) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	if err := d.err(); err != nil {
		return nil, err
	}
	tbl, err := d.CatalogIO.LoadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, d), nil
}

func (d *down) CommitTable(ctx context.Context, id table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	if err := d.err(); err != nil {
		return nil, "", err
	}
	return d.CatalogIO.CommitTable(ctx, id, reqs, ups)
}

// The catalog down at a checkpoint: phase 2 retries, then the run fails
// with the catalog's error; the checkpoint is decided, and the next run,
// with the catalog back, appends it once. A catalog back within the
// retries costs nothing.
func TestCatalogDownThenBack(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	cat := &down{CatalogIO: r.c.cat}
	co, w, stop := r.process(cat, committer.WithRetry(3, time.Millisecond))
	r.write(w, 0, 3)
	if _, err := co.Checkpoint(ctx, json.RawMessage(`{"next":3}`), false); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("checkpoint with the catalog down: %v, want its error", err)
	}
	stop()
	cat.mu.Lock()
	cat.up = true
	cat.mu.Unlock()
	co, w, stop = r.process(cat)
	r.write(w, 3, 5)
	if _, err := co.Checkpoint(ctx, json.RawMessage(`{"next":5}`), false); err != nil {
		t.Fatal(err)
	}
	r.check(5, []uint64{1, 2})

	cat.mu.Lock()
	cat.up = false
	cat.mu.Unlock()
	time.AfterFunc(50*time.Millisecond, func() { cat.mu.Lock(); cat.up = true; cat.mu.Unlock() })
	r.write(w, 5, 7)
	if _, err := co.Checkpoint(ctx, json.RawMessage(`{"next":7}`), true); err != nil {
		t.Fatalf("a catalog back within the retries: %v", err)
	}
	stop()
	r.check(7, []uint64{1, 2, 3})
}

// mustStore opens the state read-only for a look.
func mustStore(t *testing.T, loc string) recovery.Store {
	t.Helper()
	s, err := recovery.OpenDir(context.Background(), vfs.OS{}, filepath.Join(loc, "_filesink"), recovery.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
