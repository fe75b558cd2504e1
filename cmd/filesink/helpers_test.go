package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Shared helpers of the CLI tests and the chaos test.

// cliResult is the outcome of one in-process runMain call.
type cliResult struct {
	code           int
	stdout, stderr string
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cli runs runMain in process with no stdin and no signals.
func cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	return cliWith(t, strings.NewReader(""), nil, args...)
}

// cliWith runs runMain in process with the given stdin and signal channel.
func cliWith(t *testing.T, stdin io.Reader, sig <-chan os.Signal, args ...string) cliResult {
	t.Helper()
	if sig == nil {
		sig = make(chan os.Signal)
	}
	var stdout, stderr syncBuffer
	code := runMain(context.Background(), args, stdin, &stdout, &stderr, sig)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// mustRun runs a CLI command in process and fails the test unless it exits 0.
func mustRun(t *testing.T, args ...string) cliResult {
	t.Helper()
	r := cli(t, args...)
	if r.code != 0 {
		t.Fatalf("filesink %s: %v", strings.Join(args, " "), r)
	}
	return r
}

// reservedTop are the top-level directories of a sink directory that are not
// output: the checkpoint store and the dead-letter output.
var reservedTop = map[string]bool{"_filesink": true, "_dead-letter": true}

// outputScan is what a walk of a sink directory found.
type outputScan struct {
	// files are the finished output files (relative slash path -> size),
	// outside _filesink and _dead-letter.
	files map[string]int64
	// deadLetter are the finished files under _dead-letter (path relative
	// to the sink directory).
	deadLetter map[string]int64
	// hidden are files or directories outside _filesink whose name starts
	// with '.' or '_' (staging files, mostly).
	hidden []string
	// staging are files anywhere (also in _filesink and _dead-letter) that
	// look like staging or temp data: ".inprogress", ".tmp", ".ckpt-".
	staging []string
}

// scanOutput walks the sink directory out.
func scanOutput(t *testing.T, out string) outputScan {
	t.Helper()
	s := outputScan{files: map[string]int64{}, deadLetter: map[string]int64{}}
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == out && errors.Is(err, fs.ErrNotExist) {
				return nil // a run killed before it made the output directory
			}
			return err
		}
		rel, err := filepath.Rel(out, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if strings.HasSuffix(name, ".inprogress") || strings.Contains(name, ".tmp") || strings.HasPrefix(name, ".ckpt-") {
			s.staging = append(s.staging, rel)
		}
		top, _, _ := strings.Cut(rel, "/")
		if top == "_filesink" {
			return nil
		}
		if top == "_dead-letter" {
			if d.IsDir() {
				return nil
			}
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				s.hidden = append(s.hidden, rel)
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			s.deadLetter[rel] = fi.Size()
			return nil
		}
		if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			s.hidden = append(s.hidden, rel)
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		s.files[rel] = fi.Size()
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", out, err)
	}
	slices.Sort(s.hidden)
	slices.Sort(s.staging)
	return s
}

// snapshot returns every file under out except the checkpoint store, with
// its size: a second run that publishes nothing leaves it unchanged.
func snapshot(t *testing.T, out string) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		rel = filepath.ToSlash(rel)
		if rel == "_filesink" {
			return fs.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m[rel] = fi.Size()
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", out, err)
	}
	return m
}

// diffSnapshots describes the differences between two snapshots ("" if none).
func diffSnapshots(before, after map[string]int64) string {
	var d []string
	for k, v := range after {
		if w, ok := before[k]; !ok {
			d = append(d, fmt.Sprintf("new file %s (%d bytes)", k, v))
		} else if w != v {
			d = append(d, fmt.Sprintf("%s changed size %d -> %d", k, w, v))
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			d = append(d, "file disappeared: "+k)
		}
	}
	slices.Sort(d)
	return strings.Join(d, "; ")
}

// decodeFile returns the decompressed content of a finished file, chosen by
// its extension (.gz: a multi-member gzip stream; .zst: a sequence of zstd
// frames).
func decodeFile(name string) ([]byte, error) {
	raw, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return decodeBytes(name, raw)
}

