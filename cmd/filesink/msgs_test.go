package main

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The CLI's messages: every error one line that names its file, flag or
// participant once; usage errors one line with a hint, exit 2, before
// anything is written.

// repeatedPrefix returns the part of an error line that is said twice in a
// row, or "": a segment (text between ": ") or a run of segments repeated
// at once ("write /x: write /x: ...", "filesink: filesink: ..."), or a
// segment that ends with the segment after it ("prepare http/0: http/0:
// ...", "open source: source: ...").
func repeatedPrefix(line string) string {
	segs := strings.Split(line, ": ")
	for k := 1; k <= 3; k++ {
		for i := 0; i+2*k <= len(segs); i++ {
			a, b := segs[i:i+k], segs[i+k:i+2*k]
			if slices.Equal(a, b) && strings.TrimSpace(strings.Join(a, "")) != "" {
				return strings.Join(a, ": ") + ": "
			}
		}
	}
	for i := 0; i+1 < len(segs); i++ {
		if next := strings.TrimSpace(segs[i+1]); next != "" && strings.HasSuffix(segs[i], " "+next) {
			return segs[i] + ": " + next + ": "
		}
	}
	return ""
}

func TestRepeatedPrefix(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]string{
		"filesink: filesink: manifest x: bad":                                              "filesink: ",
		"filesink: localfs: write /o/.p: write /o/.p: file too large":                      "write /o/.p: ",
		"filesink: a: b: a: b: c":                                                          "a: b: ",
		"filesink: checkpoint 1: prepare http/0: http/0: batch 0 failed":                   "prepare http/0: http/0: ",
		"filesink: open source: source: list input directory in":                           "open source: source: ",
		"filesink: checkpoint 1: prepare filesink/0: localfs: write /o/.p: file too large": "",
		"filesink: run: --source /in: no such file or directory":                           "",
		"time=2026-01-02T03:04:05Z level=INFO msg=done":                                    "",
	} {
		if got := repeatedPrefix(line); got != want {
			t.Errorf("repeatedPrefix(%q) = %q, want %q", line, got, want)
		}
	}
}

// checkNamedOnce fails t for every line of a failed command's stderr
// that says a prefix twice; the command must have failed with a message.
func checkNamedOnce(t *testing.T, what string, code int, stderr string) {
	t.Helper()
	if code == 0 || strings.TrimSpace(stderr) == "" {
		t.Errorf("%s: want a failure with a message, got exit %d and stderr %q", what, code, stderr)
		return
	}
	for _, line := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if p := repeatedPrefix(line); p != "" {
			t.Errorf("%s: %q says %q twice", what, line, p)
		}
	}
}

// failureSetup makes the inputs of the common failures under dir.
func failureSetup(t *testing.T, dir string) (in, bad, dangling, corrupt, badManifest string) {
	t.Helper()
	in, bad, dangling = filepath.Join(dir, "in"), filepath.Join(dir, "bad"), filepath.Join(dir, "dangling")
	writeLines(t, filepath.Join(in, "a.jsonl"), `{"id":1}`)
	writeLines(t, filepath.Join(bad, "a.jsonl"), `{"id":1}`, `not json`)
	if err := os.MkdirAll(dangling, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dangling, "a.jsonl")); err != nil {
		t.Fatal(err)
	}
	corrupt, badManifest = filepath.Join(dir, "corrupt"), filepath.Join(dir, "bad-manifest")
	for _, out := range []string{corrupt, badManifest} {
		mustRun(t, "run", "--source", "gen://?count=10", "--sink", out)
	}
	ckpts, _ := filepath.Glob(filepath.Join(corrupt, "_filesink", "ckpt-*"))
	manifests, _ := filepath.Glob(filepath.Join(badManifest, "_filesink", "manifests", "*.json"))
	if len(ckpts) == 0 || len(manifests) == 0 {
		t.Fatalf("no checkpoint record (%v) or manifest (%v) to spoil", ckpts, manifests)
	}
	b, err := os.ReadFile(ckpts[len(ckpts)-1])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(ckpts[len(ckpts)-1], b, 0o644); err != nil {
		t.Fatal(err)
	}
	writeLines(t, manifests[0], `{"bad`)
	return in, bad, dangling, corrupt, badManifest
}

