package source_test

import (
	"context"
	"errors"
	"io"
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
