package filesink

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/zeebo/xxh3"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
)

// DefaultBufferBudget bounds the bytes a Writer buffers across all its open
// buckets.
const DefaultBufferBudget = 64 << 20

const (
	minFlush = 16 << 10
	maxFlush = 4 << 20
)

// Option configures a Writer: a value of this sealed interface, made by
// the With functions of this package and validated, with the others, once
// by New.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is what the options set; New validates it.
type config struct {
	dl     driver.Backend
	onBad  func(*source.BadRecordError) // nil: none
	enc    Encoder
	encSet bool       // WithEncoder was given
	bulk   BulkFormat // nil: the row format enc
	comp   Compression
	assign bucketing.Assigner
	policy RollingPolicy
	prefix string
	// manifestWriter: WithManifestWriter, else the namespace.
	manifestWriter string
	suffix         *string
	budget         int64
	pool           *BudgetPool // WithBudgetPool: budget is a share of it
	now            func() time.Time
	log            *slog.Logger
	runID          string
	dense          *int64 // WithDenseOrigins
	// publishOnRoll: WithPublishOnRoll.
	publishOnRoll bool
	// maxOpen: WithMaxOpenParts (maxOpenSet), else DefaultMaxOpenParts.
	maxOpen    int
	maxOpenSet bool
	// evictRoll makes the open-file limit roll row parts instead of
	// releasing them (a seam of the benchmarks that compare the two).
	evictRoll bool
	// replayer: WithReplayer. target is set for the Writer of a rebuild:
	// the name of its one part.
	replayer source.Replayer
	target   string
	// finalizeOnRestore: WithFinalizeOnRestore.
	finalizeOnRestore bool
}

func defaultConfig() config {
	return config{enc: JSONLines{}, assign: bucketing.BasePath(), policy: NewDefaultPolicy(), prefix: "part",
		budget: DefaultBufferBudget, now: time.Now, log: slog.New(slog.DiscardHandler)}
}

// validate returns the first invalid setting, or nil.
func (c *config) validate() error {
	switch {
	case c.enc == nil || c.assign == nil || c.policy == nil || c.now == nil:
		return errors.New("filesink: nil encoder, assigner, rolling policy or clock")
	case c.log == nil:
		return errors.New("filesink: nil logger")
	case c.budget < minFlush:
		return fmt.Errorf("filesink: buffer budget %d is below the minimum %d", c.budget, minFlush)
	case c.bulk != nil && c.encSet:
		return errors.New("filesink: both a row encoder (WithEncoder) and a bulk format (WithBulkFormat) are set")
	case c.bulk != nil && c.comp != nil:
		return errors.New("filesink: a bulk format compresses its own pages: WithCompression does not apply to it (use the format's compression option)")
	case c.maxOpenSet && c.maxOpen < MinOpenParts:
		return fmt.Errorf("filesink: at most %d open part files is below the minimum %d", c.maxOpen, MinOpenParts)
	case c.prefix == "" || c.prefix[0] == '.' || c.prefix[0] == '_' || strings.ContainsAny(c.prefix, "/\\\x00"):
		return fmt.Errorf("filesink: invalid part prefix %q (must not be empty, contain '/' or start with '.' or '_')", c.prefix)
	}
	return nil
}

// WithEncoder sets the row format (default JSONLines).
func WithEncoder(e Encoder) Option { return optionFunc(func(c *config) { c.enc, c.encSet = e, true }) }

// WithCompression sets the compression (default none); see NewCompression.
func WithCompression(comp Compression) Option { return optionFunc(func(c *config) { c.comp = comp }) }

// WithAssigner sets the bucket assigner (default bucketing.BasePath()).
func WithAssigner(a bucketing.Assigner) Option { return optionFunc(func(c *config) { c.assign = a }) }

// WithRollingPolicy sets the rolling policy (default NewDefaultPolicy()).
func WithRollingPolicy(p RollingPolicy) Option { return optionFunc(func(c *config) { c.policy = p }) }

// WithPrefix sets the part file prefix (default "part"). Two sinks sharing
// an output directory must use prefixes where neither is a prefix of the
// other.
func WithPrefix(p string) Option { return optionFunc(func(c *config) { c.prefix = p }) }

// WithManifestWriter names the writer in its commit manifests (and their
// file names, "CHECKPOINT-NAME.json") name instead of "PREFIX-SUBTASK".
// Writers that take turns on one chain of checkpoints, such as the owners
// of a group-mode lane, whose part prefixes differ by owner epoch, share
// a name, so that a checkpoint published by two of them (a new owner
// publishing what a paused one decided) has one manifest.
func WithManifestWriter(name string) Option {
	return optionFunc(func(c *config) { c.manifestWriter = name })
}

// WithSuffix overrides the part file suffix (default: the format's extension
// plus the compression's).
func WithSuffix(s string) Option { return optionFunc(func(c *config) { c.suffix = &s }) }

// WithBufferBudget bounds the bytes buffered across all open buckets of this
// writer (default DefaultBufferBudget).
func WithBufferBudget(n int64) Option { return optionFunc(func(c *config) { c.budget = n }) }

// WithBudgetPool makes the Writer's buffer budget an equal share of p,
// shared with the other Writers of p (WithBufferBudget then does not
// apply). The share changes as Writers are made and closed.
func WithBudgetPool(p *BudgetPool) Option { return optionFunc(func(c *config) { c.pool = p }) }

// BudgetPool is one buffer budget for several Writers, such as the lanes
// of a process in group mode: each open Writer of the pool gets an equal
// share of it (at least the minimum budget), so their total stays within
// the pool however many lanes the process runs. Safe for concurrent use.
type BudgetPool struct {
	total   int64
	writers atomic.Int64
}

// NewBudgetPool returns a pool of total bytes.
func NewBudgetPool(total int64) *BudgetPool { return &BudgetPool{total: total} }

func (p *BudgetPool) share() int64 { return max(p.total/max(p.writers.Load(), 1), minFlush) }

// WithClock sets the processing-time clock (default time.Now).
func WithClock(now func() time.Time) Option { return optionFunc(func(c *config) { c.now = now }) }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.log = l }) }

// WithRunID fixes the per-run writer id used in part names (default: 8
// random hex digits per start). Only tests should set it.
func WithRunID(id string) Option { return optionFunc(func(c *config) { c.runID = id }) }

// WithDeadLetter makes bad records go, as JSON lines
// {"origin","error","record"}, to part files published through dl with the
// same protocol (exactly once) instead of failing the write.
func WithDeadLetter(dl driver.Backend) Option { return optionFunc(func(c *config) { c.dl = dl }) }

