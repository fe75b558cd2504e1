package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
)

// Black-box chaos test (docs/testing.md, layer 5): the built CLI is killed with
// SIGKILL at random moments, many times, on the same output directory, and
// restarted each time; then the output must hold every generated record
// exactly once.

const (
	// chaosKills is the minimum number of SIGKILLs per configuration.
	chaosKills = 20
	// chaosMaxRuns bounds the runs per configuration.
	chaosMaxRuns = 500
	// chaosCount is the number of generated records (chaosShortCount with
	// -short).
	chaosCount      = 200000
	chaosShortCount = 40000
	chaosGenSeed    = 7
	// The first kill comes uniformly between chaosKillMin and chaosKillMax
	// after the start. The window of later kills adapts to the speed of the
	// machine so that at least chaosKills kills land while the job still has
	// records to write (a fast machine would otherwise finish the job in a
	// few runs; a slow one would never get past recovery).
	chaosKillMin = 30 * time.Millisecond
	chaosKillMax = 600 * time.Millisecond
	chaosMaxHi   = 20 * time.Second
)

type chaosConfig struct {
	name        string
	args        []string
	ext         string // extension of every part file
	parallelism int
	// bucket returns the bucket directory a record belongs in.
	bucket func(r genRecord) (string, error)
	// atLeastOnce: --guarantee at-least-once; records may be visible
	// before their checkpoint and come twice after a kill, never be lost.
	atLeastOnce bool
	// S3 only. lifecycle: after every other kill, every multipart upload
	// of the bucket is aborted and half of the staging tail objects are
	// deleted before the restart, as a lifecycle rule would: the runs
	// rebuild the parts from the source. kills overrides chaosKills.
	// dirSource reads the generator's records from one file of a
	// directory instead.
	lifecycle bool
	kills     int
	dirSource bool
}

type genRecord struct {
	ID  *int64 `json:"id"`
	Key string `json:"key"`
	TS  string `json:"ts"`
}

func TestChaosKill9(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL and flock")
	}
	bin := buildCLI(t)

	seed := chaosSeed(t)

	count := int64(chaosCount)
	if testing.Short() {
		count = chaosShortCount
	}
	want := generated(t, count)
	schema := writeGenSchema(t, t.TempDir())

	configs := []chaosConfig{
		{
			name: "jsonl", ext: ".jsonl", parallelism: 1,
			bucket: func(genRecord) (string, error) { return "", nil },
		},
		{
			name: "zstd-field-p2",
			args: []string{"--bucket", "field:key", "--compression", "zstd", "--parallelism", "2", "--part-size", "64KiB", "--direct-io"},
			ext:  ".jsonl.zst", parallelism: 2,
			bucket: func(r genRecord) (string, error) { return r.Key, nil },
		},
		{
			name: "gzip-eventtime-rolling",
			args: []string{"--compression", "gzip", "--bucket", "eventtime:ts:2006-01-02--15-04", "--rollover", "200ms", "--inactivity", "100ms"},
			ext:  ".jsonl.gz", parallelism: 1,
			bucket: func(r genRecord) (string, error) {
				ts, err := time.Parse(time.RFC3339Nano, r.TS)
				if err != nil {
					return "", err
				}
				return ts.UTC().Format("2006-01-02--15-04"), nil
			},
		},
		{
			// Parts published as they roll (16 KiB), before their
			// checkpoint: a kill may duplicate records, never lose one.
			name: "at-least-once", args: []string{"--guarantee", "at-least-once", "--part-size", "16KiB"},
			ext: ".jsonl", parallelism: 1, atLeastOnce: true,
			bucket: func(genRecord) (string, error) { return "", nil },
		},
		{
			// Bulk parts roll at every checkpoint (and on size): every
			// visible file must be a complete Parquet file (fileLines reads
			// it with pqarrow; PAR1 at both ends), never a truncated one.
			name: "parquet-field-p2",
			// With direct I/O (off by default), whose buffered bytes a kill loses.
			args: []string{"--format", "parquet", "--schema", schema, "--bucket", "field:key", "--parallelism", "2", "--part-size", "1MiB", "--direct-io"},
			ext:  ".parquet", parallelism: 2,
			bucket: func(r genRecord) (string, error) { return r.Key, nil },
		},
	}
	for i, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			runChaos(t, bin, c, rng, count, want)
		})
	}
}

// chaosSeed returns the seed of a chaos test's kill schedule: random, or
// FILESINK_CHAOS_SEED to reproduce a run (the kill windows also adapt to
// the machine's speed).
func chaosSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FILESINK_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FILESINK_CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("chaos seed %d (reproduce the kill schedule with FILESINK_CHAOS_SEED=%d; kill windows also adapt to the machine's speed)", seed, seed)
	return seed
}

