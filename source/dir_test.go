package source_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/filesink/filesink/source"
)

// tree is a small input directory with every case the directory source
// handles: lexical order across directories, CRLF, empty lines, no final
// newline, empty files, hidden files and directories.
var tree = map[string]string{
	"a.txt":             "one\ntwo\n",
	"a-b.txt":           "dash\n",
	"a/x.txt":           "x1\r\nx2\r\n\r\nx4",
	"a/.hidden":         "hidden\n",
	"a/_tmp/y.txt":      "hidden\n",
	".git/config":       "hidden\n",
	"_SUCCESS":          "",
	"b/c/d.txt":         "\n\nd3\n\n",
	"cr-inside.txt":     "a\rb\n",
	"empty.txt":         "",
	"lone-cr.txt":       "\r\n\r",
	"only-newlines.txt": "\n\n\n",
	"z.txt":             "last",
}

// treeOrder is the order the files must be read in ('-' < '.' < '/').
var treeOrder = []string{
	"a-b.txt", "a.txt", "a/x.txt", "b/c/d.txt", "cr-inside.txt",
	"empty.txt", "lone-cr.txt", "only-newlines.txt", "z.txt",
}

func makeTree(t testing.TB) (dir string, want []rec) {
	t.Helper()
	dir = t.TempDir()
	writeTree(t, dir, tree)
	for _, f := range treeOrder {
		want = append(want, refLines(filepath.Join(dir, filepath.FromSlash(f)), tree[f])...)
	}
	return dir, want
}

func openDir(t testing.TB, dir string, pos json.RawMessage, opts ...source.Option) *source.Dir {
	t.Helper()
	d, err := source.NewDir(context.Background(), dir, pos, opts...)
	if err != nil {
		t.Fatalf("NewDir(%s, %s): %v", dir, pos, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestDirReadsTree(t *testing.T) {
	dir, want := makeTree(t)
	for _, bs := range []int{16, 17, 64, source.DefaultBufferSize} {
		d := openDir(t, dir, nil, source.WithBufferSize(bs))
		if got := d.Files(); !slices.Equal(got, treeOrder) {
			t.Fatalf("Files() = %q, want %q", got, treeOrder)
		}
		equalRecs(t, "buffer "+bsName(bs), readAll(t, d), want)
		// io.EOF is not wrapped and repeats.
		if _, err := d.Next(context.Background()); err != io.EOF {
			t.Fatalf("Next at the end: %v, want io.EOF", err)
		}
	}
	d := openDir(t, dir, nil)
	if got, want := d.Describe(), "dir "+dir+" (9 files)"; got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}
	if !d.Replayable() {
		t.Error("Replayable() = false")
	}
}

func bsName(i int) string { return strconv.Itoa(i) }

func TestDirLines(t *testing.T) {
	for _, tc := range []struct {
		name, data string
	}{
		{"empty", ""},
		{"one", "a\n"},
		{"no final newline", "a\nb"},
		{"crlf", "a\r\nb\r\n"},
		{"crlf no final newline", "a\r\nb\r"},
		{"empty lines", "\n\na\n\n\nb\n\n"},
		{"crlf empty lines", "\r\n\r\na\r\n\r\n"},
		{"cr inside", "a\rb\r\r\n"},
		{"long lines", strings.Repeat("x", 100) + "\n" + strings.Repeat("y", 33) + "\r\n" + strings.Repeat("z", 47)},
		{"line of exactly the buffer", strings.Repeat("x", 16) + "\n" + strings.Repeat("y", 15) + "\n" + strings.Repeat("z", 17) + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"f": tc.data})
			want := refLines(filepath.Join(dir, "f"), tc.data)
			for _, bs := range []int{16, 17, 31, 1 << 20} {
				d := openDir(t, dir, nil, source.WithBufferSize(bs))
				equalRecs(t, "buffer "+bsName(bs), readAll(t, d), want)
			}
		})
	}
}

