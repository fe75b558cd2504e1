package localfs

import (
	"fmt"

	"github.com/filesink/filesink/internal/vfs"
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
// its writers go on buffered. At most maxDirect writers of a backend are
// in direct mode at once, so memory stays within maxDirect*directBuf
// however many files are open.
const (
	directBlock = vfs.DirectAlign
	directBuf   = 1 << 20   // bytes gathered for one direct write (1 MiB writes cost a quarter of the CPU of 64 KiB ones here)
	directMin   = 256 << 10 // smallest Write that puts a writer in direct mode
	maxDirect   = 8         // writers in direct mode at once per backend
)

// takeDirectBuffer returns a free direct buffer of b, or nil when direct
// I/O is off or all of them are in use. Safe for concurrent use.
func (b *Backend) takeDirectBuffer() []byte {
	if !b.direct || b.directOff.Load() {
		return nil
	}
	select {
	case buf := <-b.directBufs:
		if buf == nil {
			buf = vfs.AlignedBuffer(directBuf)
		}
		return buf[:0]
	default:
		return nil
	}
}

// startDirect puts w in direct mode if its backend has a buffer free.
// The file's size must be block-aligned.
func (w *writer) startDirect() { w.dbuf = w.b.takeDirectBuffer() }

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
			if err := w.writeOut(w.dbuf, true); err != nil {
				return written, err
			}
			w.dbuf = w.dbuf[:0]
		}
	}
	return written, nil
}

// endDirect writes what the direct buffer holds (its whole blocks with
// O_DIRECT, the rest buffered), gives the buffer back and leaves w in
// buffered mode. A no-op in buffered mode.
func (w *writer) endDirect() error {
	if w.dbuf == nil {
		return nil
	}
	buf := w.dbuf
	w.dbuf = nil
	defer func() { w.b.directBufs <- buf[:0] }()
	if err := w.broken(); err != nil {
		return err
	}
	whole := len(buf) &^ (directBlock - 1)
	if err := w.writeOut(buf[:whole], true); err != nil {
		return err
	}
	return w.writeOut(buf[whole:], false)
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
		if err := w.b.setDirect(w.f, direct); err != nil {
			if !direct {
				return w.fail(fmt.Errorf("localfs: write %s: turning O_DIRECT off: %w", w.b.abs(w.rec.Staging), err))
			}
			w.b.directOff.Store(true)
			direct = false
		} else {
			w.odirect = direct
		}
	}
	n, err := w.f.Write(b)
	if err != nil && direct && vfs.IsDirectRefused(err) {
		// Accepted on open, refused on write (the filesystem's alignment
		// is coarser, or it has no direct I/O): the rest goes buffered.
		w.b.directOff.Store(true)
		if serr := w.b.setDirect(w.f, false); serr != nil {
			return w.fail(fmt.Errorf("localfs: write %s: turning O_DIRECT off: %w", w.b.abs(w.rec.Staging), serr))
		}
		w.odirect = false
		var m int
		m, err = w.f.Write(b[n:])
		n += m
	}
	if err == nil && direct {
		w.b.directWrites.Add(1)
	}
	if err != nil {
		return w.fail(fmt.Errorf("localfs: write %s: %w", w.b.abs(w.rec.Staging), err))
	}
	return nil
}
