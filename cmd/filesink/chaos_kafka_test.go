package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
)

// Black-box chaos tests with a Kafka source (docs/testing.md, layer 5): a
// kfake broker in its own process holds a topic of 4 partitions with
// committed records, plain and transactional, and records of aborted
// transactions; `filesink run --bounded` is killed with SIGKILL at random
// moments, at least chaosKills times, and restarted until it exits 0. The
// MySQL sink must then hold the committed records' word counts exactly
// (increment mode: any duplicate or loss changes a total), with no
// prepared XA branch left; the file sink must hold every committed record
// exactly once, and no aborted one.

const (
	kafkaChaosTopic      = "words"
	kafkaChaosPartitions = 4
	// kafkaChaosChunk records go in one transaction or plain batch,
	// spread over the partitions.
	kafkaChaosChunk = 500
	kafkaChaosWords = 400
)

// kafkaInput is what the chaos producer wrote.
type kafkaInput struct {
	// recs[p] are partition p's records in offset order.
	recs      [][]inputRec
	committed int
	aborted   int
	byID      map[int64]inputRec
}

type inputRec struct {
	partition int32
	offset    int64
	id        int64
	word      string
	committed bool
}

// produceChaosInput writes count records {"word":W,"num":1} (with an "id"
// too when withID is set) to the kafkaChaosPartitions partitions of topic
// kafkaChaosTopic at addr (see produceKafkaInput).
func produceChaosInput(t *testing.T, addr string, count int, withID bool, batchBytes int32, rng *rand.Rand) *kafkaInput {
	t.Helper()
	return produceKafkaInput(t, addr, kafkaChaosTopic, kafkaChaosPartitions, count, withID, batchBytes, rng)
}

// produceKafkaInput writes count records {"word":W,"num":1} (with an "id"
// too when withID is set) round robin to the partitions of topic at addr:
// chunks of kafkaChaosChunk records, each plain (15%), in a committed
// transaction (70%) or in an aborted one (15%); the last chunk is
// committed.
func produceKafkaInput(t *testing.T, addr, topic string, partitions, count int, withID bool, batchBytes int32, rng *rand.Rand) *kafkaInput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(batchBytes)}
	plain, err := kgo.NewClient(base...)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	txn, err := kgo.NewClient(append(base, kgo.TransactionalID("chaos-producer"), kgo.TransactionTimeout(time.Minute))...)
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()

	in := &kafkaInput{recs: make([][]inputRec, partitions), byID: map[int64]inputRec{}}
	var id int64
	for start := 0; start < count; start += kafkaChaosChunk {
		n := min(kafkaChaosChunk, count-start)
		kind := rng.IntN(100)
		last := start+n >= count
		commit := last || kind < 85
		useTxn := !last && kind >= 15 || !commit
		recs := make([]*kgo.Record, n)
		meta := make([]inputRec, n)
		for i := range n {
			w := fmt.Sprintf("w%03d", rng.IntN(rng.IntN(kafkaChaosWords)+1))
			v := fmt.Sprintf(`{"word":%q,"num":1}`, w)
			if withID {
				v = fmt.Sprintf(`{"id":%d,"word":%q,"num":1}`, id, w)
			}
			p := int32((start + i) % partitions)
			recs[i] = &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}
			meta[i] = inputRec{partition: p, id: id, word: w, committed: commit}
			id++
		}
		cl := plain
		if useTxn {
			cl = txn
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		if useTxn {
			how := kgo.TryCommit
			if !commit {
				how = kgo.TryAbort
			}
			if err := txn.EndTransaction(ctx, how); err != nil {
				t.Fatalf("end transaction: %v", err)
			}
		}
		for i, r := range recs {
			meta[i].offset = r.Offset
			in.recs[r.Partition] = append(in.recs[r.Partition], meta[i])
			in.byID[meta[i].id] = meta[i]
			if commit {
				in.committed++
			} else {
				in.aborted++
			}
		}
	}
	for p := range in.recs {
		slices.SortFunc(in.recs[p], func(a, b inputRec) int { return int(a.offset - b.offset) })
	}
	t.Logf("produced %d records to %s (%d partitions): %d committed, %d in aborted transactions",
		count, topic, partitions, in.committed, in.aborted)
	return in
}