// WithBadRecordFunc sets a function called with every bad record sent to
// the dead-letter output (see WithDeadLetter), on the goroutine that wrote
// it, before the write returns; it must not block. The CLI feeds it to the
// run's event stream (pipeline.EventListener.BadRecord).
func WithBadRecordFunc(f func(*source.BadRecordError)) Option {
	return optionFunc(func(c *config) { c.onBad = f })
}

// WithPublishOnRoll makes the writer publish a part file as soon as it
// rolls, without waiting for the checkpoint that covers it: records become
// visible sooner, but the guarantee is at-least-once. After a crash, the
// records since the last checkpoint come again from the source, and those
// already in a file published early are then written twice. The part is
// still handed to the next checkpoint (its commit there is a verified
// no-op), so its manifest lists it.
func WithPublishOnRoll() Option { return optionFunc(func(c *config) { c.publishOnRoll = true }) }

// WithDenseOrigins tells the writer that every input of its source numbers
// its records without gaps from start (source.Origin.Num: the lines of a
// file from 1, the generator's ids from 0; not Kafka offsets). The commit
// manifests say so, and the auditor then also reports lost numbers.
func WithDenseOrigins(start int64) Option { return optionFunc(func(c *config) { c.dense = &start }) }

// Stats are running totals of a Writer, safe to read concurrently.
type Stats struct {
	Records    atomic.Int64 // records accepted
	Bytes      atomic.Int64 // encoded bytes accepted (before compression); for bulk formats, the records' bytes (none for WriteBatch's batches)
	BadRecords atomic.Int64 // records sent to the dead-letter output
	Committed  atomic.Int64 // part files of this run published (recovery re-commits are not counted)
	Released   atomic.Int64 // times an open part file was closed at the open-file limit, to be resumed on its next write (WithMaxOpenParts)
	Rebuilt    atomic.Int64 // parts made again from the source because the store lost their staged data (WithReplayer)
}

// Writer is one subtask of the file sink: it buckets records, writes them to
// in-progress part files through a driver.Backend, and takes part in the
// commit protocol as a committer.Participant.
//
// Write, Tick, Prepare, Restore and Sweep must be called from one goroutine
// at a time; the Wait Prepare returns, and CommittedCheckpoint, may run on
// another goroutine beside Write and Tick (not beside the other methods).
// Commit only touches published and pending files and is safe to call
// concurrently with nothing else of the same Writer.
type Writer struct {
	// last is the bucket of the last record (nil after buckets were
	// forgotten): most inputs write many records in a row to one bucket,
	// and the map lookup was a tenth of the sink's own time per record.
	last *bucket

	poolOnce sync.Once // Close leaves the budget pool once

	config
	backend driver.Backend
	subtask int
	// eventTimed is the assigner when it reads event times; recTime is
	// the event time of the record being written.
	eventTimed bucketing.EventTimed
	recTime    time.Time
	// recHash is the XXH3 hash of the record being written (PartStats
	// Digest).
	recHash uint64
	// batchNow is the processing time of the records of a batch, between
	// BeginBatch and EndBatch (inBatch).
	batchNow time.Time
	inBatch  bool
	// batchRecords and batchBytes are the records accepted in the current
	// batch, added to stats at EndBatch.
	batchRecords, batchBytes int64

	ext      string
	buckets  map[bucketKey]*bucket
	counter  int
	rolled   []*closing    // parts rolled since the last Prepare, closing in the background
	closers  chan struct{} // bounds the parts closing at once
	bufCap   int64         // sum of cap(b.buf) over buckets
	scratch  []byte
	free     [][]byte // empty buffers for reuse, counted in bufCap
	io       ioQueue
	bulkHeld int64 // sum of part.held over open bulk parts
	stats    Stats
	restored bool // Restore ran: later commits are of this run

	// rebuiltParts holds the figures of the decided parts rebuilt in this
	// run, by target, for their manifests (Commit and CommittedCheckpoint
	// may run on other goroutines: rebuiltMu).
	rebuiltMu    sync.Mutex
	rebuiltParts map[string]*PartStats

	// slots holds one token per part file open (or being closed or
	// released in the background): its capacity is the limit
	// (WithMaxOpenParts). lru lists the buckets whose part is open, least
	// recently written first (a sentinel: lru.next is the first). bg
	// counts the releases running (park).
	slots       chan struct{}
	lru         bucket
	bg          sync.WaitGroup
	limitLogged bool
}

var _ committer.Participant = (*Writer)(nil)

type bucketKey struct {
	dl   bool
	path string
}

type bucket struct {
	key  bucketKey
	buf  []byte // encoded bytes of part not yet written; empty when part is nil
	part *part
	// prev and next link the buckets whose part is open (Writer.lru); nil
	// when it is not.
	prev, next *bucket
}

type part struct {
	target    string // relative path of the finished file
	pw        driver.PartWriter
	created   time.Time
	lastWrite time.Time
	// timeOK is the processing time at which the DefaultPolicy's time
	// conditions last held false (see mustRoll).
	timeOK    time.Time
	persisted int64 // pw.Size() at the last Persist
	// park is set while the part's file is released (pw is nil): see
	// openfiles.go. persisting is the checkpoint's persist of pw, while
	// it may be pending. resumed is the resumable pw was resumed from (a
	// checkpoint's or a release's; nil for a part opened in this run), and
	// dirty tells that pw was written since.
	park       *parking
	persisting *persistJob
	resumed    json.RawMessage
	dirty      bool
	// size is the file's size plus the bytes queued for it (uncompressed),
	// moved by one addition per change so that the caller never sees a
	// write counted both as queued and as written; fileSize is pw.Size()
	// after the last write, kept by the goroutine that writes the file
	// (the I/O goroutine, or the one the part is lent to).
	size      atomic.Int64
	fileSize  int64
	full      atomic.Bool     // pw.MustRoll returned true
	resumable json.RawMessage // result of the last Persist

	// Bulk parts only (WithBulkFormat; dead-letter parts are rows).
	bulk BulkWriter // nil once closed
	rows int64      // records added to bulk
	held int64      // bulk.Buffered() after the last call into bulk
	// pending is what the rolling policy counts for the rows bulk holds:
	// its Pending estimate where it has one (sizer), else held.
	pending int64
	sizer   PendingSizer
	// lent is set while the part's file is lent to its bulk writer's
	// encoding goroutine (bulkSink.Lend); caller's goroutine only.
	lent bool
	// loanMu orders the lent writer's writes with Writer.Close, which
	// sets revoked (under it) before it closes pw.
	loanMu  sync.Mutex
	revoked bool

	stats partStats // for the manifest and the checkpoint
}

