package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
	"github.com/filesink/filesink/source"
)

// CLI tests of the Kafka source, the MySQL sink and the xa command, in
// process, with an in-process kfake cluster and the machine's MariaDB.

const secret = "hunter2-secret"

func TestKafkaMySQLUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	kafkaURI := "kafka://127.0.0.1:1/t"
	my := "mysql://root:" + secret + "@tcp(127.0.0.1:1)/test"
	mysqlRun := func(extra ...string) []string {
		return append([]string{"run", "--source", kafkaURI, "--sink", my, "--state", state, "--mysql-table", "wc"}, extra...)
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"mysql without state", []string{"run", "--source", kafkaURI, "--sink", my, "--mysql-table", "wc"}, []string{"--state"}},
		{"mysql without table", []string{"run", "--source", kafkaURI, "--sink", my, "--state", state}, []string{"--mysql-table"}},
		{"mysql bad mode", mysqlRun("--mysql-mode", "sum"), []string{"--mysql-mode", "sum"}},
		{"mysql with file flag", mysqlRun("--format", "csv"), []string{"--format", "mysql://"}},
		{"mysql bad batch", mysqlRun("--mysql-batch-rows", "0"), []string{"--mysql-batch-rows"}},
		{"mysql parallel increment without key", mysqlRun("--mysql-mode", "increment", "--parallelism", "2"), []string{"--mysql-key"}},
		{"mysql bad dsn", []string{"run", "--source", kafkaURI, "--sink", "mysql://root:" + secret + "@nonsense(", "--state", state, "--mysql-table", "wc"}, []string{"DSN"}},
		{"mysql flag with file sink", []string{"run", "--source", kafkaURI, "--sink", filepath.Join(dir, "out"), "--mysql-table", "wc"}, []string{"--mysql-table"}},
		{"job with file sink", []string{"run", "--source", kafkaURI, "--sink", filepath.Join(dir, "out"), "--job", "j"}, []string{"--job"}},
		{"start without kafka", []string{"run", "--source", "gen://?count=3", "--sink", filepath.Join(dir, "out"), "--start", "latest"}, []string{"--start", "kafka://"}},
		{"bounded without kafka", []string{"run", "--source", "gen://?count=3", "--sink", filepath.Join(dir, "out"), "--bounded"}, []string{"--bounded"}},
		{"start contradicts URI", []string{"run", "--source", kafkaURI + "?start=earliest", "--sink", filepath.Join(dir, "out"), "--start", "latest"}, []string{"--start", "earliest"}},
		{"bounded contradicts URI", []string{"run", "--source", kafkaURI + "?bounded=false", "--sink", filepath.Join(dir, "out"), "--bounded"}, []string{"--bounded", "bounded=false"}},
		{"bad start", []string{"run", "--source", kafkaURI, "--sink", filepath.Join(dir, "out"), "--start", "yesterday"}, []string{"yesterday"}},
		{"kafka without topic", []string{"run", "--source", "kafka://u:" + secret + "@127.0.0.1:1/", "--sink", filepath.Join(dir, "out")}, []string{"kafka://"}},
		{"kafka bad parameter", []string{"run", "--source", "kafka://u:" + secret + "@127.0.0.1:1/t?colour=red", "--sink", filepath.Join(dir, "out")}, []string{"colour"}},
		{"verify mysql", []string{"verify", "--sink", my}, []string{"xa list"}},
		{"xa without verb", []string{"xa"}, []string{"list, commit or rollback"}},
		{"xa without sink", []string{"xa", "list"}, []string{"--sink"}},
		{"xa file sink", []string{"xa", "list", "--sink", "s3://b/p"}, []string{"mysql://"}},
		{"xa commit without xid", []string{"xa", "commit", "--sink", my}, []string{"--xid"}},
		{"xa bad xid", []string{"xa", "rollback", "--sink", my, "--xid", "foo/bar"}, []string{"--xid", "foo/bar"}},
		{"xa list with xid", []string{"xa", "list", "--sink", my, "--xid", "foo/bar"}, []string{"--xid"}},
	}
	for _, c := range cases {
		r := cli(t, c.args...)
		if r.code != 2 {
			t.Errorf("%s: filesink %s: want exit 2, got %v", c.name, strings.Join(c.args, " "), r)
			continue
		}
		first, _, _ := strings.Cut(r.stderr, "\n")
		if !strings.HasPrefix(first, "filesink: ") {
			t.Errorf("%s: first line of stderr %q does not start with \"filesink: \"", c.name, first)
		}
		for _, w := range c.want {
			if !strings.Contains(first, w) {
				t.Errorf("%s: error line %q does not mention %q", c.name, first, w)
			}
		}
		if strings.Contains(r.stderr+r.stdout, secret) {
			t.Errorf("%s: the password shows in the output: %v", c.name, r)
		}
	}
	if _, err := os.Stat(state); err == nil {
		t.Errorf("a usage error created the state directory")
	}
	for _, args := range [][]string{{"run", "--help"}, {"xa", "--help"}, {"xa", "list", "--help"}, {"help"}} {
		r := cli(t, args...)
		all := r.stdout + r.stderr
		if r.code != 0 {
			t.Errorf("filesink %s: %v", strings.Join(args, " "), r)
		}
		for _, w := range map[string][]string{"run": {"kafka://", "mysql://", "-mysql-mode", "-bounded", "-start", "-job"},
			"xa": {"Usage: filesink xa", "-xid"}, "help": {"filesink xa"}}[args[0]] {
			if !strings.Contains(all, w) {
				t.Errorf("filesink %s does not mention %s", strings.Join(args, " "), w)
			}
		}
	}
}

