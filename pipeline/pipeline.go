package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
)

// Sink is one sink subtask as the pipeline drives it.
type Sink interface {
	committer.Participant
	// Write adds one record; record is not retained after it returns.
	Write(ctx context.Context, record []byte, origin source.Origin) error
	// Tick lets the sink apply processing-time rules (rolling) at now.
	Tick(ctx context.Context, now time.Time) error
	// Close releases resources without publishing anything.
	Close() error
	// OverlapsCheckpoints reports whether the sink takes the next
	// checkpoint's records while a checkpoint's phase 1 (the Wait of its
	// Prepare), decide step and phase 2 run. A sink whose next records may
	// wait for what a prepared, uncommitted checkpoint holds (the row locks
	// of an XA branch) returns false: then the pipeline runs every
	// checkpoint whole at its barrier. It must always return the same.
	OverlapsCheckpoints() bool
	// Batcher: the pipeline brackets every batch of records with
	// BeginBatch and EndBatch; a sink that has no use for batches
	// implements both as no-ops.
	Batcher
	// Counters returns the sink's running totals for monitoring (see
	// committer.Counters); a sink that counts none of them returns
	// committer.Counters{}. It must return the same on every call and be
	// safe for concurrent use (calling the functions it returns has the
	// concurrency rules committer.Counters gives).
	Counters() committer.Counters
}

// BadRecordSink is implemented by a Sink that can take a record the source
// could not deliver whole: a line longer than the maximum that a line
// source skipped (source.WithSkipLongLines), or a value its decoder
// refused (source.Decoded). WriteBad gets what the source kept of it
// (source.LineTooLongError.Head, source.UndecodableError.Value) and the
// source's error, and
// sends it to the sink's dead-letter output (filesink.Writer with
// filesink.WithDeadLetter), exactly once like any record, or returns a
// *source.BadRecordError when it has none. It is called on the subtask's
// goroutine, in the record's place among the others.
type BadRecordSink interface {
	WriteBad(ctx context.Context, record []byte, origin source.Origin, cause error) error
}

// WriteBad hands a record the source could not deliver whole to sink: to
// its WriteBad if it (or a sink it wraps, through an Unwrap() Sink method)
// is a BadRecordSink, else it returns a *source.BadRecordError naming the
// record, which stops the run. Wrappers of a Sink call it from their own
// WriteBad.
func WriteBad(ctx context.Context, sink Sink, record []byte, origin source.Origin, cause error) error {
	for s := sink; ; {
		if bs, ok := s.(BadRecordSink); ok {
			return bs.WriteBad(ctx, record, origin, cause)
		}
		u, ok := s.(interface{ Unwrap() Sink })
		if !ok {
			return &source.BadRecordError{Origin: origin.String(), Err: cause}
		}
		s = u.Unwrap()
	}
}

// Defaults.
const (
	DefaultCheckpointInterval = 10 * time.Second
	DefaultTickInterval       = time.Second
	DefaultBatchSize          = 512
)

