package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSuccessFile: with --success-file, every minute bucket whose range is
// behind the event-time watermark gets a _SUCCESS listing exactly its
// files; the bucket still open (the last minute) gets none; verify passes.
func TestSuccessFile(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	mustRun(t, "run", "--source", "gen://?count=3000&step=100ms", "--sink", out,
		"--bucket", "eventtime:ts:2006-01-02--15-04", "--success-file", "--checkpoint-records", "500", "--roll-on-checkpoint")
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var buckets []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), "_") {
			buckets = append(buckets, e.Name())
		}
	}
	if len(buckets) != 5 { // 300 s of event time
		t.Fatalf("buckets %v, want 5", buckets)
	}
	for i, b := range buckets {
		data, err := os.ReadFile(filepath.Join(out, b, "_SUCCESS"))
		last := i == len(buckets)-1
		if last {
			if err == nil {
				t.Errorf("bucket %s, whose minute the watermark has not passed, has a marker", b)
			}
			continue
		}
		if err != nil {
			t.Errorf("bucket %s: no marker: %v", b, err)
			continue
		}
		var m struct {
			Bucket string
			Files  []string
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		fs, _ := os.ReadDir(filepath.Join(out, b))
		var want []string
		for _, f := range fs {
			if !strings.HasPrefix(f.Name(), "_") && !strings.HasPrefix(f.Name(), ".") {
				want = append(want, f.Name())
			}
		}
		if m.Bucket != b || !slices.Equal(m.Files, want) {
			t.Errorf("bucket %s: marker %+v, want files %v", b, m, want)
		}
	}
	mustRun(t, "verify", "--deep", "--sink", out)

	for _, args := range [][]string{
		{"run", "--source", "gen://?count=10", "--sink", filepath.Join(t.TempDir(), "o"), "--success-file", "--bucket", "field:key"},
		{"run", "--source", "gen://?count=10", "--sink", filepath.Join(t.TempDir(), "o"), "--allowed-lateness", "1m"},
		{"run", "--source", "gen://?count=10", "--sink", filepath.Join(t.TempDir(), "o"), "--success-file", "--bucket", "datetime:15"},
	} {
		if r := cli(t, args...); r.code != 2 || !strings.Contains(r.stderr, "--") {
			t.Errorf("%v: want a usage error, got %v", args, r)
		}
	}
}
