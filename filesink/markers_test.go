package filesink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/source"
)

// TestMarkers: two subtasks write hourly processing-time buckets; a bucket
// gets its _SUCCESS only once its hour (plus the lateness) is over and no
// subtask has an open part in it, and the marker lists the files of both
// subtasks. A second Markers (a restarted job) finds the marker written.
// The same with an output that records its ListMetaAfter calls: after the
// first checkpoint the markers list only the manifests of newer
// checkpoints.
func TestMarkers(t *testing.T) {
	t.Run("list", func(t *testing.T) {
		testMarkers(t, func(be *localfs.Backend) driver.Backend { return be })
	})
	t.Run("list-after", func(t *testing.T) {
		var out *afterLister
		testMarkers(t, func(be *localfs.Backend) driver.Backend {
			if out == nil {
				out = &afterLister{Backend: be}
			}
			return out
		})
		// The first Markers' two checkpoints after its first, and none of
		// the restarted one's (its first call lists every manifest).
		if len(out.afters) != 2 {
			t.Fatalf("ListMetaAfter called %d times (%v), want 2", len(out.afters), out.afters)
		}
		for i, a := range out.afters {
			if want := fmt.Sprintf("%s/%020d~", filesink.ManifestDir, i+1); a != want {
				t.Errorf("call %d listed after %q, want %q", i, a, want)
			}
		}
	})
}

// afterLister is a localfs backend that records the names it was asked
// to list after.
type afterLister struct {
	*localfs.Backend
	afters []string
}

func (a *afterLister) ListMetaAfter(ctx context.Context, dir, after string) ([]string, error) {
	a.afters = append(a.afters, after)
	names, err := a.ListMeta(ctx, dir)
	return slices.DeleteFunc(names, func(n string) bool { return n <= after }), err
}

func testMarkers(t *testing.T, output func(*localfs.Backend) driver.Backend) {
	ctx := context.Background()
	be, root := newLocal(t)
	clock := newClock() // t0
	assign := bucketing.DateTime("2006-01-02--15", time.UTC)
	var ws []*filesink.Writer
	var parts []committer.Participant
	for i := range 2 {
		w := newWriter(t, be, i, filesink.WithAssigner(assign), filesink.WithClock(clock.Now),
			filesink.WithRollingPolicy(filesink.OnCheckpointPolicy{}))
		ws = append(ws, w)
		parts = append(parts, w)
	}
	coord, store := newCoordinator(t, root, parts...)
	m := &filesink.Markers{Output: output(be), Assigner: assign.(bucketing.Windowed), Lateness: 10 * time.Minute}
	n := int64(0)
	write := func(w *filesink.Writer) {
		n++
		if err := w.Write(ctx, []byte(`{"n":1}`), source.Origin{Name: "gen", Num: n}); err != nil {
			t.Fatal(err)
		}
	}
	checkpoint := func() {
		t.Helper()
		id, err := coord.Checkpoint(ctx, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		// The record's time is the watermark: the fake clock's.
		rec.Time = clock.Now()
		if err := m.Checkpointed(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	bucket := t0.UTC().Format("2006-01-02--15")
	marker := filepath.Join(root, bucket, filesink.SuccessFile)
	write(ws[0])
	write(ws[1])
	checkpoint()
	write(ws[0])
	clock.Advance(time.Hour) // the next hour; the bucket's end is past, not its lateness
	checkpoint()
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("marker written within the allowed lateness")
	}
	clock.Advance(11 * time.Minute)
	write(ws[1]) // into the next hour's bucket
	checkpoint()
	data, err := os.ReadFile(marker)
	if err != nil {
		t.Fatalf("no marker once the bucket closed: %v", err)
	}
	var got struct {
		Bucket string
		Files  []string
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(root, bucket))
	var want []string
	for _, e := range ents {
		if e.Name()[0] != '_' && e.Name()[0] != '.' {
			want = append(want, e.Name())
		}
	}
	if got.Bucket != bucket || !slices.Equal(got.Files, want) || len(want) != 3 {
		t.Errorf("marker %s lists %v, want the bucket's 3 files %v", bucket, got, want)
	}
	next := clock.Now().UTC().Format("2006-01-02--15")
	if _, err := os.Stat(filepath.Join(root, next, filesink.SuccessFile)); err == nil {
		t.Errorf("the open hour %s has a marker", next)
	}
	// A restarted job reads every manifest again and leaves the marker.
	m2 := &filesink.Markers{Output: output(be), Assigner: assign.(bucketing.Windowed), Lateness: 10 * time.Minute}
	id, err := coord.Checkpoint(ctx, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := store.Get(ctx, id)
	rec.Time = clock.Now()
	if err := m2.Checkpointed(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(marker); string(again) != string(data) {
		t.Errorf("the marker changed after a restart:\n%s\n%s", data, again)
	}
}
