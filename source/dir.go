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
// resuming fails with an *InputChangedError naming it (see Position). So
// does a file that was read to its end and has changed since: lines
// appended to it would never be read either. Lines appended to the
// checkpoint's file, or to files after it, are read.
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
// 1-based line number, "head": H, "before": {"files": N, "read": R}};
// before the first record of a fresh source it is
// {"file":"","offset":0,"line":0}. H is the fingerprint of the first
// bytes of "file", up to the offset and at most 4 KiB (the first 8 bytes,
// little-endian, of their SHA-256, in hexadecimal). "before" summarises
// the N files that sort before "file", all read to their end: R is an
// invertible Bloom lookup table of their paths, the size each had when it
// was read to its end, and the fingerprint of its first 4 KiB (or fewer,
// for a smaller file), taken from the bytes as they were read, in at most
// 3.4 KB whatever N (1.9 KB for a million files of up to 1 MiB each; a
// whole position after 100,000 files of 100 bytes is 1.7 KB).
//
// Resuming treats those files as done and continues "file" at "offset".
// If that file no longer exists, is shorter than the offset, no longer has
// a line boundary at the offset, or no longer starts with the bytes H
// holds (it was rewritten, even with a line boundary left at the offset),
// NewDir fails with an *InputChangedError naming it, because resuming
// would lose or duplicate records. It fails the same way, naming the file,
// if a file that sorts before "file" is not one of the N (it was added
// since and would never be read), if one of them has another size or
// first bytes than when it was read (lines appended to it, or a rewrite,
// would never be read: the message gives both sizes and what to do), or
// if the files before "file" changed in more ways than the summary can
// list (about 30 files added or removed, or 15 changed, unless none is
// left). Files of the N that are gone were read; removing them is no
// error. Past its first 4 KiB a file is checked by its size only: a
// rewrite there that keeps the size is not seen.
//
// To check the files before "file", NewDir reads the size and the first
// 4 KiB of each of them, several files at once: resuming after 100,000
// small files took 1.6 to 3.8 s on a busy two-core virtual machine, where
// listing them took 0.1 s and reading them all 2.8 to 4.6 s
// (BenchmarkDirResume).
//
// A position written by an older version is not checked for changed
// files: without "head" and "read" (with "before": {"files": N, "set": S},
// S a summary of the paths only) it is checked for added files only, and
// without "before" not at all. The positions the source takes after such
// a resume hold the files as they were then, and are checked.
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
	done    readSet    // summary of files[:idx]
	posIdx  int        // index of pos.File in files; -1 before the first record
	before  *beforePos // pos.Before: the summary of files[:posIdx]
	posHead posHead    // fingerprint of the first bytes of pos.File
	fileOff int64      // offset in files[idx] of the next byte read
	headN   int        // bytes of files[idx] in head
	head    [headSize]byte
}

// posHead is the fingerprint (headSum) of the first n bytes of files[idx].
type posHead struct {
	idx int
	n   int
	sum uint64
}

// dirPos is the directory source's position document.
type dirPos struct {
	File   string     `json:"file"`
	Offset int64      `json:"offset"`
	Line   int64      `json:"line"`
	Head   string     `json:"head,omitempty"` // set by Position
	Before *beforePos `json:"before,omitempty"`
}

// beforePos is the summary of the files that sort before a position's
// file, all of them read to their end: a resume finds files added among
// them since, and (Read) files changed since they were read.
type beforePos struct {
	Files int64 `json:"files"`
	// Set is a fileSet of their paths, as positions written before Read
	// have it; a resume reads it but the source no longer writes it.
	Set string `json:"set,omitempty"`
	// Read is a readSet of their paths, sizes and heads.
	Read string `json:"read,omitempty"`
}

// summary returns the position's summary of the files before files[i],
// and makes i the position's file.
func (d *Dir) summary(i int) *beforePos {
	if d.posIdx != i || d.before == nil {
		d.posIdx = i
		d.before = &beforePos{Files: d.done.n, Read: d.done.encode()}
	}
	return d.before
}

