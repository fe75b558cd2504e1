package source

import (
	"bytes"
	"context"
	"errors"
	"io"
	"unicode/utf8"
)

// errTooLong is lineReader's internal signal for a line over the maximum;
// the source turns it into a *LineTooLongError naming the input.
var errTooLong = errors.New("line too long")

// maxEmptyReads bounds consecutive (0, nil) reads before giving up with
// io.ErrNoProgress, as bufio does.
const maxEmptyReads = 100

// spillKeep is the capacity of the long-line buffer kept between lines; a
// larger one is dropped after use so that one huge line does not pin memory.
const spillKeep = 4 << 20

// LongLineHead is the most of a skipped long line that a *LineTooLongError
// keeps (LineTooLongError.Head, WithSkipLongLines): its first 64 KiB, or
// fewer when the maximum line size is smaller, cut before a UTF-8 sequence
// that would not fit whole.
const LongLineHead = 64 << 10

// lineReader splits a byte stream into lines. Lines that fit in buf are
// returned as slices of it; longer lines are assembled in long. It tracks
// the stream offset after the last consumed line and the number of lines
// consumed, including empty ones.
//
// A fill error leaves the state consistent, so after a context error the
// next call continues where the cancelled one stopped.
//
// With skipLong, a line longer than max is consumed whole (its bytes past
// the head dropped as they are read, so memory stays bounded) before
// errTooLong is returned: the reader is then at the next line, head holds
// the line's first bytes and longLen its length.
type lineReader struct {
	buf   []byte
	r, w  int   // unread bytes are buf[r:w]
	base  int64 // stream offset of buf[0]
	line  int64 // lines consumed so far (the last one's 1-based number)
	eof   bool
	spill bool   // a line longer than buf is being assembled in long
	long  []byte // the long line so far (when spill) or the last long line
	max   int
	empty int // consecutive (0, nil) fills
	fill  func(ctx context.Context, p []byte) (int, error)

	skipLong bool   // resynchronise after a line over max instead of stopping
	discard  bool   // the bytes of a line over max are being dropped
	head     []byte // the first bytes of the last line over max (skipLong)
	longLen  int64  // its length without the terminator (so far, while discard)
	lastCR   bool   // the last byte dropped was '\r'
}

func newLineReader(bufSize, maxLine int, fill func(context.Context, []byte) (int, error)) lineReader {
	return lineReader{buf: make([]byte, bufSize), max: maxLine, fill: fill}
}

// reset starts a new stream whose next byte is at offset base and whose
// last consumed line is number line.
func (l *lineReader) reset(base, line int64) {
	l.r, l.w = 0, 0
	l.base, l.line = base, line
	l.eof, l.spill, l.discard = false, false, false
	l.long = l.long[:0]
	l.empty = 0
}

// offset returns the stream offset just after the last consumed line.
func (l *lineReader) offset() int64 { return l.base + int64(l.r) }

// next returns the next non-empty line, without its "\n" or "\r\n", or
// io.EOF at the end of the stream, errTooLong (then l.line is the long
// line's number; with skipLong the line is consumed and l.head and
// l.longLen describe it), a context error or a read error. Empty lines are
// consumed and counted but not returned.
func (l *lineReader) next(ctx context.Context) ([]byte, error) {
	for {
		// Fast path: a whole line in the buffer.
		if !l.spill && !l.discard {
			if i := bytes.IndexByte(l.buf[l.r:l.w], '\n'); i >= 0 {
				line := l.buf[l.r : l.r+i]
				l.r += i + 1
				l.line++
				if n := len(line); n > 0 && line[n-1] == '\r' {
					line = line[:n-1]
				}
				if len(line) > l.max {
					return nil, l.tooLong(line, len(line))
				}
				if len(line) > 0 {
					return line, nil
				}
				continue
			}
		}
		line, err := l.readLine(ctx)
		if err != nil || len(line) > 0 {
			return line, err
		}
	}
}

// tooLong notes the first bytes of a line over the maximum, which has n
// bytes (so far), and returns errTooLong.
func (l *lineReader) tooLong(first []byte, n int) error {
	if l.skipLong {
		keep := min(len(first), l.max, LongLineHead)
		// Do not cut a UTF-8 sequence in two.
		for i := 0; i < utf8.UTFMax-1 && keep > 0 && keep < len(first) && !utf8.RuneStart(first[keep]); i++ {
			keep--
		}
		l.head = append(l.head[:0], first[:keep]...)
		l.longLen = int64(n)
	}
	return errTooLong
}

