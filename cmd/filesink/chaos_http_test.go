package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Black-box chaos of the HTTP sink: the built CLI posts generated records
// to a receiver in this test process, and is killed with SIGKILL at random
// moments, at least chaosKills times, restarted each time on the same
// state until a run exits 0. Then every record must have arrived at least
// once and, counting only the first delivery of each Idempotency-Key,
// exactly once; no key may ever come back with another body.
func TestChaosKill9HTTP(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL and flock")
	}
	bin := buildCLI(t)
	seed := chaosSeed(t)
	count := int64(chaosCount)
	if testing.Short() {
		count = chaosShortCount
	}
	for i, c := range []struct {
		name      string
		args      []string
		failEvery int
	}{
		// The default workers (one per CPU) and linger (1 s), one subtask,
		// 100 records per request.
		{name: "p1", args: []string{"--http-batch-records", "100"}},
		// Two subtasks (hash-routed), 4 workers each, odd batches, and a
		// receiver that answers 503 to one request in 20 (retries).
		{name: "p2-503s", args: []string{"--parallelism", "2", "--http-workers", "4", "--http-batch-records", "97"}, failEvery: 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			// A receiver that takes 2 ms per request keeps a job running for
			// a few seconds, so that the kills land while records remain.
			rcv := newReceiver(t, count, c.failEvery, 2*time.Millisecond)
			state := filepath.Join(t.TempDir(), "state")
			args := append([]string{"run", "--source", fmt.Sprintf("gen://?count=%d&seed=%d", count, chaosGenSeed),
				"--sink", rcv.srv.URL + "/ingest", "--state", state, "--checkpoint-interval", "100ms", "--progress", "off"}, c.args...)
			t.Logf("filesink %s", strings.Join(args, " "))
			runHTTPChaos(t, bin, args, state, rcv, rng, count)
		})
	}
}

func runHTTPChaos(t *testing.T, bin string, args []string, state string, rcv *receiver, rng *rand.Rand, count int64) {
	timeout := 3 * time.Minute
	if dl, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)-30*time.Second)
	}
	lo, hi := chaosKillMin, chaosKillMax
	kills := 0 // kills while records remained
	var prevNext int64
	var finished time.Duration
	start := time.Now()
	for run := 1; ; run++ {
		if run > chaosMaxRuns {
			t.Fatalf("no run exited 0 within %d runs (%d kills)", chaosMaxRuns, kills)
		}
		var killAt time.Duration
		switch {
		case kills >= chaosKills:
		case finished > 0:
			killAt = time.Millisecond + time.Duration(rng.Int64N(int64(finished)))
		default:
			killAt = lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
		}
		r := startRun(t, bin, args, killAt, timeout)
		next := decidedNext(t, state)
		keys, delivered := rcv.stats()
		what := map[runOutcome]string{exitedOK: "exited 0", wasKilled: "killed", failed: "FAILED (" + r.state + ")"}[r.outcome]
		t.Logf("run %d: kill at %v: %s after %v; decided next=%d (+%d); receiver: %d keys, %d deliveries",
			run, killAt.Round(time.Millisecond), what, r.dur.Round(time.Millisecond), next, next-prevNext, keys, delivered)
		if next < prevNext {
			t.Fatalf("the decided position went back from %d to %d", prevNext, next)
		}
		switch r.outcome {
		case exitedOK:
			if next != count {
				t.Fatalf("run %d exited 0, but its last checkpoint covers %d of %d records; stderr:\n%s", run, next, count, lastLines(r.stderr, 20))
			}
			if kills >= chaosKills || finished > 0 {
				if kills < chaosKills {
					t.Errorf("the job finished after %d kills, want at least %d while records remained", kills, chaosKills)
				}
				t.Logf("%d runs, %d kills, %v", run, kills, time.Since(start).Round(time.Millisecond))
				rcv.check(t, true)
				if !strings.Contains(r.stderr, "linger_cuts=0") {
					t.Logf("the last run's summary: %s", lastLines(r.stderr, 1))
				}
				// A further run sends nothing.
				r := startRun(t, bin, args, 0, timeout)
				if r.outcome != exitedOK {
					t.Fatalf("a further run: %s; stderr:\n%s", r.state, lastLines(r.stderr, 20))
				}
				if k2, d2 := rcv.stats(); d2 != delivered || k2 != keys {
					t.Errorf("a further run of the finished job sent %d more records", d2-delivered)
				}
				return
			}
			finished = max(r.dur, 2*time.Millisecond)
		case wasKilled:
			if finished == 0 {
				kills++
				if rk := chaosKills - kills; rk > 0 {
					hi = widenKillWindow(lo, hi, killAt, next-prevNext, count-next, rk)
				}
			}
		case failed:
			t.Fatalf("run %d failed on its own (%s); stderr:\n%s", run, r.state, lastLines(r.stderr, 20))
		}
		prevNext = next
	}
}