// Config describes a job.
type Config struct {
	// OpenSource opens the source at pos (nil: from the beginning).
	OpenSource func(ctx context.Context, pos json.RawMessage) (source.Source, error)
	// Store keeps the checkpoint records.
	Store recovery.Store
	// Sinks are the subtasks; their Names must be stable across runs.
	Sinks []Sink
	// CheckpointInterval between checkpoints (default 10 s; negative: none
	// on time). A checkpoint that falls due while the previous one is
	// still running is taken when that one completes; the records go on
	// meanwhile.
	CheckpointInterval time.Duration
	// CheckpointEvery takes a checkpoint after about that many records
	// (at the next batch boundary), waiting for the previous one to
	// complete if it is still running; 0 disables it.
	CheckpointEvery int64
	// TickInterval between Sink.Tick calls (default 1 s).
	TickInterval time.Duration
	// BatchSize is the number of records read per batch (default 512).
	BatchSize int
	// Stop, when closed, makes Run take a final checkpoint and return nil.
	Stop <-chan struct{}
	// Logger (default: discard).
	Logger *slog.Logger
	// Clock for Tick (default time.Now).
	Clock func() time.Time
	// CommitterOptions are passed to committer.New.
	CommitterOptions []committer.Option
	// Partition, if set, sends a record to subtask Partition(record,
	// len(Sinks)) instead of spreading the records round robin: a keyed
	// stream, for sinks that need every record of a key on one subtask
	// (mysqlxa.KeyPartitioner for the MySQL sink in upsert or increment
	// mode). It is called from one goroutine, the reader's, and must
	// return an index in [0, n).
	Partition func(record []byte, n int) int
	// Progress, if set, receives totals after every batch and checkpoint.
	// It is called from Run's goroutine and must not block. (The same as
	// Events.Progress; both are called.)
	Progress func(Progress)
	// Barrier, if set, is called on Run's goroutine when the barrier of
	// checkpoint id is taken: the start of the checkpoint. It must not
	// block. (The same as Events.CheckpointBegun; both are called.)
	Barrier func(id uint64, final bool)
	// Events receives the run's events: the commit protocol's steps with
	// their durations, recovery, sweeps, failed commits, the source, the
	// progress. The Logger gets them too.
	Events EventListener
	// Committed, if set, is called after each checkpoint's phase 2 (its
	// files and manifests published) with its id, on the goroutine that
	// committed it and before the next checkpoint's phase 2; an error
	// fails the run as a commit error does. For work that must follow a
	// commit, such as partition-complete markers (filesink.Markers). It is
	// the coordinator's post-commit function (committer.WithPostCommit).
	Committed func(ctx context.Context, id uint64) error

	// Identity, if set, is the job's identity: before anything is
	// written, Run checks it against the store's job record and refuses a
	// run of another job (recovery.CheckIdentity, with AllowChange naming
	// the fields that may change deliberately).
	Identity    *recovery.Identity
	AllowChange []string
	// Output and DeadLetter, if set, are the output (and dead-letter
	// output) of the job's file sinks. When the store holds no checkpoint
	// record and the output already holds commit manifests or files, Run
	// refuses to start with a *LostStateError, before anything is
	// written; with ResumeFromOutput it rebuilds what the output holds
	// from its manifests instead, reads the source from the beginning
	// (OpenSource gets a nil position) and drops every record the output
	// holds, so that nothing is lost or published twice.
	Output, DeadLetter driver.Output
	ResumeFromOutput   bool
	// EarlyPublish tells Run that the file sinks publish parts before
	// their checkpoint (at-least-once): files no manifest lists are then
	// expected after a crash, and only manifests make an output hold
	// published data.
	EarlyPublish bool
}

// Progress is a snapshot of a job's totals.
type Progress struct {
	Records     int64  // records read in this run
	Bytes       int64  // bytes of records read in this run
	Checkpoints int64  // checkpoints completed in this run
	Checkpoint  uint64 // id of the latest completed checkpoint
	Done        bool   // the final checkpoint completed
}

// Result describes a finished run.
type Result struct {
	Restored   uint64 // checkpoint restored at start (0: fresh start)
	Checkpoint uint64 // last checkpoint completed
	Records    int64  // records read in this run
	Bytes      int64
	EndOfInput bool // the source was exhausted (otherwise: stopped)
	// Skipped counts the records read and dropped because the output
	// already held them (Config.ResumeFromOutput).
	Skipped int64
}

// withDefaults checks cfg and fills in its defaults.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.OpenSource == nil || cfg.Store == nil || len(cfg.Sinks) == 0 {
		return cfg, errors.New("pipeline: OpenSource, Store and at least one Sink are required")
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = DefaultCheckpointInterval
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = DefaultTickInterval
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return cfg, nil
}

// Run executes the job until the end of a bounded source, a stop, or an
// error. See the package documentation for its guarantees.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &runner{cfg: cfg, ev: cfg.events(), cancel: cancel}
	defer r.shutdown()
	if err := r.checkStart(ctx); err != nil {
		return r.res, err
	}
	r.startSubtasks(ctx)
	// A fresh job opens its source first: a run that cannot leaves no
	// claim and no job record behind (establish). A job with checkpoints
	// opens it at the position recovery restores.
	if r.fresh {
		if err := r.openSource(ctx); err != nil {
			return r.res, err
		}
	}
	if err := r.establish(ctx); err != nil {
		return r.res, err
	}
	if err := r.recover(ctx); err != nil {
		return r.res, err
	}
	if !r.fresh {
		if err := r.openSource(ctx); err != nil {
			return r.res, err
		}
	}
	r.startReader(ctx)
	return r.loop(ctx)
}