// readLine returns the next line, possibly empty.
func (l *lineReader) readLine(ctx context.Context) ([]byte, error) {
	if l.discard {
		return nil, l.dropLong(ctx)
	}
	if !l.spill {
		if cap(l.long) > spillKeep {
			l.long = nil
		}
		l.long = l.long[:0]
	}
	scan := l.r
	for {
		if i := bytes.IndexByte(l.buf[scan:l.w], '\n'); i >= 0 {
			end := scan + i
			line := l.buf[l.r:end]
			if l.spill {
				l.long = append(l.long, line...)
				line = l.long
				l.spill = false
			}
			l.r = end + 1
			l.line++
			return l.check(line)
		}
		// No terminator in the buffered bytes.
		if pending := len(l.long) + l.w - l.r; pending > l.max+1 { // +1: a "\r" may follow
			if !l.skipLong {
				l.line++ // name the offending line; the error is sticky
				return nil, errTooLong
			}
			return nil, l.startDrop(ctx, pending)
		}
		if l.eof {
			if l.r == l.w && !l.spill {
				return nil, io.EOF
			}
			// A final line without "\n".
			line := l.buf[l.r:l.w]
			if l.spill {
				l.long = append(l.long, line...)
				line = l.long
				l.spill = false
			}
			l.r = l.w
			l.line++
			return l.check(line)
		}
		// Make room: move the partial line to the front, or, if it fills
		// the whole buffer, move it to long.
		if l.r > 0 {
			n := copy(l.buf, l.buf[l.r:l.w])
			l.base += int64(l.r)
			l.w, l.r = n, 0
		}
		if l.w == len(l.buf) {
			l.long = append(l.long, l.buf[:l.w]...)
			l.base += int64(l.w)
			l.w = 0
			l.spill = true
		}
		scan = l.w
		n, err := l.fill(ctx, l.buf[l.w:])
		if n < 0 || n > len(l.buf)-l.w {
			return nil, errors.New("source: reader returned an invalid count")
		}
		l.w += n
		switch {
		case err == io.EOF:
			l.eof = true
		case err != nil:
			return nil, err
		case n == 0:
			if l.empty++; l.empty >= maxEmptyReads {
				return nil, io.ErrNoProgress
			}
			continue
		}
		l.empty = 0
	}
}

// check strips a trailing "\r" and enforces the maximum line size.
func (l *lineReader) check(line []byte) ([]byte, error) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > l.max {
		return nil, l.tooLong(line, len(line))
	}
	return line, nil
}

// startDrop begins skipping the line being read, of which pending bytes
// (in long and buf[r:w]) are known to be over the maximum: it keeps the
// head, drops the rest, and reads on to the line's end.
func (l *lineReader) startDrop(ctx context.Context, pending int) error {
	first := l.buf[l.r:l.w]
	if l.spill {
		first = append(l.long, first...)
	}
	l.tooLong(first, 0)
	l.longLen = int64(pending)
	l.lastCR = first[len(first)-1] == '\r'
	l.long, l.spill = l.long[:0], false
	l.base += int64(l.w)
	l.r, l.w = 0, 0
	l.discard = true
	return l.dropLong(ctx)
}

// dropLong reads and drops the rest of a line over the maximum, up to and
// including its "\n" (or the end of the stream), then returns errTooLong
// with l.line its number. A fill error leaves it to be resumed by the next
// call.
func (l *lineReader) dropLong(ctx context.Context) error {
	for {
		if i := bytes.IndexByte(l.buf[l.r:l.w], '\n'); i >= 0 {
			l.longLen += int64(i)
			if i > 0 {
				l.lastCR = l.buf[l.r+i-1] == '\r'
			}
			if l.lastCR {
				l.longLen-- // a CRLF line's "\r" is not counted
			}
			l.r += i + 1
			return l.endDrop()
		}
		if n := l.w - l.r; n > 0 {
			l.longLen += int64(n)
			l.lastCR = l.buf[l.w-1] == '\r'
		}
		l.base += int64(l.w)
		l.r, l.w = 0, 0
		if l.eof {
			if l.lastCR {
				l.longLen--
			}
			return l.endDrop()
		}
		n, err := l.fill(ctx, l.buf)
		if n < 0 || n > len(l.buf) {
			return errors.New("source: reader returned an invalid count")
		}
		l.w = n
		switch {
		case err == io.EOF:
			l.eof = true
		case err != nil:
			return err
		case n == 0:
			if l.empty++; l.empty >= maxEmptyReads {
				return io.ErrNoProgress
			}
			continue
		}
		l.empty = 0
	}
}

// endDrop ends the skipping of a long line.
func (l *lineReader) endDrop() error {
	l.discard, l.lastCR = false, false
	l.line++
	return errTooLong
}
