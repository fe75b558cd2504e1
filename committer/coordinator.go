package committer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/filesink/filesink/recovery"
)

// Coordinator runs the protocol over a fixed set of participants.
// Not safe for concurrent use.
type Coordinator struct {
	config // the options, validated
	store  recovery.Store
	parts  []Participant

	final bool   // the last Prepare was final
	begun uint64 // id+1 of the checkpoint begun and not yet decided

	recovered bool
	broken    error
	next      uint64 // id of the next checkpoint
	// asked is the smallest positive Snapshot.SweepEvery of the last
	// decided checkpoint (0: none asked)
	asked   int
	pending []pending // decided or prepared, not yet committed, in checkpoint order
	// timing of the checkpoint begun or decided last, for the events
	timing struct {
		id                     uint64
		begun, phase1, decided time.Time
	}
	// records are the records in the store, oldest first, as this
	// coordinator knows them: listed by Recover, then each one it writes
	// added and each one it prunes removed. Pruning and the sweeps use them
	// instead of listing and reading the store again (on S3, a listing
	// costs the server more than the record's PUT). A failed Put breaks the
	// coordinator, so that an in-doubt record is never missing here.
	records []*recovery.Checkpoint
}

type pending struct {
	checkpoint uint64
	part       int
	data       json.RawMessage
}

// New returns a coordinator for parts (names must be unique) over store,
// configured by opts; it fails if an option is invalid. Recover must be
// called before the first checkpoint.
func New(store recovery.Store, parts []Participant, opts ...Option) (*Coordinator, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("committer: nil checkpoint store")
	}
	if len(parts) == 0 {
		return nil, errors.New("committer: no participants")
	}
	seen := map[string]bool{}
	for _, p := range parts {
		if seen[p.Name()] {
			return nil, fmt.Errorf("committer: duplicate participant name %q", p.Name())
		}
		seen[p.Name()] = true
	}
	return &Coordinator{config: cfg, store: store, parts: parts}, nil
}

func (c *Coordinator) at(point string) error {
	if c.hook == nil {
		return nil
	}
	return c.hook(point)
}

// fail marks the coordinator unusable and returns err.
func (c *Coordinator) fail(err error) error {
	if c.broken == nil {
		c.broken = err
	}
	return err
}

func (c *Coordinator) usable() error {
	if c.broken != nil {
		return fmt.Errorf("committer: coordinator failed earlier and must be recovered anew: %w", c.broken)
	}
	if !c.recovered {
		return errors.New("committer: Recover must be called before checkpoints")
	}
	return nil
}

// Recover restores the newest checkpoint record: it commits again every
// committable the record lists (phase 2, idempotent and verified), restores
// each participant's state, and sweeps orphaned staging data. It returns the
// restored record, or nil on a fresh start. A defective newest record is an
// error matching recovery.ErrCorruptCheckpoint; nothing is skipped.
func (c *Coordinator) Recover(ctx context.Context) (*recovery.Checkpoint, error) {
	if c.recovered || c.broken != nil {
		return nil, errors.New("committer: Recover called twice")
	}
	retained, err := recovery.Retained(ctx, c.store)
	if err != nil {
		return nil, c.fail(fmt.Errorf("recover from %s: %w", c.store.Location(), err))
	}
	c.records = slices.Clone(retained)
	var last *recovery.Checkpoint
	if len(retained) > 0 {
		last = retained[len(retained)-1]
	}
	c.next = max(1, c.firstID)
	start := c.now()
	states := make([]json.RawMessage, len(c.parts))
	recommitted := 0
	if last != nil {
		if len(last.Participants) != len(c.parts) {
			return nil, c.fail(fmt.Errorf("recover checkpoint %d: record has %d participants, this run has %d (run with the parallelism that wrote it): %w",
				last.ID, len(last.Participants), len(c.parts), ErrParticipantMismatch))
		}
		for i, rp := range last.Participants {
			if rp.Name != c.parts[i].Name() {
				return nil, c.fail(fmt.Errorf("recover checkpoint %d: participant %d is %q in the record and %q in this run: %w",
					last.ID, i, rp.Name, c.parts[i].Name(), ErrParticipantMismatch))
			}
			states[i] = rp.State
			for _, pc := range rp.Pending {
				c.pending = append(c.pending, pending{checkpoint: pc.Checkpoint, part: i, data: pc.Data})
			}
		}
		sortPending(c.pending)
		recommitted = len(c.pending)
		c.next = last.ID + 1
		if err := c.commit(ctx, last.ID, "recover:"); err != nil {
			return nil, c.fail(err)
		}
	}
	for i, p := range c.parts {
		if err := p.Restore(ctx, states[i]); err != nil {
			return nil, c.fail(wrapParticipant("restore", p.Name(), err))
		}
	}
	if err := c.at("recover:restored"); err != nil {
		return nil, c.fail(err)
	}
	if err := c.sweep(ctx, retained, true); err != nil {
		return nil, c.fail(err)
	}
	if err := c.at("recover:swept"); err != nil {
		return nil, c.fail(err)
	}
	c.recovered = true
	if f := c.events.Recovered; f != nil {
		info := RecoveredInfo{Recommitted: recommitted, Duration: c.now().Sub(start)}
		if last != nil {
			info.Checkpoint = last.ID
		}
		f(info)
	}
	return last, nil
}

