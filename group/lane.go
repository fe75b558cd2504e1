package group

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/source/kafka"
)

// lane is one run of one partition by this process: from its takeover to
// its release, fence, loss or end.
type lane struct {
	Lane
	store    *laneStore
	stop     chan struct{} // closed: take a final checkpoint and release
	stopOnce sync.Once
	cancel   context.CancelFunc // ends the run without a final checkpoint
	done     chan struct{}      // closed when the run returned
	revoked  atomic.Int64       // when the handoff began, Unix ns (for Events.Released)
	offered  atomic.Int64       // the offset last committed to the group (committed), -1: none
}

func (l *lane) requestStop() { l.stopOnce.Do(func() { close(l.stop) }) }

// stopped reports whether the lane's run returned.
func (l *lane) stopped() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// laneStore is the lane's state as its pipeline's checkpoint store. It
// remembers the last record it was asked to write, which a write whose
// outcome was found fenced may still have decided: a fenced lane's sweep
// keeps what it references.
type laneStore struct {
	*s3.LaneStore
	mu        sync.Mutex
	attempted *recovery.Checkpoint
	decided   *recovery.Checkpoint
}

// Put implements recovery.Store. A checkpoint of an idle lane (the same
// source position and participant states as the record decided before,
// nothing pending) is not written: the record in the state already
// describes it, and idle lanes cost no request.
func (s *laneStore) Put(ctx context.Context, c *recovery.Checkpoint) error {
	s.mu.Lock()
	idle := sameAs(c, s.decided)
	if !idle {
		s.attempted = c
	}
	s.mu.Unlock()
	if idle {
		return nil
	}
	if err := s.LaneStore.Put(ctx, c); err != nil {
		return err
	}
	s.mu.Lock()
	s.decided = c
	s.mu.Unlock()
	return nil
}

// sameAs reports whether c describes what prev does: the same source
// position, the same participants with the same states, and nothing
// pending in c.
func sameAs(c, prev *recovery.Checkpoint) bool {
	if prev == nil || len(prev.Participants) == 0 || !bytes.Equal(c.Source, prev.Source) || len(c.Participants) != len(prev.Participants) {
		return false
	}
	for i, p := range c.Participants {
		q := prev.Participants[i]
		if len(p.Pending) > 0 || p.Name != q.Name || !bytes.Equal(p.State, q.State) {
			return false
		}
	}
	return true
}

// Assigned implements kafka.Handler: it takes over each lane (one read and
// one conditional write of its state) and starts its run. A lane whose
// takeover fails, or that is finished, is left out: it is not read.
func (r *runner) Assigned(ctx context.Context, generation int32, ids []kafka.LaneID) map[kafka.LaneID]json.RawMessage {
	start := time.Now()
	select {
	case <-r.joined: // the group may assign before JoinGroup returned
	case <-ctx.Done():
		return nil
	}
	if r.g == nil {
		return nil
	}
	owner := s3.LaneOwner{Member: r.g.MemberID(), Generation: generation, Host: r.host, PID: os.Getpid(), RunID: r.runID}
	// The lanes' reads and takeovers run side by side: every lane of the
	// assignment starts one round trip after the first.
	isFresh := make([]bool, len(ids))
	inParallel(len(ids), func(i int) {
		id := ids[i]
		head, _, err := s3.ReadLane(ctx, r.cfg.State, id.Topic, id.Partition)
		if err != nil {
			r.cfg.Logger.Warn("lane not taken over: reading its state failed", "lane", id.String(), "err", err)
			return
		}
		isFresh[i] = head == nil
	})
	var fresh []kafka.LaneID
	for i, id := range ids {
		if isFresh[i] {
			fresh = append(fresh, id)
		}
	}
	first := map[kafka.LaneID]json.RawMessage{}
	if len(fresh) > 0 {
		var err error
		if first, err = r.g.FirstPositions(ctx, fresh); err != nil {
			r.fail(err)
			return nil
		}
	}
	pos := make([]json.RawMessage, len(ids))
	took := make([]takeResult, len(ids))
	inParallel(len(ids), func(i int) {
		pos[i], took[i] = r.takeOver(ctx, ids[i], owner, first[ids[i]], start, takeOpts{})
	})
	out := map[kafka.LaneID]json.RawMessage{}
	for i, id := range ids {
		switch took[i] {
		case tookOver:
			out[id] = pos[i]
		case notTaken:
			r.retakeLater(id)
		}
	}
	return out
}