// writeChunk is the most bytes part.Write hands its part writer at once:
// the part writer's passes over them (the copy into the page cache, an
// object store's checksums and payload hash) and the part's own CRC-32C
// then find them in the CPU's cache rather than in memory.
const writeChunk = 256 << 10

// Write writes p to the part's file, keeping the CRC-32C of its bytes,
// in pieces of at most writeChunk bytes.
// Called by the I/O goroutine only (or the goroutine the part is lent to).
func (p *part) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		c := b[:min(len(b), writeChunk)]
		n, err := p.pw.Write(c)
		p.stats.crc = crc32.Update(p.stats.crc, castagnoli, c[:n])
		written += n
		b = b[n:]
		if err == nil && n < len(c) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// writeOut writes b to the part's file (or compresses it into it, with
// comp) and brings size and full up to date; queued is how much of size
// b was counted as (len(b) for a buffer from the I/O queue, else 0).
func (p *part) writeOut(b []byte, comp Compression, queued int64) error {
	var err error
	if comp != nil {
		err = comp.Frame(p, b)
	} else {
		_, err = p.Write(b)
	}
	before := p.fileSize
	p.fileSize = p.pw.Size()
	p.size.Add(p.fileSize - before - queued)
	if p.pw.MustRoll() {
		p.full.Store(true)
	}
	return err
}

// entry is the element of the state and the committable envelope.
type entry struct {
	DeadLetter bool            `json:"dead_letter,omitempty"`
	Bucket     string          `json:"bucket"`
	Part       json.RawMessage `json:"part"`
	// Stats are the part's figures when it was persisted (state) or
	// closed (committable); absent in checkpoints of older versions.
	Stats *PartStats `json:"stats,omitempty"`
}

type state struct {
	Parts []entry `json:"parts,omitempty"`
}

// New returns the Writer of subtask over backend.
func New(backend driver.Backend, subtask int, opts ...Option) (*Writer, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	switch {
	case backend == nil:
		return nil, errors.New("filesink: nil backend")
	case subtask < 0:
		return nil, fmt.Errorf("filesink: negative subtask %d", subtask)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newWriter(backend, subtask, cfg)
}

// newWriter returns the Writer of subtask over backend with the validated
// cfg.
func newWriter(backend driver.Backend, subtask int, cfg config) (*Writer, error) {
	if !cfg.maxOpenSet {
		cfg.maxOpen = DefaultMaxOpenParts()
	}
	w := &Writer{config: cfg, backend: backend, subtask: subtask, buckets: map[bucketKey]*bucket{},
		closers: make(chan struct{}, syncParallelism), slots: make(chan struct{}, cfg.maxOpen)}
	w.lru.prev, w.lru.next = &w.lru, &w.lru
	w.eventTimed, _ = w.assign.(bucketing.EventTimed)
	if w.runID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		w.runID = hex.EncodeToString(b[:])
	}
	w.ext = w.enc.Extension()
	if w.bulk != nil {
		w.ext = w.bulk.Extension()
	}
	if w.comp != nil {
		w.ext += w.comp.Extension()
	}
	if w.suffix != nil {
		w.ext = *w.suffix
	}
	if w.pool != nil {
		w.pool.writers.Add(1)
	}
	return w, nil
}

// Name implements committer.Participant: "filesink/<subtask>".
func (w *Writer) Name() string { return ParticipantName(w.subtask) }

// ParticipantName is the name (committer.Participant.Name) of the writer
// of subtask: "filesink/" and the subtask number.
func ParticipantName(subtask int) string { return "filesink/" + strconv.Itoa(subtask) }

// Stats returns the writer's running totals. Records and Bytes count the
// records of a batch (BeginBatch) at its EndBatch.
func (w *Writer) Stats() *Stats { return &w.stats }

// OpenBuckets returns the number of buckets with an in-progress part.
// Not safe for concurrent use, like Write.
func (w *Writer) OpenBuckets() int { return len(w.buckets) }

// Counters implements pipeline.Sink: the part files committed (Stats
// Committed) and the open parts (OpenBuckets, which is not safe for
// concurrent use). Safe for concurrent use.
func (w *Writer) Counters() committer.Counters {
	return committer.Counters{
		FilesCommitted: w.stats.Committed.Load,
		PartsRebuilt:   w.stats.Rebuilt.Load,
		OpenParts:      func() int64 { return int64(w.OpenBuckets()) },
	}
}

// namespace is the start of every part name of this subtask.
func (w *Writer) namespace() string { return w.prefix + "-" + strconv.Itoa(w.subtask) + "-" }

// Write adds one record. origin names the record in errors ("in/a.jsonl:17").
// record is not retained after Write returns.
// A record that cannot be encoded or bucketed gives a *source.BadRecordError (or goes
// to the dead-letter output when one is configured); any other error leaves
// the Writer unusable until Restore.
func (w *Writer) Write(ctx context.Context, record []byte, origin source.Origin) error {
	now := w.recordNow()
	w.recHash = xxh3.Hash(record)
	var bpath string
	var err error
	if w.eventTimed != nil {
		bpath, w.recTime, err = w.eventTimed.BucketTime(record)
	} else {
		bpath, err = w.assign.Bucket(record, now)
	}
	if err == nil {
		// Every assigner of package bucketing sanitises; a custom one may not.
		bpath, err = bucketing.Sanitize(bpath)
	}
	if err != nil {
		return w.bad(ctx, record, origin, fmt.Errorf("bucket: %w", err), now)
	}
	if w.bulk != nil {
		return w.writeBulk(ctx, bucketKey{path: bpath}, record, origin, now)
	}
	n, err := w.encode(ctx, bucketKey{path: bpath}, record, origin, now)
	if err != nil {
		var eerr encodeError
		if errors.As(err, &eerr) {
			return w.bad(ctx, record, origin, fmt.Errorf("encode%s: %w", w.enc.Extension(), eerr.err), now)
		}
		return err
	}
	w.count(n)
	return nil
}

// recordNow is the processing time of the record being written: the
// batch's (BeginBatch) inside one, else the clock's.
func (w *Writer) recordNow() time.Time {
	if w.inBatch {
		return w.batchNow
	}
	return w.now()
}

// count adds one accepted record of n bytes to the writer's Stats.
func (w *Writer) count(n int) { w.countN(1, int64(n)) }