// NextID returns the id the next Prepare will use.
func (c *Coordinator) NextID() uint64 { return c.next }

// Prepare runs phase 1 and the decide step of the next checkpoint: each
// participant prepares, then the record {id, source, states, pending
// committables} is written to the store. A nil error means checkpoint id is
// decided: its committables will be published, by Commit or by a later
// Recover. final asks participants to close every open part (end of input
// or shutdown). Prepare is Begin followed by Phase1.Decide: Complete
// without phase 2 and the post-commit.
func (c *Coordinator) Prepare(ctx context.Context, source json.RawMessage, final bool) (uint64, error) {
	ph, err := c.Begin(ctx, source, final)
	if err != nil {
		return 0, err
	}
	return ph.Decide(ctx)
}

// Phase1 is a checkpoint whose barrier has been taken (Begin) and whose
// phase 1 may still be running in the participants.
type Phase1 struct {
	c      *Coordinator
	id     uint64
	final  bool
	source json.RawMessage
	waits  []Wait
}

// ID is the checkpoint's id.
func (ph *Phase1) ID() uint64 { return ph.id }

// Begin takes the barrier of the next checkpoint: every participant's
// Prepare starts its phase 1 (or does all of it). source is the source position the checkpoint records: the position
// right after the last record handed to the participants before Begin.
// After a nil error, records handed to participants belong to the next
// checkpoint, and Decide must be called (from any goroutine) before any
// other method of the coordinator; Decide may run while the participants
// receive records.
func (c *Coordinator) Begin(ctx context.Context, source json.RawMessage, final bool) (*Phase1, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	if c.begun != 0 {
		return nil, fmt.Errorf("committer: checkpoint %d begun while checkpoint %d is not decided", c.next, c.begun-1)
	}
	c.begun = c.next + 1
	c.timing.id, c.timing.begun = c.next, c.now()
	if f := c.events.CheckpointBegun; f != nil {
		f(CheckpointBegunInfo{ID: c.next, Final: final})
	}
	ph := &Phase1{c: c, id: c.next, final: final, source: source, waits: make([]Wait, len(c.parts))}
	for i, p := range c.parts {
		wait, err := p.Prepare(ctx, ph.id, final)
		if err != nil {
			return nil, c.fail(wrapParticipant(fmt.Sprintf("checkpoint %d: prepare", ph.id), p.Name(), err))
		}
		ph.waits[i] = wait
	}
	return ph, nil
}

// Decide completes phase 1 (waits until every participant's records of the
// checkpoint are durable) and writes the checkpoint record: the decide
// step. A nil error means the checkpoint is decided, as for Prepare. It
// must be called once, and no other method of the coordinator may run
// while it does.
func (ph *Phase1) Decide(ctx context.Context) (uint64, error) {
	c, id := ph.c, ph.id
	if err := c.usable(); err != nil {
		return 0, err
	}
	if c.begun != id+1 {
		return 0, fmt.Errorf("committer: checkpoint %d decided twice or not begun", id)
	}
	c.begun = 0
	rec := &recovery.Checkpoint{ID: id, Time: c.now().UTC(), Source: ph.source,
		Participants: make([]recovery.Participant, len(c.parts))}
	var fresh []pending
	asked := 0
	for i, p := range c.parts {
		snap, err := ph.waits[i](ctx)
		if err != nil {
			return 0, c.fail(wrapParticipant(fmt.Sprintf("checkpoint %d: prepare", id), p.Name(), err))
		}
		if n := snap.SweepEvery; n > 0 && (asked == 0 || n < asked) {
			asked = n
		}
		rec.Participants[i] = recovery.Participant{Name: p.Name(), State: snap.State}
		for _, d := range snap.Committables {
			fresh = append(fresh, pending{checkpoint: id, part: i, data: d})
		}
		if err := c.at("prepared:" + p.Name()); err != nil {
			return 0, c.fail(err)
		}
	}
	c.timing.phase1 = c.now()
	if f := c.events.Phase1Done; f != nil {
		f(Phase1Info{ID: id, Duration: c.timing.phase1.Sub(c.timing.begun)})
	}
	if err := c.at("phase1"); err != nil {
		return 0, c.fail(err)
	}
	all := append(append([]pending(nil), c.pending...), fresh...)
	for _, pc := range all {
		rp := &rec.Participants[pc.part]
		rp.Pending = append(rp.Pending, recovery.Committable{Checkpoint: pc.checkpoint, Data: pc.data})
	}
	if err := c.store.Put(ctx, rec); err != nil {
		return 0, c.fail(fmt.Errorf("checkpoint %d: decide: %w", id, err))
	}
	// Keep a copy that owns its bytes, as a read of the store would give:
	// participants may reuse the buffers behind their states.
	kept, err := cloneRecord(rec)
	if err != nil {
		return 0, c.fail(fmt.Errorf("checkpoint %d: %w", id, err))
	}
	c.records = append(c.records, kept)
	c.pending = all
	c.next = id + 1
	c.final = ph.final
	c.asked = asked
	c.timing.decided = c.now()
	if f := c.events.Decided; f != nil {
		f(DecidedInfo{ID: id, Committables: len(fresh), Duration: c.timing.decided.Sub(c.timing.phase1)})
	}
	if err := c.at("decided"); err != nil {
		return 0, c.fail(err)
	}
	return id, nil
}

