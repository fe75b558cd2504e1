package bulk

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/filesink/filesink/filesink"
)

// The encoding pipeline of a writer: when Add ends a row group, the
// finished record batches go to a goroutine that encodes them while the
// caller goes on converting the next row group (on a second core).
//
// The io.Writer the writer was given is not safe for concurrent use and
// is only ever called on the caller's goroutine: the encoding goroutine
// writes into the spool's private chunks, which the caller drains to the
// io.Writer in the order they were written (as they fill, at each Add, and
// all of them when the encode ends). When the io.Writer is a
// filesink.Lender (a filesink.Writer's part file) that lends its file for
// the encode, the encoding goroutine instead writes each full chunk, and
// the last at the end of the encode, to the lent writer itself: the caller
// never touches those bytes, until it has nothing else to do: once it
// waits for the encode to end (its next row group is full, or Flush), it
// claims the chunks, and the encoding goroutine queues them from then on
// for the waiting caller to write to the lent writer, on a CPU the encode
// does not need. At most one row group is encoded at a time:
// ending another one first waits for the previous encode.
//
// Flush and Close encode on the caller's goroutine, after waiting for the
// encode in flight, with the spool passing bytes straight through to the
// io.Writer (as a writer without a pipeline does), so that when they
// return every row added before them has been written.

// A spool's chunks are an eighth of a row group, within spoolMin and
// spoolMax bytes (an encoded row group is smaller than its Arrow memory):
// small row groups do not cost a large chunk.
const (
	spoolMin = 16 << 10
	spoolMax = 1 << 20
)

// spoolFree is how many drained chunks the spool keeps for reuse while an
// encode is in flight (none once it ended).
const spoolFree = 2

// spool is the io.Writer the encoder writes to. Direct (no encode in
// flight), it writes straight to out on the caller's goroutine; otherwise
// it appends to chunks that only the caller drains to out.
type spool struct {
	out    io.Writer
	direct bool // set and cleared by the caller while no encode runs
	chunk  int  // bytes a chunk
	// lent is the writer lent for the encode in flight, if any: the
	// encoding goroutine writes full chunks to it (set and cleared by the
	// caller while no encode runs); lentN counts the bytes it wrote (read
	// by the caller during the encode: they are in the file already).
	lent  io.Writer
	lentN atomic.Int64
	// claimed is set by the caller when it starts waiting for the encode
	// in flight (and cleared after it ended): from the next full chunk on,
	// the encoding goroutine queues chunks and wakes the caller (kick)
	// instead of writing them to lent, and leaves the last one to the
	// caller.
	claimed atomic.Bool
	kick    chan struct{}
	// claimedN counts the bytes the caller wrote to lent writers (for
	// tests). Caller's goroutine only.
	claimedN int64

	// cur is written by the encoding goroutine at every Write while an
	// encode is in flight and read by the caller after it ended. It has
	// a cache line of its own: the caller's looks at the counters around
	// it would otherwise cost both goroutines a cache miss.
	_   [64]byte
	cur []byte
	_   [64]byte

	mu    sync.Mutex
	ready [][]byte // full chunks, in order
	free  [][]byte
	// nready is len(ready), for the caller's lock-free check; held is the
	// capacity of every chunk the spool holds (Buffered counts it).
	nready atomic.Int32
	held   atomic.Int64
}

func (s *spool) Write(b []byte) (int, error) {
	if s.direct {
		return s.out.Write(b)
	}
	n := len(b)
	for len(b) > 0 {
		if len(s.cur) == cap(s.cur) {
			switch {
			case s.lent != nil && s.cur != nil && !s.claimed.Load():
				if err := s.writeLent(); err != nil {
					return n - len(b), err
				}
			case s.lent != nil && s.cur != nil:
				s.next()
				select {
				case s.kick <- struct{}{}:
				default:
				}
			default:
				s.next()
			}
		}
		k := copy(s.cur[len(s.cur):cap(s.cur)], b)
		s.cur = s.cur[:len(s.cur)+k]
		b = b[k:]
	}
	return n, nil
}

// writeLent writes the current chunk to the lent writer and empties it.
// Encoding goroutine only.
func (s *spool) writeLent() error {
	if len(s.cur) == 0 {
		return nil
	}
	k, err := s.lent.Write(s.cur)
	s.lentN.Add(int64(k))
	s.cur = s.cur[:0]
	return err
}

// next queues the full current chunk and takes a free or new one.
func (s *spool) next() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		s.ready = append(s.ready, s.cur)
		s.nready.Store(int32(len(s.ready)))
	}
	if k := len(s.free); k > 0 {
		s.cur = s.free[k-1][:0]
		s.free[k-1] = nil
		s.free = s.free[:k-1]
		return
	}
	s.cur = make([]byte, 0, s.chunk)
	s.held.Add(int64(s.chunk))
}

