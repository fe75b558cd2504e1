package filesink

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/filesink/filesink/committer/driver"
)

// Open part files.
//
// Every part with a file holds one descriptor while its PartWriter is open
// (a local in-progress file; an S3 part's spill file). A Writer keeps at
// most WithMaxOpenParts of them open, counting the parts that are being
// closed or released in the background until they are. When a part needs
// its file and all are taken, the least recently written open parts are
// released: their PartWriter is persisted (driver.PartWriter.Persist: the
// local file is fsynced, an S3 part's bytes since its last persist are
// stored as a tail object) and closed, and the part keeps the resumable.
// Its next write resumes it (driver.Backend.Resume) where it stopped. A
// bulk part cannot be resumed (its footer is not written yet): it rolls
// instead, as on size.
//
// Why this is crash-safe: a released part is, to the storage, exactly a
// part after a checkpoint's persist and a crash, and resuming it is the
// recovery path every driver passes (committer/drivertest). Its resumable
// describes durable bytes (Persist returned) before anything relies on it:
// a checkpoint records it as the part's state only while the part is still
// released and unwritten, or the part's own persist at that checkpoint
// once it is reopened. The sweep keeps it like any live part's. A crash
// after a release truncates the file to the newest checkpoint's length at
// recovery, as after any crash. Releasing never waits for a checkpoint and
// a checkpoint never waits for a release, except for the part's own bytes.

// MinOpenParts is the least WithMaxOpenParts a Writer takes.
const MinOpenParts = 1

// FixedMaxOpenParts is DefaultMaxOpenParts where the platform has no limit
// of open descriptors to derive it from (Windows, Plan 9, WebAssembly).
const FixedMaxOpenParts = 4096

// maxDefaultOpenParts caps DefaultMaxOpenParts under an unlimited or huge
// descriptor limit.
const maxDefaultOpenParts = 1 << 20

// DefaultMaxOpenParts returns the default of WithMaxOpenParts: on Unix,
// MaxOpenPartsFor the process's soft limit of open files (RLIMIT_NOFILE,
// which the Go runtime raises to the hard limit at start); elsewhere, or
// when the limit cannot be read, FixedMaxOpenParts. It is the allowance of
// a whole process: several Writers in one process should share it
// (pipeline.OpenPartsPerSubtask). Safe for concurrent use.
func DefaultMaxOpenParts() int {
	limit, ok := openFileLimit()
	if !ok {
		return FixedMaxOpenParts
	}
	return MaxOpenPartsFor(limit)
}

// MaxOpenPartsFor returns the part files a process may keep open under a
// limit of limit open descriptors: the limit less a reserve of 64 plus an
// eighth of the limit, for what else the process opens (standard streams,
// the runtime's poller, the state directory's lock and records, the
// source's file or connections, directory fsyncs, commit manifests, the
// metrics listener, S3 and Kafka connections, uploads in flight); at least
// a quarter of the limit and 1, at most 1,048,576. Under 256 descriptors
// that is 160, under 1,024 it is 832.
func MaxOpenPartsFor(limit uint64) int {
	if limit > maxDefaultOpenParts*2 {
		return maxDefaultOpenParts
	}
	n := int64(limit) - 64 - int64(limit/8)
	n = max(n, int64(limit/4), MinOpenParts)
	return int(min(n, maxDefaultOpenParts))
}

// WithMaxOpenParts bounds the part files the Writer keeps open at once
// (default DefaultMaxOpenParts, at least MinOpenParts), the dead-letter
// output's included, and the ones being closed or released in the
// background until they are. At the limit the least recently written open
// part is released and resumed on its next write (see the package
// documentation, Open files); with a bulk format it rolls. Recovery keeps
// within it too: the parts of the restored checkpoint are resumed one
// after the other and released again once the limit is reached.
func WithMaxOpenParts(n int) Option {
	return optionFunc(func(c *config) { c.maxOpen, c.maxOpenSet = n, true })
}

// evictBatch is the most open parts released at once when a part needs a
// file and all are taken (at most an eighth of the limit): their fsyncs
// run side by side while the next parts open in the slots the first ones
// free.
const evictBatch = 16

// parking is the release of a part's file: its PartWriter persisted and
// closed on a goroutine of its own. res and err are set before done is
// closed.
type parking struct {
	done chan struct{}
	size int64 // the part's size when released
	res  json.RawMessage
	err  error
}