// TestDirResumeEverywhere reads k records, takes the position, reopens with
// it and checks that the rest equals the tail of a full read, for every k;
// the position holds the head of its file, whatever the buffer size.
func TestDirResumeEverywhere(t *testing.T) {
	dir, want := makeTree(t)
	for _, bs := range []int{16, 1 << 20} {
		for k := 0; k <= len(want); k++ {
			d := openDir(t, dir, nil, source.WithBufferSize(bs))
			head, _ := readN(t, d, k)
			pos, err := d.Position()
			if err != nil {
				t.Fatal(err)
			}
			if k > 0 {
				checkHead(t, dir, pos)
			}
			d.Close()
			r := openDir(t, dir, pos, source.WithBufferSize(bs))
			tail := readAll(t, r)
			equalRecs(t, "resume at "+string(pos), append(head, tail...), want)
		}
	}
}

// TestDirResumeChain restarts after every single record.
func TestDirResumeChain(t *testing.T) {
	dir, want := makeTree(t)
	var got []rec
	var pos json.RawMessage
	for i := 0; ; i++ {
		d := openDir(t, dir, pos, source.WithBufferSize(16))
		r, eof := readN(t, d, 1)
		got = append(got, r...)
		var err error
		if pos, err = d.Position(); err != nil {
			t.Fatal(err)
		}
		d.Close()
		if eof {
			break
		}
		if i > len(want)+1 {
			t.Fatal("no end")
		}
	}
	equalRecs(t, "chain", got, want)
}

// setText matches the summary of the files before a position's file,
// headText the fingerprint of the first bytes of its file.
var (
	setText  = regexp.MustCompile(`"read":"[A-Za-z0-9+/]+"`)
	headText = regexp.MustCompile(`"head":"[0-9a-f]{16}"`)
)

// shortPos is a position with its summary of files written "S" and its
// head "H".
func shortPos(pos []byte) string {
	return headText.ReplaceAllString(setText.ReplaceAllString(string(pos), `"read":"S"`), `"head":"H"`)
}

// headOf is the head a position in file name at offset off holds: the
// first 8 bytes, little-endian, of the SHA-256 of the file's first
// min(off, 4096) bytes, in hexadecimal.
func headOf(t testing.TB, name string, off int64) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b[:min(off, 4096)])
	return fmt.Sprintf("%016x", binary.LittleEndian.Uint64(h[:8]))
}

// checkHead checks that pos holds the head of its file (under dir).
func checkHead(t testing.TB, dir string, pos []byte) {
	t.Helper()
	var p struct {
		File   string
		Offset int64
		Head   string
	}
	if err := json.Unmarshal(pos, &p); err != nil {
		t.Fatal(err)
	}
	if want := headOf(t, filepath.Join(dir, filepath.FromSlash(p.File)), p.Offset); p.Head != want {
		t.Errorf("position %s: head %q, want %q", pos, p.Head, want)
	}
}

