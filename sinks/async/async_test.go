package async_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/sinks/async"
)

// Naive failure 1: the linger timer flushes a batch that the producer is
// still appending to (or a worker is sending). Here the linger is 20 µs,
// so the timer fires while records are being written all the time; every
// batch's records are hashed when Send starts and again after a pause, to
// catch any later change, and the race detector watches every access.
// Every record must arrive exactly once, in whole batches with contiguous
// ordinals.
func TestLingerTimerAndWorkersNeverShareABatch(t *testing.T) {
	t.Parallel()
	const count = 20000
	l := newLedger()
	var mu sync.Mutex
	var firsts []uint64
	sizes := map[uint64]int{}
	sender := async.SenderFunc(func(ctx context.Context, b *async.Batch) error {
		before := strings.Join(bytesToStrings(b.Records), ",")
		if rand.IntN(4) == 0 {
			time.Sleep(50 * time.Microsecond) // let the producer and the timer run meanwhile
		}
		if after := strings.Join(bytesToStrings(b.Records), ","); after != before {
			t.Errorf("batch %d changed while it was being sent", b.Seq)
		}
		l.take(b)
		mu.Lock()
		firsts = append(firsts, b.First)
		sizes[b.First] = len(b.Records)
		mu.Unlock()
		return nil
	})
	s := newSink(t, sender, async.WithWorkers(4), async.WithMaxRecords(37), async.WithLinger(20*time.Microsecond))
	for i := int64(0); i < count; i += 100 {
		write(t, s, i, i+100)
		if rand.IntN(3) == 0 {
			time.Sleep(30 * time.Microsecond) // give the timer a chance to fire on a partial batch
		}
	}
	if _, err := committer.PrepareNow(context.Background(), s, 1, true); err != nil {
		t.Fatal(err)
	}
	l.check(t, count, true)
	if got := l.deliveries(); got != count {
		t.Errorf("%d deliveries, want %d", got, count)
	}
	// The batches tile the ordinals 0..count-1 with no gap or overlap.
	slices.Sort(firsts)
	next := uint64(0)
	for _, f := range firsts {
		if f != next {
			t.Fatalf("batch starting at ordinal %d, want %d", f, next)
		}
		next += uint64(sizes[f])
	}
	if next != count {
		t.Errorf("batches cover %d ordinals, want %d", next, count)
	}
	if s.Stats().LingerCuts.Load() == 0 {
		t.Logf("the linger timer never cut a batch in this run (the machine was fast); the race detector still watched the timer")
	} else {
		t.Logf("%d of %d batches cut by the linger timer", s.Stats().LingerCuts.Load(), len(firsts))
	}
}