// buildCLI builds the filesink command into a temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "filesink")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// generated returns a hash of each record the generator makes, by id.
func generated(t *testing.T, count int64) []uint64 {
	t.Helper()
	ctx := context.Background()
	src, err := source.Open(ctx, fmt.Sprintf("gen://?count=%d&seed=%d", count, chaosGenSeed), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	hashes := make([]uint64, count)
	for i := int64(0); ; i++ {
		rec, err := src.Next(ctx)
		if err == io.EOF {
			if i != count {
				t.Fatalf("generator made %d records, want %d", i, count)
			}
			return hashes
		}
		if err != nil {
			t.Fatal(err)
		}
		id, err := recordID(string(rec.Value))
		if err != nil || id != i {
			t.Fatalf("generated record %d: id %d, %v", i, id, err)
		}
		hashes[i] = hashLine(rec.Value)
	}
}

func hashLine(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// chaosOutput tracks what the output showed across runs. Finished files
// never change, so each is read once.
type chaosOutput struct {
	t     *testing.T
	out   string
	cfg   chaosConfig
	want  []uint64
	seen  map[string]int64 // finished file -> size when first seen
	owner []string         // id -> file it is in ("" if none)
	dups  map[int64][]string
}

func newChaosOutput(t *testing.T, out string, cfg chaosConfig, want []uint64) *chaosOutput {
	return &chaosOutput{t: t, out: out, cfg: cfg, want: want, seen: map[string]int64{},
		owner: make([]string, len(want)), dups: map[int64][]string{}}
}

// update reads the files published since the last call and checks the
// invariants that hold at every instant: a finished file never changes or
// disappears, has a proper name in the right bucket, holds whole generated
// records, no record is visible twice, and every visible record is covered
// by a decided checkpoint (its id is below the source position of the
// newest checkpoint record, decided).
func (c *chaosOutput) update(run int, decided int64) (newFiles int) {
	t := c.t
	t.Helper()
	s := scanOutput(t, c.out)
	for f, size := range c.seen {
		got, ok := s.files[f]
		switch {
		case !ok:
			t.Errorf("after run %d: finished file %s disappeared", run, f)
		case got != size:
			t.Errorf("after run %d: finished file %s changed size from %d to %d (clobbered)", run, f, size, got)
		}
	}
	var fresh []string
	for f := range s.files {
		if _, ok := c.seen[f]; !ok {
			fresh = append(fresh, f)
		}
	}
	slices.Sort(fresh)
	for _, f := range fresh {
		c.seen[f] = s.files[f]
		c.readFile(run, f, decided)
	}
	for _, h := range s.hidden {
		if !strings.HasSuffix(h, ".inprogress") || !strings.HasPrefix(path.Base(h), ".part-") {
			t.Errorf("after run %d: unexpected hidden file in the output: %s", run, h)
		}
	}
	if len(s.deadLetter) > 0 {
		t.Errorf("after run %d: dead-letter files appeared, but no record is bad: %v", run, s.deadLetter)
	}
	return len(fresh)
}

func (c *chaosOutput) readFile(run int, f string, decided int64) {
	t := c.t
	dir, base := path.Split(f)
	dir = strings.TrimSuffix(dir, "/")
	if !partNameOK(base, c.cfg.ext, c.cfg.parallelism) {
		t.Errorf("after run %d: finished file %s: name is not part-<subtask>-<runid>-<n>%s", run, f, c.cfg.ext)
	}
	for _, comp := range strings.Split(f, "/") {
		if comp[0] == '.' || comp[0] == '_' {
			t.Errorf("after run %d: finished file %s has a hidden or reserved component %q", run, f, comp)
		}
	}
	lines, err := fileLines(filepath.Join(c.out, filepath.FromSlash(f)))
	if err != nil {
		t.Errorf("after run %d: %v", run, err)
		return
	}
	badBucket, beyond := 0, 0
	for n, l := range lines {
		var r genRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.ID == nil {
			t.Errorf("after run %d: %s line %d is not a generated record (%v): %.120q", run, f, n+1, err, l)
			continue
		}
		id := *r.ID
		if id < 0 || id >= int64(len(c.want)) {
			t.Errorf("after run %d: %s line %d: id %d out of range", run, f, n+1, id)
			continue
		}
		if hashLine([]byte(l)) != c.want[id] {
			t.Errorf("after run %d: %s line %d: record %d differs from the generated one: %.120q", run, f, n+1, id, l)
		}
		if b, err := c.cfg.bucket(r); err != nil || b != dir {
			if badBucket++; badBucket <= 3 {
				t.Errorf("after run %d: record %d is in bucket %q, want %q (%v)", run, id, dir, b, err)
			}
		}
		if decided >= 0 && id >= decided && !c.cfg.atLeastOnce {
			if beyond++; beyond <= 3 {
				t.Errorf("after run %d: record %d is visible in %s, but the newest checkpoint record only covers ids below %d (visible before decided)", run, id, f, decided)
			}
		}
		if prev := c.owner[id]; prev != "" {
			if len(c.dups[id]) == 0 {
				c.dups[id] = []string{prev}
			}
			c.dups[id] = append(c.dups[id], f)
			continue
		}
		c.owner[id] = f
	}
}

// report fails the test for duplicates (at any time) and, when final, for
// missing records.
func (c *chaosOutput) report(final bool) {
	t := c.t
	t.Helper()
	if len(c.dups) > 0 && !c.cfg.atLeastOnce {
		var ids []int64
		for id := range c.dups {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		var ex []string
		for _, id := range ids[:min(5, len(ids))] {
			ex = append(ex, fmt.Sprintf("id %d in %v", id, c.dups[id]))
		}
		t.Errorf("%d record(s) duplicated in the output, e.g. %s", len(ids), strings.Join(ex, "; "))
	}
	if !final {
		return
	}
	var missing []int64
	for id, f := range c.owner {
		if f == "" {
			missing = append(missing, int64(id))
		}
	}
	if len(missing) > 0 {
		var ex []string
		for _, id := range missing[:min(10, len(missing))] {
			ex = append(ex, strconv.FormatInt(id, 10))
		}
		// Where are the neighbours of the first missing record?
		first := missing[0]
		var near []string
		for _, id := range []int64{first - 1, missing[len(missing)-1] + 1} {
			if id >= 0 && id < int64(len(c.owner)) {
				near = append(near, fmt.Sprintf("id %d is in %q", id, c.owner[id]))
			}
		}
		t.Errorf("%d record(s) missing from the output, e.g. ids %s (%s)", len(missing), strings.Join(ex, ", "), strings.Join(near, "; "))
	}
}

// decidedNext returns the "next" id of the newest checkpoint record in
// stateDir (0 if there is none), read without opening the store (which
// would clean it up).
func decidedNext(t *testing.T, stateDir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var newest string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "ckpt-") && e.Name() > newest {
			newest = e.Name()
		}
	}
	if newest == "" {
		return 0
	}
	name := filepath.Join(stateDir, newest)
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := recovery.Decode(name, b)
	if err != nil {
		t.Fatalf("newest checkpoint record after a kill: %v", err)
	}
	var pos struct {
		Next *int64 `json:"next"`
	}
	if err := json.Unmarshal(ck.Source, &pos); err != nil || pos.Next == nil {
		t.Fatalf("checkpoint %d: generator position %s: want {\"next\":N} (%v)", ck.ID, ck.Source, err)
	}
	return *pos.Next
}

type runOutcome int

const (
	exitedOK runOutcome = iota
	wasKilled
	failed
)

type runResult struct {
	outcome runOutcome
	dur     time.Duration
	state   string
	stderr  string
}

// startRun runs the binary, killing it with SIGKILL after killAt (0: never;
// then it is killed only after timeout, which fails the test).
func startRun(t *testing.T, bin string, args []string, killAt, timeout time.Duration) runResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timer <-chan time.Time
	if killAt > 0 {
		timer = time.After(killAt)
	}
	timedOut := false
	select {
	case <-done:
	case <-timer:
		_ = cmd.Process.Kill()
		<-done
	case <-time.After(timeout):
		timedOut = true
		_ = cmd.Process.Kill()
		<-done
	}
	r := runResult{dur: time.Since(start), state: cmd.ProcessState.String(), stderr: stderr.String()}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case timedOut:
		t.Fatalf("run did not finish within %v; stderr:\n%s", timeout, lastLines(r.stderr, 30))
	case cmd.ProcessState.Success():
		r.outcome = exitedOK
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL && killAt > 0:
		r.outcome = wasKilled
	default:
		r.outcome = failed
	}
	return r
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func runChaos(t *testing.T, bin string, cfg chaosConfig, rng *rand.Rand, count int64, want []uint64) {
	out := filepath.Join(t.TempDir(), "out")
	stateDir := filepath.Join(out, "_filesink")
	args := append([]string{"run", "--source", fmt.Sprintf("gen://?count=%d&seed=%d", count, chaosGenSeed),
		"--sink", out, "--checkpoint-interval", "100ms"}, cfg.args...)
	t.Logf("filesink %s", strings.Join(args, " "))
	timeout := 5 * time.Minute
	if dl, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)-30*time.Second)
	}
	check := newChaosOutput(t, out, cfg, want)

	lo, hi := chaosKillMin, chaosKillMax
	kills, failures := 0, 0
	var prevNext int64
	var finished time.Duration // duration of a run that finished the job before enough kills
	start := time.Now()