// drain writes the full chunks to out. Caller's goroutine only.
func (s *spool) drain() error { return s.drainTo(s.out) }

// drainTo writes the full chunks to w. Caller's goroutine only.
func (s *spool) drainTo(w io.Writer) error {
	s.mu.Lock()
	ready := s.ready
	s.ready = nil
	s.nready.Store(0)
	s.mu.Unlock()
	var err error
	for i, c := range ready {
		if err == nil {
			_, err = w.Write(c)
		}
		ready[i] = nil
		s.mu.Lock()
		if len(s.free) < spoolFree {
			s.free = append(s.free, c[:0])
		} else {
			s.held.Add(-int64(cap(c)))
		}
		s.mu.Unlock()
	}
	return err
}

// end drains everything (write is false after an error: everything is
// dropped), releases the chunks and makes the spool direct again. Caller's
// goroutine, after the encode ended.
func (s *spool) end(write bool) error {
	var err error
	if write {
		err = s.drain()
		if err == nil && len(s.cur) > 0 {
			_, err = s.out.Write(s.cur)
		}
	}
	s.mu.Lock()
	s.ready, s.free, s.cur = nil, nil, nil
	s.nready.Store(0)
	s.held.Store(0)
	s.mu.Unlock()
	s.direct = true
	return err
}

// encodeJob is a row group in flight: its record batches (held until the
// caller releases them after the encode) and the encode's outcome.
type encodeJob struct {
	recs    []arrow.Record
	mem     int64 // bytes of recs counted by the row buffer's allocator
	foreign int64 // bytes of AddArrow batches among recs
	rows    int64 // rows of recs
	done    chan struct{}
	err     error // set before done is closed
	// panicked holds what the encode panicked with, re-panicked on the
	// caller's goroutine (as a panic of an inline encode would be).
	panicked any
}

// pipeline runs a writer's encodes: inline (Flush, Close) or on a
// goroutine (a row group ended by Add). Its methods are called on the
// caller's goroutine.
type pipeline struct {
	spool spool
	// out is the spool's io.Writer; lender is its filesink.Lender, if the
	// writer the ParquetWriter was given is one.
	out    *posWriter
	lender filesink.Lender
	// mem is the encoder's allocator (pqarrow's buffers), apart from the
	// row buffer's so that the builders' count, which ends row groups,
	// does not depend on how far an encode has got.
	mem *countingAllocator
	buf *rowBuffer
	job *encodeJob
	// While an encode is in flight, the caller looks at it (its finish,
	// the spool's full chunks, the encoder's memory) at every pollEvery-th
	// Add only: the encoding goroutine changes those counters all the
	// time, and reading them at every record cost the caller a cache
	// miss per record. skipped counts the Adds since the last look; seen
	// is the encoder's memory and the spool's chunks as of that look, and
	// seenLent the bytes the encode had written to the lent file.
	skipped  int
	seen     int64
	seenLent int64
	// encoded is the number of rows of the row groups encoded so far, for
	// the writer's estimate of its bytes per row (ParquetWriter.Pending).
	encoded int64
	// panicked is set when an encode panicked: the writer is broken if
	// the caller recovers.
	panicked error
}

func newPipeline(out *posWriter, buf *rowBuffer) *pipeline {
	p := &pipeline{mem: &countingAllocator{mem: memory.NewGoAllocator()}, buf: buf, out: out}
	p.lender, _ = out.w.(filesink.Lender)
	p.spool.out = out
	p.spool.direct = true
	p.spool.kick = make(chan struct{}, 1)
	p.spool.chunk = spoolMax
	if n := buf.opts.rowGroupBytes; n > 0 {
		p.spool.chunk = int(min(max(n/8, spoolMin), spoolMax))
	}
	return p
}

// pollEvery is how often, in Adds, the caller looks at an encode in
// flight: often enough that the spool is drained every few hundred KiB of
// rows and that a finished encode's batches are released within a few
// rows.
const pollEvery = 16

// buffered is what the pipeline holds beyond the row buffer's allocator:
// the encoder's allocations, undrained chunks and AddArrow batches in
// flight. While an encode runs, the first two are as of the caller's last
// look at it (at most pollEvery Adds ago).
func (p *pipeline) buffered() int64 {
	if p.job == nil {
		return p.mem.n.Load() + p.spool.held.Load()
	}
	return p.seen + p.job.foreign
}

// look refreshes seen and seenLent.
func (p *pipeline) look() {
	p.seen = p.mem.n.Load() + p.spool.held.Load()
	p.seenLent = p.spool.lentN.Load()
}