func TestDirPositionFormat(t *testing.T) {
	dir, _ := makeTree(t)
	d := openDir(t, dir, nil)
	for _, want := range []string{
		`{"file":"","offset":0,"line":0}`,
		`{"file":"a-b.txt","offset":5,"line":1,"head":"H","before":{"files":0}}`,
		`{"file":"a.txt","offset":4,"line":1,"head":"H","before":{"files":1,"read":"S"}}`,
		`{"file":"a.txt","offset":8,"line":2,"head":"H","before":{"files":1,"read":"S"}}`,
		`{"file":"a/x.txt","offset":4,"line":1,"head":"H","before":{"files":2,"read":"S"}}`,
		`{"file":"a/x.txt","offset":8,"line":2,"head":"H","before":{"files":2,"read":"S"}}`,
		`{"file":"a/x.txt","offset":12,"line":4,"head":"H","before":{"files":2,"read":"S"}}`,
		`{"file":"b/c/d.txt","offset":5,"line":3,"head":"H","before":{"files":3,"read":"S"}}`,
	} {
		pos, err := d.Position()
		if err != nil || shortPos(pos) != want {
			t.Fatalf("Position() = %s, %v; want %s", pos, err, want)
		}
		if want != `{"file":"","offset":0,"line":0}` {
			checkHead(t, dir, pos)
		}
		if _, err := d.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// The position survives Close.
	d.Close()
	if _, err := d.Next(context.Background()); !errors.Is(err, source.ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	if pos, err := d.Position(); err != nil || shortPos(pos) != `{"file":"cr-inside.txt","offset":4,"line":1,"head":"H","before":{"files":4,"read":"S"}}` {
		t.Fatalf("Position after Close = %s, %v", pos, err)
	} else {
		checkHead(t, dir, pos)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestDirResumeAtEnd(t *testing.T) {
	dir, _ := makeTree(t)
	d := openDir(t, dir, nil)
	readAll(t, d)
	pos, _ := d.Position()
	if shortPos(pos) != `{"file":"z.txt","offset":4,"line":1,"head":"H","before":{"files":8,"read":"S"}}` {
		t.Fatalf("final position %s", pos)
	}
	checkHead(t, dir, pos)
	r := openDir(t, dir, pos)
	if got := readAll(t, r); len(got) != 0 {
		t.Fatalf("resume at the end read %q", got)
	}
	if !strings.Contains(r.Describe(), "resuming after z.txt offset 4 line 1") {
		t.Errorf("Describe() = %q", r.Describe())
	}
	// Start positions mean the beginning.
	for _, p := range []string{"", "null", " null\n", `{"file":"","offset":0,"line":0}`} {
		r := openDir(t, dir, json.RawMessage(p))
		if n := len(readAll(t, r)); n == 0 {
			t.Errorf("position %q: read nothing", p)
		}
	}
}

// positionAfter reads the tree until the record with the given origin suffix
// and returns the position after it.
func positionAfter(t *testing.T, dir, origin string) json.RawMessage {
	t.Helper()
	d := openDir(t, dir, nil)
	for {
		r, err := d.Next(context.Background())
		if err != nil {
			t.Fatalf("no record %s: %v", origin, err)
		}
		if strings.HasSuffix(r.Origin.String(), origin) {
			pos, err := d.Position()
			if err != nil {
				t.Fatal(err)
			}
			return pos
		}
	}
}

func TestDirInputChanged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		after  string // origin suffix of the checkpointed record
		change func(t *testing.T, dir string)
		reason string
	}{
		{"file removed", "a.txt:1", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "a.txt"))
		}, "no longer exists"},
		{"file renamed hidden", "a.txt:1", func(t *testing.T, dir string) {
			os.Rename(filepath.Join(dir, "a.txt"), filepath.Join(dir, "_a.txt"))
		}, "no longer exists"},
		{"file replaced by a directory", "a.txt:1", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "a.txt"))
			os.Mkdir(filepath.Join(dir, "a.txt"), 0o755)
		}, "no longer a readable regular"},
		{"file truncated", "a.txt:2", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\n"), 0o644)
		}, "shorter than the checkpoint offset 8"},
		{"file rewritten", "a.txt:1", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "a.txt"), []byte("eleven\ntwelve\n"), 0o644)
		}, "no line ends at the checkpoint offset 4"},
		{"last line extended", "a/x.txt:4", func(t *testing.T, dir string) {
			appendFile(t, filepath.Join(dir, "a/x.txt"), "more\n")
		}, "no line ends at the checkpoint offset 12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := makeTree(t)
			pos := positionAfter(t, dir, tc.after)
			tc.change(t, dir)
			_, err := source.NewDir(context.Background(), dir, pos)
			mustErrIs(t, err, source.ErrInputChanged)
			var ice *source.InputChangedError
			if !errors.As(err, &ice) {
				t.Fatalf("error %T %v: want *InputChangedError", err, err)
			}
			file := strings.TrimSuffix(tc.after, ":"+tc.after[strings.LastIndexByte(tc.after, ':')+1:])
			if ice.Input != filepath.Join(dir, file) || !strings.Contains(err.Error(), filepath.Join(dir, file)) {
				t.Errorf("error does not name %s: Input %q, %v", file, ice.Input, err)
			}
			if !strings.Contains(ice.Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", ice.Reason, tc.reason)
			}
		})
	}
}

