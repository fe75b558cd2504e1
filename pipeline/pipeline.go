package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filesink/filesink/committer"
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
	// It is called from Run's goroutine and must not block.
	Progress func(Progress)
	// Barrier, if set, is called on Run's goroutine right before the
	// barrier of checkpoint id is taken: the start of the checkpoint, for
	// timing it (the committer.WithHook points mark its later steps). It
	// must not block.
	Barrier func(id uint64, final bool)
	// Committed, if set, is called after each checkpoint's phase 2 (its
	// files and manifests published) with its id, on the goroutine that
	// committed it and before the next checkpoint's phase 2; an error
	// fails the run as a commit error does. For work that must follow a
	// commit, such as partition-complete markers (filesink.Markers).
	Committed func(ctx context.Context, id uint64) error
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
}

type batch struct {
	data   []byte
	vals   [][]byte // the records, when the source's values are retained (no copy in data)
	ends   []int    // data[ends[i-1]:ends[i]] is record i; with vals, the running byte count
	routes []int    // subtask of record i (Config.Partition); nil: round robin
	// pending counts the subtasks that have not yet processed the batch;
	// the last one hands it back to the reader for reuse.
	pending atomic.Int32
	origins []source.Origin
	pos     json.RawMessage // source position after the last record
	eof     bool            // the source is exhausted after this batch
	err     error
}

// bytes is the size of the batch's records.
func (b *batch) bytes() int {
	if len(b.ends) == 0 {
		return 0
	}
	return b.ends[len(b.ends)-1]
}

func (b *batch) record(i int) []byte {
	if b.vals != nil {
		return b.vals[i]
	}
	start := 0
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.data[start:b.ends[i]]
}

