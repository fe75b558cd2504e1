package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// resumeReaders is how many files a resume reads at once to check the
// files before the checkpoint's.
const resumeReaders = 8

// checkBefore sets d.done to the summary of the files before files[i], the
// checkpoint's file, as they are now, and checks it against the
// position's summary then (nil: a position written before positions had
// one, which is not checked). A file among them that the position's
// summary does not hold was added after the checkpoint, and would never
// be read; one it holds with another size or head was changed after it
// was read to its end, and what changed would never be read: both are an
// *InputChangedError naming the file. Files the position's summary holds
// that are gone were read, and may have been removed since. A summary of
// paths only (Set, written by an older version) tells added files, not
// changed ones.
func (d *Dir) checkBefore(ctx context.Context, i int, then *beforePos, bad func(string) error) error {
	cur, err := summarizeRead(ctx, d.fsys, d.files[:i], d.names[:i])
	if err != nil {
		return err
	}
	d.done = cur
	switch {
	case then == nil:
		return nil
	case then.Set != "":
		return d.checkAdded(i, then, bad)
	}
	set, err := decodeReadSet(then.Files, then.Read)
	if err != nil {
		return bad("before: " + err.Error())
	}
	if set == d.done {
		return nil
	}
	added, removed, ok := d.done.sub(&set).decode()
	if !ok {
		return d.tooManyChanges(i, then.Files)
	}
	if len(added) == 0 {
		return nil // files read were removed
	}
	was := make(map[uint32]readFile, len(removed))
	for _, e := range removed {
		was[e.path] = e
	}
	want := make(map[uint32]readFile, len(added))
	for _, e := range added {
		want[e.path] = e
	}
	// Name the added elements: each is a file before files[i] as it is now.
	var problems []inputChange
	var buf [headSize]byte
	for k, f := range d.files[:i] {
		e, ok := want[uint32(fileID(f))]
		if !ok {
			continue
		}
		size, n, err := readHead(d.fsys, f, buf[:])
		if err != nil {
			return fmt.Errorf("source: resume: read input file %s: %w", d.names[k], err)
		}
		if newReadFile(f, size, buf[:n]) != e {
			continue
		}
		delete(want, e.path)
		o, changed := was[e.path]
		if !changed {
			problems = append(problems, inputChange{idx: k, added: true, head: "added after the checkpoint", tail: fmt.Sprintf(
				", but sorts before the checkpoint's file %s, so it would never be read "+
					"(rename it to sort after %s to have it read, or start its name with '_' to skip it)", d.files[i], d.files[i])})
			continue
		}
		c, err := d.describeChange(k, i, o, size, buf[:n])
		if err != nil {
			return err
		}
		problems = append(problems, c)
	}
	if len(want) != 0 || len(problems) != len(added) {
		return d.tooManyChanges(i, then.Files) // an element that is no file: a collision of ids
	}
	p := problems[0]
	more := ""
	if n := len(problems) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more %s)", n, plural(n, "file", "files"))
		for _, q := range problems {
			if !q.added {
				more = fmt.Sprintf(" (and %d more %s changed or added)", n, plural(n, "file", "files"))
				break
			}
		}
	}
	return &InputChangedError{Input: d.names[p.idx], Reason: p.head + more + p.tail}
}

