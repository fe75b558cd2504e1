package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/filesink/filesink/source"
)

// TestDirReadFileChanged: a file read to its end before the checkpoint's
// file that grew, shrank or was rewritten since is a changed input: the
// rest of it would never be read. The error names the file, says how it
// changed (with both sizes) and what to do, on one line. A read file
// removed, or the checkpoint's own file appended to, is no error.
func TestDirReadFileChanged(t *testing.T) {
	big := strings.Repeat("0123456789abcde\n", 512) // 8 KiB
	for _, tc := range []struct {
		name   string
		after  string            // origin suffix of the checkpointed record
		write  map[string]string // file -> new contents
		append map[string]string // file -> appended data
		remove []string
		named  string   // the file the error names; "": no error
		says   []string // what the error says
		next   []string // no error: the origins read next
	}{
		{name: "lines appended", after: "b/c/d.txt:3", append: map[string]string{"a.txt": "three\n"},
			named: "a.txt", says: []string{"grew from 8 to 14 bytes after it was read to its end: its 6 new bytes would never be read",
				"move it out of the directory or start its name with '_'", "sorts after the checkpoint's file b/c/d.txt",
				"tail -c +9 DIR/a.txt > DIR/b/c/d.txt.more"}},
		{name: "empty file filled", after: "z.txt:1", append: map[string]string{"empty.txt": "e\n"},
			named: "empty.txt", says: []string{"grew from 0 to 2 bytes", "tail -c +1 DIR/empty.txt > DIR/z.txt.more"}},
		{name: "last line terminated", after: "b/c/d.txt:3", append: map[string]string{"a/x.txt": "\r\nx6\n"},
			named: "a/x.txt", says: []string{"grew from 12 to 17 bytes", "its 5 new bytes", "tail -c +15 DIR/a/x.txt"}},
		{name: "last line extended", after: "b/c/d.txt:3", append: map[string]string{"a/x.txt": "5\n"},
			named: "a/x.txt", says: []string{"grew from 12 to 14 bytes", "bytes were added to its last line, which was read without a newline"}},
		{name: "rewritten same size", after: "b/c/d.txt:3", write: map[string]string{"a.txt": "uno\ndos\n"},
			named: "a.txt", says: []string{"was rewritten after it was read to its end (still 8 bytes, but its first 8 bytes differ)", "put it back as it was"}},
		{name: "shrank", after: "b/c/d.txt:3", write: map[string]string{"a.txt": "one\n"},
			named: "a.txt", says: []string{"shrank from 8 to 4 bytes after it was read to its end"}},
		{name: "grew and rewritten", after: "b/c/d.txt:3", write: map[string]string{"a.txt": "eleven\ntwelve\n"},
			named: "a.txt", says: []string{"grew from 8 to 14 bytes after it was read to its end, and its first 8 bytes differ"}},
		{name: "big file appended", after: "z.txt:1", append: map[string]string{"big.txt": "more\n"},
			named: "big.txt", says: []string{"grew from 8192 to 8197 bytes", "tail -c +8193"}},
		{name: "big file head rewritten", after: "z.txt:1", write: map[string]string{"big.txt": "X" + big[1:]},
			named: "big.txt", says: []string{"still 8192 bytes, but its first 4096 bytes differ"}},
		{name: "several", after: "z.txt:1", append: map[string]string{"b/c/d.txt": "d6\n", "only-newlines.txt": "o\n"},
			write: map[string]string{"a0.txt": "new\n"},
			named: "a0.txt", says: []string{"added after the checkpoint (and 2 more files changed or added), but sorts before the checkpoint's file z.txt"}},
		{name: "several changed", after: "z.txt:1", append: map[string]string{"b/c/d.txt": "d6\n", "only-newlines.txt": "o\n"},
			named: "b/c/d.txt", says: []string{"grew from 6 to 9 bytes after it was read to its end (and 1 more file changed or added): its 3 new bytes", "tail -c +7 DIR/b/c/d.txt > DIR/z.txt.more"}},
		{name: "changed and removed", after: "z.txt:1", append: map[string]string{"lone-cr.txt": "\nl\n"}, remove: []string{"a.txt", "a-b.txt"},
			named: "lone-cr.txt", says: []string{"grew from 3 to 6 bytes"}},
		{name: "read files removed", after: "z.txt:1", remove: []string{"a.txt", "big.txt", "empty.txt"}},
		{name: "checkpoint's file appended", after: "a/x.txt:2", append: map[string]string{"a/x.txt": "\nx6\n"},
			next: []string{"a/x.txt:4", "a/x.txt:5", "b/c/d.txt:3"}},
		{name: "files after appended", after: "a/x.txt:2", append: map[string]string{"b/c/d.txt": "d6\n"},
			next: []string{"a/x.txt:4", "b/c/d.txt:3", "b/c/d.txt:5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := makeTree(t)
			writeTree(t, dir, map[string]string{"big.txt": big})
			pos := positionAfter(t, dir, tc.after)
			writeTree(t, dir, tc.write)
			for f, data := range tc.append {
				appendFile(t, filepath.Join(dir, filepath.FromSlash(f)), data)
			}
			for _, f := range tc.remove {
				if err := os.Remove(filepath.Join(dir, filepath.FromSlash(f))); err != nil {
					t.Fatal(err)
				}
			}
			d, err := source.NewDir(context.Background(), dir, pos)
			if tc.named == "" {
				if err != nil {
					t.Fatalf("NewDir: %v", err)
				}
				defer d.Close()
				if got := origins(t, dir, d, len(tc.next)); !slices.Equal(got, tc.next) {
					t.Fatalf("resumed with %q, want %q", got, tc.next)
				}
				return
			}
			var ice *source.InputChangedError
			if !errors.As(err, &ice) || !errors.Is(err, source.ErrInputChanged) {
				t.Fatalf("NewDir: %v, want an *InputChangedError", err)
			}
			if want := filepath.Join(dir, filepath.FromSlash(tc.named)); ice.Input != want || !strings.HasPrefix(err.Error(), "source: input changed since the checkpoint: "+want+": ") {
				t.Errorf("error %q does not name %s", err, want)
			}
			msg := strings.ReplaceAll(err.Error(), dir, "DIR")
			for _, s := range tc.says {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not say %q", msg, s)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q is more than one line", msg)
			}
		})
	}
}

