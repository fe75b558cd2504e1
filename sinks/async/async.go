package async

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
)

// Sender sends one batch to the target: the hook a user implements to plug
// in their own client.
//
// Send must return nil only when the target has acknowledged every record
// of b; the sink then counts the batch as delivered. Any error fails the
// sink in AtLeastOnce mode (the checkpoint is never recorded and the
// records are sent again after a restart), so a Sender retries transient
// failures itself, a bounded number of times. Send must return soon after
// ctx is done: a Send still running a grace period after ctx's deadline
// counts as a dead worker. It is called concurrently from every worker,
// each time with a different batch, and must neither modify b nor keep it
// after it returns.
type Sender interface {
	Send(ctx context.Context, b *Batch) error
}

// SenderFunc adapts a function to Sender.
type SenderFunc func(ctx context.Context, b *Batch) error

// Send calls f(ctx, b).
func (f SenderFunc) Send(ctx context.Context, b *Batch) error { return f(ctx, b) }

// Reason says why a batch was closed.
type Reason uint8

// Reasons.
const (
	ByCount      Reason = iota + 1 // WithMaxRecords reached
	ByBytes                        // WithMaxBytes reached (or the next record would exceed it)
	ByLinger                       // the first record waited WithLinger
	ByCheckpoint                   // a final checkpoint (or any checkpoint with AtMostOnce)
)

func (r Reason) String() string {
	switch r {
	case ByCount:
		return "count"
	case ByBytes:
		return "bytes"
	case ByLinger:
		return "linger"
	case ByCheckpoint:
		return "checkpoint"
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Batch is one unit of sending. The sink never touches a batch again
// after it was queued.
type Batch struct {
	// Records are the batch's records, in the order they were written,
	// without terminators. They must not be modified.
	Records [][]byte
	// Bytes is the sum of the records' lengths.
	Bytes int
	// Subtask is the sink subtask that made the batch.
	Subtask int
	// Checkpoint is the id of the checkpoint the sink was filling when the
	// batch closed. It is informational: it is not part of Key (a replay
	// after a crash may put the same batch in another checkpoint).
	Checkpoint uint64
	// Seq numbers the subtask's batches from 0 since the job's first
	// start (it is kept in the checkpoint state).
	Seq uint64
	// First is the ordinal of Records[0] among the subtask's records since
	// the job's first start.
	First uint64
	// Key is the batch's idempotency key: SINKID-SUBTASK-SEQ-HASH, with a
	// SHA-256 of First and the records. The same records at the same
	// position always get the same key; different records never do (see
	// the package documentation for when a replay reproduces a key).
	Key string
	// Reason the batch was closed.
	Reason Reason
}

// Guarantee is the delivery guarantee of a Sink.
type Guarantee uint8

// Guarantees.
const (
	// AtLeastOnce: phase 1 waits until every batch is acknowledged; a
	// failed batch fails the checkpoint.
	AtLeastOnce Guarantee = iota
	// AtMostOnce: phase 1 does not wait; failed batches are dropped.
	AtMostOnce
)

func (g Guarantee) String() string {
	if g == AtMostOnce {
		return "at-most-once"
	}
	return "at-least-once"
}

// Defaults.
const (
	DefaultMaxRecords  = 500
	DefaultMaxBytes    = 1 << 20
	DefaultLinger      = time.Second
	DefaultSendTimeout = 2 * time.Minute
	DefaultGrace       = 10 * time.Second
)

type config struct {
	name        string
	id          string
	workers     int
	queue       int
	maxRecords  int
	maxBytes    int
	linger      time.Duration
	sendTimeout time.Duration
	grace       time.Duration
	guarantee   Guarantee
	log         *slog.Logger
}

// Option configures a Sink: a value of this sealed interface, made by the
// With functions of this package and validated, with the others, once by
// New.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithName sets the participant name's prefix (default "async"): the
// Sink's Name is PREFIX/SUBTASK. It must be stable across restarts.
func WithName(prefix string) Option { return optionFunc(func(c *config) { c.name = prefix }) }

// WithSinkID sets the id that starts every idempotency key (default: the
// name prefix). Two jobs sending to one receiver need different ids. It
// may hold letters, digits and ". _ : -", at most 128 bytes.
func WithSinkID(id string) Option { return optionFunc(func(c *config) { c.id = id }) }

// WithWorkers sets the number of sending goroutines (default
// runtime.NumCPU()).
func WithWorkers(n int) Option { return optionFunc(func(c *config) { c.workers = n }) }

// WithQueue sets the number of closed batches the queue holds before Write
// blocks (default 2 x workers). Memory is bounded by (queue + workers + 1)
// x the batch size.
func WithQueue(n int) Option { return optionFunc(func(c *config) { c.queue = n }) }

// WithMaxRecords closes a batch at n records (default 500).
func WithMaxRecords(n int) Option { return optionFunc(func(c *config) { c.maxRecords = n }) }

// WithMaxBytes closes a batch before a record would take it over n bytes of
// records (default 1 MiB); a single larger record is a batch of its own.
func WithMaxBytes(n int) Option { return optionFunc(func(c *config) { c.maxBytes = n }) }

// WithLinger closes a batch d after its first record was written, however
// small it is (default 1 s; 0: never).
func WithLinger(d time.Duration) Option { return optionFunc(func(c *config) { c.linger = d }) }

// WithSendTimeout sets the deadline of each Send's context (default 2 min),
// and the grace period after it at which a Send that has not returned
// counts as a dead worker (default 10 s).
func WithSendTimeout(timeout, grace time.Duration) Option {
	return optionFunc(func(c *config) { c.sendTimeout, c.grace = timeout, grace })
}

// WithGuarantee sets the delivery guarantee (default AtLeastOnce).
func WithGuarantee(g Guarantee) Option { return optionFunc(func(c *config) { c.guarantee = g }) }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.log = l }) }