// countN adds records accepted records of n bytes in all to the writer's
// Stats: at once outside a batch, at EndBatch inside one (two atomic
// additions per record were a measurable share of the per-record cost).
func (w *Writer) countN(records, n int64) {
	if w.inBatch {
		w.batchRecords += records
		w.batchBytes += n
		return
	}
	w.stats.Records.Add(records)
	w.stats.Bytes.Add(n)
}

// publishCounts adds the records counted in the current batch to Stats.
func (w *Writer) publishCounts() {
	if w.batchRecords > 0 {
		w.stats.Records.Add(w.batchRecords)
		w.stats.Bytes.Add(w.batchBytes)
		w.batchRecords, w.batchBytes = 0, 0
	}
}

// BeginBatch tells the writer that the records written until EndBatch
// arrived together: it reads its clock once for all of them (processing
// time for bucketing and rolling) instead of once per record. The
// pipeline calls it (pipeline.Sink). Not safe for concurrent use, like
// Write.
func (w *Writer) BeginBatch() { w.batchNow, w.inBatch = w.now(), true }

// EndBatch ends what BeginBatch started: Write reads the clock again.
func (w *Writer) EndBatch() {
	w.inBatch = false
	w.publishCounts()
}

// encodeError marks an error of the encoder (a bad record).
type encodeError struct{ err error }

func (e encodeError) Error() string { return e.err.Error() }

// encode adds record to the bucket key, encoding it in place after the
// bytes already buffered there (no copy) when the bucket has an open part.
// It returns the encoded size.
func (w *Writer) encode(ctx context.Context, key bucketKey, record []byte, origin source.Origin, now time.Time) (int, error) {
	b := w.lookup(key)
	if b == nil || b.part == nil {
		var err error
		w.scratch, err = w.enc.Encode(w.scratch[:0], record)
		if err != nil {
			return 0, encodeError{err}
		}
		return len(w.scratch), w.add(ctx, key, w.scratch, w.enc.Header(), origin, now)
	}
	w.reserve(b)
	n0, oldCap := len(b.buf), cap(b.buf)
	buf, err := w.enc.Encode(b.buf, record)
	if err != nil {
		return 0, encodeError{err}
	}
	b.buf = buf
	w.bufCap += int64(cap(buf) - oldCap)
	n := len(buf) - n0
	if w.mustRoll(b, partSize(b)-int64(n), n, now) {
		w.scratch = append(w.scratch[:0], buf[n0:]...)
		b.buf = buf[:n0]
		if err := w.roll(ctx, b); err != nil {
			return 0, err
		}
		return n, w.add(ctx, key, w.scratch, w.enc.Header(), origin, now)
	}
	b.part.lastWrite = now
	w.noteRecord(b.part, origin)
	return n, w.afterAppend(ctx, b)
}

// WriteBad sends a record that the source could not deliver whole to the
// dead-letter output, as Write does with a record it cannot encode: a
// line over the maximum size that the source skipped
// (source.WithSkipLongLines), of which record holds the first bytes
// (source.LineTooLongError.Head) and cause says why. The dead letter then
// says "truncated": true and the line's "size". Without a dead-letter
// output (WithDeadLetter) it returns a *source.BadRecordError; any other
// error leaves the Writer unusable until Restore, as for Write. It
// implements pipeline.BadRecordSink. Not safe for concurrent use, like
// Write.
func (w *Writer) WriteBad(ctx context.Context, record []byte, origin source.Origin, cause error) error {
	w.recHash = xxh3.Hash(record)
	return w.bad(ctx, record, origin, cause, w.recordNow())
}

// deadLetter is one line of the dead-letter output.
type deadLetter struct {
	Origin       string `json:"origin"`
	Error        string `json:"error"`
	Record       string `json:"record,omitempty"`
	RecordBase64 []byte `json:"record_base64,omitempty"` // when the record is not UTF-8
	// A line the source skipped for its length: its first bytes only.
	Truncated bool  `json:"truncated,omitempty"`
	Size      int64 `json:"size,omitempty"` // the whole line's bytes
}

func (w *Writer) bad(ctx context.Context, record []byte, origin source.Origin, cause error, now time.Time) error {
	berr := &source.BadRecordError{Origin: origin.String(), Err: cause}
	if w.dl == nil {
		return berr
	}
	dead := deadLetter{Origin: berr.Origin, Error: cause.Error()}
	if le := (*source.LineTooLongError)(nil); errors.As(cause, &le) && le.Skipped {
		dead.Size = le.Length
		dead.Truncated = le.Length > int64(len(record))
	}
	if utf8.Valid(record) {
		dead.Record = string(record)
	} else {
		dead.RecordBase64 = record
	}
	line, err := json.Marshal(dead)
	if err != nil {
		return berr
	}
	w.log.Warn("bad record sent to the dead-letter output", "origin", origin, "err", cause)
	w.stats.BadRecords.Add(1)
	if w.onBad != nil {
		w.onBad(berr)
	}
	return w.add(ctx, bucketKey{dl: true}, append(line, '\n'), nil, origin, now)
}

func (w *Writer) add(ctx context.Context, key bucketKey, data, header []byte, origin source.Origin, now time.Time) error {
	b := w.bucketOf(key)
	if b.part != nil {
		if w.mustRoll(b, partSize(b), len(data), now) {
			if err := w.roll(ctx, b); err != nil {
				return err
			}
		}
	}
	w.reserve(b)
	oldCap := cap(b.buf)
	if b.part == nil {
		ext := w.ext
		if key.dl {
			ext = JSONLines{}.Extension() // dead letters are never compressed
		}
		b.part = &part{target: w.partName(key, ext), created: now}
		if !key.dl && len(header) > 0 {
			b.buf = append(b.buf, header...)
			b.part.stats.header = true
		}
	}
	b.part.lastWrite = now
	w.noteRecord(b.part, origin)
	b.buf = append(b.buf, data...)
	w.bufCap += int64(cap(b.buf) - oldCap)
	return w.afterAppend(ctx, b)
}

// reserve gives b a buffer if it has none: a reused one, or one of the
// per-bucket size (with more than 16 buckets open, at most 64 KiB that grows
// with use, so that opening 1,000 buckets one after the other does not
// allocate buffers sized for fewer).
func (w *Writer) reserve(b *bucket) {
	if b.buf != nil {
		return
	}
	for len(w.free) < 32 {
		buf, ok := w.io.returned()
		if !ok {
			break
		}
		w.free = append(w.free, buf)
		w.bufCap += int64(cap(buf))
	}
	if k := len(w.free); k > 0 {
		b.buf, w.free = w.free[k-1][:0], w.free[:k-1]
		return // already counted in bufCap
	}
	n := w.flushSize()
	if len(w.buckets) > 16 {
		n = min(n, 64<<10)
	}
	b.buf = make([]byte, 0, n)
	w.bufCap += int64(n)
}

