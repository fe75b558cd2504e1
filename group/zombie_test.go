package group_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
)

// The deterministic zombie cases run one lane's pipeline as two owners
// would: A, paused at a named point of its checkpoint, and B, which takes
// the lane over meanwhile (as the group would after A's session expired)
// and runs it to the end. The source is the generator, so the records and
// their ids are known.

const zombieRecords = 3000

type laneEnv struct {
	t      *testing.T
	client *s3api.Client
	bucket string
	st     *s3.Store
	be     *s3.Backend
}

func newLaneEnv(t *testing.T) *laneEnv {
	srv := minio.Shared(t)
	e := &laneEnv{t: t, client: srv.Client(t), bucket: srv.NewBucket(t)}
	var err error
	if e.st, err = s3.NewStore(e.client, e.bucket, "out/_filesink"); err != nil {
		t.Fatal(err)
	}
	if e.be, err = s3.New(e.client, e.bucket, "out", s3.WithMaxParts(s3.MaxParts-1)); err != nil {
		t.Fatal(err)
	}
	return e
}

// owner runs the lane as one process with generation gen; hook is the
// coordinator's hook.
func (e *laneEnv) owner(ctx context.Context, gen int32, member string, stop chan struct{}, hook func(string) error) (*s3.LaneStore, *s3.LaneHead, func() (pipeline.Result, error)) {
	e.t.Helper()
	return e.ownerWith(ctx, gen, member, stop, hook, filesink.OnCheckpointPolicy{})
}

// ownerWith is owner with the file sink's rolling policy.
func (e *laneEnv) ownerWith(ctx context.Context, gen int32, member string, stop chan struct{}, hook func(string) error,
	policy filesink.RollingPolicy) (*s3.LaneStore, *s3.LaneHead, func() (pipeline.Result, error)) {
	e.t.Helper()
	ls := s3.NewLaneStore(e.st, "t", 0)
	head, err := ls.Acquire(ctx, s3.LaneOwner{Member: member, Generation: gen, Host: "test", PID: 1, RunID: member},
		func() *recovery.Checkpoint { return &recovery.Checkpoint{ID: 0, Source: json.RawMessage(`{"next":0}`)} })
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := filesink.New(e.be, 0, filesink.WithPrefix(fmt.Sprintf("part-t.0-e%d", head.Epoch)),
		filesink.WithRollingPolicy(policy), filesink.WithBufferBudget(1<<20),
		filesink.WithManifestWriter("part-t.0"), filesink.WithFinalizeOnRestore())
	if err != nil {
		e.t.Fatal(err)
	}
	opts := []committer.Option{committer.WithRetain(1)}
	if hook != nil {
		opts = append(opts, committer.WithHook(hook))
	}
	cfg := pipeline.Config{
		Store: ls, Sinks: []pipeline.Sink{w}, Stop: stop,
		OpenSource: func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
			return source.Open(ctx, "gen://?count="+strconv.Itoa(zombieRecords)+"&size=64", pos)
		},
		CheckpointEvery: 500, CheckpointInterval: time.Hour, BatchSize: 100,
		CommitterOptions: opts,
	}
	return ls, head, func() (pipeline.Result, error) { return pipeline.Run(ctx, cfg) }
}

// published returns how many times each generator id is in the visible
// files, and the visible files' names.
func (e *laneEnv) published(ctx context.Context) (map[int]int, []string) {
	e.t.Helper()
	ids := map[int]int{}
	names := visibleKeys(ctx, e.t, e.client, e.bucket)
	for _, key := range names {
		out, err := e.client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &e.bucket, Key: &key})
		if err != nil {
			e.t.Fatal(err)
		}
		dec := json.NewDecoder(out.Body)
		for {
			var r struct{ ID int }
			err := dec.Decode(&r)
			if err == io.EOF {
				break
			}
			if err != nil {
				e.t.Fatalf("%s: %v", key, err)
			}
			ids[r.ID]++
		}
		out.Body.Close()
	}
	return ids, names
}