// Run executes the job until the end of a bounded source, a stop, or an
// error. See the package documentation for its guarantees.
func Run(ctx context.Context, cfg Config) (Result, error) {
	var res Result
	if cfg.OpenSource == nil || cfg.Store == nil || len(cfg.Sinks) == 0 {
		return res, errors.New("pipeline: OpenSource, Store and at least one Sink are required")
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
	log := cfg.Logger

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	subs := make([]*subtask, len(cfg.Sinks))
	free := make(chan *batch, 4) // processed batches, for the reader to reuse
	parts := make([]committer.Participant, len(cfg.Sinks))
	var wg sync.WaitGroup
	for i, s := range cfg.Sinks {
		subs[i] = newSubtask(s, i, len(cfg.Sinks), free)
		parts[i] = subs[i]
		wg.Add(1)
		go func() { defer wg.Done(); subs[i].run(ctx) }()
	}
	defer func() {
		for _, s := range subs {
			close(s.in)
		}
		wg.Wait()
		for _, s := range cfg.Sinks {
			s.Close()
		}
	}()

	opts := append([]committer.Option{committer.WithLogger(log)}, cfg.CommitterOptions...)
	coord, err := committer.New(cfg.Store, parts, opts...)
	if err != nil {
		return res, err
	}
	restored, err := coord.Recover(ctx)
	if err != nil {
		return res, err
	}
	var pos json.RawMessage
	if restored != nil {
		res.Restored = restored.ID
		res.Checkpoint = restored.ID
		pos = restored.Source
	}
	src, err := cfg.OpenSource(ctx, pos)
	if err != nil {
		return res, fmt.Errorf("open source: %w", err)
	}
	defer src.Close()
	// Until the first batch, a checkpoint records the position the source
	// was opened at, as the source resolved it (a Kafka source's start
	// and end offsets), not the restored or nil one: a restart from that
	// checkpoint must start, and in bounded mode stop, at the same place.
	// (Before the reader goroutine starts: Position is not called
	// concurrently with Next.)
	openPos, err := src.Position()
	if err != nil {
		return res, fmt.Errorf("source position: %w", err)
	}
	if openPos == nil {
		openPos = pos
	}
	if restored != nil {
		if src.Replayable() {
			log.Info("restored", "checkpoint", restored.ID, "source", src.Describe())
		} else {
			log.Warn("the source is not replayable: records read after the last checkpoint of the previous run are lost", "checkpoint", restored.ID, "source", src.Describe())
		}
	}
	// A source that reports progress outside the checkpoints (a Kafka
	// consumer group, for monitoring) gets the position of every
	// checkpoint whose phase 2 succeeded, the restored one included.
	var groups *groupCommits
	if gc, ok := src.(source.GroupCommitter); ok {
		groups = startGroupCommits(ctx, gc, log)
		defer groups.close() // before src.Close
		if restored != nil {
			groups.offer(restored.ID, restored.Source)
		}
	}
	committed := func(id uint64, pos json.RawMessage) {
		if groups != nil {
			groups.offer(id, pos)
		}
	}

	batches := make(chan *batch, 2)
	readCtx, abortReading := context.WithCancel(ctx)
	stopReading := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		read(readCtx, stopReading, src, cfg.BatchSize, cfg.Partition, len(cfg.Sinks), free, batches)
	}()
	defer func() { abortReading(); <-readDone }()

	ckptTicker := newTicker(cfg.CheckpointInterval)
	defer ckptTicker.stop()
	tickTicker := newTicker(cfg.TickInterval)
	defer tickTicker.stop()

	var prog Progress
	var sinceCkpt int64
	lastPos := openPos
	// A failed checkpoint caused by a subtask that failed on a record
	// reports that record, not the checkpoint it broke.
	subtaskErr := func(err error) error {
		for _, s := range subs {
			select {
			case <-s.failed:
				return s.err
			default:
			}
		}
		return err
	}
	completed := func(id uint64, final bool) {
		res.Checkpoint = id
		prog.Checkpoints++
		prog.Checkpoint = id
		prog.Done = final
		log.Debug("checkpoint", "id", id, "final", final, "records", prog.Records)
		if cfg.Progress != nil {
			cfg.Progress(prog)
		}
	}
	// A checkpoint's barrier is taken on this goroutine (Begin); phase 1
	// (uploads, fsyncs), the decide step and phase 2 then run on their own
	// goroutine while the subtasks take the next records. One checkpoint
	// runs at a time: the next barrier comes after the previous checkpoint
	// (see checkpointDue below).
	type outcome struct {
		id  uint64
		err error
	}
	var running chan outcome
	settle := func(o outcome) error {
		running = nil
		if o.err != nil {
			return subtaskErr(o.err)
		}
		completed(o.id, false)
		return nil
	}
	awaitRunning := func() error {
		if running == nil {
			return nil
		}
		return settle(<-running)
	}
	defer func() {
		if running != nil {
			cancel()
			<-running
		}
	}()
	// Phase 1 overlaps the next records only when every sink allows it
	// (Sink.OverlapsCheckpoints). A sink that does not (the MySQL XA sink)
	// gets phase 2 right after the barrier, before the next records: their
	// rows could wait for locks the prepared branch holds until it commits.
	overlap := true
	for _, s := range cfg.Sinks {
		overlap = overlap && s.OverlapsCheckpoints()
	}
	checkpoint := func(final bool) error {
		if err := awaitRunning(); err != nil {
			return err
		}
		if cfg.Barrier != nil {
			cfg.Barrier(coord.NextID(), final)
		}
		ph, err := coord.Begin(ctx, lastPos, final)
		if err != nil {
			return subtaskErr(err)
		}
		sinceCkpt = 0
		pos := lastPos
		if final || !overlap {
			id, err := ph.Decide(ctx)
			if err == nil {
				err = coord.Commit(ctx, id)
			}
			if err == nil && cfg.Committed != nil {
				err = cfg.Committed(ctx, id)
			}
			if err != nil {
				return subtaskErr(err)
			}
			committed(id, pos)
			completed(id, final)
			return nil
		}
		ch := make(chan outcome, 1)
		running = ch
		go func() {
			id, err := ph.Decide(ctx)
			if err == nil {
				err = coord.Commit(ctx, id)
			}
			if err == nil && cfg.Committed != nil {
				err = cfg.Committed(ctx, id)
			}
			if err == nil {
				committed(id, pos)
			}
			ch <- outcome{id, err}
		}()
		return nil
	}
	finish := func(eof bool) (Result, error) {
		if err := checkpoint(true); err != nil {
			return res, err
		}
		res.Records, res.Bytes, res.EndOfInput = prog.Records, prog.Bytes, eof
		return res, nil
	}
	// An interval checkpoint that falls due while the previous one is
	// still in its phase 1 or 2 is taken as soon as that one completes,
	// and the records go on meanwhile (as Flink triggers no checkpoint
	// while one is pending): the writes do not stand still waiting for
	// uploads. A CheckpointEvery checkpoint waits, so that it covers the
	// records it is due at.
	due := false
	checkpointDue := func() error {
		if running != nil {
			due = true
			return nil
		}
		return checkpoint(false)
	}
	stop := cfg.Stop
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-stop:
			// Let the reader hand over what it has read (a non-replayable
			// source cannot give it again); the final checkpoint follows
			// when it closes the channel.
			log.Info("stopping: taking a final checkpoint")
			close(stopReading)
			stop = nil
			ckptTicker.stop()
		case o := <-running:
			if err := settle(o); err != nil {
				return res, err
			}
			if due {
				due = false
				if err := checkpoint(false); err != nil {
					return res, err
				}
			}
		case <-ckptTicker.c:
			if err := checkpointDue(); err != nil {
				return res, err
			}
		case <-tickTicker.c:
			now := cfg.Clock()
			for _, s := range subs {
				if err := s.tick(ctx, now); err != nil {
					return res, err
				}
			}
		case b, ok := <-batches:
			if !ok {
				return finish(false)
			}
			if b.err != nil {
				return res, b.err
			}
			// The batch goes back to the reader once every subtask is done
			// with it: read what this loop needs first.
			n, size, pos, eof := len(b.ends), b.bytes(), b.pos, b.eof
			if n > 0 {
				b.pending.Store(int32(len(subs)))
				for _, s := range subs {
					select {
					case s.in <- msg{batch: b}:
					case <-s.failed:
						return res, s.err
					case <-ctx.Done():
						return res, ctx.Err()
					}
				}
				prog.Records += int64(n)
				prog.Bytes += int64(size)
				sinceCkpt += int64(n)
				if cfg.Progress != nil {
					cfg.Progress(prog)
				}
			}
			lastPos = pos
			if eof {
				return finish(true)
			}
			if cfg.CheckpointEvery > 0 && sinceCkpt >= cfg.CheckpointEvery {
				if err := checkpoint(false); err != nil {
					return res, err
				}
			}
		}
	}
}

