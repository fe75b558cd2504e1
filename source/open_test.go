package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filesink/filesink/source"
)

func TestOpen(t *testing.T) {
	dir, want := makeTree(t)
	ctx := context.Background()
	for _, tc := range []struct {
		uri  string
		pos  string
		desc string // prefix of Describe
		n    int    // records, -1: do not read
	}{
		{uri: "file://" + dir, desc: "dir " + dir, n: len(want)},
		{uri: "file:" + dir, desc: "dir " + dir, n: len(want)},
		{uri: "FILE://" + dir, desc: "dir " + dir, n: len(want)},
		{uri: dir, desc: "dir " + dir, n: len(want)},
		{uri: dir, pos: `{"file":"z.txt","offset":0,"line":0}`, desc: "dir " + dir, n: 1},
		{uri: filepath.Join(dir, "a.txt"), desc: "file " + filepath.Join(dir, "a.txt"), n: 2},
		{uri: "gen://?count=7&seed=3", desc: "gen count=7 seed=3", n: 7},
		{uri: "gen:?count=7&size=50", desc: "gen count=7 seed=0 size=50", n: 7},
		{uri: "gen://?count=7", pos: `{"next":5}`, desc: "gen count=7", n: 2},
		{uri: "gen://?count=0", desc: "gen count=0", n: 0},
		{uri: "-", desc: "stdin (not replayable)", n: -1},
		{uri: "stdin://", desc: "stdin (not replayable)", n: -1},
		{uri: "stdin:", desc: "stdin (not replayable)", n: -1},
		{uri: "-", pos: "null", desc: "stdin (not replayable)", n: -1},
	} {
		s, err := source.Open(ctx, tc.uri, json.RawMessage(tc.pos))
		if err != nil {
			t.Errorf("Open(%q, %s): %v", tc.uri, tc.pos, err)
			continue
		}
		if !strings.HasPrefix(s.Describe(), tc.desc) {
			t.Errorf("Open(%q): Describe() = %q, want prefix %q", tc.uri, s.Describe(), tc.desc)
		}
		if tc.n >= 0 {
			if got := readAll(t, s); len(got) != tc.n {
				t.Errorf("Open(%q, %s): %d records, want %d", tc.uri, tc.pos, len(got), tc.n)
			}
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for _, tc := range []struct {
		uri, pos string
		opts     []source.Option
		is       error
		msg      string
	}{
		{uri: "", is: source.ErrBadURI, msg: "gen://?count=N"},
		{uri: "kafka://broker/topic", is: source.ErrBadURI, msg: `unsupported scheme "kafka"; supported: file://DIR`},
		{uri: "s3://bucket/x", is: source.ErrBadURI, msg: "- or stdin://"},
		{uri: "stdin://x", is: source.ErrBadURI, msg: "stdin takes no path"},
		{uri: "gen://host?count=1", is: source.ErrBadURI, msg: "only a query"},
		{uri: "gen://", is: source.ErrBadURI, msg: "count is required"},
		{uri: "gen://?count=1&bogus=1", is: source.ErrBadURI, msg: "bogus"},
		{uri: "gen://?count=1", opts: []source.Option{source.WithMaxLineSize(5)}, msg: "do not apply to the generator"},
		{uri: "gen://?count=1", pos: `{"next":2}`, is: source.ErrInputChanged},
		{uri: "gen://?count=1", pos: `{"nxt":0}`, is: source.ErrBadPosition},
		{uri: "file://", is: source.ErrBadURI, msg: "no directory"},
		{uri: "file://" + filepath.Join(dir, "nope"), msg: "nope"},
		{uri: "-", pos: `{"file":"a","offset":0,"line":0}`, is: source.ErrNotReplayable, msg: "stdin cannot resume"},
		{uri: "-", opts: []source.Option{source.WithFS(nil)}, msg: "WithFS applies to directory sources only"},
		{uri: dir, pos: `{"file":"a","offset":0,"line":0}`, is: source.ErrInputChanged, msg: filepath.Join(dir, "a")},
	} {
		s, err := source.Open(ctx, tc.uri, json.RawMessage(tc.pos), tc.opts...)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q, %s): no error", tc.uri, tc.pos)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("Open(%q, %s): %v, want one matching %v", tc.uri, tc.pos, err, tc.is)
		}
		if !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Open(%q, %s): %q, want it to contain %q", tc.uri, tc.pos, err, tc.msg)
		}
	}
}