// origins reads n records (n < 0: all) and returns their origins,
// relative to dir.
func origins(t *testing.T, dir string, s source.Source, n int) []string {
	t.Helper()
	recs, _ := readN(t, s, n)
	var got []string
	for _, r := range recs {
		rel, err := filepath.Rel(dir, r.Origin)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, filepath.ToSlash(rel))
	}
	return got
}

// TestDirGrownFileAdvice: following what the error says about a file that
// grew after it was read (copy the new bytes to a new file that sorts
// after the checkpoint's file, move the grown one out) resumes and reads
// every new line once.
func TestDirGrownFileAdvice(t *testing.T) {
	dir, _ := makeTree(t)
	pos := positionAfter(t, dir, "b/c/d.txt:3")
	name := filepath.Join(dir, "a/x.txt")
	appendFile(t, name, "\r\nx6\nx7\n")
	_, err := source.NewDir(context.Background(), dir, pos)
	if err == nil || !strings.Contains(err.Error(), "tail -c +15 "+name+" > "+filepath.Join(dir, "b/c/d.txt.more")) {
		t.Fatalf("NewDir: %v, want the advice to copy from byte 15", err)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"b/c/d.txt.more": string(data[14:])})
	if err := os.Rename(name, filepath.Join(dir, "a/_x.txt")); err != nil {
		t.Fatal(err)
	}
	d := openDir(t, dir, pos)
	var vals []string
	for _, r := range readAll(t, d) {
		vals = append(vals, r.Value)
	}
	if want := []string{"x6", "x7", "a\rb", "last"}; !slices.Equal(vals, want) {
		t.Fatalf("resumed with %q, want %q", vals, want)
	}
}