// afterAppend writes b's buffer out when it holds 3/4 of the per-bucket
// size (the rest is slack for the next record, so a full-size buffer does
// not grow), and keeps the total within the budget.
func (w *Writer) afterAppend(ctx context.Context, b *bucket) error {
	if len(b.buf) >= w.flushSize()/4*3 {
		if err := w.flush(ctx, b); err != nil {
			return err
		}
	}
	if w.usage() > w.limit() {
		return w.relieve(ctx)
	}
	return nil
}

// limit is the buffer budget now: its share of the pool, or its own.
func (w *Writer) limit() int64 {
	if w.pool != nil {
		return w.pool.share()
	}
	return w.budget
}

// usage is the memory held for records: bucket and spare buffers, and
// buffers lent to the I/O goroutine.
func (w *Writer) usage() int64 { return w.bufCap + w.io.lent.Load() + w.bulkHeld }

// BufferedBytes is the memory the Writer holds for records, as counted
// against its buffer budget: buffers of encoded bytes (in buckets, spare,
// or in flight to the part files) plus, with a bulk format, what the bulk
// writers report as Buffered. It is at most the budget after every Write
// (with a bulk format: plus at most one record's growth, reclaimed by the
// same Write). Call it from the goroutine that calls Write.
func (w *Writer) BufferedBytes() int64 { return w.usage() }

// release takes b's (empty) buffer back, keeping a few for reuse.
func (w *Writer) release(b *bucket) {
	if b.buf == nil {
		return
	}
	if len(w.free) < 32 {
		w.free = append(w.free, b.buf[:0])
	} else {
		w.bufCap -= int64(cap(b.buf))
	}
	b.buf = nil
}

// flushSize is the per-bucket buffer size that keeps all buckets within the
// budget.
func (w *Writer) flushSize() int {
	// 3/4 of the budget for the buckets, the rest for buffers in flight;
	// at most an eighth of it per buffer, so that a small budget (a
	// writer's share of a BudgetPool) holds a bucket's buffer, those in
	// flight and spares without shrink dropping buffers at every flush
	// (each dropped buffer comes back as fresh memory: page faults).
	limit := w.limit()
	return int(min(max(min(limit/4*3/int64(len(w.buckets)+1), limit/8), minFlush), maxFlush))
}

// shrink writes out and releases the largest buffers until the total is
// at most 7/8 of the budget; they come back at the current per-bucket size.
func (w *Writer) shrink(ctx context.Context) error {
	drop := func() {
		for _, f := range w.free {
			w.bufCap -= int64(cap(f))
		}
		w.free = nil
		for {
			if _, ok := w.io.returned(); !ok {
				return
			}
		}
	}
	drop()
	if w.usage() <= w.limit() {
		return nil
	}
	bs := make([]*bucket, 0, len(w.buckets))
	for _, b := range w.buckets {
		if cap(b.buf) > 0 {
			bs = append(bs, b)
		}
	}
	slices.SortFunc(bs, func(x, y *bucket) int { return cmp.Compare(cap(y.buf), cap(x.buf)) })
	excess := w.usage() - w.limit()*7/8
	for _, b := range bs {
		if excess <= 0 {
			break
		}
		excess -= int64(cap(b.buf))
		if len(b.buf) == 0 {
			w.bufCap -= int64(cap(b.buf))
			b.buf = nil
		} else if err := w.flush(ctx, b); err != nil {
			return err
		}
	}
	if w.usage() > w.limit() {
		// What is left is in flight: wait for it.
		if err := w.io.wait(); err != nil {
			return err
		}
		drop()
	}
	return nil
}

// mustRoll reports whether b's part (of size bytes, before a record of n
// bytes) has to roll: the policy says so, or the backend's writer is full
// (driver.PartWriter.MustRoll). It runs for every record: the package's own
// policies are asked through their concrete types, with only the fields
// they read, instead of building a PartInfo (with the bucket's path and
// two times) for calls through the interface.
func (w *Writer) mustRoll(b *bucket, size int64, n int, now time.Time) bool {
	p := b.part
	switch pol := w.policy.(type) {
	case DefaultPolicy:
		if pol.OnEvent(PartInfo{Size: size}, n) {
			return true
		}
		// The time conditions depend on now, the part's creation and its
		// last write, which only moves up to now: false at this now, they
		// stay false until now changes (within a batch it does not).
		if !now.Equal(p.timeOK) {
			if pol.OnTime(PartInfo{Created: p.created, LastWrite: p.lastWrite}, now) {
				return true
			}
			p.timeOK = now
		}
	case OnCheckpointPolicy:
		if pol.OnEvent(PartInfo{Size: size}, n) {
			return true
		}
	default:
		info := w.info(b)
		info.Size = size
		if pol.OnEvent(info, n) || pol.OnTime(info, now) {
			return true
		}
	}
	return p.full.Load()
}

// partSize is the size of b's part for the rolling policy: bytes in its
// file, queued for it and buffered, and what its bulk writer's rows are
// expected to add.
func partSize(b *bucket) int64 {
	p := b.part
	return int64(len(b.buf)) + sizeOf(p) + p.pending
}

// bucketOf returns the bucket of key, making it if there is none.
func (w *Writer) bucketOf(key bucketKey) *bucket {
	b := w.lookup(key)
	if b == nil {
		b = &bucket{key: key}
		w.buckets[key] = b
		w.last = b
	}
	return b
}

// lookup returns the bucket of key, or nil.
func (w *Writer) lookup(key bucketKey) *bucket {
	if b := w.last; b != nil && b.key == key {
		return b
	}
	b := w.buckets[key]
	if b != nil {
		w.last = b
	}
	return b
}

func (w *Writer) info(b *bucket) PartInfo {
	p := b.part
	return PartInfo{Bucket: b.key.path, Created: p.created, LastWrite: p.lastWrite, Size: partSize(b)}
}

func (w *Writer) backendOf(dl bool) driver.Backend {
	if dl {
		return w.dl
	}
	return w.backend
}

// flush writes b's buffer to its part file, opening the file on first use.
func (w *Writer) flush(ctx context.Context, b *bucket) error {
	if len(b.buf) == 0 {
		return nil
	}
	if err := w.open(ctx, b); err != nil {
		return err
	}
	return w.handOff(b)
}

