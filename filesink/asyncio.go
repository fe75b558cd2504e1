package filesink

import (
	"sync"
	"sync/atomic"
)

// ioQueue writes full bucket buffers to their part files on a second
// goroutine, so that encoding the next records overlaps with compression and
// the write(2) calls. Buffers of one part are written in submission order.
// At most ioDepth buffers are queued; submit blocks beyond that
// (backpressure). The owner calls wait before it touches a PartWriter
// directly (Persist, CloseForCommit, Size, Close).
type ioQueue struct {
	jobs chan ioJob
	back chan []byte // written buffers, returned for reuse
	wg   sync.WaitGroup
	lent atomic.Int64 // capacity of buffers submitted and not yet taken back by returned
	mu   sync.Mutex
	err  error
	on   bool
}

const ioDepth = 2

type ioJob struct {
	p    *part
	buf  []byte
	comp Compression // nil: write as is
	drop bool        // do not return buf for reuse
	// loan, when set, is closed once the jobs before it are done, instead
	// of a write (see lend).
	loan chan struct{}
}

// submit hands buf (no longer the caller's) to the I/O goroutine.
// With drop set, the buffer is released after the write instead of being
// returned for reuse.
func (q *ioQueue) submit(p *part, buf []byte, comp Compression, drop bool) error {
	if err := q.error(); err != nil {
		return err
	}
	q.start()
	p.size.Add(int64(len(buf)))
	q.lent.Add(int64(cap(buf)))
	q.wg.Add(1)
	q.jobs <- ioJob{p: p, buf: buf, comp: comp, drop: drop}
	return nil
}

// lend returns a channel that is closed once every buffer submitted so
// far is written (or failed), so that p's file can be lent without waiting
// here for the queue.
func (q *ioQueue) lend(p *part) (<-chan struct{}, error) {
	if err := q.error(); err != nil {
		return nil, err
	}
	q.start()
	ch := make(chan struct{})
	q.wg.Add(1)
	q.jobs <- ioJob{p: p, loan: ch}
	return ch, nil
}

// start starts the I/O goroutine if it is not running.
func (q *ioQueue) start() {
	if !q.on {
		q.jobs = make(chan ioJob, ioDepth)
		q.back = make(chan []byte, 32)
		q.on = true
		go q.run(q.jobs, q.back)
	}
}

func (q *ioQueue) run(jobs <-chan ioJob, back chan<- []byte) {
	for j := range jobs {
		if j.loan != nil {
			close(j.loan) // the part's earlier buffers are written
			q.wg.Done()
			continue
		}
		if q.error() == nil {
			if err := j.p.writeOut(j.buf, j.comp, int64(len(j.buf))); err != nil {
				q.mu.Lock()
				if q.err == nil {
					q.err = err
				}
				q.mu.Unlock()
			}
		} else {
			j.p.size.Add(-int64(len(j.buf))) // dropped
		}
		if j.drop {
			q.lent.Add(-int64(cap(j.buf)))
		} else {
			select {
			case back <- j.buf[:0]:
			default: // the owner has enough spare buffers
				q.lent.Add(-int64(cap(j.buf)))
			}
		}
		q.wg.Done()
	}
}

func (q *ioQueue) error() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// wait returns when every submitted buffer is written, with the first write
// error, if any (after which the writer is unusable).
func (q *ioQueue) wait() error {
	q.wg.Wait()
	return q.error()
}

// returned yields a written buffer for reuse, if one is ready.
func (q *ioQueue) returned() ([]byte, bool) {
	if !q.on {
		return nil, false
	}
	select {
	case b := <-q.back:
		q.lent.Add(-int64(cap(b)))
		return b, true
	default:
		return nil, false
	}
}

// stop waits for the queue and ends the goroutine; submit restarts it.
func (q *ioQueue) stop() error {
	err := q.wait()
	if q.on {
		close(q.jobs)
		q.on = false
	}
	return err
}

// sizeOf is the part's size for rolling decisions: bytes in the file plus
// bytes queued for it (uncompressed).
func sizeOf(p *part) int64 { return p.size.Load() }