func decodeBytes(name string, raw []byte) ([]byte, error) {
	switch {
	case strings.HasSuffix(name, ".gz"):
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", name, err)
		}
		zr.Multistream(true)
		b, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", name, err)
		}
		return b, nil
	case strings.HasSuffix(name, ".zst"):
		zr, err := zstd.NewReader(bytes.NewReader(raw), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("%s: zstd: %w", name, err)
		}
		defer zr.Close()
		b, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("%s: zstd: %w", name, err)
		}
		return b, nil
	}
	return raw, nil
}

// fileLines returns the lines of a finished file, decompressed. A file
// whose content does not end in "\n" is an error: a part file holds whole
// records only.
func fileLines(name string) ([]string, error) {
	if isBulkFile(name) {
		return bulkLines(name)
	}
	b, err := decodeFile(name)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, nil
	}
	if b[len(b)-1] != '\n' {
		return nil, fmt.Errorf("%s: does not end with a newline (torn record?): ...%q", name, tail(b, 80))
	}
	return strings.Split(string(b[:len(b)-1]), "\n"), nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// outputLines returns every line of every finished output file of out
// (not the dead letters), each with the file it is in.
func outputLines(t *testing.T, out string) []lineAt {
	t.Helper()
	s := scanOutput(t, out)
	var names []string
	for f := range s.files {
		names = append(names, f)
	}
	slices.Sort(names)
	var res []lineAt
	for _, f := range names {
		lines, err := fileLines(filepath.Join(out, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			res = append(res, lineAt{file: f, line: l})
		}
	}
	return res
}

type lineAt struct {
	file, line string
}

// checkExactlyOnce checks that the output lines are exactly want, each once,
// in any order, and reports duplicates (with their files), missing and
// unexpected lines.
func checkExactlyOnce(t *testing.T, got []lineAt, want []string) {
	t.Helper()
	wantN := map[string]int{}
	for _, w := range want {
		wantN[w]++
	}
	gotIn := map[string][]string{}
	for _, g := range got {
		gotIn[g.line] = append(gotIn[g.line], g.file)
	}
	var dups, missing, extra []string
	for l, files := range gotIn {
		switch n := wantN[l]; {
		case n == 0:
			extra = append(extra, fmt.Sprintf("%q in %v", l, files))
		case len(files) > n:
			dups = append(dups, fmt.Sprintf("%q %d times, in %v", l, len(files), files))
		}
	}
	for l, n := range wantN {
		if len(gotIn[l]) < n {
			missing = append(missing, strconvQuote(l))
		}
	}
	for _, x := range []struct {
		what string
		l    []string
	}{{"duplicated", dups}, {"missing", missing}, {"unexpected", extra}} {
		if len(x.l) > 0 {
			slices.Sort(x.l)
			t.Errorf("%d line(s) %s in the output, e.g. %s", len(x.l), x.what, strings.Join(x.l[:min(5, len(x.l))], "; "))
		}
	}
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// writeLines writes lines (each followed by "\n") to name, creating its
// directory.
func writeLines(t *testing.T, name string, lines ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readAll returns the content of every file of a snapshot-like set.
func readContents(t *testing.T, out string, files map[string]int64) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for f := range files {
		b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		m[f] = b
	}
	return m
}

// recordID returns the integer "id" of a JSON record.
func recordID(line string) (int64, error) {
	var v struct {
		ID *int64 `json:"id"`
	}
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		return 0, err
	}
	if v.ID == nil {
		return 0, fmt.Errorf("no \"id\" in %q", line)
	}
	return *v.ID, nil
}

// partName matches the name of a finished part file with the default
// prefix: part-<subtask>-<runid>-<n><ext>.
func partNameOK(name, ext string, parallelism int) bool {
	rest, ok := strings.CutPrefix(name, "part-")
	if !ok {
		return false
	}
	rest, ok = strings.CutSuffix(rest, ext)
	if !ok {
		return false
	}
	f := strings.Split(rest, "-")
	if len(f) != 3 || f[1] == "" {
		return false
	}
	for _, n := range []string{f[0], f[2]} {
		if n == "" || strings.Trim(n, "0123456789") != "" {
			return false
		}
	}
	var sub int
	fmt.Sscan(f[0], &sub)
	return sub < parallelism && path.Base(name) == name
}