func appendFile(t *testing.T, name, data string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDirInputGrew: appending whole lines and adding files after the
// checkpoint's file are read on resume (files added before it:
// TestDirFileAddedBefore).
func TestDirInputGrew(t *testing.T) {
	for _, tc := range []struct {
		name   string
		after  string
		change map[string]string // file -> appended data
		want   []string          // the first values read on resume
	}{
		{"lines appended", "a.txt:2", map[string]string{"a.txt": "three\n"}, []string{"three", "x1"}},
		{"last line terminated", "a/x.txt:4", map[string]string{"a/x.txt": "\nx6\n"}, []string{"x6", "d3"}},
		{"last line terminated crlf", "a/x.txt:4", map[string]string{"a/x.txt": "\r\nx6\r\n"}, []string{"x6", "d3"}},
		{"last line terminated only", "a/x.txt:4", map[string]string{"a/x.txt": "\n"}, []string{"d3"}},
		{"files added", "a/x.txt:4", map[string]string{"a/y.txt": "after\n", "a/z/z.txt": "z\n"}, []string{"after", "z", "d3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := makeTree(t)
			pos := positionAfter(t, dir, tc.after)
			for f, data := range tc.change {
				p := filepath.Join(dir, filepath.FromSlash(f))
				if _, err := os.Stat(p); err == nil {
					appendFile(t, p, data)
				} else {
					writeTree(t, dir, map[string]string{f: data})
				}
			}
			d := openDir(t, dir, pos)
			got, _ := readN(t, d, len(tc.want))
			var vals []string
			for _, r := range got {
				vals = append(vals, r.Value)
			}
			if !slices.Equal(vals, tc.want) {
				t.Fatalf("resumed with %q, want %q", vals, tc.want)
			}
			if tc.name == "last line terminated" && got[0].Origin != filepath.Join(dir, "a/x.txt")+":5" {
				t.Errorf("origin %s, want line 5", got[0].Origin)
			}
		})
	}
}

func TestDirBadPosition(t *testing.T) {
	dir, _ := makeTree(t)
	for _, p := range []string{
		`{`,
		`[]`,
		`"a.txt"`,
		`{"file":"a.txt"}`,
		`{"file":"a.txt","offset":4}`,
		`{"file":"a.txt","offset":-1,"line":0}`,
		`{"file":"a.txt","offset":4,"line":-1}`,
		`{"file":"a.txt","offset":1,"line":2}`,
		`{"file":"../a.txt","offset":0,"line":0}`,
		`{"file":"/a.txt","offset":0,"line":0}`,
		`{"file":"a//x.txt","offset":0,"line":0}`,
		`{"file":".","offset":0,"line":0}`,
		`{"file":"","offset":4,"line":1}`,
		`{"file":"a.txt","offset":4,"line":1,"extra":true}`,
		`{"file":"a.txt","offset":4,"line":1} {}`,
		`{"file":"a.txt","offset":4,"line":1,"before":{"files":-1}}`,
		`{"file":"a.txt","offset":4,"line":1,"before":{"files":1}}`,
		`{"file":"a.txt","offset":4,"line":1,"before":{"files":1,"set":"!!"}}`,
		`{"file":"a.txt","offset":4,"line":1,"before":{"files":1,"set":"AAAA"}}`,
		`{"file":"a.txt","offset":4,"line":1,"before":{"files":0,"set":"AAAA"}}`,
		`{"file":"a.txt","offset":4,"line":1,"before":{"files":0,"extra":1}}`,
		`{"file":"","offset":0,"line":0,"before":{"files":1}}`,
		`{"next":3}`,
		`{"file":"a.txt","offset":"4","line":1}`,
	} {
		_, err := source.NewDir(context.Background(), dir, json.RawMessage(p))
		if !errors.Is(err, source.ErrBadPosition) {
			t.Errorf("position %s: error %v, want ErrBadPosition", p, err)
		}
	}
}

func TestDirLineTooLong(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"a": "abcd\nabcd\r\n" + "abcde\n" + "never\n",
		"b": "ab\n" + strings.Repeat("x", 100) + "\n",
		"c": "abcd\nabcde", // no final newline
	})
	for _, bs := range []int{16, 1 << 20} {
		for _, tc := range []struct {
			file   string
			max    int
			before int
			line   int64
		}{
			{"a", 4, 2, 3},
			{"b", 99, 1, 2},
			{"c", 4, 1, 2},
		} {
			d := openDir(t, filepath.Join(dir, tc.file), nil, source.WithMaxLineSize(tc.max), source.WithBufferSize(bs))
			got, _ := readN(t, d, tc.before)
			if len(got) != tc.before {
				t.Fatalf("%s: read %d records, want %d", tc.file, len(got), tc.before)
			}
			_, err := d.Next(context.Background())
			var le *source.LineTooLongError
			if !errors.As(err, &le) || !errors.Is(err, source.ErrLineTooLong) {
				t.Fatalf("%s buffer %d: error %v, want *LineTooLongError", tc.file, bs, err)
			}
			if want := (source.Origin{Name: filepath.Join(dir, tc.file), Num: tc.line}); le.Origin != want || le.Max != tc.max {
				t.Errorf("%s: error names %v max %d, want %v max %d", tc.file, le.Origin, le.Max, want, tc.max)
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, tc.file)+":"+strconv.FormatInt(tc.line, 10)) {
				t.Errorf("message %q does not name the file and line", err)
			}
			// Sticky.
			if _, err2 := d.Next(context.Background()); err2 != err {
				t.Errorf("second Next: %v, want the same error", err2)
			}
		}
	}
	// A line longer than the buffer but within the maximum is fine.
	d := openDir(t, filepath.Join(dir, "b"), nil, source.WithMaxLineSize(100), source.WithBufferSize(16))
	if got := readAll(t, d); len(got) != 2 || len(got[1].Value) != 100 {
		t.Fatalf("read %q", got)
	}
}