// wordCounts returns the word counts of the committed records below the
// offsets of pos (nil: none; every partition: all of them).
func (in *kafkaInput) wordCounts(pos *kafkaPos, all bool) map[string]int64 {
	m := map[string]int64{}
	for p, recs := range in.recs {
		next := int64(0)
		if all {
			next = 1 << 62
		} else if pos != nil {
			next = pos.next[int32(p)]
		}
		for _, r := range recs {
			if r.offset >= next {
				break
			}
			if r.committed {
				m[r.word]++
			}
		}
	}
	return m
}

// kafkaPos is the Kafka source position of a checkpoint record.
type kafkaPos struct {
	id        uint64
	next, end map[int32]int64
}

func (p *kafkaPos) progress() (done, total int64) {
	if p == nil {
		return 0, 0
	}
	for part, n := range p.next {
		done += n
		total += p.end[part]
	}
	return done, total
}

// kafkaDecided returns the source positions of the two newest checkpoint
// records in stateDir (nil where there is none), read without opening the
// store.
func kafkaDecided(t *testing.T, stateDir string) (newest, prev *kafkaPos) {
	t.Helper()
	ents, err := os.ReadDir(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "ckpt-") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	read := func(name string) *kafkaPos {
		full := filepath.Join(stateDir, name)
		b, err := os.ReadFile(full)
		if err != nil {
			t.Fatal(err)
		}
		ck, err := recovery.Decode(full, b)
		if err != nil {
			t.Fatalf("checkpoint record after a kill: %v", err)
		}
		return kafkaPosOf(t, ck)
	}
	if n := len(names); n > 0 {
		newest = read(names[n-1])
		if n > 1 {
			prev = read(names[n-2])
		}
	}
	return newest, prev
}

// kafkaPosOf returns the Kafka source position of ck.
func kafkaPosOf(t *testing.T, ck *recovery.Checkpoint) *kafkaPos {
	t.Helper()
	var v struct {
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Next      int64  `json:"next"`
			End       int64  `json:"end"`
		} `json:"partitions"`
	}
	pos, _, err := source.SplitDecodedPosition(ck.Source) // a decoded source's position holds the Kafka one
	if err == nil {
		err = json.Unmarshal(pos, &v)
	}
	if err != nil || len(v.Partitions) != kafkaChaosPartitions {
		t.Fatalf("checkpoint %d: Kafka position %s: want %d partitions (%v)", ck.ID, ck.Source, kafkaChaosPartitions, err)
	}
	p := &kafkaPos{id: ck.ID, next: map[int32]int64{}, end: map[int32]int64{}}
	for _, x := range v.Partitions {
		p.next[x.Partition], p.end[x.Partition] = x.Next, x.End
	}
	return p
}

// kafkaChaosSetup builds the CLI and the broker, starts the broker and
// fills the topic.
func kafkaChaosSetup(t *testing.T, withID bool, batchBytes int32) (bin string, broker *kafkatest.BrokerProcess, in *kafkaInput, rng *rand.Rand) {
	t.Helper()
	bin = buildCLI(t)
	brokerBin := kafkatest.BuildBroker(t)
	broker = kafkatest.StartBroker(t, brokerBin, []kafkatest.Topic{{Name: kafkaChaosTopic, Partitions: kafkaChaosPartitions}})
	seed := chaosSeedFromEnv(t)
	rng = rand.New(rand.NewPCG(seed, 42))
	count := chaosCount
	if testing.Short() {
		count = chaosShortCount
	}
	in = produceChaosInput(t, broker.Addr, count, withID, batchBytes, rng)
	return bin, broker, in, rng
}

// kafkaChaosLoop runs the command until it exits 0 after at least
// chaosKills kills, calling check after every run; the kill window adapts
// (widenKillWindow) to the progress of the runs, measured in offsets of
// the newest checkpoint record.
func kafkaChaosLoop(t *testing.T, bin string, args []string, stateDir string, rng *rand.Rand, broker *kafkatest.BrokerProcess, check func(run int)) {
	t.Helper()
	kafkaChaosLoopWith(t, bin, args, kafkaLoop{
		decided: func() *kafkaPos { newest, _ := kafkaDecided(t, stateDir); return newest },
		kills:   chaosKills,
	}, rng, broker, check)
}

