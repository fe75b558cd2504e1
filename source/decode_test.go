package source_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/filesink/filesink/source"
)

// flakyDecoder fails the value fail once with an error that is not about
// the record (a registry that cannot be reached), and names schema 1 for
// values starting with "a", 2 for the others.
type flakyDecoder struct {
	fail   string
	failed bool
}

var errUnreachable = errors.New("registry unreachable")

func (d *flakyDecoder) Decode(_ context.Context, dst, value []byte) ([]byte, source.Schema, error) {
	if string(value) == d.fail && !d.failed {
		d.failed = true
		return dst, source.Schema{}, errUnreachable
	}
	sch := source.Schema{ID: 2, Version: 2}
	if strings.HasPrefix(string(value), "a") {
		sch = source.Schema{ID: 1, Version: 1}
	}
	return append(dst, strings.ToUpper(string(value))...), sch, nil
}

// A decode error that is not about the record leaves it pending: Position
// fails until the next Next decodes it (a checkpoint never covers a
// record the sinks did not get); the position records the schemas seen
// per input, and a source opened from it keeps them.
func TestDecodedPendingAndSchemas(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in"), []byte("a1\nb2\na3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := source.Decoded(src, &flakyDecoder{fail: "b2"}, map[string][]source.Schema{"old": {{ID: 7}}})
	if rec, err := d.Next(ctx); err != nil || string(rec.Value) != "A1" {
		t.Fatalf("first: %q, %v", rec.Value, err)
	}
	if _, err := d.Next(ctx); !errors.Is(err, errUnreachable) {
		t.Fatalf("second: %v, want the decoder's error", err)
	}
	if _, err := d.Position(); err == nil || !strings.Contains(err.Error(), "/in:2") {
		t.Fatalf("Position with a record pending: %v, want an error naming in:2", err)
	}
	var got []string
	for {
		rec, err := d.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(rec.Value))
	}
	if fmt.Sprint(got) != "[B2 A3]" {
		t.Errorf("after the failure: %v, want [B2 A3] (the pending record first)", got)
	}
	pos, err := d.Position()
	if err != nil {
		t.Fatal(err)
	}
	inner, seen, err := source.SplitDecodedPosition(pos)
	if err != nil || fmt.Sprint(seen) != "map["+filepath.Join(dir, "in")+":[v1 (id 1) v2 (id 2)] old:[id 7]]" {
		t.Fatalf("schemas seen: %v, %v (position %s)", seen, err, pos)
	}
	want, _ := src.Position()
	if string(inner) != string(want) {
		t.Errorf("inner position %s, want the reader's %s", inner, want)
	}
	if p, s, err := source.SplitDecodedPosition(want); err != nil || s != nil || string(p) != string(want) {
		t.Errorf("a plain position split: %s, %v, %v", p, s, err)
	}
}

// waitDecoder says it waits (once), then waits for release, or for its
// context to end.
type waitDecoder struct {
	waiting chan struct{}
	once    *sync.Once
	release chan struct{}
}

func (d waitDecoder) Decode(ctx context.Context, dst, value []byte) ([]byte, source.Schema, error) {
	d.once.Do(func() { close(d.waiting) })
	select {
	case <-d.release:
		return append(dst, value...), source.Schema{}, nil
	case <-ctx.Done():
		return dst, source.Schema{}, fmt.Errorf("registry unreachable: %w", ctx.Err())
	}
}

// With DecodeWithin, a Next whose context ends while the decoder waits
// goes on waiting under the given context and returns the record; without
// it, the record stays pending.
func TestDecodeWithin(t *testing.T) {
	for _, within := range []bool{false, true} {
		src, err := source.NewReader(strings.NewReader("r1\n"), "in")
		if err != nil {
			t.Fatal(err)
		}
		dec := waitDecoder{waiting: make(chan struct{}), once: new(sync.Once), release: make(chan struct{})}
		var opts []source.DecodeOption
		if within {
			opts = append(opts, source.DecodeWithin(context.Background()))
		}
		d := source.Decoded(src, dec, nil, opts...)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-dec.waiting
			cancel() // Next's context ends while the decoder waits ...
			if within {
				close(dec.release) // ... then the registry answers
			}
		}()
		rec, err := d.Next(ctx)
		switch {
		case within && (err != nil || string(rec.Value) != "r1"):
			t.Errorf("with DecodeWithin: %q, %v; want the record", rec.Value, err)
		case !within && !errors.Is(err, context.Canceled):
			t.Errorf("without DecodeWithin: %v; want Next's context's error", err)
		}
	}
}