// takeoverParallelism bounds the lanes a rebalance reads and takes over
// at once.
const takeoverParallelism = 16

// inParallel runs f(0) to f(n-1), at most takeoverParallelism at once,
// and returns when all returned.
func inParallel(n int, f func(i int)) {
	sem := make(chan struct{}, takeoverParallelism)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}()
	}
	wg.Wait()
}

// takeResult is what came of a takeover.
type takeResult int

const (
	tookOver  takeResult = iota
	notTaken             // it failed: to be tried again while the group assigns the lane
	laneDone             // the lane is finished: nothing to read
	runFailed            // the process's run ends (r.fail)
)

// takeOpts are the options of a takeover outside a rebalance (retake).
type takeOpts struct {
	// gone, if set, lifts the generation tie-break for owners it reports
	// gone from the group (s3.LaneStore.IgnoreGenerationOf).
	gone func(s3.LaneOwner) bool
	// retake: the partition is assigned already; its fetch moves to the
	// lane's position (kafka.Group.Retake) before the lane runs.
	retake bool
}

// takeOver acquires lane id and starts its run, returning the position to
// read it from.
func (r *runner) takeOver(ctx context.Context, id kafka.LaneID, owner s3.LaneOwner, first json.RawMessage, start time.Time,
	o takeOpts) (json.RawMessage, takeResult) {
	ls := s3.NewLaneStore(r.cfg.State, id.Topic, id.Partition)
	if o.gone != nil {
		ls.IgnoreGenerationOf(o.gone)
	}
	head, err := ls.Acquire(ctx, owner, func() *recovery.Checkpoint {
		return &recovery.Checkpoint{ID: 0, Time: time.Now(), Source: first}
	})
	switch {
	case errors.Is(err, s3.ErrStaleGeneration):
		r.cfg.Logger.Info("lane not taken over: a newer generation owns it", "lane", id.String(), "generation", owner.Generation, "err", err)
		return nil, notTaken
	case err != nil:
		r.cfg.Logger.Warn("lane not taken over", "lane", id.String(), "err", err)
		return nil, notTaken
	}
	if err := r.hook("assign:acquired", id); err != nil {
		r.fail(err)
		return nil, runFailed
	}
	if head.Done {
		// Nothing to read. What paused owners left in it is swept by the
		// process that finds the job finished (sweepFinished).
		r.cfg.Logger.Info("lane finished earlier: nothing to read", "lane", id.String(), "epoch", head.Epoch)
		return nil, laneDone
	}
	if head.Checkpoint == nil || len(head.Checkpoint.Source) == 0 {
		r.fail(&recovery.CorruptError{File: ls.Key(), Reason: "the lane state has no source position", Err: recovery.ErrCorruptCheckpoint})
		return nil, runFailed
	}
	if o.retake {
		// A revocation waits (take) until the lane runs, to stop it.
		r.retakeMu.Lock()
		defer r.retakeMu.Unlock()
		if err := r.g.Retake(id, head.Checkpoint.Source); err != nil {
			r.cfg.Logger.Info("lane not taken again", "lane", id.String(), "err", err)
			return nil, notTaken
		}
	}
	return head.Checkpoint.Source, r.startLane(ctx, id, ls, head, start)
}

// startLane starts the run of lane id, acquired as head.
func (r *runner) startLane(ctx context.Context, id kafka.LaneID, ls *s3.LaneStore, head *s3.LaneHead, start time.Time) takeResult {
	l := &lane{
		Lane:  Lane{ID: id, Epoch: head.Epoch, Name: LaneName(r.cfg.Prefix, id)},
		store: &laneStore{LaneStore: ls, decided: head.Checkpoint},
		stop:  make(chan struct{}), done: make(chan struct{}),
	}
	l.offered.Store(-1)
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	r.mu.Lock()
	if old := r.lanes[id]; old != nil {
		old.cancel() // cannot happen: a lane is revoked before it is assigned again
	}
	r.lanes[id] = l
	r.mu.Unlock()
	r.runs.Add(1)
	r.cfg.Logger.Info("lane taken over", "lane", id.String(), "epoch", head.Epoch, "checkpoint", head.Checkpoint.ID)
	if f := r.cfg.Events.Assigned; f != nil {
		f(id, head.Epoch, time.Since(start))
	}
	go r.runLane(lctx, l, head)
	return tookOver
}

