package filesink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/filesink"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestDefaultPolicyOnEvent(t *testing.T) {
	p := filesink.DefaultPolicy{PartSize: 1000}
	tests := []struct {
		name string
		pol  filesink.DefaultPolicy
		size int64
		n    int
		want bool
	}{
		{"empty part never rolls", p, 0, 5000, false},
		{"below", p, 500, 499, false},
		{"exactly full", p, 500, 500, false},
		{"one over", p, 500, 501, true},
		{"already full", p, 1000, 1, true},
		{"already over", p, 1200, 1, true},
		{"size disabled", filesink.DefaultPolicy{}, 1 << 40, 1 << 30, false},
		{"defaults: 128 MiB", filesink.NewDefaultPolicy(), 128<<20 - 10, 10, false},
		{"defaults: 128 MiB + 1", filesink.NewDefaultPolicy(), 128<<20 - 10, 11, true},
	}
	for _, tc := range tests {
		info := filesink.PartInfo{Created: t0, LastWrite: t0, Size: tc.size}
		if got := tc.pol.OnEvent(info, tc.n); got != tc.want {
			t.Errorf("%s: OnEvent(size %d, n %d) = %v, want %v", tc.name, tc.size, tc.n, got, tc.want)
		}
	}
}

func TestDefaultPolicyOnTime(t *testing.T) {
	pol := filesink.DefaultPolicy{Rollover: time.Minute, Inactivity: 30 * time.Second}
	tests := []struct {
		name      string
		pol       filesink.DefaultPolicy
		created   time.Duration // before now
		lastWrite time.Duration // before now
		want      bool
	}{
		{"fresh", pol, 0, 0, false},
		{"young and active", pol, 59 * time.Second, 29 * time.Second, false},
		{"rollover reached", pol, time.Minute, 0, true},
		{"rollover passed", pol, 2 * time.Minute, time.Second, true},
		{"inactivity reached", pol, 40 * time.Second, 30 * time.Second, true},
		{"inactivity just before", pol, 40 * time.Second, 30*time.Second - time.Nanosecond, false},
		{"rollover just before", pol, time.Minute - time.Nanosecond, 0, false},
		{"rollover disabled", filesink.DefaultPolicy{Inactivity: time.Hour}, 24 * time.Hour, 0, false},
		{"inactivity disabled", filesink.DefaultPolicy{Rollover: time.Hour}, time.Minute, time.Minute, false},
		{"all disabled", filesink.DefaultPolicy{}, 1000 * time.Hour, 1000 * time.Hour, false},
		{"defaults: 60 s inactivity", filesink.NewDefaultPolicy(), 59 * time.Second, 59 * time.Second, false},
		{"defaults: 60 s rollover", filesink.NewDefaultPolicy(), 60 * time.Second, 0, true},
		{"defaults: 60 s inactivity reached", filesink.NewDefaultPolicy(), 60 * time.Second, 60 * time.Second, true},
		{"clock went back", pol, -time.Hour, -time.Hour, false},
	}
	for _, tc := range tests {
		now := t0.Add(2 * time.Hour)
		info := filesink.PartInfo{Created: now.Add(-tc.created), LastWrite: now.Add(-tc.lastWrite), Size: 10}
		if got := tc.pol.OnTime(info, now); got != tc.want {
			t.Errorf("%s: OnTime = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPoliciesOnCheckpoint(t *testing.T) {
	info := filesink.PartInfo{Created: t0, LastWrite: t0, Size: 1}
	if filesink.NewDefaultPolicy().OnCheckpoint(info) {
		t.Error("DefaultPolicy rolls at a checkpoint")
	}
	oc := filesink.OnCheckpointPolicy{PartSize: 100}
	if !oc.OnCheckpoint(info) || !oc.OnCheckpoint(filesink.PartInfo{}) {
		t.Error("OnCheckpointPolicy does not roll at a checkpoint")
	}
	if oc.OnTime(info, t0.Add(1000*time.Hour)) {
		t.Error("OnCheckpointPolicy rolls on time")
	}
	for _, tc := range []struct {
		pol  filesink.OnCheckpointPolicy
		size int64
		n    int
		want bool
	}{
		{oc, 0, 1000, false},
		{oc, 50, 50, false},
		{oc, 50, 51, true},
		{filesink.OnCheckpointPolicy{}, 1 << 40, 1 << 30, false},
	} {
		if got := tc.pol.OnEvent(filesink.PartInfo{Size: tc.size}, tc.n); got != tc.want {
			t.Errorf("OnCheckpointPolicy{%d}.OnEvent(%d, %d) = %v, want %v", tc.pol.PartSize, tc.size, tc.n, got, tc.want)
		}
	}
}

// recordOf returns a JSON record with id i padded to about size bytes.
func recordOf(i, size int) []byte {
	s := fmt.Sprintf(`{"id":%d,"pad":"`, i)
	pad := max(size-len(s)-2, 0)
	return []byte(s + strings.Repeat("x", pad) + `"}`)
}

func TestWriterRollsOnSize(t *testing.T) {
	ctx := context.Background()
	be, root := newLocal(t)
	const partSize, recSize, n = 1000, 99, 100 // 10 records per part
	w := newWriter(t, be, 0, filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: partSize}))
	for i := range n {
		mustWrite(t, w, recordOf(i, recSize))
	}
	snap, err := committer.PrepareNow(ctx, w, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if snap.State != nil {
		t.Errorf("final Prepare state = %s, want none", snap.State)
	}
	commitAll(t, w, snap.Committables)
	files := published(t, root)
	if len(files) != n*(recSize+1)/partSize {
		t.Errorf("%d part files, want %d: %v", len(files), n*(recSize+1)/partSize, keys(files))
	}
	for name, data := range files {
		if len(data) > partSize {
			t.Errorf("%s has %d bytes, over the part size %d", name, len(data), partSize)
		}
	}
	checkIDs(t, files, n)
}

// A record larger than the part size goes alone into a part; it is not
// split and not rejected.
func TestWriterOversizedRecord(t *testing.T) {
	be, root := newLocal(t)
	w := newWriter(t, be, 0, filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 100}))
	mustWrite(t, w, recordOf(0, 50))
	mustWrite(t, w, recordOf(1, 500))
	mustWrite(t, w, recordOf(2, 50))
	snap, err := committer.PrepareNow(context.Background(), w, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, w, snap.Committables)
	files := published(t, root)
	if len(files) != 3 {
		t.Errorf("%d files, want 3 (the big record alone): %v", len(files), keys(files))
	}
	checkIDs(t, files, 3)
}