// wait waits for the release and returns its error.
func (k *parking) wait(ctx context.Context) error {
	select {
	case <-k.done:
		return k.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// result is wait, with the resumable of the released part.
func (k *parking) result(ctx context.Context) (json.RawMessage, error) {
	if err := k.wait(ctx); err != nil {
		return nil, err
	}
	return k.res, nil
}

// OpenFiles returns the part files the Writer holds open now, those being
// closed or released in the background included: at most its
// WithMaxOpenParts. Safe for concurrent use.
func (w *Writer) OpenFiles() int { return len(w.slots) }

// acquire takes one of the Writer's open-file slots, releasing the least
// recently written open parts first when all are taken, and waiting for a
// slot that a part being closed or released frees.
func (w *Writer) acquire(ctx context.Context) error {
	select {
	case w.slots <- struct{}{}:
		return nil
	default:
	}
	if err := w.evict(ctx); err != nil {
		return err
	}
	select {
	case w.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// evict starts releasing the least recently written open parts (rolling
// bulk ones), at most evictBatch and an eighth of the limit.
func (w *Writer) evict(ctx context.Context) error {
	if w.lru.next == &w.lru {
		return nil // nothing open: the slots are being freed
	}
	if !w.limitLogged {
		w.limitLogged = true
		w.log.Info("open part files at the limit: releasing the least recently written ones, resumed on their next record",
			"max_open_parts", cap(w.slots), "open_buckets", len(w.buckets))
	}
	// The I/O goroutine may still write to the parts released.
	if err := w.io.wait(); err != nil {
		return err
	}
	n := max(1, min(evictBatch, cap(w.slots)/8))
	for i := 0; i < n && w.lru.next != &w.lru; i++ {
		b := w.lru.next
		if w.isBulk(b) || w.evictRoll {
			if err := w.roll(ctx, b); err != nil {
				return err
			}
			continue
		}
		w.park(ctx, b)
	}
	return nil
}

// park releases the file of b's open part: on a goroutine of its own (at
// most syncParallelism per Writer with the parts closing), it waits for
// the part's persist of the checkpoint in flight, if any (a PartWriter
// takes no Persist while a PersistAsync is pending), persists the part and
// closes it. A part not written since it was resumed is closed at once:
// the resumable it was resumed from describes it. The I/O goroutine must be
// done with the part.
func (w *Writer) park(ctx context.Context, b *bucket) {
	p := b.part
	w.lruRemove(b)
	pw, job := p.pw, p.persisting
	p.pw, p.persisting = nil, nil
	k := &parking{done: make(chan struct{}), size: pw.Size()}
	p.park = k
	w.stats.Released.Add(1)
	if p.resumed != nil && !p.dirty {
		k.res = p.resumed
		if err := pw.Close(); err != nil {
			k.err = fmt.Errorf("filesink: release %s: %w", p.target, err)
		}
		<-w.slots
		close(k.done)
		return
	}
	slots := w.slots
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		defer close(k.done)
		defer func() { <-slots }()
		res, err := w.persistClose(ctx, pw, job)
		if err != nil {
			err = fmt.Errorf("filesink: release %s: %w", p.target, err)
		}
		k.res, k.err = res, err
	}()
}

// persistClose persists and closes pw (after job, its pending persist, if any)
// and returns its resumable; pw is closed whatever happens.
func (w *Writer) persistClose(ctx context.Context, pw driver.PartWriter, job *persistJob) (json.RawMessage, error) {
	select {
	case w.closers <- struct{}{}:
	case <-ctx.Done():
		pw.Close()
		return nil, ctx.Err()
	}
	defer func() { <-w.closers }()
	if job != nil {
		if _, err := job.result(ctx); err != nil {
			pw.Close()
			return nil, err
		}
	}
	res, err := pw.Persist(ctx)
	if cerr := pw.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return res, err
}

// reopen resumes the file of b's released part where it was released.
func (w *Writer) reopen(ctx context.Context, b *bucket) error {
	p := b.part
	k := p.park
	if err := k.wait(ctx); err != nil {
		return err
	}
	if err := w.acquire(ctx); err != nil {
		return err
	}
	pw, err := w.backendOf(b.key.dl).Resume(ctx, k.res)
	if err == nil && pw.Size() != k.size {
		pw.Close()
		err = fmt.Errorf("it has %d bytes, %d were written", pw.Size(), k.size)
	}
	if err != nil {
		<-w.slots
		return fmt.Errorf("filesink: reopen %s: %w", p.target, err)
	}
	p.pw, p.park, p.resumed, p.dirty = pw, nil, k.res, false
	w.lruPush(b)
	return nil
}

// lruPush makes b, whose part is open, the most recently written.
func (w *Writer) lruPush(b *bucket) {
	if b.next != nil {
		b.prev.next, b.next.prev = b.next, b.prev
	}
	last := w.lru.prev
	b.prev, b.next = last, &w.lru
	last.next, w.lru.prev = b, b
}

// lruRemove takes b out of the open parts' order, if it is in it.
func (w *Writer) lruRemove(b *bucket) {
	if b.next == nil {
		return
	}
	b.prev.next, b.next.prev = b.next, b.prev
	b.prev, b.next = nil, nil
}

// persistJob is a part being persisted by a Prepare: an open one
// (PersistAsync), or a released one (its release's resumable).
type persistJob struct {
	p     *part
	size  int64
	entry entry

	mu   sync.Mutex
	wait func(context.Context) (json.RawMessage, error) // nil once called, or when out is known
	done chan struct{}                                  // closed when the call of wait returned
	out  json.RawMessage
	err  error
}

// result calls the job's wait once, from the checkpoint's Wait or from the
// release of the part, whichever comes first, and gives its outcome to
// every caller. Safe for concurrent use.
func (j *persistJob) result(ctx context.Context) (json.RawMessage, error) {
	j.mu.Lock()
	if wait := j.wait; wait != nil && j.done == nil {
		done := make(chan struct{})
		j.done = done
		j.mu.Unlock()
		out, err := wait(ctx)
		j.mu.Lock()
		j.out, j.err, j.wait = out, err, nil
		j.mu.Unlock()
		close(done)
		return out, err
	}
	done := j.done
	j.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.out, j.err
}
