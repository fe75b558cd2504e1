package icebergsink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

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
			c, loc := newTable(t)
			tbl, err := c.cat.LoadTable(ctx, c.ident)
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
			process := func(hook func(string) error) (*committer.Coordinator, *filesink.Writer, func()) {
				store, err := recovery.OpenDir(ctx, vfs.OS{}, filepath.Join(loc, "_filesink"))
				if err != nil {
					t.Fatal(err)
				}
				w, err := filesink.New(localfs.New(vfs.OS{}, loc), 0, filesink.WithBulkFormat(format), filesink.WithAssigner(Partitioning{}.Assigner(nil)))
				if err != nil {
					t.Fatal(err)
				}
				// A new process: a new committer to the same table.
				nc := NewCommitter(c.cat, c.ident, tbl, Partitioning{})
				nc.SetJob("j")
				opts := []committer.Option{}
				if hook != nil {
					opts = append(opts, committer.WithHook(hook))
				}
				co, err := committer.New(store, []committer.Participant{NewParticipant(w, "filesink/0", nc)}, opts...)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := co.Recover(ctx); err != nil {
					t.Fatal(err)
				}
				return co, w, func() { w.Close(); store.Close() }
			}
			write := func(w *filesink.Writer, from, to int) {
				for i := from; i < to; i++ {
					rec := fmt.Sprintf(`{"id":%d,"country":"c%d","ts":"2026-01-01T00:00:0%dZ"}`, i, i%2, i)
					if err := w.Write(ctx, []byte(rec), source.Origin{Name: "gen", Num: int64(i)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			co, w, stop := process(func(p string) error {
				if p == point {
					return errCrash
				}
				return nil
			})
			write(w, 0, 3)
			if _, err := co.Checkpoint(ctx, json.RawMessage(`{"next":3}`), false); !errors.Is(err, errCrash) {
				t.Fatalf("checkpoint 1: %v, want the crash at %s", err, point)
			}
			stop()

			co, w, stop = process(nil)
			defer stop()
			last, err := recovery.Latest(ctx, mustStore(t, loc))
			if err != nil {
				t.Fatal(err)
			}
			decided := last != nil
			if !decided {
				write(w, 0, 3) // the source gives them again
			}
			write(w, 3, 5)
			if _, err := co.Checkpoint(ctx, json.RawMessage(`{"next":5}`), true); err != nil {
				t.Fatal(err)
			}
			tbl, err = c.cat.LoadTable(ctx, c.ident)
			if err != nil {
				t.Fatal(err)
			}
			in, err := icecommit.Inspect(ctx, tbl, "j")
			if err != nil {
				t.Fatal(err)
			}
			var rows int64
			for _, f := range in.Files {
				rows += f.Records
			}
			want := []uint64{1, 2}
			if !decided {
				want = []uint64{1} // the undecided id is used again
			}
			if rows != 5 || len(in.Violations) > 0 || fmt.Sprint(in.Lanes["filesink/0"]) != fmt.Sprint(want) {
				t.Errorf("after a crash at %s (decided: %t): %d rows, lane checkpoints %v (want 5 rows, %v), violations %v",
					point, decided, rows, in.Lanes["filesink/0"], want, in.Violations)
			}
		})
	}
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