// runLane runs lane l from head, the state it took over, until it is
// stopped, fenced, lost or finished.
func (r *runner) runLane(ctx context.Context, l *lane, head *s3.LaneHead) {
	defer close(l.done)
	defer func() {
		if f := r.cfg.Events.Stopped; f != nil {
			f(l.ID)
		}
	}()
	log := r.cfg.Logger.With("lane", l.ID.String(), "epoch", l.Epoch)
	if err := r.sweepOlder(ctx, l, head); err != nil {
		r.laneFailed(ctx, l, err)
		return
	}
	sinks, err := r.cfg.NewSinks(ctx, l.Lane)
	if err != nil {
		r.fail(err)
		return
	}
	count := newLaneCount(r.progress)
	count.running(1)
	defer count.running(-1)
	cfg := r.cfg.Pipeline
	cfg.Events = pipeline.TeeEventListener(cfg.Events, count.events())
	if f := r.cfg.LaneEvents; f != nil {
		cfg.Events = pipeline.TeeEventListener(cfg.Events, f(l.Lane))
	}
	cfg.Logger = log
	cfg.Store = l.store
	cfg.Sinks = sinks
	cfg.Stop = l.stop
	cfg.OpenSource = func(context.Context, json.RawMessage) (source.Source, error) {
		src := r.g.Lane(l.ID)
		if src == nil {
			return nil, errors.New("group: lane " + l.ID.String() + " is not assigned")
		}
		return src, nil
	}
	user := r.cfg.Pipeline.Committed
	cfg.Committed = func(ctx context.Context, id uint64) error {
		if user != nil {
			if err := user(ctx, id); err != nil {
				return err
			}
		}
		r.committed(ctx, l, id)
		return nil
	}
	res, err := pipeline.Run(ctx, cfg)
	if err != nil {
		r.laneFailed(ctx, l, err)
		return
	}
	if err := r.hook("revoke:stopped", l.ID); err != nil {
		r.fail(err)
		return
	}
	if err := l.store.Release(ctx, res.EndOfInput); err != nil {
		r.laneFailed(ctx, l, err)
		return
	}
	if res.EndOfInput {
		log.Info("lane finished", "checkpoint", res.Checkpoint, "records", res.Records)
		select {
		case r.laneDone <- struct{}{}:
		default:
		}
		return
	}
	r.released.Add(1)
	log.Info("lane released", "checkpoint", res.Checkpoint, "records", res.Records)
	if at := l.revoked.Load(); at != 0 {
		if f := r.cfg.Events.Released; f != nil {
			f(l.ID, time.Since(time.Unix(0, at)))
		}
	}
}