// runner is one Run: the subtasks, the coordinator, the source and its
// reader, and the state of the loop. Its methods run on Run's goroutine,
// except complete.
type runner struct {
	cfg    Config
	ev     EventListener      // cfg.events()
	cancel context.CancelFunc // cancels Run's context

	subs  []*subtask
	wg    sync.WaitGroup // the subtasks' goroutines
	free  chan *batch    // processed batches, for the reader to reuse
	coord *committer.Coordinator
	// overlap: every sink takes records while a checkpoint completes
	// (Sink.OverlapsCheckpoints).
	overlap bool

	src          source.Source
	groups       *groupCommits // nil: the source is no GroupCommitter
	batches      chan *batch
	abortReading context.CancelFunc
	stopReading  chan struct{}
	readDone     chan struct{}
	ckptTicker   ticker
	tickTicker   ticker

	res       Result
	prog      Progress
	sinceCkpt int64           // records since the last barrier
	lastPos   json.RawMessage // source position after the last batch
	skip      *skipState      // what the output holds beyond lastPos (ResumeFromOutput)
	fresh     bool            // the store held no checkpoint record at the start
	writeJob  bool            // the job record is not in the store yet (establish writes it)
	jobUID    string          // the job's UID, which claims the output (Output)
	firstID   uint64          // id of a fresh start's first checkpoint (ResumeFromOutput)
	running   chan outcome    // the checkpoint completing on its own goroutine; nil: none
	due       bool            // an interval checkpoint waits for the running one
}

// outcome is how a checkpoint completed.
type outcome struct {
	id  uint64
	err error
}

// startSubtasks starts one goroutine per sink.
func (r *runner) startSubtasks(ctx context.Context) {
	n := len(r.cfg.Sinks)
	r.subs = make([]*subtask, n)
	r.free = make(chan *batch, 4)
	r.overlap = true
	for i, s := range r.cfg.Sinks {
		r.subs[i] = newSubtask(s, i, n, r.free)
		r.overlap = r.overlap && s.OverlapsCheckpoints()
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.subs[i].run(ctx) }()
	}
}

// shutdown waits for a running checkpoint (cancelling it), stops the
// reader, delivers the last group commit, closes the source, then stops
// the subtasks and closes the sinks.
func (r *runner) shutdown() {
	if r.running != nil {
		r.cancel()
		<-r.running
	}
	r.ckptTicker.stop()
	r.tickTicker.stop()
	if r.readDone != nil {
		r.abortReading()
		<-r.readDone
	}
	if r.groups != nil {
		r.groups.close() // before src.Close
	}
	if r.src != nil {
		r.src.Close()
	}
	for _, s := range r.subs {
		close(s.in)
	}
	r.wg.Wait()
	for _, s := range r.cfg.Sinks {
		s.Close()
	}
}

// recover builds the coordinator over the subtasks and recovers from the
// checkpoint store.
func (r *runner) recover(ctx context.Context) error {
	parts := make([]committer.Participant, len(r.subs))
	for i, s := range r.subs {
		parts[i] = s
	}
	opts := append([]committer.Option{committer.WithEventListener(r.ev.EventListener)}, r.cfg.CommitterOptions...)
	if r.cfg.Committed != nil {
		opts = append(opts, committer.WithPostCommit(r.cfg.Committed))
	}
	if r.firstID > 0 {
		opts = append(opts, committer.WithFirstID(r.firstID))
	}
	coord, err := committer.New(r.cfg.Store, parts, opts...)
	if err != nil {
		return err
	}
	r.coord = coord
	restored, err := coord.Recover(ctx)
	if err != nil {
		return err
	}
	if restored != nil {
		r.res.Restored = restored.ID
		r.res.Checkpoint = restored.ID
		if r.lastPos, r.skip, err = decodePosition(restored.Source); err != nil {
			return fmt.Errorf("recover checkpoint %d: %w", restored.ID, err)
		}
	}
	return nil
}