// NewDir opens the directory source for dir, resuming at pos (nil or JSON
// null: from the beginning). If dir is a regular file, the source reads that
// one file (its position names it by its base name). ctx bounds the listing
// of the directory and the reading of the files before pos's.
//
// It fails with an error matching ErrBadPosition for a malformed pos and an
// *InputChangedError if pos no longer matches the files (see Dir). A nil
// error means the source continues right after pos's record, and, for a
// position that holds them ("head" and "before"), that every file before
// pos's file is still as it was read to its end (or gone), as far as its
// size and first 4 KiB tell, none was added among them, and pos's file
// still starts with the bytes read before pos (up to 4 KiB).
func NewDir(ctx context.Context, dir string, pos json.RawMessage, opts ...Option) (*Dir, error) {
	o, err := buildOptions("dir", opts)
	if err != nil {
		return nil, err
	}
	d := &Dir{root: dir, fsys: o.fsys, max: o.maxLine, posIdx: -1, posHead: posHead{idx: -1}}
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
		if err := d.resume(ctx, pos); err != nil {
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
func (d *Dir) resume(ctx context.Context, pos json.RawMessage) error {
	var p struct {
		File   *string    `json:"file"`
		Offset *int64     `json:"offset"`
		Line   *int64     `json:"line"`
		Head   *string    `json:"head"`
		Before *beforePos `json:"before"`
	}
	if err := decodePosition("directory", pos, &p); err != nil {
		return err
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: directory position %s: %s", ErrBadPosition, truncate(pos, 200), why)
	}
	var head uint64
	if p.Head != nil {
		h, err := strconv.ParseUint(*p.Head, 16, 64)
		if err != nil || len(*p.Head) != 16 {
			return bad("head is not 16 hexadecimal digits")
		}
		head = h
	}
	switch {
	case p.File == nil || p.Offset == nil || p.Line == nil:
		return bad(`want "file", "offset" and "line"`)
	case *p.Offset < 0 || *p.Line < 0:
		return bad("negative offset or line")
	case *p.Line > *p.Offset:
		return bad("more lines than bytes")
	case p.Before != nil && p.Before.Set != "" && p.Before.Read != "":
		return bad(`before: both "set" and "read"`)
	case *p.File == "":
		if *p.Offset != 0 || *p.Line != 0 || p.Before != nil && p.Before.Files != 0 || p.Head != nil {
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
	if err := d.checkBefore(ctx, i, p.Before, bad); err != nil {
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
	skip, ok, err := d.boundary(file, off, size)
	if err != nil {
		return fmt.Errorf("source: resume %s: %w", name, err)
	}
	if !ok {
		return changed("no line ends at the checkpoint offset %d: the file was rewritten or its last line extended", off)
	}
	// The bytes before the offset must be those read: the head of the
	// file, as far as the offset, has the fingerprint the position holds.
	if d.headN, err = d.readAt(file, d.head[:min(size, headSize)], 0); err != nil {
		return fmt.Errorf("source: resume %s: %w", name, err)
	}
	n := int(min(off, headSize))
	if d.headN < n {
		return changed("the file is %d bytes, shorter than the checkpoint offset %d", d.headN, off)
	}
	d.posHead = posHead{idx: i, n: n, sum: headSum(d.head[:n])}
	if p.Head != nil && d.posHead.sum != head {
		return changed("its first %d bytes are not those read before the checkpoint: the file was rewritten or replaced "+
			"(put it back as it was: a file is only ever appended to)", n)
	}
	f, err := d.openAt(file, off+skip)
	if err != nil {
		return fmt.Errorf("source: resume %s: %w", name, err)
	}
	d.f, d.idx, d.fileOff = f, i, off+skip
	d.lr.reset(off+skip, line)
	d.pos = dirPos{File: d.files[i], Offset: off, Line: line, Before: d.summary(i)}
	d.resumed = fmt.Sprintf("%s offset %d line %d", file, off, line)
	return nil
}

// boundary reports whether a line ends at off in file, which is size
// bytes: off is 0, or the byte before it is a "\n", or the last line,
// which ended at off without a "\n", is now terminated by "\n" or "\r\n"
// (skip bytes, to read past).
func (d *Dir) boundary(file string, off, size int64) (skip int64, ok bool, err error) {
	if off == 0 || size == off {
		return 0, true, nil
	}
	var b [3]byte
	n, err := d.readAt(file, b[:], off-1)
	if err != nil {
		return 0, false, err
	}
	switch {
	case n >= 1 && b[0] == '\n':
		return 0, true, nil
	case n >= 2 && b[1] == '\n':
		return 1, true, nil
	case n >= 3 && b[1] == '\r' && b[2] == '\n':
		return 2, true, nil
	}
	return 0, false, nil
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
	n, err := d.f.Read(p)
	if n > 0 {
		// Keep the file's first headSize bytes as they are read.
		if h := int64(d.headN); d.fileOff <= h && h < headSize && d.fileOff+int64(n) > h {
			d.headN += copy(d.head[h:], p[h-d.fileOff:n])
		}
		d.fileOff += int64(n)
	}
	return n, err
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
			d.f, d.fileOff, d.headN = f, 0, 0
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
			if d.posIdx == d.idx {
				d.fixHead() // before head holds the next file's
			}
			d.done.add(newReadFile(d.files[d.idx], d.fileOff, d.head[:d.headN]), 1)
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
	p := d.pos
	if p.File != "" {
		if !d.fixHead() {
			return nil, fmt.Errorf("source: position in %s: the head of the file is no longer at hand", d.names[d.posIdx])
		}
		p.Head = fmt.Sprintf("%016x", d.posHead.sum)
	}
	return json.Marshal(p)
}

// fixHead makes d.posHead the fingerprint of the first bytes of the
// position's file up to its offset (at most headSize), from head if
// needed. It reports false if they are neither in posHead nor in head,
// which the callers rule out: head is the position's file's until it is
// read to its end, when fixHead is called.
func (d *Dir) fixHead() bool {
	n := int(min(d.pos.Offset, headSize))
	if d.posHead.idx == d.posIdx && d.posHead.n == n && d.posIdx >= 0 {
		return true
	}
	if d.idx != d.posIdx || d.headN < n {
		return false
	}
	d.posHead = posHead{idx: d.posIdx, n: n, sum: headSum(d.head[:n])}
	return true
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