func TestWriterTickRollsAfterInactivity(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	be, root := newLocal(t)
	w := newWriter(t, be, 0, filesink.WithClock(clk.Now),
		filesink.WithRollingPolicy(filesink.DefaultPolicy{Inactivity: time.Minute, Rollover: time.Hour}))
	mustWrite(t, w, recordOf(0, 50))
	clk.Advance(30 * time.Second)
	mustWrite(t, w, recordOf(1, 50))
	clk.Advance(59 * time.Second) // 59 s since the last write
	if err := w.Tick(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	snap := prepare(t, w, 1, false)
	if len(snap.Committables) != 0 {
		t.Fatalf("Tick before the inactivity interval rolled %d parts", len(snap.Committables))
	}
	if snap.State == nil {
		t.Fatal("the in-progress part is not in the state")
	}
	clk.Advance(time.Second) // exactly 60 s
	if err := w.Tick(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	snap = prepare(t, w, 2, false)
	if len(snap.Committables) != 1 {
		t.Fatalf("Tick after the inactivity interval: %d committables, want 1", len(snap.Committables))
	}
	if snap.State != nil {
		t.Errorf("state after the roll = %s, want none", snap.State)
	}
	commitAll(t, w, snap.Committables)
	checkIDs(t, published(t, root), 2)
	if n := w.OpenBuckets(); n != 0 {
		t.Errorf("%d open buckets after the roll and a checkpoint, want 0", n)
	}
}

func TestWriterRollsOnRolloverAtWrite(t *testing.T) {
	clk := newClock()
	be, root := newLocal(t)
	w := newWriter(t, be, 0, filesink.WithClock(clk.Now),
		filesink.WithRollingPolicy(filesink.DefaultPolicy{Rollover: time.Minute}))
	for i := range 10 {
		mustWrite(t, w, recordOf(i, 50))
		clk.Advance(20 * time.Second) // rolls before records 3, 6, 9
	}
	snap := prepare(t, w, 1, true)
	commitAll(t, w, snap.Committables)
	files := published(t, root)
	if len(files) != 4 {
		t.Errorf("%d parts, want 4 (3+3+3+1 records): %v", len(files), keys(files))
	}
	checkIDs(t, files, 10)
}

// Within a batch the Writer reads its clock once (BeginBatch), and checks
// the rolling policy's time conditions once per batch time: a batch whose
// time has not reached the rollover does not roll, however long it takes,
// and a part whose rollover fell due between two batches rolls at the
// first record of the later one.
func TestWriterRolloverInBatches(t *testing.T) {
	clk := newClock()
	be, root := newLocal(t)
	w := newWriter(t, be, 0, filesink.WithClock(clk.Now),
		filesink.WithRollingPolicy(filesink.DefaultPolicy{Rollover: time.Minute, Inactivity: time.Hour}))
	id := 0
	batch := func(n int) {
		w.BeginBatch()
		for range n {
			mustWrite(t, w, recordOf(id, 50))
			id++
			clk.Advance(10 * time.Second) // the clock moves, the batch's time does not
		}
		w.EndBatch()
	}
	batch(20) // at t0, 200 s of clock: one part
	batch(5)  // at t0+200s: the first part's rollover is past
	clk.Advance(20 * time.Second)
	batch(1) // at t0+270s: the second part, made at t0+200s, is 70 s old
	snap := prepare(t, w, 1, true)
	commitAll(t, w, snap.Committables)
	files := published(t, root)
	var sizes []int
	for _, data := range files {
		sizes = append(sizes, strings.Count(string(data), "\n"))
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{1, 5, 20}) {
		t.Errorf("records per part %v, want [1 5 20]", sizes)
	}
	checkIDs(t, files, id)
}

// Records written inside a batch are added to Stats at its EndBatch; outside
// a batch, at once.
func TestWriterStatsOfBatches(t *testing.T) {
	be, _ := newLocal(t)
	w := newWriter(t, be, 0)
	mustWrite(t, w, recordOf(0, 50))
	st := w.Stats()
	one := st.Bytes.Load()
	if st.Records.Load() != 1 || one <= 0 {
		t.Fatalf("after one write outside a batch: %d records, %d bytes", st.Records.Load(), one)
	}
	w.BeginBatch()
	for i := 1; i <= 3; i++ {
		mustWrite(t, w, recordOf(i, 50))
	}
	if got := st.Records.Load(); got != 1 {
		t.Errorf("inside a batch: %d records counted, want 1 (the batch's come at EndBatch)", got)
	}
	w.EndBatch()
	if got, gotB := st.Records.Load(), st.Bytes.Load(); got != 4 || gotB != 4*one {
		t.Errorf("after EndBatch: %d records and %d bytes, want 4 and %d", got, gotB, 4*one)
	}
	w.EndBatch() // nothing more to add
	if got := st.Records.Load(); got != 4 {
		t.Errorf("after a second EndBatch: %d records, want 4", got)
	}
}

func TestWriterCheckpointRolling(t *testing.T) {
	tests := []struct {
		name     string
		policy   filesink.RollingPolicy
		wantRoll bool
	}{
		{"default keeps the part", filesink.NewDefaultPolicy(), false},
		{"on-checkpoint rolls", filesink.OnCheckpointPolicy{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			be, root := newLocal(t)
			w := newWriter(t, be, 0, filesink.WithRollingPolicy(tc.policy))
			for i := range 5 {
				mustWrite(t, w, recordOf(i, 40))
			}
			snap := prepare(t, w, 1, false)
			parts := stateParts(t, snap.State)
			if tc.wantRoll {
				if len(snap.Committables) != 1 || len(parts) != 0 {
					t.Fatalf("committables %d, state parts %d; want 1, 0", len(snap.Committables), len(parts))
				}
				commitAll(t, w, snap.Committables)
				checkIDs(t, published(t, root), 5)
				return
			}
			if len(snap.Committables) != 0 || len(parts) != 1 {
				t.Fatalf("committables %d, state parts %d; want 0, 1", len(snap.Committables), len(parts))
			}
			// The state records the durable length of the in-progress file.
			var rec struct {
				Target, Staging string
				Length          int64
			}
			if err := json.Unmarshal(parts[0].Part, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Length != 5*41 {
				t.Errorf("state records %d bytes, want %d", rec.Length, 5*41)
			}
			if data := readFile(t, root, rec.Staging); len(data) != 5*41 {
				t.Errorf("in-progress file has %d bytes, want %d", len(data), 5*41)
			}
			if len(published(t, root)) != 0 {
				t.Errorf("something was published before the final checkpoint")
			}
			// More records go to the same part; the final Prepare closes it.
			mustWrite(t, w, recordOf(5, 40))
			snap = prepare(t, w, 2, true)
			if snap.State != nil || len(snap.Committables) != 1 {
				t.Fatalf("final Prepare: state %s, %d committables; want none, 1", snap.State, len(snap.Committables))
			}
			if w.OpenBuckets() != 0 {
				t.Errorf("%d open buckets after a final Prepare", w.OpenBuckets())
			}
			commitAll(t, w, snap.Committables)
			files := published(t, root)
			if len(files) != 1 {
				t.Errorf("%d files, want 1", len(files))
			}
			if _, ok := files[rec.Target]; !ok {
				t.Errorf("published %v, want the in-progress part %s", keys(files), rec.Target)
			}
			checkIDs(t, files, 6)
		})
	}
}

// Committables of rolled parts are handed out by exactly one Prepare.
func TestWriterCommittablesReturnedOnce(t *testing.T) {
	be, _ := newLocal(t)
	w := newWriter(t, be, 0, filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 200}))
	for i := range 10 {
		mustWrite(t, w, recordOf(i, 99)) // two records per part
	}
	s1 := prepare(t, w, 1, false)
	if len(s1.Committables) != 4 {
		t.Fatalf("first Prepare: %d committables, want 4", len(s1.Committables))
	}
	s2 := prepare(t, w, 2, false)
	if len(s2.Committables) != 0 {
		t.Fatalf("second Prepare returned %d committables again", len(s2.Committables))
	}
	s3 := prepare(t, w, 3, true)
	if len(s3.Committables) != 1 {
		t.Fatalf("final Prepare: %d committables, want 1", len(s3.Committables))
	}
	s4 := prepare(t, w, 4, true)
	if len(s4.Committables) != 0 || s4.State != nil {
		t.Fatalf("Prepare after final: %d committables, state %s", len(s4.Committables), s4.State)
	}
	seen := map[string]bool{}
	for _, c := range append(s1.Committables, s3.Committables...) {
		if seen[string(c)] {
			t.Errorf("committable %s returned twice", c)
		}
		seen[string(c)] = true
	}
}
