package source

import (
	"bytes"
	"context"
	"errors"
	"io"
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

// lineReader splits a byte stream into lines. Lines that fit in buf are
// returned as slices of it; longer lines are assembled in long. It tracks
// the stream offset after the last consumed line and the number of lines
// consumed, including empty ones.
//
// A fill error leaves the state consistent, so after a context error the
// next call continues where the cancelled one stopped.
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
}

func newLineReader(bufSize, maxLine int, fill func(context.Context, []byte) (int, error)) lineReader {
	return lineReader{buf: make([]byte, bufSize), max: maxLine, fill: fill}
}

// reset starts a new stream whose next byte is at offset base and whose
// last consumed line is number line.
func (l *lineReader) reset(base, line int64) {
	l.r, l.w = 0, 0
	l.base, l.line = base, line
	l.eof, l.spill = false, false
	l.long = l.long[:0]
	l.empty = 0
}

// offset returns the stream offset just after the last consumed line.
func (l *lineReader) offset() int64 { return l.base + int64(l.r) }

// next returns the next non-empty line, without its "\n" or "\r\n", or
// io.EOF at the end of the stream, errTooLong (then l.line is the long
// line's number), a context error or a read error. Empty lines are consumed and counted but not returned.
func (l *lineReader) next(ctx context.Context) ([]byte, error) {
	for {
		// Fast path: a whole line in the buffer.
		if !l.spill {
			if i := bytes.IndexByte(l.buf[l.r:l.w], '\n'); i >= 0 {
				line := l.buf[l.r : l.r+i]
				l.r += i + 1
				l.line++
				if n := len(line); n > 0 && line[n-1] == '\r' {
					line = line[:n-1]
				}
				if len(line) > l.max {
					return nil, errTooLong
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

// readLine returns the next line, possibly empty.
func (l *lineReader) readLine(ctx context.Context) ([]byte, error) {
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
			l.line++ // name the offending line; the error is sticky
			return nil, errTooLong
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
		return nil, errTooLong
	}
	return line, nil
}