func bytesToStrings(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// gate is a Sender that holds every batch until it is opened.
type gate struct {
	open     chan struct{}
	opened   atomic.Bool
	arrived  chan *async.Batch
	l        *ledger
	inFlight atomic.Int32
}

func newGate() *gate {
	return &gate{open: make(chan struct{}), arrived: make(chan *async.Batch, 1000), l: newLedger()}
}

func (g *gate) Send(ctx context.Context, b *async.Batch) error {
	g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	g.arrived <- b
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.l.take(b)
	return nil
}

func (g *gate) release() {
	g.opened.Store(true)
	close(g.open)
}

// Naive failure 2: phase 1 returns (and the checkpoint is recorded) while
// records still sit in the queue or in a worker. Prepare must wait until
// the target acknowledged every closed batch; the open batch's records go
// into the state.
func TestPrepareWaitsUntilQueueIsEmptyAndEveryBatchIsAcknowledged(t *testing.T) {
	t.Parallel()
	g := newGate()
	s := newSink(t, g, async.WithWorkers(2), async.WithQueue(8), async.WithMaxRecords(10), async.WithLinger(0))
	write(t, s, 0, 95) // 9 closed batches (2 in flight, 7 queued), 5 records open
	<-g.arrived
	<-g.arrived
	type result struct {
		state json.RawMessage
		err   error
	}
	done := make(chan result, 1)
	go func() {
		snap, err := committer.PrepareNow(context.Background(), s, 1, false)
		done <- result{snap.State, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("Prepare returned (%v) while the target held every batch", r.err)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !g.opened.Load() {
		t.Fatal("Prepare returned before the batches were acknowledged")
	}
	if got := s.Stats().Acked.Load(); got != 90 {
		t.Errorf("%d records acknowledged when Prepare returned, want 90", got)
	}
	var st struct {
		Seq, Ord uint64
		Tail     [][]byte
	}
	if err := json.Unmarshal(r.state, &st); err != nil {
		t.Fatal(err)
	}
	if st.Seq != 9 || st.Ord != 90 || len(st.Tail) != 5 || string(st.Tail[0]) != "90" {
		t.Errorf("state %s: want seq 9, ord 90 and records 90..94 in the tail", r.state)
	}
	// A final checkpoint sends the tail too: the state holds no records.
	snap, err := committer.PrepareNow(context.Background(), s, 2, true)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(snap.State), "tail") {
		t.Errorf("final state %s still holds records", snap.State)
	}
	g.l.check(t, 95, true)
}

// Naive failure 3a: a worker panics; the barrier waits forever for its
// batch, or the checkpoint completes without it.
func TestPanickingWorkerFailsTheCheckpoint(t *testing.T) {
	t.Parallel()
	sender := async.SenderFunc(func(ctx context.Context, b *async.Batch) error {
		if b.Seq == 3 {
			panic("client bug")
		}
		return nil
	})
	s := newSink(t, sender, async.WithWorkers(2), async.WithMaxRecords(10), async.WithLinger(0))
	err := writeThenPrepare(s, 60) // the failure may surface in Write already
	if !errors.Is(err, async.ErrWorkerDead) || !strings.Contains(err.Error(), "client bug") {
		t.Fatalf("Prepare = %v, want a dead worker (panic: client bug)", err)
	}
	var se *async.SendError
	if !errors.As(err, &se) || se.Seq != 3 {
		t.Errorf("error %v does not name batch 3", err)
	}
	if err := s.Write(context.Background(), []byte("60"), originOf(60)); err == nil {
		t.Error("Write after a dead worker succeeded")
	}
	if err := s.Tick(context.Background(), time.Now()); err == nil {
		t.Error("Tick after a dead worker returned nil")
	}
	if _, err := committer.PrepareNow(context.Background(), s, 2, true); err == nil {
		t.Error("a later Prepare succeeded")
	}
}

// Naive failure 3b: a worker blocks forever in a client that ignores its
// context. It is declared dead after the send timeout plus the grace
// period, and the checkpoint fails instead of waiting forever.
func TestBlockedWorkerFailsTheCheckpoint(t *testing.T) {
	t.Parallel()
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	sender := async.SenderFunc(func(ctx context.Context, b *async.Batch) error {
		if b.Seq == 1 {
			<-stuck // ignores ctx
		}
		return nil
	})
	s := newSink(t, sender, async.WithWorkers(2), async.WithMaxRecords(10), async.WithLinger(0),
		async.WithSendTimeout(20*time.Millisecond, 30*time.Millisecond))
	err := writeThenPrepare(s, 50)
	if !errors.Is(err, async.ErrWorkerDead) || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("Prepare = %v, want a dead (blocked) worker", err)
	}
}

// Naive failure 4: a send fails, is logged, and the checkpoint completes
// anyway. The error must fail Prepare with the sender's error.
func TestFailedSendFailsTheCheckpoint(t *testing.T) {
	t.Parallel()
	boom := errors.New("HTTP 400: bad record")
	sender := async.SenderFunc(func(ctx context.Context, b *async.Batch) error {
		if b.Seq == 2 {
			return boom
		}
		return nil
	})
	s := newSink(t, sender, async.WithWorkers(3), async.WithMaxRecords(10), async.WithLinger(0))
	err := writeThenPrepare(s, 40)
	if !errors.Is(err, boom) {
		t.Fatalf("Prepare = %v, want the send error", err)
	}
	var se *async.SendError
	if !errors.As(err, &se) || se.Seq != 2 || se.Records != 10 || se.Key == "" {
		t.Errorf("error %v: want a SendError naming batch 2 (10 records) and its key", err)
	}
}

// Naive failure 6 (backpressure): a full queue drops records or grows.
// With one worker and a queue of two, only 1 + 2 closed batches (and the
// open one) fit while the target holds the batch in flight; the next Write
// blocks until the target answers, and nothing is dropped.
func TestFullQueueBlocksTheProducer(t *testing.T) {
	t.Parallel()
	g := newGate()
	s := newSink(t, g, async.WithWorkers(1), async.WithQueue(2), async.WithMaxRecords(5), async.WithLinger(0))
	var written atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := int64(0); i < 100; i++ {
			if err := s.Write(context.Background(), []byte(strconv.FormatInt(i, 10)), originOf(i)); err != nil {
				done <- err
				return
			}
			written.Add(1)
		}
		done <- nil
	}()
	<-g.arrived
	// 1 batch in flight + 2 queued = 15 records; the 4th batch's 5th record
	// (number 19) cannot be queued, so Write(19) blocks: 19 Writes return,
	// and no more however long the target holds the batch.
	for written.Load() < 19 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if n := written.Load(); n != 19 {
		t.Errorf("%d Writes returned while the target held the first batch, want 19 (in flight + queue + open)", n)
	}
	g.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := committer.PrepareNow(context.Background(), s, 1, true); err != nil {
		t.Fatal(err)
	}
	g.l.check(t, 100, true)
	if d := s.Stats().Dropped.Load(); d != 0 {
		t.Errorf("%d records dropped", d)
	}
}