// spawn hands the row buffer's pending batches to a goroutine running
// encode on them. There must be no encode in flight.
func (p *pipeline) spawn(encode func([]arrow.Record) error) {
	j := &encodeJob{done: make(chan struct{})}
	j.recs, j.mem, j.foreign = p.buf.take()
	for _, r := range j.recs {
		j.rows += r.NumRows()
	}
	p.job = j
	p.spool.direct = false
	if p.lender != nil {
		p.spool.lent = p.lender.Lend()
	}
	p.skipped = 0
	p.look()
	go func() {
		defer close(j.done)
		defer func() {
			if r := recover(); r != nil {
				j.panicked = r
			}
		}()
		j.err = encode(j.recs)
		if j.err == nil && p.spool.lent != nil && !p.spool.claimed.Load() {
			j.err = p.spool.writeLent()
		}
	}()
}

// poll is called at each Add; at every pollEvery-th while an encode is in
// flight, it drains the chunks the encoder filled and ends the encode if
// it is over. A non-nil error is the encode's or the io.Writer's.
func (p *pipeline) poll() error {
	if p.panicked != nil {
		return p.panicked
	}
	j := p.job
	if j == nil {
		return nil
	}
	if p.skipped++; p.skipped < pollEvery {
		return nil
	}
	p.skipped = 0
	select {
	case <-j.done:
		return p.wait()
	default:
	}
	var err error
	if p.spool.nready.Load() > 0 {
		err = p.spool.drain()
	}
	p.look()
	return err
}

// wait waits for the encode in flight, if any, releases its batches and
// writes the rest of its bytes. Afterwards the spool is direct.
func (p *pipeline) wait() error {
	j := p.job
	if j == nil {
		return nil
	}
	claimErr := p.await(j)
	p.job = nil
	p.buf.untake(j.recs, j.mem)
	p.unlend()
	if j.panicked != nil {
		_ = p.spool.end(false)
		p.panicked = fmt.Errorf("encoding panicked: %v", j.panicked)
		panic(j.panicked)
	}
	err := j.err
	if err == nil {
		err = claimErr
	}
	if werr := p.spool.end(err == nil); err == nil {
		err = werr
	}
	if err == nil {
		p.encoded += j.rows
	}
	return err
}

// await waits for j to end. With a lent file, it claims the encoder's
// chunks meanwhile and writes them to the lent writer as they fill, and
// the last one at the end; it returns the first error of those writes
// (after which it writes no more: the rest are dropped with the spool's).
func (p *pipeline) await(j *encodeJob) error {
	s := &p.spool
	if s.lent == nil {
		<-j.done
		return nil
	}
	s.claimed.Store(true)
	defer s.claimed.Store(false)
	var err error
	for {
		select {
		case <-j.done:
			// The encoder left its last chunk too, unless it wrote it
			// before it saw the claim. A failed encode's bytes are
			// dropped (wait ends the spool without writing).
			if j.err != nil || j.panicked != nil {
				return err
			}
			if err == nil {
				err = s.claimReady()
			}
			if err == nil && len(s.cur) > 0 {
				err = s.claimLast()
			}
			return err
		case <-s.kick:
			if err == nil {
				err = s.claimReady()
			}
		}
	}
}

// claimReady writes the queued chunks to the lent writer, counting them
// as the encoder's lent writes. Caller's goroutine, during await.
func (s *spool) claimReady() error {
	return s.drainTo(claimWriter{s})
}

// claimLast writes the last, partial chunk to the lent writer for the
// caller and empties it.
func (s *spool) claimLast() error {
	_, err := claimWriter{s}.Write(s.cur)
	s.cur = s.cur[:0]
	return err
}

// claimWriter writes to the lent writer for the caller, counting the
// bytes in lentN and claimedN.
type claimWriter struct{ s *spool }

func (c claimWriter) Write(b []byte) (int, error) {
	k, err := c.s.lent.Write(b)
	c.s.lentN.Add(int64(k))
	c.s.claimedN += int64(k)
	return k, err
}

// abort is wait for a broken writer: nothing more is written.
func (p *pipeline) abort() {
	if j := p.job; j != nil {
		<-j.done
		p.job = nil
		p.buf.untake(j.recs, j.mem)
	}
	p.unlend()
	_ = p.spool.end(false)
}

// inFlight returns the rows of the encode in flight and the bytes it had
// written to a lent file as of the caller's last look at it (0 without a
// loan).
func (p *pipeline) inFlight() (rows, written int64) {
	if p.job == nil {
		return 0, 0
	}
	return p.job.rows, p.seenLent
}

// unlend ends the loan of the encode that ended, if there was one, and
// counts the bytes it wrote.
func (p *pipeline) unlend() {
	if p.spool.lent == nil {
		return
	}
	p.lender.Return()
	p.out.pos += p.spool.lentN.Swap(0)
	p.spool.lent = nil
}
