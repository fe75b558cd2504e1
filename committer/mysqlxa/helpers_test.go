package mysqlxa_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
)

// env is one test's world: a database with a counters table, a checkpoint
// store, and a job id.
type env struct {
	t     *testing.T
	srv   *mariadbtest.Server
	db    string // database name
	table string // db.counters
	admin *sql.DB
	store recovery.Store
	job   string
	keys  int // records use keys k0 .. k<keys-1>; 0: a key per record
	// badEvery > 0 makes every badEvery-th record bad (see record), for
	// sinks with the dead-letter table deadTable (extra has the option).
	badEvery int
	extra    []mysqlxa.Option // appended to every sink's options
}

// deadTable is the dead-letter table of an env with badEvery.
const deadTable = "dead_letters"

func newEnv(t *testing.T, srv *mariadbtest.Server) *env {
	t.Helper()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	e := &env{t: t, srv: srv, db: srv.NewDatabase(t), job: "j" + hex.EncodeToString(rnd[:]), keys: 7}
	e.table = e.db + ".counters"
	e.admin = srv.Admin(t)
	e.exec("CREATE TABLE " + e.table + ` (
		k VARCHAR(64) NOT NULL PRIMARY KEY,
		n BIGINT NOT NULL,
		amount DECIMAL(20,2) NOT NULL,
		note VARCHAR(100) NULL
	) ENGINE=InnoDB`)
	store, err := recovery.OpenDir(context.Background(), vfs.OS{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	// Tests on one server run in parallel: every prepared branch of this
	// test is rolled back at the end, so no test leaves locks behind.
	t.Cleanup(func() {
		if !srv.Running() {
			return
		}
		ctx := context.Background()
		xs, err := mysqlxa.ListBranches(ctx, e.admin, e.job)
		if err != nil {
			return
		}
		for _, x := range xs {
			_ = mysqlxa.RollbackBranch(ctx, e.admin, x)
		}
	})
	return e
}

func (e *env) exec(q string, args ...any) {
	e.t.Helper()
	if _, err := e.admin.ExecContext(context.Background(), q, args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// options returns the options of the env's sinks (on e.table); options
// appended to them override them.
func (e *env) options() []mysqlxa.Option {
	return append([]mysqlxa.Option{mysqlxa.WithMode(mysqlxa.Increment), mysqlxa.WithJob(e.job), mysqlxa.WithBatchRows(5),
		mysqlxa.WithColumns("k", "n", "amount"),
		mysqlxa.WithZombieGrace(200 * time.Millisecond), mysqlxa.WithLogger(testLogger(e.t))}, e.extra...)
}

// withBadRecords makes every every-th record of e bad, alternately one
// the server rejects (an amount out of range of DECIMAL(20,2)) and one the
// sink rejects (a string for n), and gives e's sinks the dead-letter
// table.
func (e *env) withBadRecords(every int) {
	e.badEvery = every
	e.extra = append(e.extra, mysqlxa.WithDeadLetterTable(deadTable))
}

// isBad reports whether record i is bad (badEvery), and whether the
// server is the one to reject it.
func (e *env) isBad(i int) (bad, server bool) {
	if e.badEvery == 0 || i%e.badEvery != e.badEvery-1 {
		return false, false
	}
	return true, (i/e.badEvery)%2 == 0
}

func (e *env) sink(db *sql.DB, opts []mysqlxa.Option) *mysqlxa.Sink {
	e.t.Helper()
	s, err := mysqlxa.New(context.Background(), db, e.table, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// record i: key k<i%keys>, n 1, amount i%10 + 0.25, or a bad record
// (isBad).
func (e *env) record(i int) []byte {
	k := i
	if e.keys > 0 {
		k = i % e.keys
	}
	if bad, server := e.isBad(i); bad && server {
		return fmt.Appendf(nil, `{"k":"k%d","n":1,"amount":1e19}`, k)
	} else if bad {
		return fmt.Appendf(nil, `{"k":"k%d","n":"one","amount":1}`, k)
	}
	return fmt.Appendf(nil, `{"k":"k%d","n":1,"amount":%d.25,"extra":"ignored"}`, k, i%10)
}

type total struct {
	n      int64
	amount string
}

// want returns the totals of records [0, n).
func (e *env) want(n int) map[string]total {
	sum := map[string]int64{}
	cnt := map[string]int64{}
	for i := range n {
		if bad, _ := e.isBad(i); bad {
			continue
		}
		k := i
		if e.keys > 0 {
			k = i % e.keys
		}
		key := fmt.Sprintf("k%d", k)
		cnt[key]++
		sum[key] += int64(i%10)*100 + 25
	}
	out := map[string]total{}
	for k, c := range cnt {
		out[k] = total{n: c, amount: fmt.Sprintf("%d.%02d", sum[k]/100, sum[k]%100)}
	}
	return out
}

func (e *env) totals() map[string]total {
	e.t.Helper()
	rows, err := e.admin.QueryContext(context.Background(), "SELECT k, n, amount FROM "+e.table)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]total{}
	for rows.Next() {
		var k string
		var tt total
		if err := rows.Scan(&k, &tt.n, &tt.amount); err != nil {
			e.t.Fatal(err)
		}
		out[k] = tt
	}
	return out
}

// checkExactlyOnce asserts that the table holds exactly the totals of
// records [0, n) and that no branch of the job is prepared.
func (e *env) checkExactlyOnce(n int) {
	e.t.Helper()
	got, want := e.totals(), e.want(n)
	if len(got) != len(want) {
		e.t.Errorf("table has %d keys, want %d: %v", len(got), len(want), got)
	}
	for k, w := range want {
		if got[k] != w {
			e.t.Errorf("key %s: got %+v, want %+v (n counts records: more is a duplicate, less a loss)", k, got[k], w)
		}
	}
	if e.badEvery > 0 {
		e.checkDeadLetters(n)
	}
	e.checkNoBranches()
}

// checkDeadLetters asserts that the dead-letter table holds exactly the
// bad records among [0, n), each once, with its origin and error.
func (e *env) checkDeadLetters(n int) {
	e.t.Helper()
	rows, err := e.admin.QueryContext(context.Background(), "SELECT origin, error, record FROM "+e.db+"."+deadTable+" WHERE job = ?", e.job)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var origin, msg, rec string
		if err := rows.Scan(&origin, &msg, &rec); err != nil {
			e.t.Fatal(err)
		}
		got[origin]++
		var i int
		if _, err := fmt.Sscanf(origin, "gen:%d", &i); err != nil {
			e.t.Errorf("dead letter of origin %q", origin)
			continue
		}
		bad, server := e.isBad(i)
		want := "column n: want an integer"
		if server {
			want = "rejected by the server: Error 1264"
		}
		if !bad || rec != string(e.record(i)) || !strings.Contains(msg, want) {
			e.t.Errorf("dead letter %s: error %q, record %s; want a bad record, %q", origin, msg, rec, want)
		}
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	for i := range n {
		origin := fmt.Sprintf("gen:%d", i)
		if bad, _ := e.isBad(i); bad && got[origin] != 1 {
			e.t.Errorf("bad record %s is %d times in the dead-letter table, want once", origin, got[origin])
		}
		delete(got, origin)
	}
	for origin := range got {
		e.t.Errorf("dead letter %s: not a bad record of the input", origin)
	}
}

func (e *env) checkNoBranches() {
	e.t.Helper()
	xs, err := mysqlxa.ListBranches(context.Background(), e.admin, e.job)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, x := range xs {
		e.t.Errorf("prepared branch left: %s", x)
	}
}

// job drives sinks like the pipeline does: Recover, then checkpoints of
// per records each, from the restored source position to n records.
type job struct {
	e     *env
	db    *mariadbtest.DB
	sinks []*mysqlxa.Sink
	coord *committer.Coordinator
	pos   int // next record
}

// start builds sinks (one per subtask; record i goes to subtask
// i%subtasks) and a coordinator on the env's store, and recovers. extra
// options override the env's.
func (e *env) start(db *mariadbtest.DB, subtasks int, hook func(string) error, extra []mysqlxa.Option) (*job, error) {
	e.t.Helper()
	j := &job{e: e, db: db}
	parts := make([]committer.Participant, subtasks)
	for i := range subtasks {
		opts := append(e.options(), mysqlxa.WithSubtask(i))
		s := e.sink(db.DB, append(opts, extra...))
		j.sinks = append(j.sinks, s)
		parts[i] = s
	}
	opts := []committer.Option{committer.WithRetry(3, time.Millisecond), committer.WithLogger(testLogger(e.t))}
	if hook != nil {
		opts = append(opts, committer.WithHook(hook))
	}
	c, err := committer.New(e.store, parts, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	j.coord = c
	last, err := c.Recover(context.Background())
	if err != nil {
		return j, err
	}
	if last != nil {
		if err := json.Unmarshal(last.Source, &j.pos); err != nil {
			e.t.Fatal(err)
		}
	}
	return j, nil
}

// write hands records [j.pos, to) to the sinks.
func (j *job) write(to int) error {
	for ; j.pos < to; j.pos++ {
		s := j.sinks[j.pos%len(j.sinks)]
		if err := s.Write(context.Background(), j.e.record(j.pos), source.Origin{Name: "gen", Num: int64(j.pos)}); err != nil {
			return err
		}
	}
	return nil
}

// run writes and checkpoints every per records until n.
func (j *job) run(n, per int) error {
	for j.pos < n {
		if err := j.write(min(j.pos+per, n)); err != nil {
			return err
		}
		pos, _ := json.Marshal(j.pos)
		if _, err := j.coord.Checkpoint(context.Background(), pos, j.pos == n); err != nil {
			return err
		}
	}
	return nil
}

func (j *job) close() {
	for _, s := range j.sinks {
		s.Close()
	}
}