// TestErrorsNameThingsOnce provokes the common failures and checks that
// no line of their messages says a prefix twice.
func TestErrorsNameThingsOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, bad, dangling, corrupt, badManifest := failureSetup(t, dir)
	afile := filepath.Join(dir, "afile")
	writeLines(t, afile, "not a directory")
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer refuse.Close()
	out := func(name string) string { return filepath.Join(dir, "out-"+name) }
	cases := map[string][]string{
		"missing source":      {"run", "--source", filepath.Join(dir, "missing"), "--sink", out("missing")},
		"bad record":          {"run", "--source", bad, "--sink", out("bad"), "--on-bad-record", "fail"},
		"dangling input":      {"run", "--source", dangling, "--sink", out("dangling")},
		"sink under a file":   {"run", "--source", in, "--sink", filepath.Join(afile, "out")},
		"state under a file":  {"run", "--source", in, "--sink", out("state"), "--state", filepath.Join(afile, "state")},
		"corrupt checkpoint":  {"run", "--source", "gen://?count=10", "--sink", corrupt},
		"state of corrupt":    {"state", "--state", filepath.Join(corrupt, "_filesink")},
		"verify corrupt":      {"verify", "--sink", corrupt},
		"verify bad manifest": {"verify", "--sink", badManifest},
		"http sink refuses":   {"run", "--source", "gen://?count=3", "--sink", refuse.URL, "--state", filepath.Join(dir, "http-state")},
		"verify missing":      {"verify", "--sink", filepath.Join(dir, "missing")},
	}
	if os.Geteuid() != 0 { // root writes anywhere: TestWriteErrorNamesFileOnce covers it
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		cases["unwritable sink"] = []string{"run", "--source", in, "--sink", filepath.Join(ro, "out")}
	}
	for name, args := range cases {
		r := cli(t, args...)
		checkNamedOnce(t, name, r.code, r.stderr)
	}
}

// TestWriteErrorNamesFileOnce: a part file that cannot be written (the
// file size limit of the process, which root is bound by too) fails the
// run naming the file once.
func TestWriteErrorNamesFileOnce(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	out := filepath.Join(t.TempDir(), "out")
	// ulimit -f counts 512-byte blocks: 2,000 records do not fit in 4.
	cmd := exec.Command("sh", "-c", `ulimit -f 4 && exec "$0" "$@"`, bin, "run", "--source", "gen://?count=2000", "--sink", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err == nil || !strings.Contains(stderr.String(), "file too large") {
		t.Fatalf("want a failed write (file too large): %v\n%s", err, stderr.String())
	}
	checkNamedOnce(t, "write error", code, stderr.String())
}

// wantUsageLine checks a usage error: exit 2, one line on stderr starting
// with "filesink: " and holding every want, nothing on stdout.
func wantUsageLine(t *testing.T, what string, r cliResult, want ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if r.code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], "filesink: ") || r.stdout != "" {
		t.Errorf("%s: want exit 2 and one line on stderr, got %v", what, r)
		return
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Errorf("%s: %q does not say %q", what, lines[0], w)
		}
	}
}

func TestUnknownFlagOneLine(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{{"run"}, {"verify"}, {"state"}, {"uploads", "list"}, {"xa", "list"}, {"xa", "commit"}} {
		name := strings.Join(cmd, " ")
		hint := "; see 'filesink " + name + " --help'"
		r := cli(t, append(cmd, "--sinc", "x")...)
		wantUsageLine(t, name+" --sinc", r, "filesink: "+name+": unknown flag --sinc", hint)
		if cmd[0] != "state" && !strings.Contains(r.stderr, "(did you mean --sink?)") {
			t.Errorf("%s --sinc: no suggestion of --sink: %q", name, r.stderr)
		}
		needs := map[bool]string{true: "--state", false: "--sink"}[cmd[0] == "state"]
		wantUsageLine(t, name+" "+needs, cli(t, append(cmd, needs)...), needs+" needs a value", hint)
	}
	wantUsageLine(t, "run --parallelism two", cli(t, "run", "--parallelism", "two"),
		`invalid value "two" for --parallelism: want an integer`, "see 'filesink run --help'")
	wantUsageLine(t, "unknown command", cli(t, "runn"), `unknown command "runn"`, "see 'filesink help'")
}