func TestDirInvalidUTF8Name(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"ok.txt": "a\n", "sub/bad\xff.txt": "b\n", "_skip\xff": "c\n"})
	_, err := source.NewDir(context.Background(), dir, nil)
	if err == nil || !strings.Contains(err.Error(), `"sub/bad\xff.txt"`) || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("error %v: want one naming the file", err)
	}
}

func TestDirSymlinks(t *testing.T) {
	dir := t.TempDir()
	other := t.TempDir()
	writeTree(t, other, map[string]string{"target.txt": "linked\n", "d/in-linked-dir.txt": "no\n"})
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	for name, target := range map[string]string{
		"b-link.txt": filepath.Join(other, "target.txt"),
		"c-dirlink":  filepath.Join(other, "d"),
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Skip("no symlinks:", err)
		}
	}
	d := openDir(t, dir, nil)
	if got := d.Files(); !slices.Equal(got, []string{"a.txt", "b-link.txt"}) {
		t.Fatalf("Files() = %q: want the file link, not the directory link", got)
	}
	os.Symlink(filepath.Join(other, "missing"), filepath.Join(dir, "dangling"))
	if _, err := source.NewDir(context.Background(), dir, nil); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "dangling") {
		t.Fatalf("dangling link: %v", err)
	}
}

func TestDirSingleFile(t *testing.T) {
	dir, _ := makeTree(t)
	name := filepath.Join(dir, "a", "x.txt")
	d := openDir(t, name, nil)
	want := refLines(name, tree["a/x.txt"])
	equalRecs(t, "single file", readAll(t, d), want)
	if d.Describe() != "file "+name {
		t.Errorf("Describe() = %q", d.Describe())
	}
	pos, _ := d.Position()
	if want := `{"file":"x.txt","offset":12,"line":4,"head":"` + headOf(t, name, 12) + `","before":{"files":0}}`; string(pos) != want {
		t.Errorf("Position() = %s, want %s", pos, want)
	}
}

func TestDirOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := source.NewDir(context.Background(), filepath.Join(dir, "missing"), nil); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing dir: %v", err)
	}
	if _, err := source.NewDir(context.Background(), "", nil); err == nil {
		t.Error("empty dir name: no error")
	}
	for _, opts := range [][]source.Option{
		{source.WithMaxLineSize(0)},
		{source.WithBufferSize(15)},
		{source.WithFS(nil)},
		{nil},
	} {
		if _, err := source.NewDir(context.Background(), dir, nil, opts...); err == nil {
			t.Errorf("options %v: no error", opts)
		}
	}
	// An empty directory is an empty source.
	d := openDir(t, dir, nil)
	if got := readAll(t, d); len(got) != 0 || d.Describe() != "dir "+dir+" (0 files)" {
		t.Errorf("empty dir: %q, %q", got, d.Describe())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := source.NewDir(ctx, dir, nil); err != context.Canceled {
		t.Errorf("cancelled listing: %v, want context.Canceled", err)
	}
}