func (e *laneEnv) exactlyOnce(ctx context.Context) []string {
	e.t.Helper()
	ids, names := e.published(ctx)
	for i := range zombieRecords {
		if ids[i] != 1 {
			e.t.Fatalf("record %d is published %d times", i, ids[i])
		}
	}
	if len(ids) != zombieRecords {
		e.t.Fatalf("%d distinct records published, want %d", len(ids), zombieRecords)
	}
	return names
}

// pauseAt returns a coordinator hook that blocks at the second time point
// is reached (the first checkpoint completes normally), and the channels
// that say it is paused and resume it.
func pauseAt(point string) (hook func(string) error, paused, resume chan struct{}) {
	return pauseAtNth(point, 2)
}

// pauseAtNth is pauseAt at the nth time point is reached.
func pauseAtNth(point string, nth int) (hook func(string) error, paused, resume chan struct{}) {
	paused, resume = make(chan struct{}), make(chan struct{})
	n := 0
	return func(at string) error {
		if at != point {
			return nil
		}
		n++
		if n == nth {
			close(paused)
			<-resume
		}
		return nil
	}, paused, resume
}

// A pauses after phase 1 of its second checkpoint; B takes the lane over
// and runs it to the end; A wakes: its decide is fenced and it publishes
// nothing more.
func TestZombiePausedAfterPhase1(t *testing.T) {
	ctx := t.Context()
	e := newLaneEnv(t)
	hook, paused, resume := pauseAt("phase1")
	_, _, runA := e.owner(ctx, 1, "a", nil, hook)
	errA := make(chan error, 1)
	go func() { _, err := runA(); errA <- err }()
	<-paused
	_, headB, runB := e.owner(ctx, 2, "b", nil, nil)
	if headB.Epoch != 2 || headB.Checkpoint == nil || headB.Checkpoint.ID != 1 {
		t.Fatalf("B took over epoch %d at checkpoint %v, want epoch 2 at A's checkpoint 1", headB.Epoch, headB.Checkpoint)
	}
	if res, err := runB(); err != nil || !res.EndOfInput {
		t.Fatalf("B: %+v, %v", res, err)
	}
	_, before := e.published(ctx)
	close(resume)
	err := <-errA
	if !errors.Is(err, s3.ErrFenced) {
		t.Fatalf("A after waking: %v, want fenced", err)
	}
	after := e.exactlyOnce(ctx)
	if len(after) != len(before) {
		t.Fatalf("A published %d files after it was fenced", len(after)-len(before))
	}
}

// A pauses after deciding its second checkpoint, before publishing it; B
// takes over (adopting that checkpoint), publishes its files and runs to
// the end; A wakes: its phase 2 of the checkpoint is a verified no-op, and
// its next decide is fenced.
func TestZombiePausedAfterDecide(t *testing.T) {
	ctx := t.Context()
	e := newLaneEnv(t)
	hook, paused, resume := pauseAt("decided")
	_, _, runA := e.owner(ctx, 1, "a", nil, hook)
	errA := make(chan error, 1)
	go func() { _, err := runA(); errA <- err }()
	<-paused
	_, headB, runB := e.owner(ctx, 2, "b", nil, nil)
	if headB.Checkpoint == nil || headB.Checkpoint.ID != 2 {
		t.Fatalf("B took over checkpoint %v, want A's decided checkpoint 2", headB.Checkpoint)
	}
	if res, err := runB(); err != nil || !res.EndOfInput {
		t.Fatalf("B: %+v, %v", res, err)
	}
	close(resume)
	err := <-errA
	if !errors.Is(err, s3.ErrFenced) {
		t.Fatalf("A after waking: %v, want fenced at its next decide (its phase 2 must succeed as a no-op)", err)
	}
	e.exactlyOnce(ctx)
}