// openSource opens the source at the restored position and starts the
// group commits of a source.GroupCommitter.
func (r *runner) openSource(ctx context.Context) error {
	pos := r.lastPos
	src, err := r.cfg.OpenSource(ctx, pos)
	if err != nil {
		return sourceError("open source", err)
	}
	r.src = src
	// Until the first batch, a checkpoint records the position the source
	// was opened at, as the source resolved it (a Kafka source's start
	// and end offsets), not the restored or nil one: a restart from that
	// checkpoint must start, and in bounded mode stop, at the same place.
	// (Before the reader goroutine starts: Position is not called
	// concurrently with Next.)
	openPos, err := src.Position()
	if err != nil {
		return fmt.Errorf("source position: %w", err)
	}
	if openPos != nil {
		r.lastPos = openPos
	}
	if f := r.ev.SourceOpened; f != nil {
		f(SourceInfo{Restored: r.res.Restored, Source: src.Describe(), Replayable: src.Replayable()})
	}
	// A source that reports progress outside the checkpoints (a Kafka
	// consumer group, for monitoring) gets the position of every
	// checkpoint whose phase 2 succeeded, the restored one included.
	if gc, ok := src.(source.GroupCommitter); ok {
		r.groups = startGroupCommits(ctx, gc, r.cfg.Logger)
		if r.res.Restored != 0 {
			r.groups.offer(r.res.Restored, pos)
		}
	}
	return nil
}

// startReader starts the reader's goroutine and the tickers.
func (r *runner) startReader(ctx context.Context) {
	r.batches = make(chan *batch, 2)
	readCtx, abort := context.WithCancel(ctx)
	r.abortReading = abort
	r.stopReading = make(chan struct{})
	r.readDone = make(chan struct{})
	rd := newReader(r.src, &r.cfg, r.free, r.batches)
	rd.skip, rd.skipping = r.skip, r.skip != nil
	go func() {
		defer close(r.readDone)
		rd.run(readCtx, r.stopReading)
	}()
	r.ckptTicker = newTicker(r.cfg.CheckpointInterval)
	r.tickTicker = newTicker(r.cfg.TickInterval)
}

// loop is Run's event loop, from the first batch to the end.
func (r *runner) loop(ctx context.Context) (Result, error) {
	stop := r.cfg.Stop
	for {
		var err error
		select {
		case <-ctx.Done():
			return r.res, ctx.Err()
		case <-stop:
			// Let the reader hand over what it has read (a non-replayable
			// source cannot give it again); the final checkpoint follows
			// when it closes the channel.
			r.cfg.Logger.Info("stopping: taking a final checkpoint")
			close(r.stopReading)
			stop = nil
			r.ckptTicker.stop()
		case o := <-r.running:
			err = r.settled(ctx, o)
		case <-r.ckptTicker.c:
			err = r.checkpointDue(ctx)
		case <-r.tickTicker.c:
			err = r.tick(ctx)
		case b, ok := <-r.batches:
			if !ok {
				return r.finish(ctx, false)
			}
			if b.restart != nil {
				return r.restart(ctx, b.restart)
			}
			var eof bool
			if eof, err = r.onBatch(ctx, b); err == nil && eof {
				return r.finish(ctx, true)
			}
		}
		if err != nil {
			return r.res, err
		}
	}
}

// onBatch hands b to the subtasks and takes a CheckpointEvery checkpoint
// when due. eof: the source is exhausted.
func (r *runner) onBatch(ctx context.Context, b *batch) (eof bool, err error) {
	if b.err != nil {
		return false, b.err
	}
	// The batch goes back to the reader once every subtask is done with
	// it: read what this loop needs first.
	n, size, pos, eof := len(b.ends), b.bytes(), b.pos, b.eof
	if b.skipping {
		r.skip = b.skip
		r.res.Skipped += b.skipped
	}
	if n > 0 {
		if err := r.dispatch(ctx, b); err != nil {
			return false, err
		}
		r.prog.Records += int64(n)
		r.prog.Bytes += int64(size)
		r.sinceCkpt += int64(n)
		if r.ev.Progress != nil {
			r.ev.Progress(r.prog)
		}
	}
	r.lastPos = pos
	if eof {
		return true, nil
	}
	if r.cfg.CheckpointEvery > 0 && r.sinceCkpt >= r.cfg.CheckpointEvery {
		return false, r.checkpoint(ctx, false)
	}
	return false, nil
}