// Commit runs phase 2 for every decided checkpoint <= id: each pending
// committable is published in checkpoint order, then old records are
// pruned. Committing an id whose committables are all published is a
// no-op. A nil error means everything decided up to id is published.
func (c *Coordinator) Commit(ctx context.Context, id uint64) error {
	if err := c.usable(); err != nil {
		return err
	}
	if id >= c.next {
		return fmt.Errorf("committer: commit of checkpoint %d, which is not decided (next is %d)", id, c.next)
	}
	if c.begun != 0 {
		return fmt.Errorf("committer: commit while checkpoint %d is begun and not decided", c.begun-1)
	}
	if err := c.commit(ctx, id, ""); err != nil {
		return c.fail(err)
	}
	if c.postCommit != nil {
		if err := c.postCommit(ctx, id); err != nil {
			return c.fail(err)
		}
	}
	return nil
}

// Complete finishes the checkpoint: Decide, then Commit of everything
// decided up to it, which runs the post-commit steps (the participants'
// CommittedCheckpoint, and WithPostCommit's function). A nil error means
// the checkpoint is decided and published. Like Decide, it must be called
// once, with no other method of the coordinator running meanwhile; it may
// run on any goroutine while the participants receive records.
func (ph *Phase1) Complete(ctx context.Context) (uint64, error) {
	id, err := ph.Decide(ctx)
	if err != nil {
		return 0, err
	}
	return id, ph.c.Commit(ctx, id)
}

// Checkpoint runs a whole checkpoint: Begin, then Complete.
func (c *Coordinator) Checkpoint(ctx context.Context, source json.RawMessage, final bool) (uint64, error) {
	ph, err := c.Begin(ctx, source, final)
	if err != nil {
		return 0, err
	}
	return ph.Complete(ctx)
}

func (c *Coordinator) commit(ctx context.Context, upTo uint64, phase string) error {
	// Committables leave c.pending only once their whole checkpoint is
	// published, CommittedCheckpoint calls included: after a failure the
	// checkpoint's committables are committed again (a no-op for those
	// already published) so that its CommittedCheckpoint calls are made.
	n, group := 0, 0
	for n < len(c.pending) && c.pending[n].checkpoint <= upTo {
		pc := c.pending[n]
		p := c.parts[pc.part]
		if err := c.retry(ctx, pc.checkpoint, p.Name(), phase != "", func() error { return p.Commit(ctx, pc.data) }); err != nil {
			var ce *CommitError
			if !errors.As(err, &ce) {
				err = &CommitError{Checkpoint: pc.checkpoint, Participant: p.Name(), Target: string(pc.data), Err: err}
			}
			c.pending = c.pending[group:]
			return err
		}
		n++
		if err := c.at(fmt.Sprintf("%scommitted:%d", phase, n)); err != nil {
			c.pending = c.pending[group:]
			return err
		}
		if n == len(c.pending) || c.pending[n].checkpoint != pc.checkpoint || c.pending[n].checkpoint > upTo {
			if err := c.committedCheckpoint(ctx, c.pending[group:n], phase); err != nil {
				c.pending = c.pending[group:]
				return err
			}
			group = n
		}
	}
	c.pending = c.pending[n:]
	if err := c.at(phase + "phase2"); err != nil {
		return err
	}
	if err := c.prune(ctx); err != nil {
		return fmt.Errorf("prune checkpoints in %s: %w", c.store.Location(), err)
	}
	if phase == "" {
		c.committed(upTo)
	}
	if err := c.at(phase + "pruned"); err != nil {
		return err
	}
	if every := c.sweepInterval(); phase == "" && every > 0 && (upTo%uint64(every) == 0 || c.final) {
		if err := c.sweep(ctx, slices.Clone(c.records), false); err != nil {
			return err
		}
		return c.at("swept")
	}
	return nil
}