// A process whose assignment of an older generation arrives late does not
// take the lane over from the newer owner, which goes on deciding.
func TestZombieOldGenerationAssign(t *testing.T) {
	ctx := t.Context()
	e := newLaneEnv(t)
	stop := make(chan struct{})
	lsB, headB, runB := e.owner(ctx, 6, "b", stop, nil)
	lsA := s3.NewLaneStore(e.st, "t", 0)
	_, err := lsA.Acquire(ctx, s3.LaneOwner{Member: "a", Generation: 5, Host: "test", PID: 2, RunID: "a"},
		func() *recovery.Checkpoint { return &recovery.Checkpoint{Source: json.RawMessage(`{"next":0}`)} })
	if !errors.Is(err, s3.ErrStaleGeneration) {
		t.Fatalf("Acquire with generation 5 over generation 6: %v, want ErrStaleGeneration", err)
	}
	if lsB.Epoch() != headB.Epoch {
		t.Fatalf("B's epoch changed")
	}
	if res, err := runB(); err != nil || !res.EndOfInput {
		t.Fatalf("B after the stale takeover attempt: %+v, %v (it must not be fenced)", res, err)
	}
	e.exactlyOnce(ctx)
}

// A's one part file stays open across its checkpoints (it never rolls);
// A pauses after phase 1 of its fourth checkpoint, its part spanning the
// three decided before. B takes over from checkpoint 3: it closes A's part
// where checkpoint 3 recorded it (Backend.Finalize), without resuming it,
// and writes the rest into parts of its own. A wakes and goes on writing
// its part before its decide is fenced: none of its later bytes appear,
// and every record is published exactly once.
func TestZombieTakeoverMidPart(t *testing.T) {
	ctx := t.Context()
	e := newLaneEnv(t)
	never := filesink.DefaultPolicy{PartSize: 1 << 30}
	hook, paused, resume := pauseAtNth("phase1", 4)
	_, _, runA := e.ownerWith(ctx, 1, "a", nil, hook, never)
	errA := make(chan error, 1)
	go func() { _, err := runA(); errA <- err }()
	<-paused
	_, headB, runB := e.ownerWith(ctx, 2, "b", nil, nil, never)
	if headB.Checkpoint == nil || headB.Checkpoint.ID != 3 {
		t.Fatalf("B took over checkpoint %v, want A's checkpoint 3", headB.Checkpoint)
	}
	var pos struct{ Next int }
	if err := json.Unmarshal(headB.Checkpoint.Source, &pos); err != nil {
		t.Fatal(err)
	}
	var st struct{ Parts []json.RawMessage }
	if err := json.Unmarshal(headB.Checkpoint.Participants[0].State, &st); err != nil || len(st.Parts) != 1 {
		t.Fatalf("checkpoint 3 has no in-progress part: %s (%v)", headB.Checkpoint.Participants[0].State, err)
	}
	if res, err := runB(); err != nil || !res.EndOfInput {
		t.Fatalf("B: %+v, %v", res, err)
	}
	close(resume)
	if err := <-errA; !errors.Is(err, s3.ErrFenced) {
		t.Fatalf("A after waking: %v, want fenced", err)
	}
	e.exactlyOnce(ctx)
	// A's part holds exactly the records of checkpoints 1 to 3.
	var aKeys []string
	_, names := e.published(ctx)
	for _, k := range names {
		if strings.Contains(k, "/part-t.0-e1-") {
			aKeys = append(aKeys, k)
		}
	}
	if len(aKeys) != 1 {
		t.Fatalf("A's part files: %v, want the one it kept open", aKeys)
	}
	ids := e.idsIn(ctx, aKeys[0])
	if len(ids) != pos.Next || ids[0] != 0 || ids[len(ids)-1] != pos.Next-1 {
		t.Fatalf("A's part %s holds %d records (%v...), want records 0 to %d of checkpoint 3", aKeys[0], len(ids), ids[:min(3, len(ids))], pos.Next-1)
	}
}

// idsIn returns the generator ids of the records of the visible file key,
// in order.
func (e *laneEnv) idsIn(ctx context.Context, key string) []int {
	e.t.Helper()
	out, err := e.client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &e.bucket, Key: &key})
	if err != nil {
		e.t.Fatal(err)
	}
	defer out.Body.Close()
	var ids []int
	dec := json.NewDecoder(out.Body)
	for {
		var r struct{ ID int }
		if err := dec.Decode(&r); err == io.EOF {
			return ids
		} else if err != nil {
			e.t.Fatalf("%s: %v", key, err)
		}
		ids = append(ids, r.ID)
	}
}