// wordRecord is a record of the word count topic.
func wordRecord(word string) string { return fmt.Sprintf(`{"word":%q,"num":1}`, word) }

// createWC creates a word count table in db and returns its name.
func createWC(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	if _, err := db.Exec("CREATE TABLE " + name + " (word VARCHAR(64) NOT NULL PRIMARY KEY, num BIGINT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	return name
}

// wcTotals reads a word count table.
func wcTotals(t *testing.T, db *sql.DB, table string) map[string]int64 {
	t.Helper()
	rows, err := db.Query("SELECT word, num FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]int64{}
	for rows.Next() {
		var w string
		var n int64
		if err := rows.Scan(&w, &n); err != nil {
			t.Fatal(err)
		}
		m[w] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRunKafkaToMySQL: committed Kafka records (plain and transactional)
// reach the table exactly once by increment, aborted ones never; running
// the finished job again changes nothing; no branch is left prepared; the
// job id is kept in the state directory; a password never shows.
func TestRunKafkaToMySQL(t *testing.T) {
	srv := mariadbtest.Shared(t)
	dbName := srv.NewDatabase(t)
	db := srv.Open(t, dbName)
	table := createWC(t, db.DB, "wc")
	c := kafkatest.Start(t, kafkatest.Topic{Name: "words", Partitions: 2})
	want := map[string]int64{}
	add := func(p int32, commit bool, txn string, words ...string) {
		var vals []string
		for _, w := range words {
			vals = append(vals, wordRecord(w))
			if commit {
				want[w]++
			}
		}
		if txn == "" {
			c.MustProduce(t, "words", p, vals...)
			return
		}
		c.MustProduceTxn(t, txn, commit, "words", p, vals...)
	}
	add(0, true, "", "a", "b", "a")
	add(1, true, "", "c")
	add(0, false, "tx0", "a", "zzz-aborted")
	add(1, true, "tx1", "b", "c", "c")
	add(1, false, "tx1", "zzz-aborted")
	add(0, true, "", "d")

	state := filepath.Join(t.TempDir(), "state")
	sink := "mysql://" + srv.DSN(dbName)
	args := []string{"run", "--source", "kafka://" + c.Bootstrap() + "/words", "--bounded",
		"--sink", sink, "--mysql-table", table, "--mysql-mode", "increment", "--mysql-key", "word",
		"--state", state, "--checkpoint-interval", "50ms", "--log-level", "debug"}
	mustRun(t, args...)
	if got := wcTotals(t, db.DB, table); !mapsEqual(got, want) {
		t.Fatalf("table %v, want %v", got, want)
	}
	job, err := readJobFile(state)
	if err != nil || !strings.HasPrefix(job, "fs-") {
		t.Fatalf("job id kept in the state directory: %q, %v", job, err)
	}
	mustRun(t, args...)
	if got := wcTotals(t, db.DB, table); !mapsEqual(got, want) {
		t.Fatalf("after a second run: table %v, want %v", got, want)
	}
	r := mustRun(t, "xa", "list", "--sink", sink, "--state", state)
	if !strings.Contains(r.stdout, "0 prepared branch(es) of job "+job) {
		t.Errorf("xa list after a clean run: %v", r)
	}
	// A different --job than the one kept is refused.
	if r := cli(t, append(args, "--job", "other")...); r.code != 2 || !strings.Contains(r.stderr, job) {
		t.Errorf("run with another --job: want exit 2 naming the kept job, got %v", r)
	}
	mustRun(t, "state", "--state", state)

	// A wrong password: a clear error that does not show it.
	bad := strings.Replace(srv.DSN(dbName), "@", ":"+secret+"@", 1)
	if strings.Contains(srv.DSN(dbName), ":") && strings.Index(srv.DSN(dbName), ":") < strings.Index(srv.DSN(dbName), "@") {
		bad = srv.DSN(dbName) // the DSN has a password already: skip this part
	}
	if bad != srv.DSN(dbName) {
		args2 := slices.Clone(args)
		args2[slices.Index(args2, "--sink")+1] = "mysql://" + bad
		args2[slices.Index(args2, "--state")+1] = filepath.Join(t.TempDir(), "state2")
		r := cli(t, args2...)
		if r.code == 0 || strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("run with a wrong password: want a failure that does not show it, got %v", r)
		}
		if r := cli(t, "xa", "list", "--sink", "mysql://"+bad); r.code == 0 || strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("xa list with a wrong password: want a failure that does not show it, got %v", r)
		}
	}
}

// TestRunKafkaToMySQLParallel: three subtasks in increment mode on hot
// keys: records are routed by key, so no branch waits for another's locks,
// and the totals are exact.
func TestRunKafkaToMySQLParallel(t *testing.T) {
	srv := mariadbtest.Shared(t)
	dbName := srv.NewDatabase(t)
	db := srv.Open(t, dbName)
	table := createWC(t, db.DB, "wc")
	c := kafkatest.Start(t, kafkatest.Topic{Name: "words", Partitions: 2})
	want := map[string]int64{}
	for p := range int32(2) {
		var vals []string
		for i := range 3000 {
			w := fmt.Sprintf("k%d", i%7)
			vals = append(vals, wordRecord(w))
			want[w]++
		}
		c.MustProduce(t, "words", p, vals...)
	}
	state := filepath.Join(t.TempDir(), "state")
	sink := "mysql://" + srv.DSN(dbName)
	mustRun(t, "run", "--source", "kafka://"+c.Bootstrap()+"/words", "--bounded",
		"--sink", sink, "--mysql-table", table, "--mysql-mode", "increment", "--mysql-key", "word", "--mysql-batch-rows", "50",
		"--state", state, "--checkpoint-interval", "20ms", "--parallelism", "3")
	if got := wcTotals(t, db.DB, table); !mapsEqual(got, want) {
		t.Fatalf("table %v, want %v", got, want)
	}
	r := mustRun(t, "xa", "list", "--sink", sink, "--state", state)
	if !strings.Contains(r.stdout, "0 prepared branch(es)") {
		t.Errorf("xa list after a clean run: %v", r)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestRunKafkaToFiles: Kafka to the file sink, bounded, with a consumer
// group for monitoring: every committed record exactly once, aborted ones
// never, verify passes, and the group's offsets are the end offsets (the
// pipeline's group-commit hook).
func TestRunKafkaToFiles(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "ev", Partitions: 3})
	var want []string
	for p := range int32(3) {
		var vals []string
		for i := range 50 {
			vals = append(vals, fmt.Sprintf(`{"id":"%d-%d"}`, p, i))
		}
		c.MustProduce(t, "ev", p, vals[:20]...)
		c.MustProduceTxn(t, fmt.Sprintf("x%d", p), false, "ev", p, `{"id":"aborted"}`)
		c.MustProduceTxn(t, fmt.Sprintf("x%d", p), true, "ev", p, vals[20:]...)
		want = append(want, vals...)
	}
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"run", "--source", "kafka://" + c.Bootstrap() + "/ev?monitor_group=monitor", "--bounded", "--start", "earliest",
		"--sink", out, "--checkpoint-interval", "20ms", "--parallelism", "2"}
	mustRun(t, args...)
	checkExactlyOnce(t, outputLines(t, out), want)
	mustRun(t, "verify", "--sink", out)
	before := snapshot(t, out)
	mustRun(t, args...)
	if d := diffSnapshots(before, snapshot(t, out)); d != "" {
		t.Errorf("a second run changed the output: %s", d)
	}

	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, "ev")
	if err != nil {
		t.Fatal(err)
	}
	got, err := adm.FetchOffsets(ctx, "monitor")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		g, ok := got.Lookup("ev", o.Partition)
		if !ok || g.At != o.Offset {
			t.Errorf("group offset of ev/%d: %v (found %v), want the end offset %d", o.Partition, g.At, ok, o.Offset)
		}
	})
}

