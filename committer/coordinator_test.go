package committer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/vfs"
)

// world is what survives a crash: the published output.
type world struct {
	published []string // in publish order
	fails     map[string]int
}

// fake is a participant whose committables are strings; each Prepare emits
// one committable "<name>@<id>" unless final with no data.
type fake struct {
	committer.NopPostCommit
	name    string
	w       *world
	state   string
	commits []string
}

func (f *fake) Name() string { return f.name }
func (f *fake) Prepare(_ context.Context, id uint64, final bool) (committer.Wait, error) {
	return committer.Ready(f.snapshot(id)), nil
}
func (f *fake) snapshot(id uint64) committer.Snapshot {
	c, _ := json.Marshal(fmt.Sprintf("%s@%d", f.name, id))
	st, _ := json.Marshal(fmt.Sprintf("state@%d", id))
	return committer.Snapshot{State: st, Committables: []json.RawMessage{c}}
}
func (f *fake) Commit(_ context.Context, c json.RawMessage) error {
	var s string
	json.Unmarshal(c, &s)
	if f.w.fails[s] > 0 {
		f.w.fails[s]--
		return errors.New("transient")
	}
	f.commits = append(f.commits, s)
	if !slices.Contains(f.w.published, s) {
		f.w.published = append(f.w.published, s)
	}
	return nil
}
func (f *fake) Restore(_ context.Context, st json.RawMessage) error {
	f.state = string(st)
	return nil
}
func (f *fake) Sweep(context.Context, []*recovery.Checkpoint) (committer.Swept, error) {
	return nil, nil
}