// enumFlags are the flags that take one of a list of words, with a run
// that refuses a bad value of each: the extra flags it needs, and the
// words the error must list.
var enumFlags = map[string]struct {
	extra []string
	want  string
}{
	"format":              {nil, "jsonl, csv, text, parquet or arrow"},
	"compression":         {nil, "none, gzip or zstd"},
	"on-bad-record":       {nil, "fail or skip"},
	"log-level":           {nil, "debug, info, warn or error"},
	"progress":            {nil, "auto, on or off"},
	"guarantee":           {nil, "exactly-once, at-least-once or at-most-once"},
	"mysql-mode":          {[]string{"--sink", "mysql://u@tcp(127.0.0.1:1)/db", "--mysql-table", "t"}, "insert, upsert or increment"},
	"invalid-utf8":        {nil, "reject or replace"},
	"unknown-fields":      {[]string{"--format", "parquet"}, "reject or drop"},
	"s3-integrity":        {[]string{"--sink", "s3://bucket/p"}, "default or fast"},
	"s3-sse":              {[]string{"--sink", "s3://bucket/p"}, "AES256 or aws:kms"},
	"parquet-compression": {[]string{"--format", "parquet"}, "snappy, zstd, gzip or none"},
	"parquet-dictionary":  {[]string{"--format", "parquet"}, "auto, on or off"},
	"arrow-compression":   {[]string{"--format", "arrow"}, "none, lz4 or zstd"},
	"allow-change":        {nil, "one or more of source, sink, format, schema and bucketing, separated by commas"},
	"value-format":        {nil, "raw or avro"},
	"key-format":          {nil, "raw or avro"},
}

// TestEnumFlagsRefused: a word a flag does not take is refused in one line
// that lists the words, exit 2, before anything is written, from the
// command line and from a config file; every enum flag of run is covered.
func TestEnumFlagsRefused(t *testing.T) {
	t.Parallel()
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	f.register(fs)
	fs.VisitAll(func(fl *flag.Flag) {
		if _, ok := fl.Value.(*enumValue); ok {
			if _, covered := enumFlags[fl.Name]; !covered {
				t.Errorf("enum flag --%s is not in enumFlags", fl.Name)
			}
		}
	})
	dir := t.TempDir()
	in, out, state := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "state")
	writeLines(t, filepath.Join(in, "a.jsonl"), `{"id":1}`)
	for name, c := range enumFlags {
		args := append([]string{"run", "--source", in, "--sink", out, "--state", state}, c.extra...)
		r := cli(t, append(args, "--"+name, "maybe-not")...)
		wantUsageLine(t, "--"+name, r, fmt.Sprintf(`invalid value "maybe-not" for --%s: want %s`, name, c.want))
		cfg := writeConfig(t, name+": maybe-not\n")
		r = cli(t, append(args, "--config", cfg)...)
		wantUsageLine(t, "config "+name, r, "config "+cfg, fmt.Sprintf(`invalid value "maybe-not" for --%s: want %s`, name, c.want))
	}
	wantUsageLine(t, "verify --s3-integrity", cli(t, "verify", "--sink", "s3://b/p", "--s3-integrity", "paranoid"), "want default or fast")
	for _, p := range []string{out, state} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a refused flag value created %s", p)
		}
	}
	// The words match regardless of case; the value is the listed word.
	mustRun(t, "run", "--source", in, "--sink", out, "--format", "JSONL", "--compression", "GZIP")
	if files := scanOutput(t, out).files; len(files) != 1 || !strings.HasSuffix(firstKey(files), ".jsonl.gz") {
		t.Errorf("--format JSONL --compression GZIP: files %v, want one .jsonl.gz", files)
	}
}

