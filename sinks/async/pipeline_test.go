package async_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/sinks/async"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
)

type job struct {
	t       *testing.T
	count   int64
	store   recovery.Store
	l       *ledger
	subs    int
	opts    []async.Option
	runs    int
	crashes int
	every   int64
}

func newJob(t *testing.T, count int64, subs int, opts ...async.Option) *job {
	store, err := recovery.OpenDir(context.Background(), vfs.OS{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &job{t: t, count: count, store: store, l: newLedger(), subs: subs, opts: opts}
}

// run runs the job once with sender wrapping the ledger; wrap may alter
// the sender. It returns Run's result.
//
// Checkpoints come every j.every records (at the pipeline's next batch
// boundary): a test varies it from run to run, as time-based checkpoints
// vary, so that a replay's barriers fall elsewhere than the crashed run's.
func (j *job) run(ctx context.Context, wrap func(async.Sender) async.Sender) (pipeline.Result, error) {
	j.runs++
	var sender async.Sender = async.SenderFunc(func(ctx context.Context, b *async.Batch) error {
		j.l.take(b)
		return nil
	})
	if wrap != nil {
		sender = wrap(sender)
	}
	var sinks []pipeline.Sink
	for i := range j.subs {
		s, err := async.New(sender, i, append([]async.Option{async.WithSinkID("job"), async.WithLogger(testLogger(j.t))}, j.opts...)...)
		if err != nil {
			j.t.Fatal(err)
		}
		sinks = append(sinks, s)
	}
	gen := source.GenConfig{Count: j.count, Seed: 3, Size: 60, Keys: 7}
	cfg := pipeline.Config{
		OpenSource: func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
			return source.NewGenerator(gen, pos)
		},
		Store: j.store, Sinks: sinks, CheckpointEvery: cmpOr(j.every, 700), CheckpointInterval: -1, BatchSize: 90,
		Logger: testLogger(j.t),
	}
	if j.subs > 1 {
		cfg.Partition = async.HashPartition
	}
	return pipeline.Run(ctx, cfg)
}

// crashUntilDone runs the job, each run cancelled (a crash without the
// process exit) after a random number of delivered batches, until a run
// completes.
func (j *job) crashUntilDone(rng *rand.Rand, crashes int) {
	t := j.t
	for {
		if j.runs > 200 {
			t.Fatalf("no run completed in %d runs", j.runs)
		}
		j.every = 200 + rng.Int64N(1500)
		ctx, cancel := context.WithCancel(context.Background())
		var left atomic.Int64
		left.Store(1 + rng.Int64N(60))
		crash := j.crashes < crashes
		res, err := j.run(ctx, func(next async.Sender) async.Sender {
			return async.SenderFunc(func(sctx context.Context, b *async.Batch) error {
				if err := next.Send(sctx, b); err != nil {
					return err
				}
				if crash && left.Add(-1) == 0 {
					cancel() // the next records of this epoch were sent, its checkpoint not decided
				}
				return nil
			})
		})
		cancel()
		switch {
		case err == nil:
			if !res.EndOfInput {
				t.Fatalf("run %d returned without reaching the end of input: %+v", j.runs, res)
			}
			return
		case errors.Is(err, context.Canceled):
			j.crashes++
		default:
			t.Fatalf("run %d: %v", j.runs, err)
		}
	}
}

// Crash (cancel pipeline.Run) at random moments, after batches of the
// undecided checkpoint were sent, and run again from the store: every
// record is delivered at least once, and, counting only the first delivery
// of each idempotency key, exactly once (the replay rebuilds the same
// batches with the same keys).
func TestPipelineCrashReplayExactlyOnceByKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		subs int
	}{{"p1", 1}, {"p3-hash-partitioned", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 1))
			j := newJob(t, 30000, tc.subs, async.WithWorkers(3), async.WithMaxRecords(37), async.WithMaxBytes(1500), async.WithLinger(0))
			j.crashUntilDone(rng, 8)
			if j.crashes < 8 {
				t.Errorf("%d crashes, want 8", j.crashes)
			}
			j.l.check(t, j.count, true)
			t.Logf("%d runs, %d crashes, %d deliveries of %d records", j.runs, j.crashes, j.l.deliveries(), j.count)
		})
	}
}

// A send error and a panicking sender surface as errors from pipeline.Run,
// the checkpoint they broke is not recorded, and the next run delivers
// everything.
func TestPipelineSendFailureSurfacesAndRecovers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fail func(b *async.Batch) error
		is   error
	}{
		{"error", func(*async.Batch) error { return errTarget }, errTarget},
		{"panic", func(*async.Batch) error { panic("client bug") }, async.ErrWorkerDead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := newJob(t, 5000, 1, async.WithWorkers(2), async.WithMaxRecords(50), async.WithLinger(0))
			var batches atomic.Int64
			_, err := j.run(context.Background(), func(next async.Sender) async.Sender {
				return async.SenderFunc(func(ctx context.Context, b *async.Batch) error {
					if batches.Add(1) == 30 {
						return tc.fail(b)
					}
					return next.Send(ctx, b)
				})
			})
			if !errors.Is(err, tc.is) {
				t.Fatalf("Run = %v, want %v", err, tc.is)
			}
			// The newest record covers only records acknowledged before it.
			last, err := recovery.Latest(context.Background(), j.store)
			if err != nil {
				t.Fatal(err)
			}
			if last != nil {
				var pos struct{ Next int64 }
				json.Unmarshal(last.Source, &pos)
				var st struct {
					Ord  uint64
					Tail [][]byte
				}
				json.Unmarshal(last.Participants[0].State, &st)
				if got := int64(st.Ord) + int64(len(st.Tail)); got != pos.Next {
					t.Errorf("checkpoint %d covers %d records but the sink acknowledged or kept %d", last.ID, pos.Next, got)
				}
				if 29*50 < int(st.Ord) {
					t.Errorf("checkpoint %d records ordinal %d acknowledged, beyond the failed batch", last.ID, st.Ord)
				}
			}
			if _, err := j.run(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			j.l.check(t, j.count, true)
		})
	}
}

var errTarget = fmt.Errorf("target said 400")

func cmpOr(a, b int64) int64 {
	if a != 0 {
		return a
	}
	return b
}