func newCoord(t *testing.T, store recovery.Store, w *world, opts ...committer.Option) (*committer.Coordinator, []*fake) {
	t.Helper()
	fs := []*fake{{name: "a", w: w}, {name: "b", w: w}}
	c, err := committer.New(store, []committer.Participant{fs[0], fs[1]}, append([]committer.Option{committer.WithRetry(3, time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, fs
}

func newStore(t *testing.T) recovery.Store {
	s, err := recovery.OpenDir(context.Background(), vfs.OS{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheckpointsPublishInOrder(t *testing.T) {
	ctx := context.Background()
	w := &world{}
	c, _ := newCoord(t, newStore(t), w)
	if r, err := c.Recover(ctx); r != nil || err != nil {
		t.Fatalf("fresh Recover = %v, %v", r, err)
	}
	for range 3 {
		if _, err := c.Checkpoint(ctx, json.RawMessage(`1`), false); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"a@1", "b@1", "a@2", "b@2", "a@3", "b@3"}
	if !slices.Equal(w.published, want) {
		t.Fatalf("published %v, want %v", w.published, want)
	}
}

// Invariant 7: a lost notification is made up by the next commit, in order;
// a late or duplicate commit is a no-op.
func TestLostNotification(t *testing.T) {
	ctx := context.Background()
	w := &world{}
	c, fs := newCoord(t, newStore(t), w)
	c.Recover(ctx)
	id1, err := c.Prepare(ctx, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	id2, err := c.Prepare(ctx, nil, false) // the commit of id1 never came
	if err != nil {
		t.Fatal(err)
	}
	if len(w.published) != 0 {
		t.Fatalf("published before any commit: %v", w.published)
	}
	if err := c.Commit(ctx, id2); err != nil {
		t.Fatal(err)
	}
	want := []string{"a@1", "b@1", "a@2", "b@2"}
	if !slices.Equal(w.published, want) {
		t.Fatalf("published %v, want %v", w.published, want)
	}
	n := len(fs[0].commits)
	if err := c.Commit(ctx, id1); err != nil { // late notification
		t.Fatal(err)
	}
	if err := c.Commit(ctx, id2); err != nil { // duplicate notification
		t.Fatal(err)
	}
	if len(fs[0].commits) != n {
		t.Fatalf("late/duplicate commit ran Commit again: %v", fs[0].commits)
	}
	if err := c.Commit(ctx, id2+1); err == nil {
		t.Fatal("commit of an undecided checkpoint accepted")
	}
}

// Crash at every named point of a checkpoint and of recovery itself, then
// recover (twice in a row from the same record where the first recovery
// crashes too): everything decided is published exactly once, nothing
// undecided is published.
func TestCrashAtEveryPoint(t *testing.T) {
	ctx := context.Background()
	points := []string{"prepared:a", "prepared:b", "phase1", "decided", "committed:1", "committed:2", "committed:3", "committed:4", "phase2", "pruned"}
	for _, p := range points {
		for _, recoverCrash := range []string{"", "recover:committed:1", "recover:restored", "recover:swept"} {
			t.Run(p+"/"+recoverCrash, func(t *testing.T) {
				w := &world{}
				store := newStore(t)
				c, _ := newCoord(t, store, w)
				c.Recover(ctx)
				if _, err := c.Checkpoint(ctx, nil, false); err != nil {
					t.Fatal(err)
				}
				// A new run: checkpoint 2 is decided but its commit is lost,
				// then checkpoint 3 crashes at p, so that its phase 2 has
				// the committables of two checkpoints.
				crash := errors.New("crash")
				armed := false
				cc, _ := newCoord(t, store, w, committer.WithHook(func(at string) error {
					if armed && at == p {
						return crash
					}
					return nil
				}))
				if _, err := cc.Recover(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := cc.Prepare(ctx, nil, false); err != nil {
					t.Fatal(err)
				}
				armed = true
				if _, err := cc.Checkpoint(ctx, nil, false); !errors.Is(err, crash) {
					t.Fatalf("checkpoint 3 did not crash at %s: %v", p, err)
				}
				if _, err := cc.Checkpoint(ctx, nil, false); err == nil {
					t.Fatal("a crashed coordinator accepted another checkpoint")
				}
				decided := p == "decided" || strings.HasPrefix(p, "committed") || p == "phase2" || p == "pruned"
				if recoverCrash != "" {
					rc, _ := newCoord(t, store, w, committer.WithHook(func(at string) error {
						if at == recoverCrash {
							return crash
						}
						return nil
					}))
					if _, err := rc.Recover(ctx); !errors.Is(err, crash) {
						t.Fatalf("recovery did not crash at %s: %v", recoverCrash, err)
					}
				}
				final, _ := newCoord(t, store, w)
				r, err := final.Recover(ctx)
				if err != nil {
					t.Fatal(err)
				}
				want := []string{"a@1", "b@1", "a@2", "b@2"}
				wantID := uint64(2)
				if decided {
					want = append(want, "a@3", "b@3")
					wantID = 3
				}
				if r.ID != wantID {
					t.Fatalf("restored checkpoint %d, want %d", r.ID, wantID)
				}
				if !slices.Equal(w.published, want) {
					t.Fatalf("published %v, want %v", w.published, want)
				}
				if got := final.NextID(); got != wantID+1 {
					t.Fatalf("next id %d, want %d", got, wantID+1)
				}
			})
		}
	}
}

func TestRetryTransientNotPermanent(t *testing.T) {
	ctx := context.Background()
	w := &world{fails: map[string]int{"a@1": 2}}
	c, _ := newCoord(t, newStore(t), w)
	c.Recover(ctx)
	if _, err := c.Checkpoint(ctx, nil, false); err != nil {
		t.Fatalf("two transient failures with 3 attempts: %v", err)
	}
	w.fails = map[string]int{"a@2": 5}
	_, err := c.Checkpoint(ctx, nil, false)
	var ce *committer.CommitError
	if !errors.As(err, &ce) || ce.Checkpoint != 2 || ce.Participant != "a" {
		t.Fatalf("persistent failure: %v", err)
	}
	if w.fails["a@2"] != 2 {
		t.Fatalf("made %d attempts, want 3", 5-w.fails["a@2"])
	}
	if !committer.IsPermanent(fmt.Errorf("x: %w", committer.ErrDataLoss)) || committer.IsPermanent(errors.New("x")) {
		t.Fatal("IsPermanent misclassifies")
	}
}

func TestParticipantMismatch(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	w := &world{}
	c, _ := newCoord(t, store, w)
	c.Recover(ctx)
	c.Checkpoint(ctx, nil, false)
	one, _ := committer.New(store, []committer.Participant{&fake{name: "a", w: w}})
	if _, err := one.Recover(ctx); !errors.Is(err, committer.ErrParticipantMismatch) {
		t.Fatalf("recover with fewer participants: %v", err)
	}
}

// sweepCounter counts sweeps; the rest is fake's.
type sweepCounter struct {
	fake
	sweeps int
}

func (s *sweepCounter) Sweep(context.Context, []*recovery.Checkpoint) (committer.Swept, error) {
	s.sweeps++
	return nil, nil
}

func TestSweepEvery(t *testing.T) {
	ctx := context.Background()
	w := &world{}
	p := &sweepCounter{fake: fake{name: "a", w: w}}
	c, err := committer.New(newStore(t), []committer.Participant{p}, committer.WithSweepEvery(3))
	if err != nil {
		t.Fatal(err)
	}
	c.Recover(ctx) // sweep 1
	for range 7 {
		if _, err := c.Checkpoint(ctx, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	// checkpoints 3 and 6
	if p.sweeps != 3 {
		t.Fatalf("%d sweeps after recovery and 7 checkpoints with every=3, want 3", p.sweeps)
	}
	if _, err := c.Checkpoint(ctx, nil, true); err != nil { // 8, final
		t.Fatal(err)
	}
	if p.sweeps != 4 {
		t.Fatalf("final checkpoint did not sweep: %d sweeps", p.sweeps)
	}
}

// askingSweeper is a sweepCounter whose snapshots ask for a sweep every
// `every` checkpoints (Snapshot.SweepEvery), as the file sink on S3 does.
type askingSweeper struct {
	sweepCounter
	every int
}

func (s *askingSweeper) Prepare(ctx context.Context, id uint64, final bool) (committer.Wait, error) {
	snap := s.snapshot(id)
	snap.SweepEvery = s.every
	return committer.Ready(snap), nil
}

// TestSweepAskedBySnapshot: a participant that declares in its snapshots
// that its staging outlives commits gets sweeps while the job runs without
// WithSweepEvery; with it too, the smaller interval wins.
func TestSweepAskedBySnapshot(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		option, asked, want int
	}{
		{0, 3, 1 + 2},   // recovery, checkpoints 3 and 6
		{2, 3, 1 + 3},   // recovery, checkpoints 2, 4 and 6
		{0, 0, 1},       // recovery only
		{5, 0, 1 + 1},   // recovery and checkpoint 5
		{4, 100, 1 + 1}, // recovery and checkpoint 4
	} {
		w := &world{}
		p := &askingSweeper{sweepCounter: sweepCounter{fake: fake{name: "a", w: w}}, every: tc.asked}
		c, err := committer.New(newStore(t), []committer.Participant{p}, committer.WithSweepEvery(tc.option))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		for range 7 {
			if _, err := c.Checkpoint(ctx, nil, false); err != nil {
				t.Fatal(err)
			}
		}
		if p.sweeps != tc.want {
			t.Errorf("WithSweepEvery(%d), snapshots asking every %d: %d sweeps after recovery and 7 checkpoints, want %d",
				tc.option, tc.asked, p.sweeps, tc.want)
		}
	}
}

// asyncFake is a fake whose phase 1 completes only when its gate opens.
type asyncFake struct {
	*fake
	gate chan struct{}
}

func (f *asyncFake) Prepare(ctx context.Context, id uint64, final bool) (committer.Wait, error) {
	snap := f.snapshot(id)
	return func(ctx context.Context) (committer.Snapshot, error) {
		select {
		case <-f.gate:
			return snap, nil
		case <-ctx.Done():
			return committer.Snapshot{}, ctx.Err()
		}
	}, nil
}

// Begin takes the barrier; Decide waits for the asynchronous phase 1 and
// writes the record; nothing else runs in between.
func TestBeginDecide(t *testing.T) {
	ctx := context.Background()
	w := &world{}
	store := newStore(t)
	a := &asyncFake{fake: &fake{name: "a", w: w}, gate: make(chan struct{})}
	b := &fake{name: "b", w: w}
	c, err := committer.New(store, []committer.Participant{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	ph, err := c.Begin(ctx, json.RawMessage(`7`), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Begin(ctx, nil, false); err == nil {
		t.Fatal("a second Begin before Decide succeeded")
	}
	if err := c.Commit(ctx, 0); err == nil {
		t.Fatal("Commit while a checkpoint is begun succeeded")
	}
	// Not decided while the participant's phase 1 runs.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := ph.Decide(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Decide before phase 1 completed: %v", err)
	}
	if recs, err := recovery.Retained(ctx, store); err != nil || len(recs) != 0 {
		t.Fatalf("records after an unfinished phase 1: %v, %v", recs, err)
	}
	// The failed Decide broke the coordinator; a new one recovers and runs
	// the protocol with the gate open.
	close(a.gate)
	c, err = committer.New(store, []committer.Participant{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	ph, err = c.Begin(ctx, json.RawMessage(`8`), false)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ph.Decide(ctx)
	if err != nil || id != ph.ID() {
		t.Fatalf("Decide = %d, %v; want %d", id, err, ph.ID())
	}
	if _, err := ph.Decide(ctx); err == nil {
		t.Fatal("a second Decide of the same checkpoint succeeded")
	}
	if err := c.Commit(ctx, id); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("a@%d", id), fmt.Sprintf("b@%d", id)}
	if !slices.Equal(w.published, want) {
		t.Fatalf("published %v, want %v", w.published, want)
	}
}

// manifester is a fake with a CommittedCheckpoint of its own:
// it records, per checkpoint, the committables it was told about, and
// checks that each of them was published before.
type manifester struct {
	fake
	manifests map[uint64][]string
	early     []string
}

func (m *manifester) CommittedCheckpoint(_ context.Context, id uint64, committables []json.RawMessage) error {
	var got []string
	for _, c := range committables {
		var s string
		json.Unmarshal(c, &s)
		if !slices.Contains(m.w.published, s) {
			m.early = append(m.early, s)
		}
		got = append(got, s)
	}
	if prev, ok := m.manifests[id]; ok && !slices.Equal(prev, got) {
		return fmt.Errorf("checkpoint %d: manifest %v, then %v", id, prev, got)
	}
	m.manifests[id] = got
	return nil
}

// TestPostCommitAfterEveryCrash: a crash at any point of phase 2,
// including right after a CommittedCheckpoint call, or during the recovery
// that follows, still gives every decided checkpoint exactly one manifest
// listing exactly its committables, written after all of them were
// published.
func TestPostCommitAfterEveryCrash(t *testing.T) {
	ctx := context.Background()
	points := []string{"committed:1", "checkpoint-committed:m", "committed:2", "phase2"}
	for _, p := range points {
		for _, recoverCrash := range []string{"", "recover:committed:1", "recover:checkpoint-committed:m"} {
			t.Run(p+"/"+recoverCrash, func(t *testing.T) {
				w := &world{}
				store := newStore(t)
				manifests := map[uint64][]string{}
				mk := func(hook func(string) error) (*committer.Coordinator, *manifester) {
					m := &manifester{fake: fake{name: "m", w: w}, manifests: manifests}
					opts := []committer.Option{committer.WithRetry(3, time.Millisecond)}
					if hook != nil {
						opts = append(opts, committer.WithHook(hook))
					}
					c, err := committer.New(store, []committer.Participant{m}, opts...)
					if err != nil {
						t.Fatal(err)
					}
					return c, m
				}
				crash := errors.New("crash")
				c, _ := mk(nil)
				if _, err := c.Recover(ctx); err != nil {
					t.Fatal(err)
				}
				// Checkpoint 1's phase 2 is lost: checkpoint 2's phase 2
				// publishes the committables of two checkpoints.
				if _, err := c.Prepare(ctx, nil, false); err != nil {
					t.Fatal(err)
				}
				armed := false
				c, _ = mk(func(at string) error {
					if armed && at == p {
						return crash
					}
					return nil
				})
				c.Recover(ctx)
				if _, err := c.Prepare(ctx, nil, false); err != nil {
					t.Fatal(err)
				}
				armed = true
				if _, err := c.Checkpoint(ctx, nil, false); !errors.Is(err, crash) {
					t.Fatalf("no crash at %s: %v", p, err)
				}
				if recoverCrash != "" {
					rc, _ := mk(func(at string) error {
						if at == recoverCrash {
							return crash
						}
						return nil
					})
					if _, err := rc.Recover(ctx); !errors.Is(err, crash) {
						t.Fatalf("recovery did not crash at %s: %v", recoverCrash, err)
					}
				}
				final, m := mk(nil)
				if _, err := final.Recover(ctx); err != nil {
					t.Fatal(err)
				}
				want := map[uint64][]string{1: {"m@1"}, 2: {"m@2"}, 3: {"m@3"}}
				if fmt.Sprint(manifests) != fmt.Sprint(want) {
					t.Errorf("manifests %v, want %v", manifests, want)
				}
				if len(m.early) > 0 {
					t.Errorf("manifests named %v before they were published", m.early)
				}
			})
		}
	}
}

// countingStore counts the listings and reads of a store.
type countingStore struct {
	recovery.Store
	lists, gets int
}

func (s *countingStore) List(ctx context.Context) ([]uint64, error) {
	s.lists++
	return s.Store.List(ctx)
}

func (s *countingStore) Get(ctx context.Context, id uint64) (*recovery.Checkpoint, error) {
	s.gets++
	return s.Store.Get(ctx, id)
}

// sweepSpy records, at each sweep, the retained records it was given and
// what the store held at that moment.
type sweepSpy struct {
	fake
	store        recovery.Store
	given, there [][]uint64
	mismatch     []string
}

func (s *sweepSpy) Sweep(ctx context.Context, retained []*recovery.Checkpoint) (committer.Swept, error) {
	var ids []uint64
	for _, r := range retained {
		ids = append(ids, r.ID)
		stored, err := s.store.Get(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		a, _ := json.Marshal(r)
		b, _ := json.Marshal(stored)
		if string(a) != string(b) {
			s.mismatch = append(s.mismatch, fmt.Sprintf("record %d: given %s, stored %s", r.ID, a, b))
		}
	}
	there, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	s.given, s.there = append(s.given, ids), append(s.there, there)
	return nil, nil
}

// TestPruneAndSweepWithoutListing: after Recover, checkpoints prune and
// sweep from the records the coordinator wrote, without listing or reading
// the store again; the records a sweep gets are exactly those in the store,
// with the stored content, and pruning keeps the newest three.
func TestPruneAndSweepWithoutListing(t *testing.T) {
	ctx := context.Background()
	inner := newStore(t)
	store := &countingStore{Store: inner}
	spy := &sweepSpy{fake: fake{name: "a", w: &world{}}, store: inner}
	c, err := committer.New(store, []committer.Participant{spy}, committer.WithSweepEvery(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	lists, gets := store.lists, store.gets
	for i := range 7 {
		if _, err := c.Checkpoint(ctx, json.RawMessage(fmt.Sprint(i)), i == 6); err != nil {
			t.Fatal(err)
		}
	}
	if store.lists != lists || store.gets != gets {
		t.Errorf("checkpoints listed the store %d times and read %d records", store.lists-lists, store.gets-gets)
	}
	// The recovery sweep, then after checkpoints 2, 4, 6 and the final 7.
	if len(spy.given) != 5 {
		t.Fatalf("%d sweeps, want 5: %v", len(spy.given), spy.given)
	}
	for i := range spy.given {
		if !slices.Equal(spy.given[i], spy.there[i]) {
			t.Errorf("sweep %d got records %v, the store held %v", i, spy.given[i], spy.there[i])
		}
	}
	if want := []uint64{5, 6, 7}; !slices.Equal(spy.given[4], want) {
		t.Errorf("last sweep got %v, want %v", spy.given[4], want)
	}
	for _, m := range spy.mismatch {
		t.Error(m)
	}
}

// sweeper is a fake whose sweeps report one orphan of kind "thing".
type sweeper struct{ fake }

func (s *sweeper) Sweep(context.Context, []*recovery.Checkpoint) (committer.Swept, error) {
	return committer.Swept{"thing": 1}, nil
}

// TestEvents: the event stream reports every step of recovery and of each
// checkpoint, in order, with the failed commit attempts and the sweeps'
// counts.
func TestEvents(t *testing.T) {
	ctx := context.Background()
	w := &world{fails: map[string]int{"a@2": 2}}
	var got []string
	ev := committer.EventListener{
		CheckpointBegun: func(i committer.CheckpointBegunInfo) { got = append(got, fmt.Sprintf("begun %d %v", i.ID, i.Final)) },
		Phase1Done:      func(i committer.Phase1Info) { got = append(got, fmt.Sprintf("phase1 %d", i.ID)) },
		Decided:         func(i committer.DecidedInfo) { got = append(got, fmt.Sprintf("decided %d (%d)", i.ID, i.Committables)) },
		Committed: func(i committer.CommittedInfo) {
			got = append(got, fmt.Sprintf("committed %d %v timed=%v", i.ID, i.Final, i.Total >= i.Phase2 && i.Total > 0))
		},
		CommitFailed: func(i committer.CommitFailedInfo) {
			got = append(got, fmt.Sprintf("failed %d %s #%d retry=%v recovery=%v", i.Checkpoint, i.Participant, i.Attempt, i.Retry, i.Recovery))
		},
		Swept: func(i committer.SweptInfo) {
			got = append(got, fmt.Sprintf("swept %s %v recovery=%v", i.Participant, map[string]int64(i.Swept), i.Recovery))
		},
		Recovered: func(i committer.RecoveredInfo) {
			got = append(got, fmt.Sprintf("recovered %d (%d)", i.Checkpoint, i.Recommitted))
		},
	}
	clock := time.Unix(0, 0)
	tick := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	a, b := &fake{name: "a", w: w}, &sweeper{fake{name: "b", w: w}}
	store := newStore(t)
	c, err := committer.New(store, []committer.Participant{a, b}, committer.WithRetry(2, time.Millisecond),
		committer.WithEventListener(ev), committer.WithClock(tick), committer.WithSweepEvery(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Checkpoint(ctx, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Checkpoint(ctx, nil, true); err == nil {
		t.Fatal("a commit failing every attempt succeeded")
	}
	// A new coordinator recovers checkpoint 2 and publishes a@2 and b@2.
	c, err = committer.New(store, []committer.Participant{a, b}, committer.WithEventListener(ev))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"swept a map[] recovery=true", "swept b map[thing:1] recovery=true", "recovered 0 (0)",
		"begun 1 false", "phase1 1", "decided 1 (2)", "committed 1 false timed=true",
		"begun 2 true", "phase1 2", "decided 2 (2)",
		"failed 2 a #1 retry=true recovery=false", "failed 2 a #2 retry=false recovery=false",
		"swept a map[] recovery=true", "swept b map[thing:1] recovery=true", "recovered 2 (2)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestOptionsValidated: New rejects invalid options, each naming itself.
func TestOptionsValidated(t *testing.T) {
	store, w := newStore(t), &world{}
	parts := []committer.Participant{&fake{name: "a", w: w}}
	for _, tc := range []struct {
		opt  committer.Option
		want string
	}{
		{committer.WithRetain(0), "WithRetain"},
		{committer.WithRetry(0, time.Second), "WithRetry"},
		{committer.WithRetry(3, -time.Second), "WithRetry"},
		{committer.WithSweepEvery(-1), "WithSweepEvery"},
		{committer.WithClock(nil), "WithClock"},
		{committer.WithLogger(nil), "WithLogger"},
	} {
		if _, err := committer.New(store, parts, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with an invalid %s: %v", tc.want, err)
		}
	}
	if _, err := committer.New(store, parts, committer.WithRetain(1), committer.WithRetry(1, 0), committer.WithSweepEvery(0)); err != nil {
		t.Errorf("New with valid options: %v", err)
	}
}