func (c *config) validate() error {
	switch {
	case c.name == "":
		return errors.New("async: empty name")
	case c.workers < 1:
		return fmt.Errorf("async: %d workers: want at least 1", c.workers)
	case c.queue < 1:
		return fmt.Errorf("async: queue of %d batches: want at least 1", c.queue)
	case c.maxRecords < 1:
		return fmt.Errorf("async: at most %d records per batch: want at least 1", c.maxRecords)
	case c.maxBytes < 1:
		return fmt.Errorf("async: at most %d bytes per batch: want at least 1", c.maxBytes)
	case c.linger < 0:
		return fmt.Errorf("async: negative linger %v", c.linger)
	case c.sendTimeout <= 0 || c.grace < 0:
		return fmt.Errorf("async: send timeout %v and grace %v: want a positive timeout", c.sendTimeout, c.grace)
	case c.guarantee != AtLeastOnce && c.guarantee != AtMostOnce:
		return fmt.Errorf("async: unknown guarantee %d", c.guarantee)
	case c.log == nil:
		return errors.New("async: nil logger")
	}
	return checkID(c.id)
}

func checkID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("async: sink id %q: want 1 to 128 bytes", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-') {
			return fmt.Errorf("async: sink id %q: %q is not a letter, digit or one of . _ : -", id, r)
		}
	}
	return nil
}

// Stats are a Sink's counters, safe to read concurrently.
type Stats struct {
	Records      atomic.Int64 // records written
	Batches      atomic.Int64 // batches acknowledged
	Acked        atomic.Int64 // records acknowledged
	Dropped      atomic.Int64 // records of failed batches dropped (AtMostOnce)
	LingerCuts   atomic.Int64 // batches closed by the linger timer
	PrepareNanos atomic.Int64 // time spent in Prepare
}