// open opens the file of b's part, if it is not open: a new one, or the
// released one again (reopen). At the open-file limit it first releases
// the least recently written open parts.
func (w *Writer) open(ctx context.Context, b *bucket) error {
	p := b.part
	if p.pw != nil {
		return nil
	}
	if p.park != nil {
		return w.reopen(ctx, b)
	}
	if err := w.acquire(ctx); err != nil {
		return err
	}
	pw, err := w.backendOf(b.key.dl).Open(ctx, p.target)
	if err != nil {
		<-w.slots
		return err
	}
	p.pw = pw
	w.lruPush(b)
	return nil
}

// handOff lends b's buffer to the I/O goroutine, which writes it to the
// part's file; the part's file must be open. No I/O on this goroutine.
func (w *Writer) handOff(b *bucket) error {
	comp := w.comp
	if b.key.dl {
		comp = nil
	}
	buf := b.buf
	w.bufCap -= int64(cap(buf)) // lent to the I/O goroutine; reserve takes it back
	b.buf = nil
	b.part.dirty = true
	w.lruPush(b)
	// A buffer a bulk writer grew past the largest size reserve hands out
	// (its bytes before the file was open) is not kept for reuse.
	return w.io.submit(b.part, buf, comp, w.isBulk(b) && cap(buf) > maxFlush)
}

// roll closes b's part for commit in the background; its committable is
// returned by the next Prepare.
func (w *Writer) roll(ctx context.Context, b *bucket) error {
	if w.isBulk(b) {
		if err := w.closeBulk(b); err != nil || b.part == nil {
			return err
		}
	}
	if err := w.flush(ctx, b); err != nil {
		return err
	}
	if b.part.pw == nil && b.part.park == nil {
		b.part = nil
		return nil
	}
	// A released part is reopened to be closed for commit.
	if err := w.open(ctx, b); err != nil {
		return err
	}
	if err := w.io.wait(); err != nil {
		return err
	}
	w.closeInBackground(ctx, b)
	return nil
}

// closing is a part being closed for commit (CloseForCommit) on its own
// goroutine, so that the next records need not wait for its last bytes to
// become durable.
type closing struct {
	key     bucketKey
	stats   *PartStats
	done    chan struct{}
	pending json.RawMessage // set before done is closed, with err
	err     error
}

// closeInBackground detaches b's open part (its buffer written out, the
// I/O goroutine done with it) and closes it for commit on its own
// goroutine, at most syncParallelism at once per Writer; its open-file
// slot is freed once it is closed.
func (w *Writer) closeInBackground(ctx context.Context, b *bucket) {
	p := b.part
	b.part = nil
	w.lruRemove(b)
	c := &closing{key: b.key, stats: p.stats.snapshot(p.pw.Size()), done: make(chan struct{})}
	w.rolled = append(w.rolled, c)
	slots := w.slots
	go func() {
		defer close(c.done)
		select {
		case w.closers <- struct{}{}:
		case <-ctx.Done():
			p.pw.Close()
			<-slots
			c.err = ctx.Err()
			return
		}
		defer func() { <-w.closers }()
		c.pending, c.err = p.pw.CloseForCommit(ctx)
		if c.err != nil {
			p.pw.Close() // a failed CloseForCommit may leave it open
		}
		<-slots
		if c.err == nil && w.publishOnRoll {
			// At-least-once: visible now; the next checkpoint commits it
			// again, which finds it published.
			c.err = w.backendOf(c.key.dl).Commit(ctx, c.pending)
		}
	}()
}

// committable waits for c and returns its committable.
func (c *closing) committable(ctx context.Context) (json.RawMessage, error) {
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c.err != nil {
		return nil, c.err
	}
	return json.Marshal(entry{DeadLetter: c.key.dl, Bucket: c.key.path, Part: c.pending, Stats: c.stats})
}

// awaitClosing waits for every part closing in the background, ignoring
// their outcome (the writer is being reset).
func (w *Writer) awaitClosing() {
	for _, c := range w.rolled {
		<-c.done
	}
}

