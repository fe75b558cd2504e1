package main

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// The tests with environment variables cannot run in parallel
// (t.Setenv); the others do not set any.

// writeConfig writes a config file into a temp dir and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "filesink.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// partPrefixes returns the name prefixes (before the first '-') of the
// finished files of out, and their lines.
func partPrefixes(t *testing.T, out string) (map[string]bool, []lineAt) {
	t.Helper()
	lines := outputLines(t, out)
	prefixes := map[string]bool{}
	for _, l := range lines {
		p, _, _ := strings.Cut(path.Base(l.file), "-")
		prefixes[p] = true
	}
	return prefixes, lines
}

func TestConfigFileOnly(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	cfg := writeConfig(t, `# a job from a file
source: "gen://?count=50"
sink: `+out+`
format: csv
csv:                # a section: csv-columns, csv-header
  columns: [id, key, ts, payload]
  header: false
prefix: fromfile
checkpoint-interval: 1m
roll-on-checkpoint: true
retain: 2
`)
	mustRun(t, "run", "--config", cfg)
	prefixes, lines := partPrefixes(t, out)
	if !prefixes["fromfile"] || len(prefixes) != 1 {
		t.Errorf("part prefixes %v, want fromfile (from the file)", prefixes)
	}
	if len(lines) != 50 {
		t.Fatalf("%d lines, want 50", len(lines))
	}
	// CSV of the 4 columns: the nested csv section took effect.
	for _, l := range lines {
		if f := strings.Split(l.line, ","); len(f) != 4 || strings.ContainsAny(l.line, "{}") {
			t.Fatalf("line %q in %s is not CSV of 4 columns", l.line, l.file)
		}
	}
}

func TestConfigFlagOverridesFile(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	cfg := writeConfig(t, "source: gen://?count=20\nsink: "+out+"\nprefix: fromfile\nformat: xml\n")
	mustRun(t, "run", "--config", cfg, "--prefix", "fromflag", "--format", "jsonl")
	if prefixes, lines := partPrefixes(t, out); !prefixes["fromflag"] || len(prefixes) != 1 || len(lines) != 20 {
		t.Errorf("part prefixes %v, %d lines; want fromflag only, 20 lines", prefixes, len(lines))
	}
}

func TestConfigEnvironment(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, "source: gen://?count=20\nprefix: fromfile\ncheckpoint-interval: 1m\n")
	// The environment overrides the file...
	out1 := filepath.Join(dir, "out1")
	t.Setenv("FILESINK_PREFIX", "fromenv")
	t.Setenv("FILESINK_SINK", out1)
	mustRun(t, "run", "--config", cfg)
	if prefixes, lines := partPrefixes(t, out1); !prefixes["fromenv"] || len(prefixes) != 1 || len(lines) != 20 {
		t.Errorf("env over file: part prefixes %v, %d lines; want fromenv only, 20 lines", prefixes, len(lines))
	}
	// ...the command line overrides the environment, and FILESINK_CONFIG
	// names the file.
	out2 := filepath.Join(dir, "out2")
	t.Setenv("FILESINK_CONFIG", cfg)
	mustRun(t, "run", "--sink", out2, "--prefix", "fromflag")
	if prefixes, lines := partPrefixes(t, out2); !prefixes["fromflag"] || len(prefixes) != 1 || len(lines) != 20 {
		t.Errorf("flag over env: part prefixes %v, %d lines; want fromflag only, 20 lines", prefixes, len(lines))
	}
	// A bad value in the environment names the variable.
	t.Setenv("FILESINK_CHECKPOINT_INTERVAL", "soon")
	r := cli(t, "run", "--sink", filepath.Join(dir, "out3"))
	if r.code != 2 || !strings.Contains(r.stderr, "environment FILESINK_CHECKPOINT_INTERVAL") || !strings.Contains(r.stderr, `"soon"`) {
		t.Errorf("bad duration in the environment: want exit 2 naming the variable, got %v", r)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	cases := []struct {
		name, text string
		want       []string // substrings of the one line of stderr
	}{
		{"unknown key", "source: gen://?count=1\nsink: " + out + "\ncheckpoint-intreval: 5s\n",
			[]string{`line 3: unknown key "checkpoint-intreval"`, "did you mean checkpoint-interval?"}},
		{"unknown key in a section", "s3:\n  endpiont: http://x\n",
			[]string{`line 2: unknown key "s3.endpiont"`, "did you mean s3-endpoint?"}},
		{"bad duration", "source: gen://?count=1\nsink: " + out + "\ncheckpoint-interval: fast\n",
			[]string{"line 3: key checkpoint-interval", `invalid value "fast"`, "want a duration"}},
		{"bad bool", "roll-on-checkpoint: maybe\n",
			[]string{"line 1: key roll-on-checkpoint", "want true or false"}},
		{"bad integer", "parallelism: two\n",
			[]string{"line 1: key parallelism", "want an integer"}},
		{"section for a value", "format:\n  kind: csv\n",
			[]string{"line 1: key format: want a value, not a section"}},
		{"set twice", "s3-endpoint: http://a\ns3:\n  endpoint: http://b\n",
			[]string{"line 3: key s3.endpoint sets --s3-endpoint, already set on line 1"}},
		{"not a mapping", "- source\n- sink\n",
			[]string{"line 1: want a mapping of flag names to values"}},
		{"config in config", "config: other.yaml\n",
			[]string{"key config: a config file cannot name another one"}},
		{"bad yaml", "source: [unclosed\n",
			[]string{"yaml:"}},
	}
	for _, c := range cases {
		cfg := writeConfig(t, c.text)
		r := cli(t, "run", "--config", cfg)
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], "filesink: run: config "+cfg+": ") {
			t.Errorf("%s: want exit 2 and one line naming %s, got %v", c.name, cfg, r)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(lines[0], w) {
				t.Errorf("%s: %q does not say %q", c.name, lines[0], w)
			}
		}
	}
	if r := cli(t, "run", "--config", filepath.Join(t.TempDir(), "missing.yaml")); r.code != 2 || !strings.Contains(r.stderr, "missing.yaml") {
		t.Errorf("missing config file: %v", r)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a run with a bad config wrote %s", out)
	}
}

// TestConfigSecretsNotShown: values of a config file are not echoed, even
// when another key is wrong or the run fails.
func TestConfigSecretsNotShown(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "source: gen://?count=1\nsink: 'mysql://app:S3cr3tPa55@tcp(127.0.0.1:1)/db'\nmysql-table: t\n"+
		"state: "+filepath.Join(t.TempDir(), "state")+"\nlog-level: debug\nparallelism: x\n")
	r := cli(t, "run", "--config", cfg)
	if r.code != 2 || strings.Contains(r.stderr, "S3cr3tPa55") {
		t.Errorf("want exit 2 without the password: %v", r)
	}
	cfg = writeConfig(t, "source: gen://?count=1\nsink: 'mysql://app:S3cr3tPa55@tcp(127.0.0.1:1)/db'\nmysql-table: t\n"+
		"state: "+filepath.Join(t.TempDir(), "state")+"\nlog-level: debug\n")
	r = cli(t, "run", "--config", cfg)
	if r.code == 0 || strings.Contains(r.stderr+r.stdout, "S3cr3tPa55") {
		t.Errorf("a run that cannot connect: want an error without the password: %v", r)
	}
}
