package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrGone is matched by an error of Replayer.Replay reporting that the
// source can no longer give back records it delivered before: a file
// changed or removed, offsets past a topic's retention, a source that is
// not replayable.
var ErrGone = errors.New("the source no longer holds the records")

// GoneError reports records that a Replayer cannot give back. It matches
// ErrGone.
type GoneError struct {
	// Input is the input (Origin.Name); From and To the numbers asked for.
	Input    string
	From, To int64
	// Reason says why ("the file is gone", "retention removed offsets
	// before 120").
	Reason string
}

func (e *GoneError) Error() string {
	return fmt.Sprintf("records %d..%d of %s cannot be read again: %s", e.From, e.To, e.Input, e.Reason)
}

// Unwrap returns ErrGone.
func (e *GoneError) Unwrap() error { return ErrGone }

// Replayer reads again records a source delivered: the file sink rebuilds
// a part file whose staged data the store lost from the records its
// checkpoint says the part holds (filesink.WithReplayer).
type Replayer interface {
	// Replay calls fn, in order, with every record of input (an
	// Origin.Name the source gave) whose number (Origin.Num) lies in one of
	// runs: sorted, disjoint ranges [from, to], both included. Records
	// passed to fn are valid only during the call. A nil error means fn
	// was called for every number of runs the input numbers a record with
	// (a line, an id, an offset that is not a transaction marker). An
	// error matching ErrGone means the input cannot give them back; fn's
	// errors are returned as they are. Safe for concurrent use.
	Replay(ctx context.Context, input string, runs [][2]int64, fn func(Record) error) error
}

// NewReplayer returns the Replayer of the source Open(uri, ...) opens,
// with the same options, or nil for standard input, which cannot be read
// again. It reads nothing: a file is opened when its records are asked
// for.
func NewReplayer(uri string, opts ...Option) (Replayer, error) {
	if err := CheckURI(uri); err != nil {
		return nil, err
	}
	switch {
	case uri == "-" || hasScheme(uri, "stdin"):
		return nil, nil
	case hasScheme(uri, "gen"):
		cfg, err := ParseGenQuery(strings.TrimPrefix(trimScheme(uri, "gen"), "?"))
		if err != nil {
			return nil, err
		}
		return GenReplayer(cfg), nil
	case hasScheme(uri, "file"):
		uri = trimScheme(uri, "file")
	}
	return NewDirReplayer(uri, opts...)
}

// GenReplayer is the Replayer of the generator with cfg: it makes the
// records again, as NewGenerator(cfg, ...) made them.
type GenReplayer GenConfig

// Replay implements Replayer.
func (r GenReplayer) Replay(ctx context.Context, input string, runs [][2]int64, fn func(Record) error) error {
	g, err := NewGenerator(GenConfig(r), nil)
	if err != nil {
		return err
	}
	for _, run := range runs {
		if input != "gen" || run[0] < 0 || run[1] >= g.cfg.Count {
			return &GoneError{Input: input, From: run[0], To: run[1], Reason: fmt.Sprintf("the generator makes records gen:0..gen:%d", g.cfg.Count-1)}
		}
		for i := run[0]; i <= run[1]; i++ {
			if i&1023 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			g.next = i
			rec, err := g.Next(ctx)
			if err != nil {
				return err
			}
			if err := fn(rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// DirReplayer is the Replayer of the directory source: it reads the lines
// of one input file again, as NewDir read them.
type DirReplayer struct {
	root string
	fsys fs.FS
	opts []Option
}

// NewDirReplayer returns the Replayer of NewDir(ctx, dir, ..., opts...).
func NewDirReplayer(dir string, opts ...Option) (*DirReplayer, error) {
	o, err := buildOptions("dir", opts)
	if err != nil {
		return nil, err
	}
	r := &DirReplayer{root: dir, fsys: o.fsys, opts: []Option{WithMaxLineSize(o.maxLine), WithBufferSize(o.bufSize)}}
	if o.skipLong {
		r.opts = append(r.opts, WithSkipLongLines())
	}
	if !o.fsSet {
		if fi, err := os.Stat(dir); err == nil && fi.Mode().IsRegular() {
			r.root = filepath.Dir(dir)
		}
		r.fsys = os.DirFS(r.root)
	}
	return r, nil
}

// Replay implements Replayer. The file must still hold the lines it held:
// the file sink checks what it reads against the checkpoint's figures.
func (r *DirReplayer) Replay(ctx context.Context, input string, runs [][2]int64, fn func(Record) error) error {
	if len(runs) == 0 {
		return nil
	}
	first, last := runs[0][0], runs[len(runs)-1][1]
	gone := func(reason string) error {
		return &GoneError{Input: input, From: first, To: last, Reason: reason}
	}
	rel, err := filepath.Rel(r.root, input)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return gone("it is not a file of the input directory " + r.root)
	}
	f, err := r.fsys.Open(filepath.ToSlash(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return gone("the file is gone")
	}
	if err != nil {
		return fmt.Errorf("source: open input file %s: %w", input, err)
	}
	defer f.Close()
	rd, err := NewReader(f, input, r.opts...)
	if err != nil {
		return err
	}
	defer rd.Close()
	i := 0
	for {
		rec, err := rd.Next(ctx)
		var le *LineTooLongError
		switch {
		case err == io.EOF:
			return gone(fmt.Sprintf("the file ends after line %d", rd.lr.line))
		case errors.As(err, &le) && le.Skipped:
			continue
		case err != nil:
			return err
		}
		n := rec.Origin.Num
		for n > runs[i][1] {
			if i++; i == len(runs) {
				return nil
			}
		}
		if n < runs[i][0] {
			continue
		}
		if err := fn(rec); err != nil {
			return err
		}
		if n == last {
			return nil
		}
	}
}