// committed offers the group the lane's committed offset, for lag
// dashboards (never read back), after every checkpoint: the position of
// the record last decided (an idle lane's checkpoint writes none), sent
// when it passed what the group has, so that a commit that failed is
// made at the next checkpoint, also when the lane has gone idle.
func (r *runner) committed(ctx context.Context, l *lane, _ uint64) {
	l.store.mu.Lock()
	c := l.store.decided
	l.store.mu.Unlock()
	if c == nil || len(c.Source) == 0 {
		return
	}
	_, next, _, err := kafka.LanePosition(c.Source)
	if err != nil {
		return
	}
	if f := r.cfg.Events.Committed; f != nil {
		var hwm int64
		if src := r.g.Lane(l.ID); src != nil {
			hwm = src.HighWatermark()
		}
		f(l.ID, next, hwm)
	}
	if next <= l.offered.Load() {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.g.CommitLane(cctx, l.ID, next); err != nil {
		if ctx.Err() == nil {
			r.cfg.Logger.Debug("committing the lane's offset to the group failed (monitoring only; tried again at the next checkpoint)", "lane", l.ID.String(), "err", err)
		}
		return
	}
	l.offered.Store(next)
}

// laneFailed handles the end of a lane's run by err: a fence or a loss
// stops the lane alone; anything else ends the process's run.
func (r *runner) laneFailed(ctx context.Context, l *lane, err error) {
	switch {
	case errors.Is(err, s3.ErrFenced) || ctx.Err() == nil && r.movedOn(ctx, l):
		r.fenced.Add(1)
		r.cfg.Logger.Warn("lane fenced: another process took it over; this process publishes nothing more of it",
			"lane", l.ID.String(), "epoch", l.Epoch, "err", err)
		if f := r.cfg.Events.Fenced; f != nil {
			f(l.ID)
		}
		r.sweepFenced(ctx, l)
		r.retakeLater(l.ID)
	case ctx.Err() != nil || !r.g.Holds(l.ID) || errors.Is(err, kafka.ErrLaneRevoked):
		// Lost, aborted, or revoked while it was being taken again (the
		// group may have assigned the partition to this process again
		// since: that assignment, or the retake, runs it anew).
		r.cfg.Logger.Info("lane stopped without a final checkpoint (lost or aborted)", "lane", l.ID.String(), "epoch", l.Epoch, "err", err)
		if ctx.Err() == nil && r.g.Holds(l.ID) {
			r.retakeLater(l.ID)
		}
	default:
		r.fail(err)
	}
}

// movedOn reports whether another process has taken lane l over: a run
// that failed then (its staging swept by the new owner, say) is a fenced
// lane, not a failure of this process. An unreadable state is not proof.
func (r *runner) movedOn(ctx context.Context, l *lane) bool {
	head, _, err := s3.ReadLane(ctx, r.cfg.State, l.ID.Topic, l.ID.Partition)
	return err == nil && head != nil && head.Epoch > l.Epoch
}

// sweepOlder deletes the staging data of older owner epochs of the lane
// that the state taken over does not reference: what crashed or fenced
// owners left. It never touches this or a newer epoch's data.
func (r *runner) sweepOlder(ctx context.Context, l *lane, head *s3.LaneHead) error {
	if l.Epoch <= 1 {
		return nil
	}
	var retained []*recovery.Checkpoint
	if head.Checkpoint != nil && len(head.Checkpoint.Participants) > 0 {
		retained = append(retained, head.Checkpoint)
	}
	keep, err := filesink.Referenced(retained, filesink.ParticipantName(0))
	if err != nil {
		return err
	}
	if _, err := r.cfg.Backend.SweepEpochs(ctx, l.Name, l.Epoch, keep[false]); err != nil {
		return err
	}
	return r.hook("lane:swept", l.ID)
}

// sweepFinished takes every finished lane over once more and sweeps what
// older owners left in it: uploads that a paused process started after
// the lane's last takeover, when it woke, before it found the lane gone.
// Of the processes that find the job finished, the first to claim a lane
// (s3.LaneStore.ClaimSweep) sweeps it; the others leave it. A lane a
// newer generation owns is left to that owner.
func (r *runner) sweepFinished(ctx context.Context) {
	heads, err := s3.ListLanes(ctx, r.cfg.State)
	if err != nil {
		r.cfg.Logger.Warn("sweeping the finished lanes: listing them failed", "err", err)
		return
	}
	owner := s3.LaneOwner{Member: r.g.MemberID(), Generation: r.g.Generation(), Host: r.host, PID: os.Getpid(), RunID: r.runID}
	for _, h := range heads {
		if !h.Done || h.Swept {
			continue
		}
		id := kafka.LaneID{Topic: h.Topic, Partition: h.Partition}
		head, err := s3.NewLaneStore(r.cfg.State, h.Topic, h.Partition).ClaimSweep(ctx, owner)
		if err != nil {
			if !errors.Is(err, s3.ErrStaleGeneration) && !errors.Is(err, s3.ErrSwept) {
				r.cfg.Logger.Warn("sweeping a finished lane: taking it over failed (the next takeover sweeps it)", "lane", id.String(), "err", err)
			}
			continue
		}
		l := &lane{Lane: Lane{ID: id, Epoch: head.Epoch, Name: LaneName(r.cfg.Prefix, id)}}
		if err := r.sweepOlder(ctx, l, head); err != nil {
			r.cfg.Logger.Warn("sweeping a finished lane's older staging (the next takeover sweeps it)", "lane", id.String(), "err", err)
			continue
		}
		if err := r.hook("job:swept", id); err != nil {
			r.cfg.Logger.Warn("end-of-job sweep", "lane", id.String(), "err", err)
		}
	}
}

// sweepFenced deletes the staging data this owner epoch wrote and no
// record it wrote or tried to write references: the new owner adopted one
// of those, so what they reference stays.
func (r *runner) sweepFenced(ctx context.Context, l *lane) {
	l.store.mu.Lock()
	var retained []*recovery.Checkpoint
	for _, c := range []*recovery.Checkpoint{l.store.decided, l.store.attempted} {
		if c != nil && len(c.Participants) > 0 {
			retained = append(retained, c)
		}
	}
	l.store.mu.Unlock()
	keep, err := filesink.Referenced(retained, filesink.ParticipantName(0))
	if err == nil {
		_, err = r.cfg.Backend.Sweep(ctx, l.PartPrefix()+"-", keep[false])
	}
	if err != nil && ctx.Err() == nil {
		r.cfg.Logger.Warn("sweeping a fenced lane's staging (the next takeover sweeps it)", "lane", l.ID.String(), "err", err)
	}
}

// Revoked implements kafka.Handler: it takes a final checkpoint of each
// revoked lane, releases it and returns when all are done, or cancels
// those still running when the rebalance timeout is near (a lane lost
// that way is still safe).
func (r *runner) Revoked(ctx context.Context, ids []kafka.LaneID) {
	lanes := r.take(ids)
	now := time.Now().UnixNano()
	for _, l := range lanes {
		l.revoked.Store(now)
		l.requestStop()
	}
	r.await(ctx, lanes, r.rebalanceTimeout()*9/10)
}

// Lost implements kafka.Handler: the lanes stop without a final checkpoint.
func (r *runner) Lost(ctx context.Context, ids []kafka.LaneID) {
	lanes := r.take(ids)
	for _, l := range lanes {
		l.cancel()
	}
	r.await(ctx, lanes, r.rebalanceTimeout())
}

// take removes the lanes of ids from the running set and returns them.
func (r *runner) take(ids []kafka.LaneID) []*lane {
	r.retakeMu.Lock()
	defer r.retakeMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*lane
	for _, id := range ids {
		if l := r.lanes[id]; l != nil {
			out = append(out, l)
			delete(r.lanes, id)
		}
	}
	return out
}

// await waits for the lanes' runs to return, cancelling them after
// timeout or with ctx.
func (r *runner) await(ctx context.Context, lanes []*lane, timeout time.Duration) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for _, l := range lanes {
		select {
		case <-l.done:
			continue
		case <-ctx.Done():
		case <-t.C:
			r.cfg.Logger.Warn("handoff took longer than the rebalance timeout allows: stopping the lane without a final checkpoint", "lane", l.ID.String())
		}
		for _, l := range lanes {
			l.cancel()
		}
		for _, l := range lanes {
			<-l.done
		}
		return
	}
}

// stopAll stops every running lane: with final, a final checkpoint each
// (SIGTERM, the end of a bounded job); otherwise they are cancelled.
func (r *runner) stopAll(final bool) {
	r.mu.Lock()
	var ids []kafka.LaneID
	for id := range r.lanes {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	if final {
		r.Revoked(context.Background(), ids)
		return
	}
	r.Lost(context.Background(), ids)
}

// jobFinished reports whether every partition of the job's topics has a
// finished lane (bounded mode).
func (r *runner) jobFinished(ctx context.Context) (bool, error) {
	parts, err := r.g.Partitions(ctx)
	if err != nil {
		return false, err
	}
	heads, err := s3.ListLanes(ctx, r.cfg.State)
	if err != nil {
		return false, err
	}
	done := map[kafka.LaneID]bool{}
	for _, h := range heads {
		if h.Done {
			done[kafka.LaneID{Topic: h.Topic, Partition: h.Partition}] = true
		}
	}
	for _, p := range parts {
		if !done[p] {
			return false, nil
		}
	}
	return len(parts) > 0, nil
}

func newRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