// TestDirCheckpointFileRewritten: the checkpoint's own file must still
// start with the bytes read before the offset (up to 4 KiB), even when a
// line still ends at the offset.
func TestDirCheckpointFileRewritten(t *testing.T) {
	big := strings.Repeat("0123456789abcde\n", 512) // 8 KiB
	for _, tc := range []struct {
		name, after, file, data, says string
	}{
		{"line boundary kept", "a.txt:1", "a.txt", "ONE\ntwo\n", "its first 4 bytes are not those read before the checkpoint"},
		{"last file at its end", "z.txt:1", "z.txt", "LAST", "its first 4 bytes are not those read"},
		{"big file", "big.txt:300", "big.txt", "X" + big[1:], "its first 4096 bytes are not those read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := makeTree(t)
			writeTree(t, dir, map[string]string{"big.txt": big})
			pos := positionAfter(t, dir, tc.after)
			writeTree(t, dir, map[string]string{tc.file: tc.data})
			_, err := source.NewDir(context.Background(), dir, pos)
			var ice *source.InputChangedError
			if !errors.As(err, &ice) || ice.Input != filepath.Join(dir, tc.file) || !strings.Contains(err.Error(), tc.says) ||
				!strings.Contains(err.Error(), "put it back as it was") {
				t.Fatalf("NewDir: %v, want an *InputChangedError naming %s saying %q", err, tc.file, tc.says)
			}
		})
	}
	// Past the first 4 KiB, the bytes before the offset are not checked;
	// a line must still end at the offset.
	dir, _ := makeTree(t)
	writeTree(t, dir, map[string]string{"big.txt": big})
	pos := positionAfter(t, dir, "big.txt:300")
	writeTree(t, dir, map[string]string{"big.txt": big[:4800] + "X" + big[4801:]})
	d := openDir(t, dir, pos)
	if got := origins(t, dir, d, 1); !slices.Equal(got, []string{"big.txt:301"}) {
		t.Fatalf("resumed with %q", got)
	}
}

// TestDirPositionAfterEmptyFiles: a position taken after the source read
// past its file into files without records still holds its file's head.
func TestDirPositionAfterEmptyFiles(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "x\n", "b": "", "c": "\n\n" + strings.Repeat("\n", 5000)})
	d := openDir(t, dir, nil, source.WithBufferSize(16))
	readAll(t, d)
	pos, err := d.Position()
	if err != nil {
		t.Fatal(err)
	}
	checkHead(t, dir, pos)
	if got := shortPos(pos); got != `{"file":"a","offset":2,"line":1,"head":"H","before":{"files":0}}` {
		t.Fatalf("position %s", got)
	}
	appendFile(t, filepath.Join(dir, "b"), "b1\n")
	if got := origins(t, dir, openDir(t, dir, pos), -1); !slices.Equal(got, []string{"b:1"}) {
		t.Fatalf("resumed with %q, want b:1", got)
	}
}

// TestDirOldPositionUnchecked: a position written before positions held
// the summary of the files read ("set": their paths only) resumes without
// checking them for changes, still finds files added among them, and the
// positions taken after it are checked.
func TestDirOldPositionUnchecked(t *testing.T) {
	dir, want := makeTree(t)
	old := json.RawMessage(`{"file":"b/c/d.txt","offset":5,"line":3,"before":{"files":3,"set":"` +
		source.PathSet([]string{"a-b.txt", "a.txt", "a/x.txt"}) + `"}}`)
	appendFile(t, filepath.Join(dir, "a.txt"), "three\n")
	d := openDir(t, dir, old)
	var tail []rec
	for _, r := range want {
		if r.Origin > filepath.Join(dir, "b/c/d.txt:3") {
			tail = append(tail, r)
		}
	}
	got, _ := readN(t, d, 1)
	pos, err := d.Position()
	if err != nil {
		t.Fatal(err)
	}
	equalRecs(t, "old position", append(got, readAll(t, d)...), tail)
	if shortPos(pos) != `{"file":"cr-inside.txt","offset":4,"line":1,"head":"H","before":{"files":4,"read":"S"}}` {
		t.Fatalf("position after the old one: %s", pos)
	}
	// Files added before the old position's file are still found.
	writeTree(t, dir, map[string]string{"a0.txt": "new\n"})
	if _, err := source.NewDir(context.Background(), dir, old); !errors.Is(err, source.ErrInputChanged) || !strings.Contains(err.Error(), "a0.txt: added after the checkpoint") {
		t.Fatalf("old position with a file added before: %v", err)
	}
	os.Remove(filepath.Join(dir, "a0.txt"))
	// The new position holds a.txt as it was when the source resumed.
	appendFile(t, filepath.Join(dir, "a.txt"), "four\n")
	if _, err := source.NewDir(context.Background(), dir, pos); !errors.Is(err, source.ErrInputChanged) || !strings.Contains(err.Error(), "a.txt: grew from 14 to 19 bytes") {
		t.Fatalf("new position with a.txt grown: %v", err)
	}
}