// Sink is a pipeline.Sink that sends batches through a Sender from N
// workers. See the package documentation for its guarantees and
// concurrency.
type Sink struct {
	committer.NopPostCommit
	cfg     config
	sender  Sender
	subtask int
	name    string

	life    context.Context // cancelled by Close
	endLife context.CancelFunc
	queue   chan *Batch
	pend    tracker
	workers sync.WaitGroup
	stats   Stats

	errOnce sync.Once
	err     error         // set once, before failed is closed
	failed  chan struct{} // closed on the first failure

	mu      sync.Mutex // guards the open batch and the counters below
	data    []byte     // records of the open batch, back to back
	ends    []int      // data[ends[i-1]:ends[i]] is record i
	gen     uint64     // incremented when a linger timer is armed
	timer   *time.Timer
	nextSeq uint64 // Seq of the next batch
	nextOrd uint64 // ordinal of the open batch's first record
	filling uint64 // id of the checkpoint being filled
	closed  bool
}

// Sink is also a pipeline.Sink (checked in the tests: committer packages do
// not import the pipeline).
var _ committer.Participant = (*Sink)(nil)

// New returns subtask's Sink sending through sender, and starts its
// workers. Close stops them.
func New(sender Sender, subtask int, opts ...Option) (*Sink, error) {
	c := config{name: "async", workers: runtime.NumCPU(), maxRecords: DefaultMaxRecords, maxBytes: DefaultMaxBytes,
		linger: DefaultLinger, sendTimeout: DefaultSendTimeout, grace: DefaultGrace, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o.apply(&c)
	}
	if c.id == "" {
		c.id = c.name
	}
	if c.queue == 0 {
		c.queue = 2 * c.workers
	}
	if sender == nil {
		return nil, errors.New("async: nil Sender")
	}
	if subtask < 0 {
		return nil, fmt.Errorf("async: subtask %d", subtask)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := &Sink{cfg: c, sender: sender, subtask: subtask, name: c.name + "/" + strconv.Itoa(subtask),
		queue: make(chan *Batch, c.queue), failed: make(chan struct{}), filling: 1}
	s.pend.zero = closedChan()
	s.life, s.endLife = context.WithCancel(context.Background())
	for range c.workers {
		s.workers.Add(1)
		go s.work()
	}
	return s, nil
}

// Name returns PREFIX/SUBTASK.
func (s *Sink) Name() string { return s.name }

// Stats returns the sink's counters.
func (s *Sink) Stats() *Stats { return &s.stats }

// Counters implements pipeline.Sink: the records acknowledged and dropped
// (Stats Acked, Dropped). Safe for concurrent use.
func (s *Sink) Counters() committer.Counters {
	return committer.Counters{RecordsAcked: s.stats.Acked.Load, RecordsDropped: s.stats.Dropped.Load}
}

// BeginBatch implements pipeline.Sink; the sink makes its own batches:
// it does nothing.
func (s *Sink) BeginBatch() {}

// EndBatch implements pipeline.Sink; it does nothing.
func (s *Sink) EndBatch() {}

// Err returns the error that failed the sink, or nil.
func (s *Sink) Err() error {
	select {
	case <-s.failed:
		return s.err
	default:
		return nil
	}
}

// fail records the sink's first failure.
func (s *Sink) fail(err error) error {
	s.errOnce.Do(func() {
		s.err = err
		close(s.failed)
		s.cfg.log.Error("async sink failed: no checkpoint will complete", "sink", s.name, "err", err)
	})
	return s.Err()
}

// Write appends record to the open batch (copying it), and queues the
// batch when it is full; it blocks while the queue is full. A nil error
// means the record is in the sink (not that it was sent). An error means
// the sink failed (or ctx was cancelled while the queue was full, which
// fails the sink: the batch could not be queued and no later checkpoint
// may complete without it).
func (s *Sink) Write(ctx context.Context, record []byte, _ source.Origin) error {
	if err := s.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if n := len(s.ends); n > 0 && len(s.data)+len(record) > s.cfg.maxBytes {
		if err := s.cutLocked(ctx, ByBytes); err != nil {
			return err
		}
	}
	s.appendLocked(record)
	s.stats.Records.Add(1)
	switch {
	case len(s.ends) >= s.cfg.maxRecords:
		return s.cutLocked(ctx, ByCount)
	case len(s.data) >= s.cfg.maxBytes:
		return s.cutLocked(ctx, ByBytes)
	}
	return nil
}

func (s *Sink) appendLocked(record []byte) {
	if len(s.ends) == 0 && s.cfg.linger > 0 {
		s.gen++
		gen := s.gen
		s.timer = time.AfterFunc(s.cfg.linger, func() { s.lingerCut(gen) })
	}
	s.data = append(s.data, record...)
	s.ends = append(s.ends, len(s.data))
}

// lingerCut runs on the timer's goroutine: if the open batch is still the
// one the timer was armed for, it is closed and queued, under the mutex.
func (s *Sink) lingerCut(gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || gen != s.gen || len(s.ends) == 0 {
		return // cut meanwhile, or closed
	}
	if err := s.cutLocked(s.life, ByLinger); err == nil {
		s.stats.LingerCuts.Add(1)
	}
}

// cutLocked closes the open batch and queues it, blocking while the queue
// is full. From here on the batch belongs to the queue, then to one
// worker. Failing to queue it fails the sink.
func (s *Sink) cutLocked(ctx context.Context, why Reason) error {
	if s.timer != nil {
		s.timer.Stop() // a callback already running sees another gen or no records
		s.timer = nil
	}
	b := &Batch{Records: make([][]byte, len(s.ends)), Bytes: len(s.data), Subtask: s.subtask,
		Checkpoint: s.filling, Seq: s.nextSeq, First: s.nextOrd, Reason: why}
	start := 0
	for i, end := range s.ends {
		b.Records[i] = s.data[start:end:end]
		start = end
	}
	b.Key = Key(s.cfg.id, s.subtask, b.Seq, b.First, b.Records)
	s.nextSeq++
	s.nextOrd += uint64(len(s.ends))
	// The batch owns the old buffers now: the next batch gets new ones.
	size := len(s.data)
	s.data, s.ends = make([]byte, 0, size+size/8), make([]int, 0, len(s.ends))
	s.pend.add()
	select {
	case s.queue <- b:
		return nil
	case <-s.failed:
		return s.Err()
	case <-s.life.Done():
		return ErrClosed // closed: nothing is sent any more
	case <-ctx.Done():
		return s.fail(fmt.Errorf("%s: batch %d (%d records) not queued: %w", s.name, b.Seq, len(b.Records), ctx.Err()))
	}
}

// Key returns the idempotency key of a batch: SINKID-SUBTASK-SEQ-HASH,
// where HASH is 24 hex digits of the SHA-256 of first and the records
// (each with its length).
func Key(sinkID string, subtask int, seq, first uint64, records [][]byte) string {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], first)
	h.Write(n[:])
	for _, r := range records {
		binary.BigEndian.PutUint64(n[:], uint64(len(r)))
		h.Write(n[:])
		h.Write(r)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sinkID + "-" + strconv.Itoa(subtask) + "-" + strconv.FormatUint(seq, 10) + "-" + hex.EncodeToString(sum[:12])
}