// Tick applies the rolling policy's time conditions (rollover, inactivity)
// to every open part at processing time now. The pipeline calls it
// periodically.
func (w *Writer) Tick(ctx context.Context, now time.Time) error {
	for _, b := range w.sorted() {
		if b.part != nil && w.policy.OnTime(w.info(b), now) {
			if err := w.roll(ctx, b); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *Writer) sorted() []*bucket {
	bs := make([]*bucket, 0, len(w.buckets))
	for _, b := range w.buckets {
		bs = append(bs, b)
	}
	slices.SortFunc(bs, func(x, y *bucket) int {
		if x.key.dl != y.key.dl {
			if x.key.dl {
				return 1
			}
			return -1
		}
		return cmp.Compare(x.key.path, y.key.path)
	})
	return bs
}

// OverlapsCheckpoints implements pipeline.Sink: the writer takes the next
// checkpoint's records while a checkpoint's uploads and phase 2 run.
func (w *Writer) OverlapsCheckpoints() bool { return true }

// Prepare implements committer.Participant. At the barrier it writes
// out every buffer, starts closing the parts the policy (or final) says to
// roll, and starts persisting the others (driver.PartWriter.PersistAsync:
// S3 uploads, local fsyncs). The returned function waits for the closes
// and persists and returns the open parts' resumables as state and the
// rolled parts (since the last checkpoint) as committables. It touches
// only what the barrier handed over, so Write and Tick may run while it
// waits.
func (w *Writer) Prepare(ctx context.Context, id uint64, final bool) (committer.Wait, error) {
	if err := w.flushAll(ctx); err != nil {
		return nil, err
	}
	jobs, err := w.persistOpen(ctx, final)
	if err != nil {
		return nil, err
	}
	rolled := w.rolled
	w.rolled = nil
	w.forgetIdle()
	every := w.sweepEvery()
	return func(ctx context.Context) (committer.Snapshot, error) {
		snap, err := prepared(ctx, jobs, rolled)
		snap.SweepEvery = every
		return snap, err
	}, nil
}

// sweepEvery is how often the backends (the output's and the dead
// letters') need their staging swept while the job runs: the smallest
// positive interval they declare, 0 if none does.
func (w *Writer) sweepEvery() int {
	every := w.backend.SweepEvery()
	if w.dl != nil {
		if n := w.dl.SweepEvery(); n > 0 && (every == 0 || n < every) {
			every = n
		}
	}
	return every
}

// flushAll closes the bulk parts (a footer cannot be resumed: every bulk
// part rolls at a checkpoint) and writes out the buffers of the others,
// and waits for the I/O queue.
func (w *Writer) flushAll(ctx context.Context) error {
	for _, b := range w.sorted() {
		if b.part == nil {
			continue
		}
		if w.isBulk(b) {
			if err := w.closeBulk(b); err != nil {
				return err
			}
			if b.part == nil {
				continue
			}
		}
		if err := w.flush(ctx, b); err != nil {
			return err
		}
	}
	return w.io.wait()
}

// persistOpen starts closing the parts that roll at this checkpoint (a
// released one is reopened for it, within the open-file limit) and
// starts persisting the others, returned in bucket order. Parts unchanged
// since their last persist keep their resumable; a released part's is
// its release's.
func (w *Writer) persistOpen(ctx context.Context, final bool) ([]*persistJob, error) {
	var keep, reopen []*bucket
	for _, b := range w.sorted() {
		p := b.part
		if p == nil {
			continue
		}
		if p.pw == nil && p.park == nil { // opened, nothing written
			b.part = nil
			continue
		}
		if final || w.isBulk(b) || w.policy.OnCheckpoint(w.info(b)) {
			if p.pw == nil {
				reopen = append(reopen, b)
				continue
			}
			w.closeInBackground(ctx, b)
			continue
		}
		keep = append(keep, b)
	}
	for _, b := range reopen {
		if err := w.open(ctx, b); err != nil {
			return nil, err
		}
		w.closeInBackground(ctx, b)
	}
	jobs := make([]*persistJob, 0, len(keep))
	for _, b := range keep {
		p := b.part
		j := &persistJob{p: p}
		switch {
		case p.pw == nil: // released (perhaps by the reopens above)
			j.size, j.wait = p.park.size, p.park.result
		case p.resumable == nil || p.pw.Size() != p.persisted:
			j.size = p.pw.Size()
			wait, err := p.pw.PersistAsync(ctx)
			if err != nil {
				return nil, err
			}
			j.wait = wait
			p.persisting = j
		default:
			j.size, j.out = p.persisted, p.resumable
		}
		j.entry = entry{DeadLetter: b.key.dl, Bucket: b.key.path, Stats: p.stats.snapshot(j.size)}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// forgetIdle forgets the buckets with nothing open: memory follows the
// open buckets.
func (w *Writer) forgetIdle() {
	w.last = nil
	for k, b := range w.buckets {
		if b.part == nil {
			w.release(b)
			delete(w.buckets, k)
		}
	}
}

// prepared waits for the persists of jobs and the closes of rolled and
// returns the checkpoint's snapshot.
func prepared(ctx context.Context, jobs []*persistJob, rolled []*closing) (committer.Snapshot, error) {
	var st state
	for _, j := range jobs {
		out, err := j.result(ctx)
		if err != nil {
			return committer.Snapshot{}, err
		}
		// Read by the next Prepare and by Sweep, which run after
		// this function has returned (a release or a reopen of the
		// part beside it touches neither).
		j.p.resumable, j.p.persisted = out, j.size
		j.entry.Part = out
		st.Parts = append(st.Parts, j.entry)
	}
	var snap committer.Snapshot
	for _, c := range rolled {
		data, err := c.committable(ctx)
		if err != nil {
			return committer.Snapshot{}, err
		}
		snap.Committables = append(snap.Committables, data)
	}
	if len(st.Parts) > 0 {
		s, err := json.Marshal(st)
		if err != nil {
			return committer.Snapshot{}, err
		}
		snap.State = s
	}
	return snap, nil
}

// syncParallelism bounds the parts a Writer closes at once.
const syncParallelism = 16

// Commit implements committer.Participant.
func (w *Writer) Commit(ctx context.Context, committable json.RawMessage) error {
	var e entry
	if err := json.Unmarshal(committable, &e); err != nil {
		return committer.Permanent(fmt.Errorf("filesink: bad committable %s: %w", committable, err))
	}
	be := w.backendOf(e.DeadLetter)
	if be == nil {
		return committer.Permanent(fmt.Errorf("filesink: committable %s is for the dead-letter output, which is not configured", committable))
	}
	if err := be.Commit(ctx, e.Part); err != nil {
		if w.replayer == nil || !w.rebuildable(&e, err) {
			target, _, derr := be.Describe(e.Part)
			if derr != nil {
				return err
			}
			return w.lostPart(&e, be.FileLocation(target), err)
		}
		if err := w.rebuildPending(ctx, be, &e, err); err != nil {
			return err
		}
	}
	if w.restored {
		w.stats.Committed.Add(1)
	}
	return nil
}

// Restore implements committer.Participant: open parts are dropped (their
// staging data stays for the sweep) and the parts of state are resumed,
// truncated to their recorded lengths, one after the other: at the
// open-file limit (WithMaxOpenParts) the earlier ones are closed again,
// released as they were recorded, and resumed on their next write.
func (w *Writer) Restore(ctx context.Context, raw json.RawMessage) error {
	w.drop()
	w.restored = true
	if raw == nil {
		return nil
	}
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("filesink: bad state %s: %w", raw, err)
	}
	now := w.now()
	for _, e := range st.Parts {
		be := w.backendOf(e.DeadLetter)
		if be == nil {
			return fmt.Errorf("filesink: the checkpoint has an open dead-letter part but no dead-letter output is configured")
		}
		if w.bulk != nil && !e.DeadLetter {
			return fmt.Errorf("filesink: the checkpoint has an open row-format part (%s) in bucket %q, which a bulk format cannot resume: it was written with another --format", e.Part, e.Bucket)
		}
		target, _, err := be.Describe(e.Part)
		if err != nil {
			return err
		}
		if w.finalizeOnRestore {
			if err := w.finalizeRestored(ctx, be, &e, target); err != nil {
				return err
			}
			continue
		}
		if err := w.acquire(ctx); err != nil {
			return err
		}
		pw, err := be.Resume(ctx, e.Part)
		var remade *rebuilt
		if err != nil {
			// At-least-once: a part open at the checkpoint may have rolled
			// and been published before the crash. Its records up to the
			// checkpoint are visible; those after it come again.
			if w.publishOnRoll && errors.Is(err, committer.ErrDataLoss) && published(ctx, be, target) {
				<-w.slots
				w.log.Warn("a part open at the restored checkpoint was published before the crash (at-least-once): its later records come again", "part", target)
				continue
			}
			if w.replayer == nil || !w.rebuildable(&e, err) || !errors.Is(err, committer.ErrDataLoss) {
				<-w.slots
				return w.lostPart(&e, be.FileLocation(target), err)
			}
			lost := err
			if remade, err = w.remake(ctx, be, &e, target, true, false); err != nil {
				<-w.slots
				return &RebuildError{Part: be.FileLocation(target), Lost: lost, Err: err}
			}
			w.noteRebuilt(target, &e, remade, lost)
			pw = remade.pw
		}
		key := bucketKey{dl: e.DeadLetter, path: e.Bucket}
		var stats partStats
		if remade != nil {
			stats = remade.stats
		} else if stats, err = restoreStats(e.Stats); err != nil {
			pw.Close()
			<-w.slots
			return fmt.Errorf("filesink: bad figures of %s in the checkpoint: %w", target, err)
		}
		p := &part{target: target, pw: pw, created: now, lastWrite: now, persisted: pw.Size(), resumable: e.Part, resumed: e.Part, stats: stats}
		if remade != nil {
			// Written in this run: the next checkpoint persists it.
			p.persisted, p.resumable, p.resumed, p.dirty = 0, nil, nil, true
		}
		p.fileSize = pw.Size()
		p.size.Store(p.fileSize)
		if pw.MustRoll() {
			p.full.Store(true)
		}
		b := &bucket{key: key, part: p}
		w.buckets[key] = b
		w.lruPush(b)
	}
	return nil
}

// Referenced returns the staging data that the records in retained
// reference for the participant named participant (ParticipantName): the
// in-progress parts of its states and its pending committables, as the
// values a driver.Backend's Sweep keeps, split by dead letters (true) or
// not. It does no I/O. A nil error means every reference was read; a
// record whose state or committable does not decode is an error.
func Referenced(retained []*recovery.Checkpoint, participant string) (map[bool][]json.RawMessage, error) {
	keep := map[bool][]json.RawMessage{}
	addEntry := func(raw json.RawMessage) error {
		var e entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return err
		}
		keep[e.DeadLetter] = append(keep[e.DeadLetter], e.Part)
		return nil
	}
	for _, c := range retained {
		for _, p := range c.Participants {
			if p.Name != participant {
				continue
			}
			if p.State != nil {
				var st state
				if err := json.Unmarshal(p.State, &st); err != nil {
					return nil, fmt.Errorf("filesink: bad state in checkpoint %d: %w", c.ID, err)
				}
				for _, e := range st.Parts {
					keep[e.DeadLetter] = append(keep[e.DeadLetter], e.Part)
				}
			}
			for _, pc := range p.Pending {
				if err := addEntry(pc.Data); err != nil {
					return nil, fmt.Errorf("filesink: bad committable in checkpoint %d: %w", c.ID, err)
				}
			}
		}
	}
	return keep, nil
}

// published reports whether target is a finished file of be.
func published(ctx context.Context, be driver.Backend, target string) bool {
	r, err := be.OpenFile(ctx, target)
	if err != nil {
		return false
	}
	r.Close()
	return true
}

// Sweep implements committer.Participant: it deletes in-progress files named
// in this subtask's namespace that neither a retained checkpoint nor an open
// part references. It returns the counts of its backends' sweeps
// (driver.Backend.Sweep).
func (w *Writer) Sweep(ctx context.Context, retained []*recovery.Checkpoint) (committer.Swept, error) {
	keep, err := w.kept(ctx, retained)
	if err != nil {
		return nil, err
	}
	swept, err := w.backend.Sweep(ctx, w.namespace(), keep[false])
	if err != nil || w.dl == nil {
		return swept, err
	}
	dl, err := w.dl.Sweep(ctx, w.namespace(), keep[true])
	return committer.Swept(swept).Add(dl), err
}

// kept returns what the sweep must keep: the parts the retained records
// and the live parts reference, by dead-letter or not.
func (w *Writer) kept(ctx context.Context, retained []*recovery.Checkpoint) (map[bool][]json.RawMessage, error) {
	keep, err := Referenced(retained, w.Name())
	if err != nil {
		return nil, err
	}
	addEntry := func(raw json.RawMessage) error {
		var e entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return err
		}
		keep[e.DeadLetter] = append(keep[e.DeadLetter], e.Part)
		return nil
	}
	// Open bulk parts have no resumable (they are never persisted in
	// progress): they roll now, to be kept as the next Prepare's
	// committables.
	for _, b := range w.sorted() {
		if w.isBulk(b) && b.part != nil && b.part.pw != nil {
			if err := w.roll(ctx, b); err != nil {
				return nil, err
			}
		}
	}
	// Live parts: rolled ones waiting for the next Prepare, and open ones
	// (persisted now if they never were, to get their resumable).
	for _, c := range w.rolled {
		data, err := c.committable(ctx)
		if err != nil {
			return nil, err
		}
		if err := addEntry(data); err != nil {
			return nil, err
		}
	}
	if err := w.io.wait(); err != nil {
		return nil, err
	}
	for _, b := range w.sorted() {
		p := b.part
		if p == nil {
			continue
		}
		if p.resumed != nil {
			// An S3 part's tail objects from before it was resumed.
			keep[b.key.dl] = append(keep[b.key.dl], p.resumed)
		}
		if p.pw == nil {
			if k := p.park; k != nil { // released: its release's resumable
				if err := k.wait(ctx); err != nil {
					return nil, err
				}
				keep[b.key.dl] = append(keep[b.key.dl], k.res)
			}
			continue
		}
		if p.resumable == nil {
			r, err := p.pw.Persist(ctx)
			if err != nil {
				return nil, err
			}
			p.resumable, p.persisted = r, p.pw.Size()
		}
		keep[b.key.dl] = append(keep[b.key.dl], p.resumable)
	}
	return keep, nil
}

// Close releases every open part file without publishing anything; staging
// data stays for a later recovery. Records not covered by a decided
// checkpoint are dropped.
func (w *Writer) Close() error {
	if w.pool != nil {
		w.poolOnce.Do(func() { w.pool.writers.Add(-1) })
	}
	return w.drop()
}

// drop is Close without leaving the BudgetPool: Restore starts over with
// it, and the Writer goes on taking its share of the pool.
func (w *Writer) drop() error {
	first := w.io.stop()
	w.awaitClosing()
	w.bg.Wait()
	for k, b := range w.buckets {
		if p := b.part; p != nil && p.pw != nil {
			// A bulk writer's encoding goroutine may still hold the part
			// (and the queue, reset below): after this it writes nothing.
			p.loanMu.Lock()
			p.revoked = true
			err := p.pw.Close()
			p.loanMu.Unlock()
			<-w.slots
			if err != nil && first == nil {
				first = err
			}
		}
		b.prev, b.next = nil, nil
		delete(w.buckets, k)
	}
	w.lru.prev, w.lru.next = &w.lru, &w.lru
	w.io = ioQueue{}
	w.last = nil
	w.bufCap, w.rolled, w.free, w.bulkHeld = 0, nil, nil, 0
	return first
}