// sweepInterval is how often phase 2 sweeps: every n-th checkpoint, n the
// smaller of WithSweepEvery and what the participants asked for in their
// last snapshots; 0: only at recovery.
func (c *Coordinator) sweepInterval() int {
	switch {
	case c.asked == 0:
		return c.sweepEvery
	case c.sweepEvery == 0:
		return c.asked
	default:
		return min(c.sweepEvery, c.asked)
	}
}

// committed reports the end of phase 2 up to checkpoint id.
func (c *Coordinator) committed(id uint64) {
	f := c.events.Committed
	if f == nil {
		return
	}
	now := c.now()
	info := CommittedInfo{ID: id, Final: c.final}
	if c.timing.id == id && !c.timing.decided.IsZero() {
		info.Phase2, info.Total = now.Sub(c.timing.decided), now.Sub(c.timing.begun)
	}
	f(info)
}

// sweep runs every participant's Sweep with the retained records.
func (c *Coordinator) sweep(ctx context.Context, retained []*recovery.Checkpoint, recovering bool) error {
	for _, p := range c.parts {
		swept, err := p.Sweep(ctx, retained)
		if err != nil {
			if recovering {
				return wrapParticipant("sweep", p.Name(), err)
			}
			return wrapParticipant("cleanup", p.Name(), err)
		}
		if f := c.events.Swept; f != nil {
			f(SweptInfo{Participant: p.Name(), Swept: swept, Recovery: recovering})
		}
	}
	return nil
}

// cloneRecord returns a deep copy of rec, through its encoding.
func cloneRecord(rec *recovery.Checkpoint) (*recovery.Checkpoint, error) {
	b, err := recovery.Encode(rec)
	if err != nil {
		return nil, err
	}
	return recovery.Decode("checkpoint "+strconv.FormatUint(rec.ID, 10), b)
}

// prune deletes all but the newest c.retain records (recovery.PruneIDs:
// c.records are the store's records, no listing needed).
func (c *Coordinator) prune(ctx context.Context) error {
	ids := make([]uint64, len(c.records))
	for i, r := range c.records {
		ids[i] = r.ID
	}
	n, err := recovery.PruneIDs(ctx, c.store, ids, c.retain)
	c.records = c.records[n:]
	return err
}

// committedCheckpoint calls CommittedCheckpoint of every participant that
// has committables in done, with them in done, all of one checkpoint, in
// participant order.
func (c *Coordinator) committedCheckpoint(ctx context.Context, done []pending, phase string) error {
	for i, p := range c.parts {
		var data []json.RawMessage
		for _, pc := range done {
			if pc.part == i {
				data = append(data, pc.data)
			}
		}
		if len(data) == 0 {
			continue
		}
		id := done[0].checkpoint
		if err := c.retry(ctx, id, p.Name(), phase != "", func() error { return p.CommittedCheckpoint(ctx, id, data) }); err != nil {
			return &CommitError{Checkpoint: id, Participant: p.Name(), Err: err}
		}
		if err := c.at(phase + "checkpoint-committed:" + p.Name()); err != nil {
			return err
		}
	}
	return nil
}

// retry runs f, a phase-2 step of participant part for checkpoint id,
// until it succeeds, fails permanently, ctx ends or the attempts run out;
// it reports each failure that is not permanent as a CommitFailed event.
func (c *Coordinator) retry(ctx context.Context, id uint64, part string, recovering bool, f func() error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = f()
		if err == nil || IsPermanent(err) || ctx.Err() != nil {
			return err
		}
		retry := attempt < c.attempts
		var d time.Duration
		if retry {
			d = min(c.backoff<<(attempt-1), 30*time.Second)
			d = time.Duration(rand.Int64N(int64(d) + 1))
		}
		if f := c.events.CommitFailed; f != nil {
			f(CommitFailedInfo{Checkpoint: id, Participant: part, Attempt: attempt, Retry: retry, Wait: d, Recovery: recovering, Err: err})
		}
		if !retry {
			return err
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// sortPending orders by checkpoint, keeping each participant's order within
// a checkpoint.
func sortPending(p []pending) {
	slices.SortStableFunc(p, func(a, b pending) int { return cmp.Compare(a.checkpoint, b.checkpoint) })
}