// dispatch sends b to every subtask.
func (r *runner) dispatch(ctx context.Context, b *batch) error {
	b.pending.Store(int32(len(r.subs)))
	for _, s := range r.subs {
		select {
		case s.in <- msg{batch: b}:
		case <-s.failed:
			return s.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// tick runs Sink.Tick on every subtask.
func (r *runner) tick(ctx context.Context) error {
	now := r.cfg.Clock()
	for _, s := range r.subs {
		if err := s.tick(ctx, now); err != nil {
			return err
		}
	}
	return nil
}

// finish takes the final checkpoint and returns the result.
func (r *runner) finish(ctx context.Context, eof bool) (Result, error) {
	if err := r.checkpoint(ctx, true); err != nil {
		return r.res, err
	}
	r.res.Records, r.res.Bytes, r.res.EndOfInput = r.prog.Records, r.prog.Bytes, eof
	return r.res, nil
}

// restart ends a run whose source met a schema change
// (source.ErrSchemaChanged) with a final checkpoint of the records
// handed over before it, and returns cause.
func (r *runner) restart(ctx context.Context, cause error) (Result, error) {
	r.cfg.Logger.Info("the records' schema changed: taking a final checkpoint before the job opens again", "change", cause.Error())
	res, err := r.finish(ctx, false)
	if err != nil {
		return res, err
	}
	return res, cause
}

// checkpointDue takes an interval checkpoint. One that falls due while the
// previous one is still in its phase 1 or 2 is taken as soon as that one
// completes, and the records go on meanwhile (as Flink triggers no
// checkpoint while one is pending): the writes do not stand still waiting
// for uploads. A CheckpointEvery checkpoint waits instead, so that it
// covers the records it is due at.
func (r *runner) checkpointDue(ctx context.Context) error {
	if r.running != nil {
		r.due = true
		return nil
	}
	return r.checkpoint(ctx, false)
}

// checkpoint takes a barrier on this goroutine (Begin). The rest of the
// checkpoint (phase 1's waiting for uploads and fsyncs, the decide step,
// phase 2 and the post-commit steps: Phase1.Complete) runs here too when
// it is final or a sink does not overlap checkpoints, else on a goroutine
// of its own while the subtasks take the next records. One checkpoint
// runs at a time: a checkpoint first waits for the running one.
func (r *runner) checkpoint(ctx context.Context, final bool) error {
	if r.running != nil {
		if err := r.settle(<-r.running, false); err != nil {
			return err
		}
	}
	ckptPos, err := encodePosition(r.lastPos, r.skip)
	if err != nil {
		return err
	}
	ph, err := r.coord.Begin(ctx, ckptPos, final)
	if err != nil {
		return r.subtaskErr(err)
	}
	r.sinceCkpt = 0
	pos := r.lastPos
	if final || !r.overlap {
		return r.settle(r.complete(ctx, ph, pos), final)
	}
	ch := make(chan outcome, 1)
	r.running = ch
	go func() { ch <- r.complete(ctx, ph, pos) }()
	return nil
}

// complete completes a checkpoint whose barrier was taken at source
// position pos; on any goroutine.
func (r *runner) complete(ctx context.Context, ph *committer.Phase1, pos json.RawMessage) outcome {
	id, err := ph.Complete(ctx)
	if err == nil && r.groups != nil {
		r.groups.offer(id, pos)
	}
	return outcome{id, err}
}

// settled takes the outcome of the running checkpoint, then a checkpoint
// that fell due meanwhile.
func (r *runner) settled(ctx context.Context, o outcome) error {
	if err := r.settle(o, false); err != nil {
		return err
	}
	if r.due {
		r.due = false
		return r.checkpoint(ctx, false)
	}
	return nil
}

// settle records the outcome of a completed checkpoint.
func (r *runner) settle(o outcome, final bool) error {
	r.running = nil
	if o.err != nil {
		return r.subtaskErr(o.err)
	}
	r.res.Checkpoint = o.id
	r.prog.Checkpoints++
	r.prog.Checkpoint = o.id
	r.prog.Done = final
	if r.ev.Progress != nil {
		r.ev.Progress(r.prog)
	}
	return nil
}

// subtaskErr returns the error of a subtask that failed on a record, if
// any, else err: a failed checkpoint caused by such a subtask reports that
// record, not the checkpoint it broke.
func (r *runner) subtaskErr(err error) error {
	for _, s := range r.subs {
		select {
		case <-s.failed:
			return s.err
		default:
		}
	}
	return err
}

type ticker struct {
	t *time.Ticker
	c <-chan time.Time
}

func newTicker(d time.Duration) ticker {
	if d <= 0 {
		return ticker{}
	}
	t := time.NewTicker(d)
	return ticker{t: t, c: t.C}
}

func (t *ticker) stop() {
	if t.t != nil {
		t.t.Stop()
		t.c = nil
	}
}