// kafkaLoop is how kafkaChaosLoopWith reads the newest checkpoint's
// position, how many kills it makes, and what it does after each.
type kafkaLoop struct {
	decided   func() *kafkaPos
	kills     int
	afterKill func(kills int) // nil: nothing
	stderr    func(string)    // nil: nothing; gets every run's stderr
}

// kafkaChaosLoopWith is kafkaChaosLoop with its reads and kills given.
func kafkaChaosLoopWith(t *testing.T, bin string, args []string, l kafkaLoop, rng *rand.Rand, broker *kafkatest.BrokerProcess, check func(run int)) {
	t.Helper()
	chaosKills := l.kills
	t.Logf("filesink %s", strings.Join(args, " "))
	timeout := 5 * time.Minute
	if dl, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)-30*time.Second)
	}
	lo, hi := chaosKillMin, chaosKillMax
	kills, failures := 0, 0
	var prevDone int64
	var finished time.Duration
	start := time.Now()
	for run := 1; ; run++ {
		if run > chaosMaxRuns {
			t.Fatalf("no run exited 0 on its own within %d runs (%d kills)", chaosMaxRuns, kills)
		}
		select {
		case <-broker.Done():
			t.Fatalf("the kfake broker process died")
		default:
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
		if l.stderr != nil {
			l.stderr(r.stderr)
		}
		newest := l.decided()
		done, total := newest.progress()
		what := map[runOutcome]string{exitedOK: "exited 0", wasKilled: "killed", failed: "FAILED (" + r.state + ")"}[r.outcome]
		t.Logf("run %d: kill at %v: %s after %v; decided %d of %d offsets (+%d)", run, killAt.Round(time.Millisecond), what, r.dur.Round(time.Millisecond), done, total, done-prevDone)
		check(run)
		if t.Failed() {
			t.Fatalf("stderr of run %d:\n%s", run, lastLines(r.stderr, 20))
		}
		switch r.outcome {
		case exitedOK:
			if newest == nil || done != total {
				t.Fatalf("run %d exited 0, but its last checkpoint covers %d of %d offsets; stderr:\n%s", run, done, total, lastLines(r.stderr, 20))
			}
			if kills >= chaosKills {
				t.Logf("%d runs, %d kills, %v", run, kills, time.Since(start).Round(time.Millisecond))
				return
			}
			finished = max(r.dur, 2*time.Millisecond)
		case wasKilled:
			kills++
			if l.afterKill != nil {
				l.afterKill(kills)
			}
			if finished == 0 {
				if total == 0 {
					total = done + 1
				}
				if rk := chaosKills - kills; rk > 0 {
					hi = widenKillWindow(lo, hi, killAt, done-prevDone, total-done, rk)
				}
			}
		case failed:
			failures++
			t.Errorf("run %d failed on its own (%s); stderr:\n%s", run, r.state, lastLines(r.stderr, 20))
			if failures >= 3 {
				t.FailNow()
			}
		}
		prevDone = done
	}
}

