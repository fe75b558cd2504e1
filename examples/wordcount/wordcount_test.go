package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
)

func TestSplitWords(t *testing.T) {
	long := strings.Repeat("x", MaxWordLen+10)
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  \t ", nil},
		{"To be, or not to be: that is the question!", []string{"to", "be", "or", "not", "to", "be", "that", "is", "the", "question"}},
		{"Straße CAFÉ naïve 日本語 x2 4711", []string{"straße", "café", "naïve", "日本語", "x2", "4711"}},
		{"don't e-mail", []string{"don", "t", "e", "mail"}},
		{"a\xffb\xc3", []string{"a", "b"}}, // invalid UTF-8 separates
		{long + " y", []string{long[:MaxWordLen], "y"}},
	} {
		var got []string
		splitWords([]byte(tc.in), func(w []byte) { got = append(got, string(w)) })
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// vocabulary of the generated lines: ASCII, non-ASCII letters, digits.
var vocabulary = strings.Fields(`the quick brown fox jumps over lazy dog to be or not that is question
	flink kafka mysql exactly once checkpoint barrier commit abort prepare xa branch
	straße café naïve über 日本語 данные 2026 x86 π`)

// testInput produces lines to topic (4 partitions) and returns the
// expected counts: the committed lines' words, lower-cased. Some lines are
// in aborted transactions; their word "aborted" must never be counted.
func testInput(t *testing.T, c *kafkatest.Cluster, topic string, lines int, seed uint64) map[string]int64 {
	t.Helper()
	t.Logf("input seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	seps := []string{" ", "  ", ", ", "! ", "\t", " -- ", "; ", "... "}
	want := map[string]int64{}
	var parts [4][][]byte
	for i := range lines {
		n := 1 + rng.IntN(12)
		var b strings.Builder
		for j := range n {
			w := vocabulary[rng.IntN(len(vocabulary))]
			want[w]++
			switch rng.IntN(4) {
			case 0:
				w = strings.ToUpper(w)
			case 1:
				r := []rune(w)
				r[0] = unicode.ToTitle(r[0])
				w = string(r)
			}
			if j > 0 || rng.IntN(3) == 0 {
				b.WriteString(seps[rng.IntN(len(seps))])
			}
			b.WriteString(w)
		}
		if rng.IntN(5) == 0 {
			b.WriteString(".")
		}
		p := i % 4
		parts[p] = append(parts[p], []byte(b.String()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for p, vals := range parts {
		half := len(vals) / 2
		if _, err := c.Produce(ctx, topic, int32(p), vals[:half]...); err != nil {
			t.Fatal(err)
		}
		aborted := kafkatest.Bytes("aborted line", "Aborted, ABORTED")
		if _, err := c.ProduceTxn(ctx, fmt.Sprintf("abort-%s-%d", topic, p), false, topic, int32(p), aborted...); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Produce(ctx, topic, int32(p), vals[half:]...); err != nil {
			t.Fatal(err)
		}
	}
	// Keys as the job stores them: lower-cased (a word of the vocabulary
	// is lower-case already, except for case-mapping quirks handled here).
	lower := map[string]int64{}
	for w, n := range want {
		lower[strings.ToLower(w)] += n
	}
	return lower
}

func tableCounts(t *testing.T, db *sql.DB, table string) map[string]int64 {
	t.Helper()
	rows, err := db.Query("SELECT word, num FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int64{}
	for rows.Next() {
		var w string
		var n int64
		if err := rows.Scan(&w, &n); err != nil {
			t.Fatal(err)
		}
		got[w] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// crashAt returns a hook that fails the nth time point is reached, as a
// crash there would stop the job.
func crashAt(point string, nth int) func(string) error {
	var seen atomic.Int32
	return func(p string) error {
		if p == point && int(seen.Add(1)) == nth {
			return fmt.Errorf("simulated crash at %s (#%d)", p, nth)
		}
		return nil
	}
}

// The word count runs in process against a kfake cluster and the shared
// MariaDB, crashes in the middle of the job (at a protocol point, or by
// cancellation with a branch active), runs again until the end of the
// bounded topic, and the table's totals equal the committed input's word
// counts exactly; no XA branch of the job is left. A third run finds
// nothing more to do and changes nothing.
func TestWordCountCrashAndRestart(t *testing.T) {
	srv := mariadbtest.Shared(t) // CI=true and no server: fails, never skips
	c := kafkatest.Start(t, kafkatest.Topic{Name: "lines", Partitions: 4})
	const lines = 6000
	want := testInput(t, c, "lines", lines, uint64(time.Now().UnixNano()))
	if want["aborted"] != 0 {
		t.Fatal("the vocabulary must not contain the aborted records' word")
	}

	for _, tc := range []struct {
		name  string
		crash func(cancel context.CancelFunc) func(string) error
	}{
		// The checkpoint record is written, XA COMMIT is not sent: the
		// restart must commit the prepared branch (and count it once).
		{"after-decide", func(context.CancelFunc) func(string) error { return crashAt("decided", 3) }},
		// Phase 1 done, no record: the restart rolls the branch back and
		// counts its lines again.
		{"after-prepare", func(context.CancelFunc) func(string) error { return crashAt("prepared:mysqlxa/0", 3) }},
		// Cancelled (like a kill) a little after the second checkpoint,
		// wherever that lands: reading, counting, or inside phase 1 with
		// the branch active (the counts are sent to the branch at the
		// barrier, so its rows are sent, and its locks held, only from
		// Prepare to Commit).
		{"cancel", func(cancel context.CancelFunc) func(string) error {
			var n atomic.Int32
			return func(p string) error {
				if p == "phase2" && n.Add(1) == 2 {
					go func() { time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond); cancel() }()
				}
				return nil
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbName := srv.NewDatabase(t)
			admin := srv.Admin(t)
			table := "`" + dbName + "`.wc"
			cfg := Config{
				Brokers: c.Addrs(), Topic: "lines", Bounded: true,
				DSN: srv.DSN(dbName), Table: "wc", State: filepath.Join(t.TempDir(), "state"),
				CheckpointInterval: -1, CheckpointEvery: 500,
			}

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			crashCtx, crash := context.WithCancel(ctx)
			first := cfg
			first.hook = tc.crash(crash)
			res, err := Run(crashCtx, first)
			crash()
			if err == nil {
				t.Fatalf("first run finished (%+v), want a crash", res)
			}
			t.Logf("first run: %v (after checkpoint %d, %d words counted)", err, res.Checkpoint, res.Words)
			if res.Checkpoint == 0 {
				t.Errorf("the crash came before any checkpoint completed")
			}
			partial := tableCounts(t, admin, table)
			if reflect.DeepEqual(partial, want) {
				t.Errorf("the table holds the whole input after the crash: the crash came too late to test anything")
			}

			res, err = Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !res.EndOfInput || res.Restored == 0 {
				t.Errorf("second run %+v: want the end of input after restoring a checkpoint", res)
			}
			got := tableCounts(t, admin, table)
			checkCounts(t, got, want)

			again, err := Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if again.Lines != 0 {
				t.Errorf("third run read %d lines, want 0 (the job was finished)", again.Lines)
			}
			checkCounts(t, tableCounts(t, admin, table), want)

			job, err := defaultJob(cfg.State)
			if err != nil {
				t.Fatal(err)
			}
			left, err := mysqlxa.ListBranches(ctx, srv.Open(t, dbName).DB, job)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) > 0 {
				t.Errorf("prepared XA branches of job %s left: %v", job, left)
			}
		})
	}
}

func checkCounts(t *testing.T, got, want map[string]int64) {
	t.Helper()
	var total, wantTotal int64
	for _, n := range want {
		wantTotal += n
	}
	for w, n := range got {
		total += n
		if want[w] != n {
			t.Errorf("count of %q = %d, want %d", w, n, want[w])
		}
	}
	for w, n := range want {
		if _, ok := got[w]; !ok {
			t.Errorf("count of %q missing, want %d", w, n)
		}
	}
	if total != wantTotal {
		t.Errorf("%d words counted, want %d", total, wantTotal)
	}
}