func TestDirContext(t *testing.T) {
	dir, want := makeTree(t)
	d := openDir(t, dir, nil, source.WithBufferSize(16))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var got []rec
	cancelled := 0
	for {
		// Alternate cancelled and live contexts. A cancelled Next returns
		// a buffered record or context.Canceled, unwrapped, when it would
		// read; either way it loses nothing.
		r, err := d.Next(ctx)
		switch {
		case err == nil:
			got = append(got, rec{string(r.Value), r.Origin.String()})
		case err == context.Canceled:
			cancelled++
		case err != io.EOF:
			t.Fatalf("Next(cancelled) = %v", err)
		}
		r, err = d.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rec{string(r.Value), r.Origin.String()})
	}
	equalRecs(t, "with cancellations", got, want)
	if cancelled == 0 {
		t.Error("no Next returned context.Canceled")
	}
}

func TestDirWithFS(t *testing.T) {
	fsys := fstest.MapFS{}
	for name, data := range tree {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	var want []rec
	for _, f := range treeOrder {
		want = append(want, refLines(filepath.Join("mem", f), tree[f])...)
	}
	d := openDir(t, "mem", nil, source.WithFS(fsys), source.WithBufferSize(16))
	equalRecs(t, "MapFS", readAll(t, d), want)
	for k := range want {
		d := openDir(t, "mem", nil, source.WithFS(fsys))
		head, _ := readN(t, d, k)
		pos, _ := d.Position()
		r := openDir(t, "mem", pos, source.WithFS(noSeekFS{fsys}))
		equalRecs(t, "MapFS resume", append(head, readAll(t, r)...), want)
	}
}

// noSeekFS hides io.Seeker, so resuming must discard bytes instead.
type noSeekFS struct{ fs.FS }

func (f noSeekFS) Open(name string) (fs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	if _, ok := file.(fs.ReadDirFile); ok {
		return file, nil
	}
	return struct{ fs.File }{file}, nil
}

// failFS fails reads of one file after some bytes.
type failFS struct {
	fs.FS
	name string
	n    int
}

var errDisk = errors.New("disk on fire")

func (f failFS) Open(name string) (fs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil || name != f.name {
		return file, err
	}
	return &failFile{File: file, left: f.n}, nil
}

type failFile struct {
	fs.File
	left int
}

func (f *failFile) Read(p []byte) (int, error) {
	if f.left <= 0 {
		return 0, errDisk
	}
	if len(p) > f.left {
		p = p[:f.left]
	}
	n, err := f.File.Read(p)
	f.left -= n
	return n, err
}

func TestDirReadError(t *testing.T) {
	fsys := fstest.MapFS{
		"a": {Data: []byte("1\n2\n")},
		"b": {Data: []byte("3\n4\n5\n")},
	}
	d := openDir(t, "in", nil, source.WithFS(failFS{fsys, "b", 4}), source.WithBufferSize(16))
	got, _ := readN(t, d, 4)
	if len(got) != 4 {
		t.Fatalf("read %q", got)
	}
	_, err := d.Next(context.Background())
	if !errors.Is(err, errDisk) || !strings.Contains(err.Error(), filepath.Join("in", "b")) || !strings.Contains(err.Error(), "after line 2") {
		t.Fatalf("error %v: want errDisk naming in/b after line 2", err)
	}
	if _, err2 := d.Next(context.Background()); err2 != err {
		t.Fatalf("not sticky: %v", err2)
	}
}

// TestDirNoAllocs checks that Next does not allocate for lines that fit in
// the buffer.
func TestDirNoAllocs(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"f": strings.Repeat(strings.Repeat("x", 99)+"\n", 50000)})
	d := openDir(t, dir, nil, source.WithBufferSize(64<<10))
	ctx := context.Background()
	if _, err := d.Next(ctx); err != nil { // opens the file
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(10000, func() {
		if _, err := d.Next(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Next allocates %v times per record", allocs)
	}
}

// event is a record or a skipped long line, as a reference splitter or a
// source with WithSkipLongLines gives them.
type event struct {
	Value  string // the record, or the skipped line's head
	Origin string
	Long   int64 // the skipped line's length; 0: a record
}

// refSkip splits data as a source with WithSkipLongLines and maximum max
// does.
func refSkip(name, data string, max int) []event {
	var out []event
	parts := strings.Split(data, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	for i, p := range parts {
		p = strings.TrimSuffix(p, "\r")
		origin := name + ":" + strconv.Itoa(i+1)
		switch {
		case len(p) > max:
			out = append(out, event{p[:min(len(p), max, source.LongLineHead)], origin, int64(len(p))})
		case p != "":
			out = append(out, event{p, origin, 0})
		}
	}
	return out
}

// nextEvent reads one record or skipped line; ok is false at the end.
func nextEvent(t *testing.T, s source.Source, max int) (event, bool) {
	t.Helper()
	r, err := s.Next(context.Background())
	var le *source.LineTooLongError
	switch {
	case err == io.EOF:
		return event{}, false
	case err == nil:
		return event{string(r.Value), r.Origin.String(), 0}, true
	case errors.As(err, &le) && le.Skipped && errors.Is(err, source.ErrLineTooLong):
		if le.Max != max || !strings.Contains(err.Error(), le.Origin.String()+": line of "+strconv.FormatInt(le.Length, 10)+" bytes") {
			t.Errorf("error %q (max %d), want it to name %s and the length", err, le.Max, le.Origin)
		}
		return event{string(le.Head), le.Origin.String(), le.Length}, true
	}
	t.Fatalf("Next: %v", err)
	return event{}, false
}

// TestDirSkipLongLines: with WithSkipLongLines a line over the maximum is
// reported (origin, length, first bytes) and skipped, wherever it falls
// against the read buffer; the source goes on with the next line, and a
// position taken after any record or skipped line resumes with exactly
// the rest.
func TestDirSkipLongLines(t *testing.T) {
	const max = 20
	long := strings.Repeat("L", 45)
	data := map[string]string{
		"a": "short\n" + long + "\n" + "after\n" + long + "\r\n" + long + "\n\n" + strings.Repeat("m", max) + "\r\n" + strings.Repeat("n", max+1) + "\r\n",
		"b": strings.Repeat("x", 100000) + "\nend\n" + long, // a final long line without "\n"
		"c": long + "\r",
	}
	dir := t.TempDir()
	writeTree(t, dir, data)
	var want []event
	for _, f := range []string{"a", "b", "c"} {
		want = append(want, refSkip(filepath.Join(dir, f), data[f], max)...)
	}
	for _, bs := range []int{16, 17, 23, 64, 1 << 20} {
		opts := []source.Option{source.WithMaxLineSize(max), source.WithBufferSize(bs), source.WithSkipLongLines()}
		for k := 0; k <= len(want); k++ {
			d := openDir(t, dir, nil, opts...)
			var got []event
			for range k {
				e, ok := nextEvent(t, d, max)
				if !ok {
					t.Fatalf("buffer %d: ended after %d events", bs, len(got))
				}
				got = append(got, e)
			}
			pos, err := d.Position()
			if err != nil {
				t.Fatal(err)
			}
			r := openDir(t, dir, pos, opts...)
			for {
				e, ok := nextEvent(t, r, max)
				if !ok {
					break
				}
				got = append(got, e)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("buffer %d, resumed after %d: got\n%+v\nwant\n%+v", bs, k, got, want)
			}
		}
	}
}

// TestDirFileAddedBefore: a file added after the checkpoint with a path
// that sorts before the checkpoint's file would never be read: resuming
// fails naming it. Files read and removed since are no error.
func TestDirFileAddedBefore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		after   string // origin suffix of the checkpointed record
		add     []string
		remove  []string
		named   string // the file the error names; "": no error
		more    string // and what else it says
		wantOut []string
	}{
		{name: "added", after: "a/x.txt:2", add: []string{"a/w.txt"}, named: "a/w.txt", more: "sorts before the checkpoint's file a/x.txt"},
		{name: "added before the first file", after: "a-b.txt:1", add: []string{"a-a.txt"}, named: "a-a.txt"},
		{name: "several added", after: "b/c/d.txt:3", add: []string{"b/b.txt", "a0.txt", "a/w.txt"}, named: "a/w.txt", more: "(and 2 more files)"},
		{name: "removed and added", after: "b/c/d.txt:3", add: []string{"a0.txt"}, remove: []string{"a.txt", "a-b.txt"}, named: "a0.txt"},
		{name: "removed", after: "b/c/d.txt:3", remove: []string{"a.txt", "a/x.txt"}, wantOut: []string{"cr-inside.txt:1"}},
		{name: "all removed", after: "z.txt:1", remove: []string{"a.txt", "a-b.txt", "a/x.txt", "b/c/d.txt", "cr-inside.txt", "empty.txt", "lone-cr.txt", "only-newlines.txt"}},
		{name: "added after", after: "a/x.txt:2", add: []string{"a/y.txt"}, wantOut: []string{"a/x.txt:4", "a/y.txt:1"}},
		{name: "hidden added", after: "a/x.txt:2", add: []string{"_early.txt", "a/.w.txt"}, wantOut: []string{"a/x.txt:4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := makeTree(t)
			pos := positionAfter(t, dir, tc.after)
			for _, f := range tc.add {
				writeTree(t, dir, map[string]string{f: "new\n"})
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
				got, _ := readN(t, d, len(tc.wantOut))
				for i, r := range got {
					if !strings.HasSuffix(r.Origin, tc.wantOut[i]) {
						t.Fatalf("resumed with %q, want origins %q", got, tc.wantOut)
					}
				}
				return
			}
			var ice *source.InputChangedError
			if !errors.As(err, &ice) || !errors.Is(err, source.ErrInputChanged) {
				t.Fatalf("NewDir: %v, want an *InputChangedError", err)
			}
			if want := filepath.Join(dir, filepath.FromSlash(tc.named)); ice.Input != want || !strings.Contains(err.Error(), want+": added after the checkpoint") {
				t.Errorf("error %q does not name %s", err, want)
			}
			if !strings.Contains(err.Error(), tc.more) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line saying %q", err, tc.more)
			}
		})
	}
}