runs:
	for run := 1; ; run++ {
		if run > chaosMaxRuns {
			t.Fatalf("no run exited 0 on its own within %d runs (%d kills)", chaosMaxRuns, kills)
		}
		var killAt time.Duration
		switch {
		case kills >= chaosKills:
			// Enough kills: let the run finish.
		case finished > 0:
			// The job finished before enough kills: crash recovery and the
			// final checkpoint of the finished job.
			killAt = time.Millisecond + time.Duration(rng.Int64N(int64(finished)))
		default:
			killAt = lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
		}
		r := startRun(t, bin, args, killAt, timeout)
		next := decidedNext(t, stateDir)
		fresh := check.update(run, next)
		what := map[runOutcome]string{exitedOK: "exited 0", wasKilled: "killed", failed: "FAILED (" + r.state + ")"}[r.outcome]
		t.Logf("run %d: kill at %v: %s after %v; decided next=%d (+%d), %d new files", run, killAt.Round(time.Millisecond), what, r.dur.Round(time.Millisecond), next, next-prevNext, fresh)
		if t.Failed() {
			t.Logf("stderr of run %d:\n%s", run, lastLines(r.stderr, 20))
			check.report(false)
			t.FailNow()
		}
		switch r.outcome {
		case exitedOK:
			if next != count {
				t.Fatalf("run %d exited 0, but its last checkpoint covers %d of %d records; stderr:\n%s", run, next, count, lastLines(r.stderr, 20))
			}
			if kills >= chaosKills {
				t.Logf("%d runs, %d kills, %v", run, kills, time.Since(start).Round(time.Millisecond))
				break runs
			}
			finished = max(r.dur, 2*time.Millisecond)
		case wasKilled:
			kills++
			if finished > 0 {
				break
			}
			gain := next - prevNext
			if rk := chaosKills - kills; rk > 0 {
				hi = widenKillWindow(lo, hi, killAt, gain, int64(count-next), rk)
			}
		case failed:
			failures++
			t.Errorf("run %d failed on its own (%s); stderr:\n%s", run, r.state, lastLines(r.stderr, 20))
			if failures >= 3 {
				t.FailNow()
			}
		}
		prevNext = next
	}
	check.report(true)

	s := scanOutput(t, out)
	if len(s.hidden) > 0 {
		t.Errorf("hidden files or directories left in the output after a clean run: %v", s.hidden[:min(10, len(s.hidden))])
	}
	if len(s.staging) > 0 {
		t.Errorf("in-progress or temp files left after a clean run: %v", s.staging[:min(10, len(s.staging))])
	}
	if len(s.files) == 0 {
		t.Errorf("no output files")
	}

	vargs := []string{"verify", "--deep", "--sink", out}
	if cfg.atLeastOnce {
		// Files published before a kill and not in a checkpoint are in no
		// manifest (their records came again): check against the records.
		vargs = []string{"verify", "--no-manifests", "--sink", out}
	}
	vcmd := exec.Command(bin, vargs...)
	vout, err := vcmd.CombinedOutput()
	if err != nil {
		t.Errorf("filesink verify --sink OUT: %v\n%s", err, vout)
	}

	before := snapshot(t, out)
	r := startRun(t, bin, args, 0, timeout)
	if r.outcome != exitedOK {
		t.Fatalf("a further run of the same command: %s; stderr:\n%s", r.state, lastLines(r.stderr, 20))
	}
	if d := diffSnapshots(before, snapshot(t, out)); d != "" {
		t.Errorf("a further run of the finished job changed the output: %s", d)
	}
	if s := scanOutput(t, out); len(s.staging) > 0 || len(s.hidden) > 0 {
		t.Errorf("a further run left staging files: %v %v", s.staging, s.hidden)
	}
}

// widenKillWindow returns the next upper bound of the random kill delay:
// aim for about half the remaining records over the remaining kills, from
// the rate of the run just killed (startup included), moving the bound
// geometrically so one odd run does not swing it.
func widenKillWindow(lo, hi, killAt time.Duration, gain, left int64, killsLeft int) time.Duration {
	newHi := min(hi*3/2, chaosMaxHi)
	if gain > 0 {
		rate := float64(gain) / float64(killAt)
		wantGain := float64(left) / float64(2*killsLeft+2)
		newHi = time.Duration(2*wantGain/rate) - lo
		newHi = min(max(newHi, lo+20*time.Millisecond), chaosMaxHi)
	}
	return time.Duration(math.Sqrt(float64(hi) * float64(newHi)))
}
