package source_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/filesink/filesink/source"
)

func newReader(t testing.TB, r io.Reader, opts ...source.Option) *source.Reader {
	t.Helper()
	s, err := source.NewReader(r, "stdin", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestReaderLines(t *testing.T) {
	inputs := []string{
		"",
		"a",
		"a\nb\n",
		"a\r\nb\r\n\r\n\nc",
		"\n\n\nx\n",
		strings.Repeat("0123456789", 10) + "\n" + strings.Repeat("y", 16) + "\r\n" + strings.Repeat("z", 17),
	}
	wraps := map[string]func(io.Reader) io.Reader{
		"plain":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
		"data+err": iotest.DataErrReader,
	}
	for _, in := range inputs {
		want := refLines("stdin", in)
		for wname, wrap := range wraps {
			for _, bs := range []int{16, 1 << 20} {
				// Background (direct reads) and a cancellable context
				// (reads on the helper goroutine).
				for _, cancellable := range []bool{false, true} {
					s := newReader(t, wrap(strings.NewReader(in)), source.WithBufferSize(bs))
					ctx := context.Background()
					if cancellable {
						var cancel context.CancelFunc
						ctx, cancel = context.WithCancel(ctx)
						defer cancel()
					}
					var got []rec
					for {
						r, err := s.Next(ctx)
						if err == io.EOF {
							break
						}
						if err != nil {
							t.Fatalf("%q %s: %v", in, wname, err)
						}
						got = append(got, rec{string(r.Value), r.Origin.String()})
					}
					equalRecs(t, wname+" "+bsName(bs), got, want)
				}
			}
		}
	}
}

func TestReaderContract(t *testing.T) {
	s := newReader(t, strings.NewReader("a\n"))
	if s.Replayable() {
		t.Error("Replayable() = true")
	}
	if pos, err := s.Position(); pos != nil || err != nil {
		t.Errorf("Position() = %s, %v; want nil, nil", pos, err)
	}
	if s.Describe() != "stdin (not replayable)" {
		t.Errorf("Describe() = %q", s.Describe())
	}
	s.Close()
	if _, err := s.Next(context.Background()); !errors.Is(err, source.ErrClosed) {
		t.Errorf("Next after Close: %v", err)
	}
	if _, err := source.NewReader(nil, "x"); err == nil {
		t.Error("NewReader(nil): no error")
	}
	if _, err := source.NewReader(strings.NewReader(""), "x", source.WithFS(nil)); err == nil {
		t.Error("NewReader with WithFS: no error")
	}
}

func TestReaderErrors(t *testing.T) {
	errRead := errors.New("pipe broke")
	s := newReader(t, io.MultiReader(strings.NewReader("a\nb\npartial"), iotest.ErrReader(errRead)))
	readN(t, s, 2)
	_, err := s.Next(context.Background())
	if !errors.Is(err, errRead) || !strings.Contains(err.Error(), "stdin after line 2") {
		t.Fatalf("error %v: want the read error naming stdin and the line", err)
	}
	if _, err2 := s.Next(context.Background()); err2 != err {
		t.Fatalf("not sticky: %v", err2)
	}

	s = newReader(t, strings.NewReader("ok\n"+strings.Repeat("x", 20)+"\n"), source.WithMaxLineSize(10), source.WithBufferSize(16))
	readN(t, s, 1)
	_, err = s.Next(context.Background())
	var le *source.LineTooLongError
	if !errors.As(err, &le) || le.Origin.String() != "stdin:2" || le.Max != 10 {
		t.Fatalf("long line: %v", err)
	}

	s = newReader(t, zeroReader{})
	if _, err := s.Next(context.Background()); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("zero reader: %v, want io.ErrNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// TestReaderCancel: Next returns when ctx is cancelled while Read blocks,
// and the data of that read is not lost.
func TestReaderCancel(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	s := newReader(t, pr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Next(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Next on an idle pipe: %v, want context.DeadlineExceeded", err)
	}
	go func() {
		pw.Write([]byte("hel"))
		pw.Write([]byte("lo\nworld\n"))
		pw.Close()
	}()
	got := readAll(t, s)
	equalRecs(t, "after cancel", got, []rec{{"hello", "stdin:1"}, {"world", "stdin:2"}})
}

// TestReaderCloseWhileBlocked: Close does not wait for a blocked Read, and
// the helper goroutine ends when the Read returns.
func TestReaderCloseWhileBlocked(t *testing.T) {
	pr, pw := io.Pipe()
	s := newReader(t, pr)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, err := s.Next(ctx); err != context.Canceled {
		t.Fatalf("Next: %v", err)
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked")
	}
	pw.CloseWithError(errors.New("gone")) // unblocks the helper's Read
}

// TestReaderSkipLongLines: a reader source with WithSkipLongLines skips
// long lines as the directory source does, through every read pattern,
// and a cancellation while it drops a long line loses nothing.
func TestReaderSkipLongLines(t *testing.T) {
	const max = 10
	in := "ok\n" + strings.Repeat("x", 50) + "\r\nafter\n" + strings.Repeat("y", 11) + "\n\n" + strings.Repeat("z", 33)
	want := refSkip("stdin", in, max)
	for wname, wrap := range map[string]func(io.Reader) io.Reader{
		"plain": func(r io.Reader) io.Reader { return r }, "one byte": iotest.OneByteReader, "half": iotest.HalfReader,
	} {
		for _, bs := range []int{16, 1 << 20} {
			s := newReader(t, wrap(strings.NewReader(in)), source.WithMaxLineSize(max), source.WithBufferSize(bs), source.WithSkipLongLines())
			var got []event
			for {
				e, ok := nextEvent(t, s, max)
				if !ok {
					break
				}
				got = append(got, e)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s buffer %d: got %+v, want %+v", wname, bs, got, want)
			}
		}
	}

	// Cancelled while dropping: the next call goes on dropping.
	pr, pw := io.Pipe()
	defer pw.Close()
	s := newReader(t, pr, source.WithMaxLineSize(max), source.WithBufferSize(16), source.WithSkipLongLines())
	go pw.Write([]byte(strings.Repeat("x", 40)))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Next(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Next while the long line is incomplete: %v, want context.DeadlineExceeded", err)
	}
	go func() {
		pw.Write([]byte(strings.Repeat("x", 40) + "\nnext\n"))
		pw.Close()
	}()
	e, _ := nextEvent(t, s, max)
	if want := (event{strings.Repeat("x", max), "stdin:1", 80}); e != want {
		t.Fatalf("after the cancel: %+v, want %+v", e, want)
	}
	if e, _ := nextEvent(t, s, max); e != (event{"next", "stdin:2", 0}) {
		t.Fatalf("then %+v, want the next line", e)
	}
}

// TestReaderSkipLongLineMemory: skipping a line of 64 MiB does not hold
// it in memory.
func TestReaderSkipLongLineMemory(t *testing.T) {
	const size = 64 << 20
	r := io.MultiReader(io.LimitReader(repeatReader('x'), size), strings.NewReader("\nnext\n"))
	s := newReader(t, r, source.WithMaxLineSize(1<<20), source.WithSkipLongLines())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	e, _ := nextEvent(t, s, 1<<20)
	runtime.ReadMemStats(&after)
	if e.Long != size || len(e.Value) != source.LongLineHead {
		t.Fatalf("skipped line: length %d, head of %d bytes", e.Long, len(e.Value))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("skipping a %d-byte line allocated %d bytes", size, alloc)
	}
	if e, _ := nextEvent(t, s, 1<<20); e.Value != "next" {
		t.Fatalf("then %+v, want the next line", e)
	}
}

// repeatReader reads an endless run of one byte.
type repeatReader byte

func (c repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}