// Naive failure 5: the context is cancelled while the producer waits to
// queue a batch (mid-batch): the batch must not be silently forgotten
// while the sink goes on (a later checkpoint would then complete without
// it). The sink fails; no checkpoint completes after it.
func TestCancelledWriteFailsTheSink(t *testing.T) {
	t.Parallel()
	g := newGate()
	s := newSink(t, g, async.WithWorkers(1), async.WithQueue(1), async.WithMaxRecords(5), async.WithLinger(0))
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(0); i < 100 && err == nil; i++ {
			err = s.Write(ctx, []byte(strconv.FormatInt(i, 10)), originOf(i))
		}
	}()
	<-g.arrived
	time.Sleep(20 * time.Millisecond)
	cancel()
	<-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked Write = %v, want context.Canceled", err)
	}
	g.release()
	if _, err := committer.PrepareNow(context.Background(), s, 1, false); !errors.Is(err, context.Canceled) {
		t.Errorf("Prepare after a batch was abandoned = %v, want the failure", err)
	}
}

// Prepare with a cancelled context returns the context's error and
// records nothing; the sink itself stays usable (nothing was lost).
func TestPrepareCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	g := newGate()
	s := newSink(t, g, async.WithWorkers(1), async.WithMaxRecords(5), async.WithLinger(0))
	write(t, s, 0, 10)
	<-g.arrived
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := committer.PrepareNow(ctx, s, 1, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("Prepare = %v, want context.Canceled", err)
	}
	g.release()
	if _, err := committer.PrepareNow(context.Background(), s, 2, true); err != nil {
		t.Fatal(err)
	}
	g.l.check(t, 10, true)
}

// At most once: phase 1 does not wait for the target, and failed batches
// are dropped and counted, never retried or failing the job.
func TestAtMostOnce(t *testing.T) {
	t.Parallel()
	g := newGate()
	s := newSink(t, g, async.WithWorkers(1), async.WithMaxRecords(10), async.WithLinger(0), async.WithGuarantee(async.AtMostOnce))
	write(t, s, 0, 25)
	snap, err := committer.PrepareNow(context.Background(), s, 1, false) // returns while the target holds every batch
	if err != nil {
		t.Fatal(err)
	}
	if g.opened.Load() {
		t.Fatal("gate opened before Prepare returned")
	}
	if strings.Contains(string(snap.State), "tail") {
		t.Errorf("at-most-once state %s holds records", snap.State)
	}
	g.release()

	var calls atomic.Int32
	fail := async.SenderFunc(func(ctx context.Context, b *async.Batch) error {
		calls.Add(1)
		return errors.New("503")
	})
	s2 := newSink(t, fail, async.WithWorkers(1), async.WithMaxRecords(10), async.WithLinger(0), async.WithGuarantee(async.AtMostOnce))
	write(t, s2, 0, 30)
	if _, err := committer.PrepareNow(context.Background(), s2, 1, true); err != nil {
		t.Fatal(err)
	}
	// A final checkpoint waits until every batch was sent or dropped.
	if got, want := s2.Stats().Dropped.Load(), int64(30); got != want {
		t.Errorf("%d records dropped when the final checkpoint returned, want %d", got, want)
	}
	if s2.Err() != nil {
		t.Errorf("at-most-once sink failed: %v", s2.Err())
	}
	if c := calls.Load(); c > 3 {
		t.Errorf("%d sends of 3 batches: at-most-once must not retry", c)
	}
}