// HashPartition routes a record to subtask FNV-1a(record) mod n: the same
// record always goes to the same subtask, whatever batches the pipeline
// read it in, so that each subtask's stream, and its batch keys, are the
// same in a replay (pipeline.Config.Partition).
func HashPartition(record []byte, n int) int {
	h := fnv.New64a()
	h.Write(record)
	return int(h.Sum64() % uint64(n))
}

// work is one worker: it takes batches from the queue and sends them.
func (s *Sink) work() {
	defer s.workers.Done()
	for {
		var b *Batch
		select {
		case b = <-s.queue:
		case <-s.life.Done():
			return
		case <-s.failed:
			return
		}
		err := s.send(b)
		switch {
		case err == nil:
			s.stats.Batches.Add(1)
			s.stats.Acked.Add(int64(len(b.Records)))
			s.pend.done()
		case errors.Is(err, ErrClosed):
			return // Close: not a failure of the target
		case s.cfg.guarantee == AtMostOnce:
			s.cfg.log.Warn("batch dropped (at-most-once)", "sink", s.name, "seq", b.Seq, "records", len(b.Records), "key", b.Key, "err", err)
			s.stats.Dropped.Add(int64(len(b.Records)))
			s.pend.done()
		default:
			s.fail(err)
			return
		}
	}
}

