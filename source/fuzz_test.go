package source_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"testing"
	"testing/fstest"
	"testing/iotest"

	"github.com/filesink/filesink/source"
)

// FuzzLines checks the line splitting of the reader and directory sources
// against the reference splitter, and directory resume at every record.
func FuzzLines(f *testing.F) {
	f.Add([]byte("a\nb\r\n\r\n\nc"), uint8(0))
	f.Add([]byte("\r\r\n\n\r"), uint8(1))
	f.Add(bytes.Repeat([]byte("0123456789abcdef\n"), 5), uint8(0))
	f.Add([]byte("0123456789abcdef0\r\n0123456789abcde\r\n"), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, bs uint8) {
		bufSize := 16 + int(bs%64)
		want := refLines("in/f", string(data))
		for _, r := range []io.Reader{bytes.NewReader(data), iotest.OneByteReader(bytes.NewReader(data))} {
			s, err := source.NewReader(r, "in/f", source.WithBufferSize(bufSize))
			if err != nil {
				t.Fatal(err)
			}
			equalRecs(t, "reader", readAll(t, s), want)
		}
		fsys := fstest.MapFS{"f": {Data: data}}
		open := func(pos json.RawMessage) *source.Dir {
			d, err := source.NewDir(context.Background(), "in", pos, source.WithFS(fsys), source.WithBufferSize(bufSize))
			if err != nil {
				t.Fatalf("NewDir(%s): %v", pos, err)
			}
			return d
		}
		equalRecs(t, "dir", readAll(t, open(nil)), want)
		for k := 0; k <= len(want) && k < 20; k++ {
			d := open(nil)
			head, _ := readN(t, d, k)
			pos, _ := d.Position()
			equalRecs(t, "resume at "+string(pos), append(head, readAll(t, open(pos))...), want)
		}
	})
}

// FuzzDirPosition feeds arbitrary positions to the directory source: it
// must not panic, and a position it accepts must resume at a record
// boundary, so that what it reads is a tail of the full read.
func FuzzDirPosition(f *testing.F) {
	f.Add([]byte(`{"file":"a.txt","offset":4,"line":1}`))
	f.Add([]byte(`{"file":"a/x.txt","offset":2,"line":1}`))
	f.Add([]byte(`{"file":"a/x.txt","offset":3,"line":1}`))
	f.Add([]byte(`{"file":"z.txt","offset":4,"line":1}`))
	f.Add([]byte(`{"file":"","offset":0,"line":0}`))
	f.Add([]byte(`null`))
	fsys := fstest.MapFS{}
	for name, data := range tree {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	values := func(recs []rec) []string {
		var v []string
		for _, r := range recs {
			v = append(v, r.Value)
		}
		return v
	}
	d, err := source.NewDir(context.Background(), "in", nil, source.WithFS(fsys))
	if err != nil {
		f.Fatal(err)
	}
	full := values(readAll(f, d))
	// Every position of a full read, with its summary of the files before.
	d, err = source.NewDir(context.Background(), "in", nil, source.WithFS(fsys))
	if err != nil {
		f.Fatal(err)
	}
	for range full {
		if _, err := d.Next(context.Background()); err != nil {
			f.Fatal(err)
		}
		pos, _ := d.Position()
		f.Add([]byte(pos))
	}
	f.Fuzz(func(t *testing.T, pos []byte) {
		d, err := source.NewDir(context.Background(), "in", pos, source.WithFS(fsys), source.WithBufferSize(16))
		if err != nil {
			return
		}
		var got []string
		for {
			r, err := d.Next(context.Background())
			if err != nil {
				break
			}
			got = append(got, string(r.Value))
		}
		if len(got) > len(full) || !slices.Equal(got, full[len(full)-len(got):]) {
			t.Fatalf("position %s resumed with %q, not a tail of %q", pos, got, full)
		}
	})
}

// FuzzGenQuery: any query ParseGenQuery accepts gives a generator whose
// records are valid JSON with consecutive ids.
func FuzzGenQuery(f *testing.F) {
	f.Add("count=3&seed=1&size=20&keys=2&start=2026-01-01T00:00:00.5Z&step=-3ms")
	f.Add("count=2&step=1ns&start=0000-01-01T00:00:00Z")
	f.Fuzz(func(t *testing.T, q string) {
		cfg, err := source.ParseGenQuery(q)
		if err != nil {
			return
		}
		if cfg.Size > 1<<16 {
			cfg.Size = 1 << 16
		}
		g, err := source.NewGenerator(cfg, nil)
		if err != nil {
			return
		}
		for i := int64(0); i < 5; i++ {
			r, err := g.Next(context.Background())
			if err == io.EOF {
				if i != cfg.Count {
					t.Fatalf("EOF after %d of %d records", i, cfg.Count)
				}
				return
			}
			var v genRecord
			if err := json.Unmarshal(r.Value, &v); err != nil || v.ID != i {
				t.Fatalf("record %d %q: %v", i, r.Value, err)
			}
		}
	})
}