// leaveBranches makes n subtasks of job each prepare a branch of
// checkpoint 1 in table (a word each, w0, w1, ...), then "crash", and
// returns the xids that xa list prints for them.
func leaveBranches(t *testing.T, db *sql.DB, table, job string, n int) []string {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		s, err := mysqlxa.New(ctx, db, table, mysqlxa.WithMode(mysqlxa.Increment), mysqlxa.WithKey("word"), mysqlxa.WithJob(job), mysqlxa.WithSubtask(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Restore(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(ctx, []byte(wordRecord(fmt.Sprintf("w%d", i))), source.Origin{Name: "test", Num: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := committer.PrepareNow(ctx, s, 1, false); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	xs, err := mysqlxa.ListBranches(ctx, db, job)
	if err != nil {
		t.Fatal(err)
	}
	var xids []string
	for _, x := range xs {
		if x.Sink != table || x.Checkpoint != 1 {
			t.Errorf("branch %s: want sink %s, checkpoint 1", x, table)
		}
		xids = append(xids, x.String())
	}
	if len(xids) != n {
		t.Fatalf("%d branches of job %s prepared, want %d", len(xids), job, n)
	}
	return xids
}

// resolveXA runs an xa commit or rollback, again while the server says
// the branch is still attached to its closed session (it may need a
// moment to detach it), for up to 20 s.
func resolveXA(t *testing.T, args ...string) cliResult {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := cli(t, args...)
		if r.code == 0 || time.Now().After(deadline) || !strings.Contains(r.stderr, "live session") {
			return r
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestXACommand: branches prepared and left behind are listed, decoded, and
// committed or rolled back by hand; with --state, the wrong decision is
// refused.
func TestXACommand(t *testing.T) {
	srv := mariadbtest.Shared(t)
	dbName := srv.NewDatabase(t)
	db := srv.Open(t, dbName)
	table := createWC(t, db.DB, "wc")
	job := fmt.Sprintf("xa-test-%d", time.Now().UnixNano()%1e9)

	prepared := leaveBranches(t, db.DB, table, job, 2)
	sink := "mysql://" + srv.DSN(dbName)
	r := mustRun(t, "xa", "list", "--sink", sink, "--job", job)
	var xids []string
	for _, l := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(l)
		if len(f) == 6 && f[0] == job {
			if f[1] != table || f[3] != "1" {
				t.Errorf("xa list line %q: want sink %s, checkpoint 1", l, table)
			}
			xids = append(xids, f[5])
		}
	}
	if len(xids) != 2 || !strings.Contains(r.stdout, "2 prepared branch(es) of job "+job) || !slices.Equal(xids, prepared) {
		t.Fatalf("xa list: want the 2 branches %v of job %s:\n%v", prepared, job, r)
	}

	// With a state directory of that job and no checkpoint record, neither
	// branch is decided: commit is refused, rollback is fine.
	state := t.TempDir()
	if err := writeJobFile(state, job); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, "xa", "list", "--sink", sink, "--state", state)
	if !strings.Contains(r.stdout, "DECIDED") || strings.Count(r.stdout, " no ") != 2 {
		t.Errorf("xa list --state: want two undecided branches:\n%v", r)
	}
	if r := cli(t, "xa", "commit", "--sink", sink, "--state", state, "--xid", xids[0]); r.code != 1 || !strings.Contains(r.stderr, "never decided") {
		t.Errorf("xa commit of an undecided branch with --state: want exit 1, got %v", r)
	}
	if r := cli(t, "xa", "commit", "--sink", sink, "--job", "other-job", "--xid", xids[0]); r.code != 2 {
		t.Errorf("xa commit of another job's branch: want exit 2, got %v", r)
	}

	// Commit one (with --force: an operator who knows better), roll back
	// the other. The server may need a moment to detach a branch from
	// its closed session.
	resolve := func(args ...string) cliResult { return resolveXA(t, args...) }
	if r := resolve("xa", "commit", "--sink", sink, "--state", state, "--force", "--xid", xids[0]); r.code != 0 || !strings.Contains(r.stdout, "committed") {
		t.Fatalf("xa commit --force: %v", r)
	}
	if r := resolve("xa", "rollback", "--sink", sink, "--xid", xids[1]); r.code != 0 || !strings.Contains(r.stdout, "rolled back") {
		t.Fatalf("xa rollback: %v", r)
	}
	if r := cli(t, "xa", "rollback", "--sink", sink, "--xid", xids[1]); r.code != 1 {
		t.Errorf("xa rollback of a branch that is gone: want exit 1, got %v", r)
	}
	if got := wcTotals(t, db.DB, table); len(got) != 1 || got["w0"] != 1 {
		t.Errorf("table after commit of w0's branch and rollback of w1's: %v", got)
	}
	r = mustRun(t, "xa", "list", "--sink", sink, "--job", job)
	if !strings.Contains(r.stdout, "0 prepared branch(es)") {
		t.Errorf("xa list at the end: %v", r)
	}
}