// send runs the Sender on a goroutine of its own, so that a panic or a
// Send that ignores its deadline is seen as a dead worker instead of
// taking the process down or holding the checkpoint forever.
func (s *Sink) send(b *Batch) error {
	ctx, cancel := context.WithTimeout(s.life, s.cfg.sendTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("%w: Send panicked: %v\n%s", ErrWorkerDead, r, debug.Stack())
			}
		}()
		done <- s.sender.Send(ctx, b)
	}()
	t := time.NewTimer(s.cfg.sendTimeout + s.cfg.grace)
	defer t.Stop()
	var err error
	select {
	case err = <-done:
	case <-t.C:
		err = fmt.Errorf("%w: Send still running %v after it was called (timeout %v, grace %v)", ErrWorkerDead, s.cfg.sendTimeout+s.cfg.grace, s.cfg.sendTimeout, s.cfg.grace)
	case <-s.life.Done():
		err = ErrClosed
	}
	if err != nil {
		return &SendError{Sink: s.name, Seq: b.Seq, Key: b.Key, Records: len(b.Records), Err: err}
	}
	return nil
}

// state is the participant's checkpoint state.
type state struct {
	Checkpoint uint64   `json:"checkpoint"`
	Seq        uint64   `json:"seq"`            // Seq of the next batch
	Ord        uint64   `json:"ord"`            // ordinal of Tail[0]
	Tail       [][]byte `json:"tail,omitempty"` // the open batch's records
}

// Prepare implements committer.Participant: see prepare;
// all of phase 1 is done at the barrier (the Wait returns at once).
func (s *Sink) Prepare(ctx context.Context, id uint64, final bool) (committer.Wait, error) {
	snap, err := s.prepare(ctx, id, final)
	if err != nil {
		return nil, err
	}
	return committer.Ready(snap), nil
}

// OverlapsCheckpoints implements pipeline.Sink: false: the pipeline runs the whole checkpoint
// at the barrier.
func (s *Sink) OverlapsCheckpoints() bool { return false }