// The state round-trips: a restored sink continues the open batch, the
// sequence and the ordinals where the checkpoint left them, so the next
// batch has the key the first sink would have given it.
func TestRestoreContinuesTheOpenBatch(t *testing.T) {
	t.Parallel()
	var keys1, keys2 []string
	var mu sync.Mutex
	rec := func(keys *[]string) async.Sender {
		return async.SenderFunc(func(ctx context.Context, b *async.Batch) error {
			mu.Lock()
			*keys = append(*keys, b.Key)
			mu.Unlock()
			return nil
		})
	}
	a := newSink(t, rec(&keys1), async.WithWorkers(1), async.WithMaxRecords(10), async.WithLinger(0), async.WithSinkID("job1"))
	if err := a.Restore(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	write(t, a, 0, 25)
	snap, err := committer.PrepareNow(context.Background(), a, 7, false)
	if err != nil {
		t.Fatal(err)
	}
	write(t, a, 25, 40) // after the checkpoint: the crash loses this run
	if _, err := committer.PrepareNow(context.Background(), a, 8, true); err != nil {
		t.Fatal(err)
	}

	b := newSink(t, rec(&keys2), async.WithWorkers(1), async.WithMaxRecords(10), async.WithLinger(0), async.WithSinkID("job1"))
	if err := b.Restore(context.Background(), snap.State); err != nil {
		t.Fatal(err)
	}
	write(t, b, 25, 40) // the replay
	if _, err := committer.PrepareNow(context.Background(), b, 8, true); err != nil {
		t.Fatal(err)
	}
	// First run: batches 0, 1 before the checkpoint, 2 (20..29), 3 (30..39,
	// final). The replay: 2 and 3 again with the same keys.
	if len(keys1) != 4 || len(keys2) != 2 || keys2[0] != keys1[2] || keys2[1] != keys1[3] {
		t.Errorf("keys of the first run %v, of the replay %v: want the replay's to be the first run's last two", keys1, keys2)
	}
	if !strings.HasPrefix(keys1[0], "job1-0-0-") {
		t.Errorf("key %q: want job1-0-0-HASH", keys1[0])
	}
	if err := b.Restore(context.Background(), json.RawMessage(`{"seq":`)); err == nil {
		t.Error("Restore of a corrupt state (after writes) succeeded")
	}
}

func TestKeyNamesTheRecords(t *testing.T) {
	a := async.Key("j", 0, 5, 100, [][]byte{[]byte("x"), []byte("y")})
	if b := async.Key("j", 0, 5, 100, [][]byte{[]byte("x"), []byte("y")}); a != b {
		t.Errorf("same batch, keys %s and %s", a, b)
	}
	for _, other := range []string{
		async.Key("j", 0, 5, 100, [][]byte{[]byte("x")}),
		async.Key("j", 0, 5, 100, [][]byte{[]byte("xy")}),
		async.Key("j", 0, 5, 101, [][]byte{[]byte("x"), []byte("y")}),
		async.Key("j", 1, 5, 100, [][]byte{[]byte("x"), []byte("y")}),
		async.Key("k", 0, 5, 100, [][]byte{[]byte("x"), []byte("y")}),
	} {
		if other == a {
			t.Errorf("different batches share key %s", a)
		}
	}
}

func TestOptionsValidated(t *testing.T) {
	ok := async.SenderFunc(func(context.Context, *async.Batch) error { return nil })
	for i, o := range []async.Option{async.WithWorkers(0), async.WithQueue(-1), async.WithMaxRecords(0), async.WithMaxBytes(0),
		async.WithLinger(-1), async.WithSinkID("a b"), async.WithSendTimeout(0, 0), async.WithName("")} {
		if s, err := async.New(ok, 0, o); err == nil {
			s.Close()
			t.Errorf("invalid option %d was accepted", i)
		}
	}
	if _, err := async.New(nil, 0); err == nil {
		t.Error("nil sender accepted")
	}
}

// writeThenPrepare writes records 0..n-1 and prepares checkpoint 1,
// returning the first error (a failed sink fails Write as well as
// Prepare).
func writeThenPrepare(s *async.Sink, n int64) error {
	for i := range n {
		if err := s.Write(context.Background(), []byte(strconv.FormatInt(i, 10)), originOf(i)); err != nil {
			return err
		}
	}
	_, err := committer.PrepareNow(context.Background(), s, 1, false)
	return err
}