// inputChange is what changed of files[idx] (added: it was added): the
// reason is head, then the number of other files changed, if any, then
// tail.
type inputChange struct {
	idx        int
	added      bool
	head, tail string
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// describeChange says how files[k], read to its end when it was o, and now
// size bytes starting with head (its first min(size, headSize) bytes),
// changed, and what to do, for a checkpoint in files[i].
func (d *Dir) describeChange(k, i int, o readFile, size int64, head []byte) (inputChange, error) {
	then := int64(o.size)
	n := min(then, headSize)
	sameHead := int64(len(head)) >= n && uint32(headSum(head[:n])) == o.head
	pos := d.files[i]
	leave := "move it out of the directory or start its name with '_'"
	putNew := fmt.Sprintf("put lines that are new into a new file that sorts after the checkpoint's file %s", pos)
	c := inputChange{idx: k}
	switch {
	case size > then && sameHead:
		c.head = fmt.Sprintf("grew from %d to %d bytes after it was read to its end", then, size)
		skip, ok, err := d.boundary(d.files[k], then, size)
		if err != nil {
			return c, fmt.Errorf("source: resume: read input file %s: %w", d.names[k], err)
		}
		if !ok {
			c.tail = fmt.Sprintf(": bytes were added to its last line, which was read without a newline, and its %d new bytes "+
				"would never be read (%s; %s)", size-then, leave, putNew)
			break
		}
		next := filepath.Join(d.root, filepath.FromSlash(pos)) + ".more"
		c.tail = fmt.Sprintf(": its %d new bytes would never be read (%s; to have the new lines read, first copy them to a new file "+
			"that sorts after the checkpoint's file %s, e.g. tail -c +%d %s > %s)",
			size-then, leave, pos, then+skip+1, shellQuote(d.names[k]), shellQuote(next))
	case size < then:
		c.head = fmt.Sprintf("shrank from %d to %d bytes after it was read to its end", then, size)
		c.tail = fmt.Sprintf(": it was truncated or rewritten, and what it holds now would never be read "+
			"(put it back as it was, or %s; %s)", leave, putNew)
	case size == then:
		c.head = fmt.Sprintf("was rewritten after it was read to its end (still %d bytes, but its first %d bytes differ)", size, n)
		c.tail = fmt.Sprintf(": what it holds now would never be read (put it back as it was, or %s; %s)", leave, putNew)
	default:
		c.head = fmt.Sprintf("grew from %d to %d bytes after it was read to its end, and its first %d bytes differ", then, size, n)
		c.tail = fmt.Sprintf(": it was rewritten, and what it holds now would never be read (put it back as it was, or %s; %s)", leave, putNew)
	}
	return c, nil
}

// tooManyChanges is the error for a difference between the summaries of
// the files before files[i] too large to list, unless no file is left
// before files[i] (all were read and removed: nothing to tell).
func (d *Dir) tooManyChanges(i int, then int64) error {
	if i == 0 {
		return nil
	}
	file := d.files[i]
	return &InputChangedError{Input: d.root, Reason: fmt.Sprintf("the files that sort before the checkpoint's file %s changed "+
		"in more ways than the checkpoint can tell apart (%d then, %d now): a file added or changed among them would never be read "+
		"(take the files before %s that were read out of the directory, or start their names with '_'; rename new files to sort after it)",
		file, then, i, file)}
}

// checkAdded checks the files before files[i] against a position's summary
// of their paths (Set): a file it does not hold was added since.
func (d *Dir) checkAdded(i int, then *beforePos, bad func(string) error) error {
	set, err := decodeFileSet(then.Files, then.Set)
	if err != nil {
		return bad("before: " + err.Error())
	}
	cur := summarize(d.files[:i])
	added, ok := addedFiles(d.files[:i], &cur, &set)
	switch {
	case !ok:
		return d.tooManyChanges(i, then.Files)
	case len(added) > 0:
		more := ""
		if n := len(added) - 1; n > 0 {
			more = fmt.Sprintf(" (and %d more %s)", n, plural(n, "file", "files"))
		}
		file := d.files[i]
		return &InputChangedError{Input: filepath.Join(d.root, filepath.FromSlash(added[0])), Reason: fmt.Sprintf(
			"added after the checkpoint%s, but sorts before the checkpoint's file %s, so it would never be read "+
				"(rename it to sort after %s to have it read, or start its name with '_' to skip it)", more, file, file)}
	}
	return nil
}

// summarizeRead returns the summary of files (names: their display paths)
// as they are now: of each, its size and the fingerprint of its head. A
// file gone since the listing is left out. It reads up to resumeReaders
// files at once (opening a file is most of the cost, and waits on the
// disk when the file is not cached), and returns ctx's error, unwrapped,
// when ctx is done.
func summarizeRead(ctx context.Context, fsys fs.FS, files, names []string) (readSet, error) {
	const block = 64 // files a reader takes at a time
	workers := min(resumeReaders, (len(files)+block-1)/block)
	sets := make([]readSet, workers)
	errs := make([]error, workers) // each reader's first error
	errAt := make([]int, workers)  // and the index of its file
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var buf [headSize]byte
			for !failed.Load() {
				from := int(next.Add(block)) - block
				if from >= len(files) {
					return
				}
				if err := ctx.Err(); err != nil {
					errs[w], errAt[w] = err, from
					failed.Store(true)
					return
				}
				for k := from; k < min(from+block, len(files)); k++ {
					size, n, err := readHead(fsys, files[k], buf[:])
					if errors.Is(err, fs.ErrNotExist) {
						continue
					}
					if err != nil {
						errs[w], errAt[w] = fmt.Errorf("source: resume: read input file %s: %w", names[k], err), k
						failed.Store(true)
						return
					}
					sets[w].add(newReadFile(files[k], size, buf[:n]), 1)
				}
			}
		})
	}
	wg.Wait()
	var s readSet
	var first error
	at := len(files)
	for w := range workers {
		s.merge(&sets[w])
		if errs[w] != nil && errAt[w] < at {
			first, at = errs[w], errAt[w]
		}
	}
	if err := ctx.Err(); err != nil {
		return s, err
	}
	return s, first
}

// readHead returns the size of file and reads its first min(size,
// len(buf)) bytes into buf (n of them: fewer if it shrank meanwhile).
func readHead(fsys fs.FS, file string, buf []byte) (size int64, n int, err error) {
	f, err := fsys.Open(file)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size = fi.Size()
	if size == 0 {
		return 0, 0, nil
	}
	n, err = io.ReadFull(f, buf[:min(size, int64(len(buf)))])
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return size, n, err
}

// shellQuote quotes s for a POSIX shell if it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:@%=", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