// prepare is phase 1 of checkpoint id. With AtLeastOnce it returns only
// when every closed batch was acknowledged by the target; the open batch's
// records go into the returned state (a final checkpoint closes and sends
// it too, so that the state holds no records). A nil error means every
// record written before the call was acknowledged or is in the state. An
// error means the sink failed (or ctx ended): the checkpoint must not be
// recorded. With AtMostOnce it queues the open batch and returns at once,
// except at a final checkpoint, which waits until every batch was sent or
// dropped.
func (s *Sink) prepare(ctx context.Context, id uint64, final bool) (committer.Snapshot, error) {
	start := time.Now()
	defer func() { s.stats.PrepareNanos.Add(int64(time.Since(start))) }()
	if err := s.Err(); err != nil {
		return committer.Snapshot{}, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return committer.Snapshot{}, ErrClosed
	}
	if len(s.ends) > 0 && (final || s.cfg.guarantee == AtMostOnce) {
		if err := s.cutLocked(ctx, ByCheckpoint); err != nil {
			s.mu.Unlock()
			return committer.Snapshot{}, err
		}
	}
	st := state{Checkpoint: id, Seq: s.nextSeq, Ord: s.nextOrd}
	start0 := 0
	for _, end := range s.ends {
		st.Tail = append(st.Tail, s.data[start0:end])
		start0 = end
	}
	raw, err := json.Marshal(st) // copies the tail
	s.filling = id + 1
	s.mu.Unlock()
	if err != nil {
		return committer.Snapshot{}, fmt.Errorf("%s: state: %w", s.name, err)
	}
	if s.cfg.guarantee == AtLeastOnce || final {
		// AtMostOnce waits at a final checkpoint only, so that a clean
		// end sends everything (failed batches are dropped, not waited
		// for again).
		if err := s.pend.wait(ctx, s.failed); err != nil {
			if ferr := s.Err(); ferr != nil {
				return committer.Snapshot{}, ferr
			}
			return committer.Snapshot{}, fmt.Errorf("%s: checkpoint %d: waiting for acknowledgements: %w", s.name, id, err)
		}
	}
	return committer.Snapshot{State: raw}, nil
}

// Commit fails: the sink makes no committables, so a record listing one
// for it was not written by this sink.
func (s *Sink) Commit(_ context.Context, c json.RawMessage) error {
	return committer.Permanent(fmt.Errorf("%s: unexpected committable %.80s: an async sink has none", s.name, c))
}

// Restore resets the open batch, the batch sequence and the record
// ordinal to a state from a decided checkpoint (nil: a fresh start). It
// must be called before any Write.
func (s *Sink) Restore(_ context.Context, raw json.RawMessage) error {
	if err := s.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.stats.Records.Load() > 0 || s.pend.busy() {
		return fmt.Errorf("%s: Restore after records were written", s.name)
	}
	var st state
	if raw != nil {
		if err := json.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("%s: restore state %.120s: %w", s.name, raw, recovery.ErrCorruptCheckpoint)
		}
	}
	s.data, s.ends = s.data[:0], s.ends[:0]
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	for _, r := range st.Tail {
		s.appendLocked(r)
	}
	s.nextSeq, s.nextOrd, s.filling = st.Seq, st.Ord, st.Checkpoint+1
	return nil
}

// Sweep does nothing: the sink stages nothing.
func (s *Sink) Sweep(context.Context, []*recovery.Checkpoint) (committer.Swept, error) {
	return nil, nil
}

// Tick returns the sink's failure, if any, so that a dead worker stops the
// pipeline while no records come.
func (s *Sink) Tick(context.Context, time.Time) error { return s.Err() }

// Close stops the workers and the linger timer without sending anything
// more: queued and open batches are dropped (a checkpoint that recorded
// their records recorded them acknowledged or in its state). Sends in
// flight are cancelled.
func (s *Sink) Close() error {
	s.endLife()
	s.mu.Lock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.mu.Unlock()
	s.workers.Wait()
	return nil
}

// tracker counts the batches queued and not yet acknowledged.
type tracker struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed while n == 0
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

func (t *tracker) add() {
	t.mu.Lock()
	if t.n == 0 {
		t.zero = make(chan struct{})
	}
	t.n++
	t.mu.Unlock()
}

func (t *tracker) done() {
	t.mu.Lock()
	t.n--
	if t.n == 0 {
		close(t.zero)
	}
	t.mu.Unlock()
}

func (t *tracker) busy() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n > 0
}

// wait returns nil once no batch is pending, or an error when ctx ends or
// failed is closed.
func (t *tracker) wait(ctx context.Context, failed <-chan struct{}) error {
	t.mu.Lock()
	z := t.zero
	t.mu.Unlock()
	select {
	case <-z:
		return nil
	case <-failed:
		return errors.New("sink failed")
	case <-ctx.Done():
		return ctx.Err()
	}
}
