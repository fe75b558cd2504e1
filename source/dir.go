package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Dir is the directory source: every regular file under a directory, read
// line by line. It is replayable.
//
// # Files
//
// The files are those under the directory, recursively, taken when the
// source is made, in lexical (byte) order of their slash-separated relative
// paths ("a-b.txt" comes before "a/b.txt"). Files and directories whose name
// starts with '.' or '_' are skipped, as are devices, pipes, sockets and
// symbolic links to anything but a regular file; symbolic links to
// directories are not followed. A path that is not valid UTF-8 is an error,
// since a position could not name it. Files added while the source runs are
// not read; a later run reads those whose path sorts after the checkpoint's
// file. One added with a path that sorts before it would never be read:
// resuming fails with an *InputChangedError naming it (see Position).
//
// # Lines
//
// Each line is one record; a final line without "\n" is still a record, a
// trailing "\r" is stripped (CRLF input; a "\r" elsewhere is kept), and
// empty lines (also "\r\n" alone) are skipped but counted in line numbers.
// A line of spaces is not empty: it is a record. A line longer than the
// maximum line size (WithMaxLineSize) is a *LineTooLongError naming the
// file and line; with WithSkipLongLines the source reads past it and goes
// on.
//
// # Position
//
// The position is {"file": relative slash path, "offset": byte offset just
// after the last returned record's line terminator, "line": that record's
// 1-based line number, "before": {"files": N, "set": S}}; before the first
// record of a fresh source it is {"file":"","offset":0,"line":0}. "before"
// summarises the N files that sort before "file", all read, in at most
// 2.4 KB whatever N (1.6 KB for a million files; S: an invertible Bloom
// lookup table of their paths). Resuming treats those files as done and
// continues "file" at "offset". If that file no longer exists, is shorter than the offset, or
// no longer has a line boundary at the offset, NewDir fails with an
// *InputChangedError naming it, because resuming would lose or duplicate
// records. It fails the same way, naming the file, if a file that sorts
// before "file" is not one of the N (it was added since and would never be
// read), or if the files before "file" changed in more ways than the
// summary can list (about 30 files added or removed, unless none is left).
// Files of the N that are gone were read; removing them is no error. A
// position without "before" (written by an older version) is not checked
// for added files.
type Dir struct {
	root    string   // the directory as given; names inputs
	desc    string   // Describe's text
	fsys    fs.FS    // rooted at the directory
	files   []string // relative slash paths, sorted
	names   []string // display paths: root joined with files[i]
	idx     int      // the file being read; len(files) at the end
	f       fs.File  // files[idx] when open
	lr      lineReader
	max     int
	pos     dirPos // just after the last record returned
	err     error  // sticky
	closed  bool
	rdr     func(context.Context, []byte) (int, error)
	resumed string
	done    fileSet    // summary of files[:idx]
	posIdx  int        // index of pos.File in files; -1 before the first record
	before  *beforePos // pos.Before: the summary of files[:posIdx]
}

// dirPos is the directory source's position document.
type dirPos struct {
	File   string     `json:"file"`
	Offset int64      `json:"offset"`
	Line   int64      `json:"line"`
	Before *beforePos `json:"before,omitempty"`
}

// beforePos is the summary (a fileSet) of the files that sort before a
// position's file, all of them read: a resume finds files added among
// them since.
type beforePos struct {
	Files int64  `json:"files"`
	Set   string `json:"set,omitempty"`
}

// summary returns the position's summary of the files before files[i],
// and makes i the position's file.
func (d *Dir) summary(i int) *beforePos {
	if d.posIdx != i || d.before == nil {
		d.posIdx = i
		d.before = &beforePos{Files: d.done.n, Set: d.done.encode()}
	}
	return d.before
}