// linger is how long the reader waits for more records before it hands a
// partial batch over, so that records of a slow source (stdin) reach the
// sinks and the next checkpoint.
const linger = 50 * time.Millisecond

// read sends batches of records until the end of the source, an error,
// stop (then it sends what it has read and closes out) or cancellation of
// ctx (then it returns at once).
func read(ctx context.Context, stop <-chan struct{}, src source.Source, size int, partition func([]byte, int) int, subtasks int, free <-chan *batch, out chan<- *batch) {
	defer close(out)
	stopCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-stopCtx.Done():
		}
	}()
	dataCap := 0 // the previous batch's bytes: the next one is sized for as many
	r, ok := src.(source.Retained)
	retained := ok && r.ValuesRetained()
	for {
		var b *batch
		select {
		case b = <-free: // processed by every subtask: reuse its buffers
			clear(b.vals) // let the source's memory go
			b.data, b.ends, b.origins, b.routes = b.data[:0], b.ends[:0], b.origins[:0], b.routes[:0]
			if b.vals != nil {
				b.vals = b.vals[:0]
			}
			b.pos, b.eof, b.err = nil, false, nil
		default:
			b = &batch{
				ends:    make([]int, 0, size),
				origins: make([]source.Origin, 0, size),
			}
			if retained {
				b.vals = make([][]byte, 0, size)
			} else {
				b.data = make([]byte, 0, dataCap+dataCap/8)
			}
			if partition != nil {
				b.routes = make([]int, 0, size)
			}
		}
		stopped := false
		lctx, lcancel := context.WithTimeout(stopCtx, linger)
		for len(b.ends) < size {
			if stopCtx.Err() != nil && ctx.Err() == nil {
				stopped = true // a source that never blocks ignores its context
				break
			}
			rec, err := src.Next(lctx)
			if err == io.EOF {
				b.eof = true
				break
			}
			if err != nil {
				if ctx.Err() != nil {
					lcancel()
					return
				}
				if stopCtx.Err() != nil {
					stopped = true
					break
				}
				if lctx.Err() != nil {
					if len(b.ends) > 0 {
						break // hand over a partial batch
					}
					lcancel()
					lctx, lcancel = context.WithTimeout(stopCtx, linger)
					continue
				}
				b.err = fmt.Errorf("read source: %w", err)
				break
			}
			if partition != nil {
				i := partition(rec.Value, subtasks)
				if i < 0 || i >= subtasks {
					b.err = fmt.Errorf("partition of record %s: subtask %d out of [0, %d)", rec.Origin, i, subtasks)
					break
				}
				b.routes = append(b.routes, i)
			}
			if retained {
				b.vals = append(b.vals, rec.Value)
				b.ends = append(b.ends, b.bytes()+len(rec.Value))
			} else {
				b.data = append(b.data, rec.Value...)
				b.ends = append(b.ends, len(b.data))
			}
			b.origins = append(b.origins, rec.Origin)
		}
		lcancel()
		dataCap = len(b.data)
		if b.err == nil {
			pos, err := src.Position()
			if err != nil {
				b.err = fmt.Errorf("source position: %w", err)
			}
			b.pos = pos
		}
		select {
		case out <- b:
		case <-ctx.Done():
			return
		}
		if b.eof || b.err != nil || stopped {
			return
		}
	}
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