func firstKey(m map[string]int64) string {
	for k := range m {
		return k
	}
	return ""
}

// TestSubcommandHelpListsFlags: every command's --help prints its usage
// and its flags on stdout and exits 0.
func TestSubcommandHelpListsFlags(t *testing.T) {
	t.Parallel()
	flags := map[string][]string{
		"run": {"-source", "-sink", "-format", "-guarantee"}, "verify": {"-sink", "-state", "-deep"}, "state": {"-state", "-json"},
		"uploads": {"-sink", "-upload-id", "-all", "-subtask"}, "xa": {"-sink", "-xid", "-force", "-state", "-job"},
	}
	for _, args := range [][]string{
		{"run", "--help"}, {"run", "-h"}, {"verify", "--help"}, {"state", "--help"},
		{"uploads", "--help"}, {"uploads", "-h"}, {"uploads", "list", "--help"}, {"uploads", "abort", "--help"},
		{"xa", "--help"}, {"xa", "list", "--help"}, {"xa", "commit", "--help"}, {"xa", "rollback", "-h"},
	} {
		r := cli(t, args...)
		if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "Usage: filesink "+args[0]+" ") || !strings.Contains(r.stdout, "\nFlags:\n") {
			t.Errorf("filesink %s: want exit 0 and the usage with its flags on stdout, got %v", strings.Join(args, " "), r)
			continue
		}
		for _, fl := range flags[args[0]] {
			if !strings.Contains(r.stdout, "  "+fl+" ") && !strings.Contains(r.stdout, "  "+fl+"\n") {
				t.Errorf("filesink %s does not list %s", strings.Join(args, " "), fl)
			}
		}
	}
}

// TestBadSourceExitsLikeBadSink: a --source that is wrong is a usage error
// (exit 2, one line naming it, nothing written), as a wrong --sink is.
func TestBadSourceExitsLikeBadSink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	writeLines(t, filepath.Join(in, "a.jsonl"), `{"id":1}`)
	afile := filepath.Join(dir, "afile")
	writeLines(t, afile, "x")
	for _, c := range []struct {
		source, sink, want string
	}{
		{"ftp://host/in", out, "--source"},
		{"gen://?count=many", out, "--source"},
		{"gen://somewhere", out, "--source"},
		{"file://", out, "--source"},
		{filepath.Join(dir, "missing"), out, "--source " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{in, "ftp://host/out", "--sink"},
		{in, "file://", "--sink"},
		{in, filepath.Join(afile, "out"), "--sink " + filepath.Join(afile, "out")},
	} {
		r := cli(t, "run", "--source", c.source, "--sink", c.sink)
		wantUsageLine(t, c.source+" -> "+c.sink, r, "filesink: run: ", c.want)
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s -> %s: the refused run created %s", c.source, c.sink, out)
			os.RemoveAll(out)
		}
	}
}

// TestVerifyMissingDirectory: verify (and state) on a directory that is not
// there say so in one line, exit 2.
func TestVerifyMissingDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "x", "out")
	afile := filepath.Join(dir, "afile")
	writeLines(t, afile, "x")
	r := cli(t, "verify", "--sink", missing)
	if want := "filesink: verify: " + missing + ": no such directory\n"; r.code == 0 || r.stderr != want || r.stdout != "" {
		t.Errorf("verify of a missing directory: want a failure with %q alone, got %v", want, r)
	}
	wantUsageLine(t, "verify --sink FILE", cli(t, "verify", "--sink", afile), "verify: "+afile+": not a directory")
	wantUsageLine(t, "verify --state missing", cli(t, "verify", "--sink", dir, "--state", missing), missing+": no such directory")
	wantUsageLine(t, "state --state missing", cli(t, "state", "--state", missing), missing+": no such directory")
}