// NewDir opens the directory source for dir, resuming at pos (nil or JSON
// null: from the beginning). If dir is a regular file, the source reads that
// one file (its position names it by its base name). ctx bounds the listing
// of the directory.
//
// It fails with an error matching ErrBadPosition for a malformed pos and an
// *InputChangedError if pos no longer matches the files.
func NewDir(ctx context.Context, dir string, pos json.RawMessage, opts ...Option) (*Dir, error) {
	o, err := buildOptions("dir", opts)
	if err != nil {
		return nil, err
	}
	d := &Dir{root: dir, fsys: o.fsys, max: o.maxLine, posIdx: -1}
	if !o.fsSet {
		if dir == "" {
			return nil, errors.New("source: empty directory name")
		}
		fi, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("source: input directory: %w", err)
		}
		switch {
		case fi.IsDir():
			d.fsys = os.DirFS(dir)
		case fi.Mode().IsRegular():
			d.root = filepath.Dir(dir)
			d.fsys = os.DirFS(d.root)
			d.files = []string{filepath.Base(dir)}
			d.desc = "file " + dir
		default:
			return nil, fmt.Errorf("source: input %s is neither a directory nor a regular file (mode %v)", dir, fi.Mode())
		}
	}
	if d.files == nil {
		d.files, err = listFiles(ctx, d.fsys)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
				return nil, cerr
			}
			return nil, fmt.Errorf("source: list input directory %s: %w", dir, err)
		}
		n := strconv.Itoa(len(d.files)) + " files"
		if len(d.files) == 1 {
			n = "1 file"
		}
		d.desc = "dir " + dir + " (" + n + ")"
	}
	d.names = make([]string, len(d.files))
	for i, f := range d.files {
		d.names[i] = filepath.Join(d.root, filepath.FromSlash(f))
	}
	d.rdr = d.read
	d.lr = newLineReader(o.bufSize, o.maxLine, d.rdr)
	d.lr.skipLong = o.skipLong
	if !isNullPosition(pos) {
		if err := d.resume(pos); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// listFiles returns the regular, non-hidden files under "." of fsys, sorted.
func listFiles(ctx context.Context, fsys fs.FS) ([]string, error) {
	files := []string{}
	err := fs.WalkDir(fsys, ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if hidden(de.Name()) {
			if de.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !utf8.ValidString(p) {
			// A position is JSON, which cannot carry this name exactly.
			return fmt.Errorf("%q: name is not valid UTF-8, so no checkpoint position could name it (rename it, or prefix it with '_' to skip it)", p)
		}
		switch t := de.Type(); {
		case t.IsRegular():
			files = append(files, p)
		case t&fs.ModeSymlink != 0:
			fi, err := fs.Stat(fsys, p)
			if err != nil {
				return fmt.Errorf("symbolic link %s: %w", p, err)
			}
			if fi.Mode().IsRegular() {
				files = append(files, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	return files, nil
}

// hidden reports whether a file or directory name is skipped.
func hidden(name string) bool {
	return name != "" && (name[0] == '.' || name[0] == '_')
}

// resume positions d at pos, checking that the input still matches it.
func (d *Dir) resume(pos json.RawMessage) error {
	var p struct {
		File   *string    `json:"file"`
		Offset *int64     `json:"offset"`
		Line   *int64     `json:"line"`
		Before *beforePos `json:"before"`
	}
	if err := decodePosition("directory", pos, &p); err != nil {
		return err
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: directory position %s: %s", ErrBadPosition, truncate(pos, 200), why)
	}
	switch {
	case p.File == nil || p.Offset == nil || p.Line == nil:
		return bad(`want "file", "offset" and "line"`)
	case *p.Offset < 0 || *p.Line < 0:
		return bad("negative offset or line")
	case *p.Line > *p.Offset:
		return bad("more lines than bytes")
	case *p.File == "":
		if *p.Offset != 0 || *p.Line != 0 || p.Before != nil && p.Before.Files != 0 {
			return bad("an offset without a file")
		}
		return nil // the start
	case *p.File == "." || !fs.ValidPath(*p.File):
		return bad("file is not a clean relative slash path")
	}
	file, off, line := *p.File, *p.Offset, *p.Line
	name := filepath.Join(d.root, filepath.FromSlash(file))
	changed := func(format string, args ...any) error {
		return &InputChangedError{Input: name, Reason: fmt.Sprintf(format, args...)}
	}
	i, found := slices.BinarySearch(d.files, file)
	if !found {
		if _, err := fs.Stat(d.fsys, file); err != nil && errors.Is(err, fs.ErrNotExist) {
			return changed("the file named in the checkpoint no longer exists")
		}
		return changed("the file named in the checkpoint is no longer a readable regular, non-hidden file")
	}
	if err := d.checkBefore(i, file, p.Before, bad); err != nil {
		return err
	}
	fi, err := fs.Stat(d.fsys, file)
	if err != nil {
		return fmt.Errorf("source: resume %s: %w", name, err)
	}
	size := fi.Size()
	if size < off {
		return changed("the file is %d bytes, shorter than the checkpoint offset %d", size, off)
	}
	// The checkpoint offset must still be a line boundary: the byte before
	// it a "\n", or the checkpointed final line (which had no "\n") now
	// terminated by "\n" or "\r\n", which is then consumed as its end.
	skip := int64(0)
	if off > 0 && size > off {
		var b [3]byte
		n, err := d.readAt(file, b[:], off-1)
		if err != nil {
			return fmt.Errorf("source: resume %s: %w", name, err)
		}
		switch {
		case n >= 1 && b[0] == '\n':
		case n >= 2 && b[1] == '\n':
			skip = 1
		case n >= 3 && b[1] == '\r' && b[2] == '\n':
			skip = 2
		default:
			return changed("no line ends at the checkpoint offset %d: the file was rewritten or its last line extended", off)
		}
	}
	f, err := d.openAt(file, off+skip)
	if err != nil {
		return fmt.Errorf("source: resume %s: %w", name, err)
	}
	d.f, d.idx = f, i
	d.lr.reset(off+skip, line)
	d.pos = dirPos{File: d.files[i], Offset: off, Line: line, Before: d.summary(i)}
	d.resumed = fmt.Sprintf("%s offset %d line %d", file, off, line)
	return nil
}

// checkBefore sets d.done to the summary of the files before files[i],
// the checkpoint's file, and checks it against the position's (nil: a
// position written before positions had one, which is not checked): a
// file among them that the position's do not hold was added after the
// checkpoint, and would never be read. Files the position's hold that are
// gone were read, and may have been removed since.
func (d *Dir) checkBefore(i int, file string, then *beforePos, bad func(string) error) error {
	d.done = summarize(d.files[:i])
	if then == nil {
		return nil
	}
	set, err := decodeFileSet(then.Files, then.Set)
	if err != nil {
		return bad("before: " + err.Error())
	}
	added, ok := addedFiles(d.files[:i], &d.done, &set)
	switch {
	case !ok && i > 0:
		return &InputChangedError{Input: d.root, Reason: fmt.Sprintf("the files that sort before the checkpoint's file %s changed "+
			"in more ways than the checkpoint can tell apart (%d then, %d now): a file added among them would never be read "+
			"(take the files before %s that were read out of the directory, or start their names with '_'; rename new files to sort after it)",
			file, then.Files, i, file)}
	case len(added) > 0:
		more := ""
		if len(added) > 1 {
			more = fmt.Sprintf(" (and %d more files)", len(added)-1)
		}
		return &InputChangedError{Input: filepath.Join(d.root, filepath.FromSlash(added[0])), Reason: fmt.Sprintf(
			"added after the checkpoint%s, but sorts before the checkpoint's file %s, so it would never be read "+
				"(rename it to sort after %s to have it read, or start its name with '_' to skip it)", more, file, file)}
	}
	return nil
}

// openAt opens file positioned at off.
func (d *Dir) openAt(file string, off int64) (fs.File, error) {
	f, err := d.fsys.Open(file)
	if err != nil {
		return nil, err
	}
	if off == 0 {
		return f, nil
	}
	if s, ok := f.(io.Seeker); ok {
		_, err = s.Seek(off, io.SeekStart)
	} else {
		var n int64
		n, err = io.CopyN(io.Discard, f, off)
		if err == io.EOF {
			err = fmt.Errorf("file ended at %d bytes, before offset %d", n, off)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readAt reads up to len(b) bytes of file at off.
func (d *Dir) readAt(file string, b []byte, off int64) (int, error) {
	f, err := d.openAt(file, off)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := io.ReadFull(f, b)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return n, err
}

// read is the lineReader's fill: it honours ctx between reads.
func (d *Dir) read(ctx context.Context, p []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return d.f.Read(p)
}

// Next implements Source. It does not allocate for lines that fit in the
// read buffer. It checks ctx before each read of a file.
func (d *Dir) Next(ctx context.Context) (Record, error) {
	if d.closed {
		return Record{}, ErrClosed
	}
	if d.err != nil {
		return Record{}, d.err
	}
	for {
		if d.f == nil {
			if d.idx >= len(d.files) {
				return Record{}, io.EOF
			}
			if err := ctx.Err(); err != nil {
				return Record{}, err
			}
			f, err := d.fsys.Open(d.files[d.idx])
			if err != nil {
				return Record{}, d.fail(fmt.Errorf("source: open input file %s: %w", d.names[d.idx], err))
			}
			d.f = f
			d.lr.reset(0, 0)
		}
		line, err := d.lr.next(ctx)
		switch {
		case err == nil:
			if d.posIdx != d.idx { // the first record of a file
				d.pos.File, d.pos.Before = d.files[d.idx], d.summary(d.idx)
			}
			d.pos.Offset, d.pos.Line = d.lr.offset(), d.lr.line
			return Record{Value: line, Origin: Origin{Name: d.names[d.idx], Num: d.lr.line}}, nil
		case err == io.EOF:
			cerr := d.f.Close()
			d.f = nil
			if cerr != nil {
				return Record{}, d.fail(fmt.Errorf("source: close input file %s: %w", d.names[d.idx], cerr))
			}
			d.done.add(fileID(d.files[d.idx]), 1)
			d.idx++
		case err == errTooLong:
			le := &LineTooLongError{Origin: Origin{Name: d.names[d.idx], Num: d.lr.line}, Max: d.max}
			if !d.lr.skipLong {
				return Record{}, d.fail(le)
			}
			le.Skipped, le.Length, le.Head = true, d.lr.longLen, bytes.Clone(d.lr.head)
			d.pos = dirPos{File: d.files[d.idx], Offset: d.lr.offset(), Line: d.lr.line, Before: d.summary(d.idx)}
			return Record{}, le
		case ctx.Err() != nil && err == ctx.Err():
			return Record{}, err
		default:
			return Record{}, d.fail(fmt.Errorf("source: read input file %s after line %d: %w", d.names[d.idx], d.lr.line, err))
		}
	}
}

func (d *Dir) fail(err error) error {
	d.err = err
	return err
}

// Position implements Source. It may be called after Close and then returns
// the position after the last record returned.
func (d *Dir) Position() (json.RawMessage, error) {
	return json.Marshal(d.pos)
}

// Replayable implements Source: it returns true.
func (d *Dir) Replayable() bool { return true }

// Describe implements Source: "dir DIR (N files)", or "file PATH" for a
// single file, with the resume point if resumed.
func (d *Dir) Describe() string {
	if d.resumed != "" {
		return d.desc + ", resuming after " + d.resumed
	}
	return d.desc
}

// Files returns the relative slash paths of the files the source reads, in
// order. The caller must not modify the slice.
func (d *Dir) Files() []string { return d.files }

// Close implements Source. It closes the open file, if any; calling it again
// does nothing.
func (d *Dir) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	if d.f != nil {
		err := d.f.Close()
		d.f = nil
		return err
	}
	return nil
}