// TestChaosKill9KafkaMySQL: Kafka to MySQL by increment, killed at random.
func TestChaosKill9KafkaMySQL(t *testing.T) {
	srv := mariadbtest.Shared(t)
	db := srv.Open(t, "test")
	table := fmt.Sprintf("wc_chaos_%d", time.Now().UnixNano()%1e9)
	marker := table + "_marker"
	if _, err := db.Exec("CREATE TABLE " + table + " (word VARCHAR(64) NOT NULL PRIMARY KEY, num BIGINT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tb := range []string{table, marker} {
			if _, err := db.Exec("DROP TABLE IF EXISTS " + tb); err != nil {
				t.Errorf("drop table %s: %v", tb, err)
			}
		}
	})
	bin, broker, in, rng := kafkaChaosSetup(t, false, 1<<20)
	state := filepath.Join(t.TempDir(), "state")
	sink := "mysql://" + srv.DSN("test")
	args := []string{"run", "--bounded", "--source", "kafka://" + broker.Addr + "/" + kafkaChaosTopic,
		"--sink", sink, "--mysql-table", table, "--mysql-mode", "increment", "--mysql-key", "word",
		"--mysql-marker-table", marker, "--state", state, "--checkpoint-interval", "100ms", "--parallelism", "2"}

	// After every run each word's total is exactly the count of its
	// committed records below the newest checkpoint record's offsets (its
	// phase 2 ran) or below the one before (killed between the record and
	// the XA COMMIT of the word's subtask; records are routed by word, so
	// a word's rows are in one subtask's branch): never a record that no
	// checkpoint decided, never a duplicate.
	check := func(run int) {
		got := wcTotals(t, db.DB, table)
		newest, prev := kafkaDecided(t, state)
		wantNew, wantPrev := in.wordCounts(newest, false), in.wordCounts(prev, false)
		var diffs []string
		for w := range kafkaWordSet(got, wantNew) {
			if got[w] != wantNew[w] && got[w] != wantPrev[w] {
				diffs = append(diffs, fmt.Sprintf("%s=%d (want %d or %d)", w, got[w], wantNew[w], wantPrev[w]))
			}
		}
		if len(diffs) > 0 {
			slices.Sort(diffs)
			t.Errorf("after run %d: %d word total(s) match neither of the two newest checkpoint records, e.g. %s", run, len(diffs), strings.Join(diffs[:min(8, len(diffs))], ", "))
		}
	}
	kafkaChaosLoop(t, bin, args, state, rng, broker, check)

	want := in.wordCounts(nil, true)
	if got := wcTotals(t, db.DB, table); !mapsEqual(got, want) {
		var sum, wsum int64
		for _, n := range got {
			sum += n
		}
		for _, n := range want {
			wsum += n
		}
		t.Errorf("final totals differ from the committed input's word counts: %d words, sum %d; want %d words, sum %d", len(got), sum, len(want), wsum)
	}
	job, err := readJobFile(state)
	if err != nil || job == "" {
		t.Fatalf("job id in %s: %q, %v", state, job, err)
	}
	checkNoBranches(t, db.DB, job, table)
	r := mustRun(t, "xa", "list", "--sink", sink, "--state", state)
	if !strings.Contains(r.stdout, "0 prepared branch(es)") {
		t.Errorf("xa list: %s", r.stdout)
	}

	// The finished job again: nothing changes.
	if r := startRun(t, bin, args, 0, 2*time.Minute); r.outcome != exitedOK {
		t.Fatalf("a further run: %s; stderr:\n%s", r.state, lastLines(r.stderr, 20))
	}
	if got := wcTotals(t, db.DB, table); !mapsEqual(got, want) {
		t.Errorf("a further run of the finished job changed the totals")
	}
	checkNoBranches(t, db.DB, job, table)
}

func kafkaWordSet(ms ...map[string]int64) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		for w := range m {
			out[w] = true
		}
	}
	return out
}

