package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// --guarantee: each sink gives what it can, and asking for anything else is
// a usage error naming what the sink supports, never a downgrade.
func TestGuaranteeFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	for _, tc := range []struct {
		sink, guarantee string
		want            string // "" : accepted (exit 0 on an empty bounded source)
	}{
		{out, "exactly-once", ""},
		{out + "-alo", "at-least-once", ""}, // parts published as they roll; one output, one job
		{out, "at-most-once", "supports exactly-once (two-phase commit) and at-least-once"},
		{"s3://bucket/p", "at-most-once", "at-most-once is for http(s):// sinks"},
		{"mysql://root@tcp(127.0.0.1:1)/test", "at-least-once", "mysql:// sink supports exactly-once (two-phase commit) only"},
		{"mysql://root@tcp(127.0.0.1:1)/test", "at-most-once", "mysql:// sink supports exactly-once (two-phase commit) only"},
		{"http://127.0.0.1:1/in", "exactly-once", "gives at-least-once"},
		{"http://127.0.0.1:1/in", "twice", "want exactly-once, at-least-once or at-most-once"},
	} {
		args := []string{"run", "--source", "gen://?count=0", "--sink", tc.sink, "--guarantee", tc.guarantee, "--state", filepath.Join(dir, "state-"+tc.guarantee)}
		r := cli(t, args...)
		if tc.want == "" {
			if r.code != 0 {
				t.Errorf("%s --guarantee %s: %v", tc.sink, tc.guarantee, r)
			}
			continue
		}
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s --guarantee %s: want exit 2 with %q, got %v", tc.sink, tc.guarantee, tc.want, r)
		}
	}
	help := cli(t, "run", "--help")
	for _, want := range []string{"--guarantee", "at-least-once", "at-most-once", "exactly-once", "http://HOST:PORT/PATH", "Idempotency-Key"} {
		if !strings.Contains(help.stdout, want) {
			t.Errorf("run --help does not mention %q", want)
		}
	}
}

func TestHTTPSinkFlagsRefusedElsewhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--sink", filepath.Join(dir, "out"), "--http-workers", "2"},
		{"--sink", "http://127.0.0.1:1/", "--state", dir, "--format", "csv"},
		{"--sink", "http://127.0.0.1:1/", "--state", dir, "--mysql-table", "t"},
		{"--sink", "http://127.0.0.1:1/"},
		{"--sink", "http://127.0.0.1:1/", "--state", dir, "--guarantee", "at-most-once", "--http-retries", "3"},
		{"--sink", "ftp://127.0.0.1:1/", "--state", dir},
	} {
		r := cli(t, append([]string{"run", "--source", "gen://?count=1"}, args...)...)
		if r.code != 2 {
			t.Errorf("run %v: %v, want exit 2", args, r)
		}
	}
}

// The CLI end to end, in process: every record arrives once (no crash,
// so once in all, not only by key), a second run over the finished input
// sends nothing, and so does a run with at-most-once.
func TestHTTPSinkRun(t *testing.T) {
	t.Parallel()
	const count = 20000
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"at-least-once", []string{"--parallelism", "2", "--http-workers", "3", "--http-batch-records", "300"}},
		{"at-most-once", []string{"--guarantee", "at-most-once", "--http-batch-bytes", "4KiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rcv := newReceiver(t, count, 0, 0)
			args := append([]string{"run", "--source", fmt.Sprintf("gen://?count=%d", count), "--sink", rcv.srv.URL + "/ingest",
				"--state", t.TempDir(), "--checkpoint-interval", "50ms", "--progress", "off"}, tc.args...)
			mustRun(t, args...)
			rcv.check(t, true)
			keys, n := rcv.stats()
			if n != count {
				t.Errorf("%d deliveries of %d records without a crash", n, count)
			}
			mustRun(t, args...)
			if k2, n2 := rcv.stats(); k2 != keys || n2 != n {
				t.Errorf("a run over the finished input sent %d more batches (%d records)", k2-keys, n2-n)
			}
		})
	}
}

// A 4xx fails the job (exit 1) with the body in the message, and neither
// the user info nor query values of the URL appear in any output.
func TestHTTPSinkClientErrorAndSecrets(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, _ := r.BasicAuth(); u != "bob" || p != "hunter2" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		http.Error(w, `{"error":"schema mismatch at field ts"}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	url := strings.Replace(srv.URL, "http://", "http://bob:hunter2@", 1) + "/in?api_key=topsecret"
	r := cli(t, "run", "--source", "gen://?count=100", "--sink", url, "--state", t.TempDir(), "--log-level", "debug")
	if r.code != 1 || !strings.Contains(r.stderr, "schema mismatch at field ts") || !strings.Contains(r.stderr, "HTTP 400") {
		t.Fatalf("want exit 1 with the 400's body: %v", r)
	}
	for _, secret := range []string{"hunter2", "topsecret", "bob:"} {
		if strings.Contains(r.stderr+r.stdout, secret) {
			t.Errorf("output contains %q:\n%s", secret, r.stderr)
		}
	}
}

// TestFileSinkAtLeastOnce: --guarantee at-least-once publishes part files
// as they roll; without a crash every record is there once and the
// output passes verify.
func TestFileSinkAtLeastOnce(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	const n = 20000
	mustRun(t, "run", "--source", fmt.Sprintf("gen://?count=%d", n), "--sink", out, "--guarantee", "at-least-once",
		"--part-size", "256KiB", "--checkpoint-records", "5000")
	checkExactlyOnce(t, outputLines(t, out), genLines(t, fmt.Sprintf("gen://?count=%d", n)))
	if files := scanOutput(t, out).files; len(files) < 4 {
		t.Errorf("%d files, want several (256 KiB parts)", len(files))
	}
	mustRun(t, "verify", "--deep", "--sink", out)
}
