package localfs

import (
	"fmt"

	"github.com/filesink/filesink/vfs"
)

// Direct I/O. A part writer that receives large writes (at least
// directMin bytes at once: a Writer's full buffers, a Parquet encoder's
// pages) gathers them in a block-aligned buffer of directBuf bytes and
// writes each full buffer with O_DIRECT, from its memory to the disk: no
// copy into the page cache, whose pages a sink writing large files only
// fills and drops (measured on the benchmark machine: CPU per 128 MiB
// written with fsync, 25-35 ms direct in 1 MiB writes against 50-60 ms
// buffered, and several times that buffered when the sink's other
// goroutines keep both CPUs busy). Smaller writes, the bytes before the
// file's next block boundary and the last partial block of a persist stay
// buffered. Durability is unchanged: Persist and CloseForCommit still
// fsync (O_DIRECT does not flush the device's cache or the file's
// metadata). A filesystem that refuses O_DIRECT (tmpfs on older kernels,
// some FUSE and network filesystems) turns it off for the backend, and
// its writers go on buffered. A direct write runs on a goroutine of its
// own while the writer fills its second buffer, so the writer does not
// wait for the device unless it fills a buffer faster than the device
// takes one. At most maxDirect writers of a backend are in direct mode at
// once, so memory stays within maxDirect*2*directBuf however many files
// are open.
const (
	directBlock = vfs.DirectAlign
	directBuf   = 1 << 20   // bytes gathered for one direct write (1 MiB writes cost a quarter of the CPU of 64 KiB ones here)
	directMin   = 256 << 10 // smallest Write that puts a writer in direct mode
	maxDirect   = 8         // writers in direct mode at once per backend
)

// directSlot is the pair of aligned buffers of a writer in direct mode:
// bufs[cur] is filled while the other one is written.
type directSlot struct {
	bufs [2][]byte
	cur  int
}

// takeDirectSlot returns a free direct slot of b, its buffers allocated,
// or nil when direct I/O is off or all of them are in use. Safe for
// concurrent use.
func (b *Backend) takeDirectSlot() *directSlot {
	if !b.direct || b.directOff.Load() {
		return nil
	}
	select {
	case sl := <-b.directBufs:
		if sl == nil {
			sl = &directSlot{bufs: [2][]byte{vfs.AlignedBuffer(directBuf), vfs.AlignedBuffer(directBuf)}}
		}
		return sl
	default:
		return nil
	}
}

// startDirect puts w in direct mode if its backend has a slot free: the
// bytes of p before the file's next block boundary are written buffered,
// and the number of them is returned. A nil error and w.dslot nil mean w
// stays in buffered mode.
func (w *writer) startDirect(p []byte) (int, error) {
	sl := w.b.takeDirectSlot()
	if sl == nil {
		return 0, nil
	}
	head := int(-w.Size() & (directBlock - 1))
	if head > 0 {
		if n, err := w.writeBuffered(p[:head]); err != nil {
			w.b.directBufs <- sl
			return n, err
		}
	}
	sl.cur = 0
	w.dslot, w.dbuf = sl, sl.bufs[0][:0]
	return head, nil
}

// startFlight writes the full buffer dbuf with O_DIRECT on a goroutine of
// its own, after the write in flight, and goes on with the other buffer.
func (w *writer) startFlight() error {
	if err := w.awaitFlight(); err != nil {
		return err
	}
	buf := w.dbuf
	w.dslot.cur ^= 1
	w.dbuf = w.dslot.bufs[w.dslot.cur][:0]
	done := make(chan error, 1)
	w.dflight = done
	go func() { done <- w.writeOut(buf, true) }()
	return nil
}

// awaitFlight waits for the direct write in flight, if any, and returns
// its error.
func (w *writer) awaitFlight() error {
	if w.dflight == nil {
		return nil
	}
	err := <-w.dflight
	w.dflight = nil
	return err
}

// writeDirect gathers p in the direct buffer and writes each full one.
func (w *writer) writeDirect(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		k := copy(w.dbuf[len(w.dbuf):cap(w.dbuf)], p)
		w.dbuf = w.dbuf[:len(w.dbuf)+k]
		p = p[k:]
		written += k
		w.size += int64(k)
		if len(w.dbuf) == cap(w.dbuf) {
			if err := w.startFlight(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// endDirect waits for the direct write in flight, writes what the
// direct buffer holds (its whole blocks with O_DIRECT, the rest
// buffered), gives the slot back and leaves w in buffered mode. A no-op in
// buffered mode.
func (w *writer) endDirect() error {
	if w.dslot == nil {
		return nil
	}
	err := w.awaitFlight()
	if err == nil {
		err = w.broken()
	}
	if err == nil {
		whole := len(w.dbuf) &^ (directBlock - 1)
		if err = w.writeOut(w.dbuf[:whole], true); err == nil {
			err = w.writeOut(w.dbuf[whole:], false)
		}
	}
	w.releaseDirect()
	return err
}

// dropDirect is endDirect for a writer abandoned by Close: the bytes the
// buffer holds are not written (no checkpoint recorded them). It returns
// the error of the direct write in flight.
func (w *writer) dropDirect() error {
	if w.dslot == nil {
		return nil
	}
	err := w.awaitFlight()
	w.releaseDirect()
	return err
}

// releaseDirect gives w's slot back (no write may be in flight) and
// leaves w in buffered mode.
func (w *writer) releaseDirect() {
	w.b.directBufs <- w.dslot
	w.dslot, w.dbuf = nil, nil
}

// setODirect sets or clears O_DIRECT on w's file. Failing to clear it
// breaks the writer; failing to set it does not (the bytes go buffered).
func (w *writer) setODirect(on bool) error {
	if err := w.b.setDirect(w.f, on); err != nil {
		if !on {
			return w.fail(fmt.Errorf("localfs: write %s: turning O_DIRECT off: %w", w.b.abs(w.rec.Staging), err))
		}
		return err
	}
	w.odirect = on
	return nil
}

// writeOut writes b to the file, with O_DIRECT if direct (b's length and
// the file's size are then block-aligned), switching the file's flag as
// needed. When the filesystem refuses O_DIRECT, the bytes are written
// buffered and the backend's direct I/O is turned off. A failure breaks
// the writer.
func (w *writer) writeOut(b []byte, direct bool) error {
	if len(b) == 0 {
		return nil
	}
	if direct != w.odirect {
		if err := w.setODirect(direct); err != nil {
			if !direct {
				return err
			}
			w.b.directOff.Store(true)
			direct = false
		}
	}
	n, err := w.f.Write(b)
	if err != nil && direct && vfs.IsDirectRefused(err) {
		// Accepted on open, refused on write (the filesystem's alignment
		// is coarser, or it has no direct I/O): the rest goes buffered.
		w.b.directOff.Store(true)
		if serr := w.setODirect(false); serr != nil {
			return serr
		}
		var m int
		m, err = w.f.Write(b[n:])
		n += m
	}
	if err == nil && direct {
		w.b.directWrites.Add(1)
	}
	if err != nil {
		return w.fail(vfs.WrapPath("localfs: write "+w.b.abs(w.rec.Staging), err))
	}
	return nil
}