// checkNoBranches fails the test if XA RECOVER lists a branch of the job or
// of the table's sink.
func checkNoBranches(t *testing.T, db *sql.DB, job, table string) {
	t.Helper()
	xs, err := mysqlxa.ListBranches(context.Background(), db, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range xs {
		if x.Job == job || x.Sink == table {
			t.Errorf("XA RECOVER lists a branch of the sink: %s", x)
		}
	}
}

// TestChaosKill9KafkaFiles: Kafka to the file sink, killed at random.
func TestChaosKill9KafkaFiles(t *testing.T) {
	// Bucketed by word (hundreds of open part files per subtask): without
	// the fsyncs of their checkpoints, the job would end before most kills.
	bin, broker, in, rng := kafkaChaosSetup(t, true, 1<<20)
	out := filepath.Join(t.TempDir(), "out")
	state := filepath.Join(out, "_filesink")
	args := []string{"run", "--bounded", "--source", "kafka://" + broker.Addr + "/" + kafkaChaosTopic,
		"--sink", out, "--checkpoint-interval", "100ms", "--parallelism", "2", "--bucket", "field:word"}

	seen := map[string]int64{}   // finished file -> size when first seen
	owner := map[int64]string{}  // id -> file it is in
	dups := map[int64][]string{} // id -> files, when in more than one
	check := func(run int) {
		newest, _ := kafkaDecided(t, state)
		s := scanOutput(t, out)
		for f, size := range seen {
			if got, ok := s.files[f]; !ok || got != size {
				t.Errorf("after run %d: finished file %s disappeared or changed size (%d -> %d)", run, f, size, got)
			}
		}
		for _, h := range s.hidden {
			if !strings.HasSuffix(h, ".inprogress") || !strings.HasPrefix(path.Base(h), ".part-") {
				t.Errorf("after run %d: unexpected hidden file in the output: %s", run, h)
			}
		}
		var fresh []string
		for f := range s.files {
			if _, ok := seen[f]; !ok {
				fresh = append(fresh, f)
			}
		}
		slices.Sort(fresh)
		undecided := 0
		for _, f := range fresh {
			seen[f] = s.files[f]
			dir, base := path.Split(f)
			if !partNameOK(base, ".jsonl", 2) {
				t.Errorf("after run %d: %s is not a part file name", run, f)
			}
			lines, err := fileLines(filepath.Join(out, filepath.FromSlash(f)))
			if err != nil {
				t.Errorf("after run %d: %v", run, err)
				continue
			}
			for n, l := range lines {
				id, err := recordID(l)
				rec, ok := in.byID[id]
				switch {
				case err != nil || !ok:
					t.Errorf("after run %d: %s line %d is not an input record (%v): %.100q", run, f, n+1, err, l)
					continue
				case rec.word+"/" != dir:
					t.Errorf("after run %d: record %d (word %s) is in %s", run, id, rec.word, f)
				case !rec.committed:
					t.Errorf("after run %d: record %d of an aborted transaction is in %s", run, id, f)
				case newest == nil || rec.offset >= newest.next[rec.partition]:
					if undecided++; undecided <= 3 {
						t.Errorf("after run %d: record %d (partition %d offset %d) is visible in %s, but no checkpoint record covers it", run, id, rec.partition, rec.offset, f)
					}
				}
				if prev, ok := owner[id]; ok {
					dups[id] = append(dups[id], prev, f)
					continue
				}
				owner[id] = f
			}
		}
		if len(dups) > 0 {
			t.Errorf("after run %d: %d record(s) duplicated, e.g. %v", run, len(dups), firstDups(dups))
		}
	}
	kafkaChaosLoop(t, bin, args, state, rng, broker, check)

	missing := 0
	for id, rec := range in.byID {
		if _, ok := owner[id]; rec.committed && !ok {
			if missing++; missing <= 5 {
				t.Errorf("committed record %d (partition %d offset %d) is missing from the output", id, rec.partition, rec.offset)
			}
		}
	}
	if missing > 0 || len(owner) != in.committed {
		t.Errorf("%d committed record(s) missing; %d distinct records in the output, want %d", missing, len(owner), in.committed)
	}
	s := scanOutput(t, out)
	if len(s.staging) > 0 || len(s.hidden) > 0 {
		t.Errorf("staging files left after a clean run: %v %v", s.staging, s.hidden)
	}
	if vout, err := exec.Command(bin, "verify", "--deep", "--sink", out).CombinedOutput(); err != nil {
		t.Errorf("filesink verify: %v\n%s", err, vout)
	}
	before := snapshot(t, out)
	if r := startRun(t, bin, args, 0, 2*time.Minute); r.outcome != exitedOK {
		t.Fatalf("a further run: %s; stderr:\n%s", r.state, lastLines(r.stderr, 20))
	}
	if d := diffSnapshots(before, snapshot(t, out)); d != "" {
		t.Errorf("a further run of the finished job changed the output: %s", d)
	}
}

func firstDups(d map[int64][]string) []string {
	var ids []int64
	for id := range d {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []string
	for _, id := range ids[:min(3, len(ids))] {
		out = append(out, fmt.Sprintf("id %d in %v", id, d[id]))
	}
	return out
}
