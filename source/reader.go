package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Reader is the source of lines of an io.Reader, such as stdin. Lines are
// split as by Dir: one record per line, a final line without "\n" is still
// a record, a trailing "\r" is stripped, empty lines are skipped but
// counted, and a line longer than the maximum is a *LineTooLongError.
//
// # Not replayable
//
// A reader cannot be read again, so Reader is not replayable: Replayable
// returns false and Position returns nil. After a crash, every record that
// a decided checkpoint covered is in the output exactly once, but the
// records read after the last decided checkpoint are lost: they were
// consumed from the reader and never published. Reader is therefore
// at-most-once across crashes (and exactly-once when no crash happens). For
// exactly-once across crashes, write the input to a directory first and use
// Dir.
//
// # Cancellation
//
// Next honours ctx even while the underlying Read blocks (a terminal or an
// idle pipe): with a cancellable ctx, reads run on a helper goroutine, and
// Next returns ctx.Err() when ctx is done while the read is still
// outstanding. No data is lost: the next call to Next waits for that read.
// Close does not interrupt a blocked Read; the helper goroutine exits when
// the Read returns.
type Reader struct {
	name   string
	lr     lineReader
	max    int
	a      asyncReader
	err    error
	closed bool
}

// NewReader returns a source of the lines of r. name names the input in
// origins and errors ("stdin" makes origins "stdin:LINE"). The options
// WithMaxLineSize, WithBufferSize and WithSkipLongLines apply; WithFS
// does not.
func NewReader(r io.Reader, name string, opts ...Option) (*Reader, error) {
	if r == nil {
		return nil, errors.New("source: NewReader: nil io.Reader")
	}
	o, err := buildOptions("reader", opts)
	if err != nil {
		return nil, err
	}
	s := &Reader{name: name, max: o.maxLine}
	s.a = asyncReader{r: r, chunkSize: min(o.bufSize, 256<<10)}
	s.lr = newLineReader(o.bufSize, o.maxLine, s.a.read)
	s.lr.skipLong = o.skipLong
	return s, nil
}

// Next implements Source.
func (s *Reader) Next(ctx context.Context) (Record, error) {
	if s.closed {
		return Record{}, ErrClosed
	}
	if s.err != nil {
		return Record{}, s.err
	}
	line, err := s.lr.next(ctx)
	switch {
	case err == nil:
		return Record{Value: line, Origin: Origin{Name: s.name, Num: s.lr.line}}, nil
	case err == io.EOF:
		return Record{}, io.EOF
	case err == errTooLong:
		le := &LineTooLongError{Origin: Origin{Name: s.name, Num: s.lr.line}, Max: s.max}
		if s.lr.skipLong {
			le.Skipped, le.Length, le.Head = true, s.lr.longLen, bytes.Clone(s.lr.head)
			return Record{}, le
		}
		s.err = le
	case ctx.Err() != nil && err == ctx.Err():
		return Record{}, err
	default:
		s.err = fmt.Errorf("source: read %s after line %d: %w", s.name, s.lr.line, err)
	}
	return Record{}, s.err
}

// Position implements Source: it returns nil, nil, because a reader cannot
// resume.
func (s *Reader) Position() (json.RawMessage, error) { return nil, nil }

// Replayable implements Source: it returns false.
func (s *Reader) Replayable() bool { return false }

// Describe implements Source: "NAME (not replayable)".
func (s *Reader) Describe() string { return s.name + " (not replayable)" }

// Close implements Source. It does not close the io.Reader and does not
// wait for a blocked Read.
func (s *Reader) Close() error {
	if !s.closed {
		s.closed = true
		s.a.close()
	}
	return nil
}

// asyncReader reads from r, on a helper goroutine when the caller's ctx can
// be cancelled, so that a blocked Read does not block Next. At most one Read
// is outstanding at a time; its bytes land in chunk and are handed over only
// through channels.
type asyncReader struct {
	r         io.Reader
	chunkSize int
	chunk     []byte        // the helper's buffer; the caller reads it only after a result
	req       chan struct{} // caller -> helper: read once into chunk
	res       chan readResult
	started   bool
	pending   bool   // a read was requested and its result not yet received
	rest      []byte // bytes of chunk received but not yet copied out
	err       error  // the reader's error, returned once rest is drained
}

type readResult struct {
	n   int
	err error
}

func (a *asyncReader) read(ctx context.Context, p []byte) (int, error) {
	if len(a.rest) > 0 {
		n := copy(p, a.rest)
		a.rest = a.rest[n:]
		return n, nil
	}
	if a.err != nil {
		return 0, a.err
	}
	if !a.pending && ctx.Done() == nil {
		// Not cancellable: read directly, no copy.
		n, err := a.r.Read(p)
		if err != nil {
			a.err = err
		}
		return n, err
	}
	if !a.pending {
		if !a.started {
			a.started = true
			a.chunk = make([]byte, a.chunkSize)
			a.req = make(chan struct{}, 1)
			a.res = make(chan readResult, 1)
			go a.loop(a.r, a.chunk, a.req, a.res)
		}
		a.req <- struct{}{}
		a.pending = true
	}
	select {
	case res := <-a.res:
		a.pending = false
		if res.n < 0 || res.n > len(a.chunk) {
			a.err = errors.New("source: reader returned an invalid count")
			return 0, a.err
		}
		a.rest, a.err = a.chunk[:res.n], res.err
		n := copy(p, a.rest)
		a.rest = a.rest[n:]
		if len(a.rest) == 0 && a.err != nil {
			return n, a.err
		}
		return n, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// loop serves read requests until req is closed.
func (a *asyncReader) loop(r io.Reader, chunk []byte, req <-chan struct{}, res chan<- readResult) {
	for range req {
		n, err := r.Read(chunk)
		res <- readResult{n, err}
	}
}

// close stops the helper goroutine once its current Read, if any, returns.
func (a *asyncReader) close() {
	if a.started {
		close(a.req)
		a.started = false
	}
}
