package main

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/filesink/filesink/internal/testutil/mariadbtest"
)

// A row the server rejects (data too long) stops the run with an error
// naming the record's file and line and the server's message.
func TestMySQLServerErrorNamesRecord(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	dbName := srv.NewDatabase(t)
	db := srv.Open(t, dbName)
	if _, err := db.Exec("CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, note VARCHAR(10) NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	writeLines(t, filepath.Join(in, "a.jsonl"), `{"id":1,"note":"ok"}`, `{"id":2,"note":"far too long for ten"}`, `{"id":3}`)
	r := cli(t, "run", "--source", in, "--sink", "mysql://"+srv.DSN(dbName), "--mysql-table", "t", "--state", filepath.Join(dir, "state"))
	if r.code != 1 || !strings.Contains(r.stderr, filepath.Join(in, "a.jsonl")+":2") || !strings.Contains(r.stderr, "Data too long for column 'note'") {
		t.Fatalf("want exit 1 naming a.jsonl:2 and the server's error, got %v", r)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows (%v) after a failed run", n, err)
	}
}

// badInput is the input of TestMySQLOnBadRecordSkipKill9: good records,
// records the server rejects (a note too long, a duplicate id), records
// the sink rejects (a string for an integer column, not JSON). It returns
// the lines per file, the rows the table must hold (id -> n) and the
// origins of the bad records.
func badInput(files, lines int) (data [][]string, rows map[int64]int64, bad map[string]bool) {
	rows, bad = map[int64]int64{}, map[string]bool{}
	data = make([][]string, files)
	id := int64(0)
	for f := range files {
		for l := 1; l <= lines; l++ {
			id++
			origin := fmt.Sprintf("f%d.jsonl:%d", f, l)
			var line string
			switch {
			case id%13 == 0:
				line = fmt.Sprintf(`{"id":%d,"n":1,"note":"%s"}`, id, strings.Repeat("x", 11))
			case id%17 == 0:
				line = fmt.Sprintf(`{"id":%d,"n":"one"}`, id)
			case id%31 == 0:
				line = `{"id":`
			case id%29 == 0 && rows[id-1] != 0:
				line = fmt.Sprintf(`{"id":%d,"n":2}`, id-1) // a duplicate of the line before
			default:
				line = fmt.Sprintf(`{"id":%d,"n":%d,"note":"ok"}`, id, id%1000+1)
				rows[id] = id%1000 + 1
			}
			if _, good := rows[id]; !good {
				bad[origin] = true
			}
			data[f] = append(data[f], line)
		}
	}
	return data, rows, bad
}

// TestMySQLOnBadRecordSkipKill9: with --on-bad-record skip, the records
// the sink or the server rejects go to the dead-letter table and the rest
// of their batches to the table; the job is killed with SIGKILL a few
// times and run again to the end: every good record is in the table
// exactly once, every bad one in the dead letters exactly once.
func TestMySQLOnBadRecordSkipKill9(t *testing.T) {
	srv := mariadbtest.Shared(t)
	dbName := srv.NewDatabase(t)
	db := srv.Open(t, dbName)
	if _, err := db.Exec("CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, n INT NOT NULL, note VARCHAR(10) NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	data, wantRows, wantBad := badInput(4, 5000)
	for f, lines := range data {
		writeLines(t, filepath.Join(in, fmt.Sprintf("f%d.jsonl", f)), lines...)
	}
	bin := buildCLI(t)
	args := []string{"run", "--source", in, "--sink", "mysql://" + srv.DSN(dbName), "--mysql-table", "t",
		"--state", filepath.Join(dir, "state"), "--on-bad-record", "skip", "--mysql-batch-rows", "40", "--checkpoint-interval", "20ms"}
	check := func(run int, final bool) {
		rows := mysqlRows(t, db.DB, "SELECT id, n FROM t")
		for id, n := range rows {
			if wantRows[id] != n {
				t.Errorf("after run %d: row id %d n %d, want %d (0: not a good record)", run, id, n, wantRows[id])
			}
		}
		origins := deadOrigins(t, db.DB, in)
		for o, n := range origins {
			if !wantBad[o] || n != 1 {
				t.Errorf("after run %d: dead letter %s %d times (a bad record: %v)", run, o, n, wantBad[o])
			}
		}
		if final && (len(rows) != len(wantRows) || len(origins) != len(wantBad)) {
			t.Errorf("at the end: %d rows, %d dead letters; want %d and %d", len(rows), len(origins), len(wantRows), len(wantBad))
		}
	}
	kills := 0
	for run := 1; ; run++ {
		killAt := time.Duration(0)
		if run <= 4 {
			killAt = time.Duration(150*run) * time.Millisecond
		}
		r := startRun(t, bin, args, killAt, 2*time.Minute)
		switch r.outcome {
		case wasKilled:
			kills++
			check(run, false)
			continue
		case exitedOK:
		default:
			t.Fatalf("run %d: %s\n%s", run, r.state, lastLines(r.stderr, 20))
		}
		check(run, true)
		if !strings.Contains(r.stderr, "bad_records=") {
			t.Errorf("the done line does not count the bad records:\n%s", lastLines(r.stderr, 5))
		}
		break
	}
	t.Logf("%d runs killed with SIGKILL", kills)
	if kills == 0 {
		t.Errorf("no run was killed: the input is too small for this machine")
	}
}

// mysqlRows reads the rows of q, two integers each, as a map.
func mysqlRows(t *testing.T, db *sql.DB, q string) map[int64]int64 {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var k, v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// deadOrigins counts the dead letters of the default dead-letter table by
// origin, relative to dir.
func deadOrigins(t *testing.T, db *sql.DB, dir string) map[string]int {
	t.Helper()
	rows, err := db.Query("SELECT origin FROM filesink_dead_letter")
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1146 {
		// A run killed before the sink created the table: none yet (the
		// final check compares the count with the bad records).
		return map[string]int{}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(o, dir+string(filepath.Separator))]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