// TestDirFileAddedBeforeMany: the summary of the files before the
// checkpoint's file stays small with many files, finds one file added
// among them, lets files removed go, and refuses to guess when too many
// changed at once.
func TestDirFileAddedBeforeMany(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for i := range 1000 {
		files[fmt.Sprintf("f%04d.txt", 2*i)] = "x\n"
	}
	writeTree(t, dir, files)
	pos := positionAfter(t, dir, "f1600.txt:1")
	if len(pos) > 2000 {
		t.Errorf("position of %d bytes: %s", len(pos), pos)
	}
	open := func() error {
		d, err := source.NewDir(context.Background(), dir, pos)
		if err == nil {
			d.Close()
		}
		return err
	}
	// One added among 800.
	writeTree(t, dir, map[string]string{"f0777.txt": "new\n"})
	if err := open(); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "f0777.txt")+": added") {
		t.Fatalf("one file added among 800: %v", err)
	}
	os.Remove(filepath.Join(dir, "f0777.txt"))
	// A few removed.
	for i := range 10 {
		os.Remove(filepath.Join(dir, fmt.Sprintf("f%04d.txt", 20*i)))
	}
	if err := open(); err != nil {
		t.Fatalf("10 files removed: %v", err)
	}
	// Too many removed to list: the added file could hide among them.
	for i := range 300 {
		os.Remove(filepath.Join(dir, fmt.Sprintf("f%04d.txt", 2*i)))
	}
	err := open()
	var ice *source.InputChangedError
	if !errors.As(err, &ice) || ice.Input != dir || !strings.Contains(err.Error(), "(800 then, 500 now)") {
		t.Fatalf("300 files removed: %v, want an error saying it cannot tell", err)
	}
	// Every file before the checkpoint's removed: nothing to tell.
	for i := range 800 {
		os.Remove(filepath.Join(dir, fmt.Sprintf("f%04d.txt", 2*i)))
	}
	if err := open(); err != nil {
		t.Fatalf("all files before removed: %v", err)
	}
}

// TestDirOldPosition: a position without "before", written before
// positions had it, still resumes (without the check of added files).
func TestDirOldPosition(t *testing.T) {
	dir, want := makeTree(t)
	writeTree(t, dir, map[string]string{"a/w.txt": "not read\n"})
	d := openDir(t, dir, json.RawMessage(`{"file":"a/x.txt","offset":8,"line":2}`))
	var tail []rec
	for _, r := range want {
		if r.Origin > filepath.Join(dir, "a/x.txt:2") {
			tail = append(tail, r)
		}
	}
	equalRecs(t, "old position", readAll(t, d), tail)
}
