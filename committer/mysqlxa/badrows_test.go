package mysqlxa_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
	"github.com/filesink/filesink/source"
)

// A row the server rejects for its values (data too long, out of range,
// a duplicate key in insert mode, in the batch or against a committed
// row) fails the checkpoint with an error naming that record's origin
// and the server's message; nothing of the checkpoint is committed.
func TestServerRejectsRowNamed(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	db := srv.Open(t, e.db)
	ctx := context.Background()
	insert := []mysqlxa.Option{mysqlxa.WithMode(mysqlxa.Insert), mysqlxa.WithColumns()}
	j, err := e.start(db, 1, nil, insert)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.sinks[0].Write(ctx, []byte(`{"k":"old","n":1,"amount":1}`), source.Origin{Name: "in/first.jsonl", Num: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.coord.Checkpoint(ctx, json.RawMessage(`0`), true); err != nil {
		t.Fatal(err)
	}
	j.close()
	for _, c := range []struct {
		name, bad, server string
		code              uint16
	}{
		{"too long", `{"k":"x","n":1,"amount":1,"note":"` + strings.Repeat("n", 101) + `"}`, "Data too long for column 'note'", 1406},
		{"out of range", `{"k":"x","n":1,"amount":1e19}`, "Out of range value for column 'amount'", 1264},
		{"duplicate in the batch", `{"k":"g1","n":1,"amount":1}`, "Duplicate entry 'g1'", 1062},
		{"duplicate of a committed row", `{"k":"old","n":1,"amount":1}`, "Duplicate entry 'old'", 1062},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, err := e.start(db, 1, nil, insert)
			if err != nil {
				t.Fatal(err)
			}
			defer j.close()
			s := j.sinks[0]
			recs := []string{`{"k":"g1","n":1,"amount":1}`, `{"k":"g2","n":1,"amount":1}`, c.bad, `{"k":"g3","n":1,"amount":1}`}
			for i, r := range recs {
				if err := s.Write(ctx, []byte(r), source.Origin{Name: "in/bad.jsonl", Num: int64(i + 1)}); err != nil {
					t.Fatalf("Write of record %d: %v", i+1, err)
				}
			}
			_, err = j.coord.Checkpoint(ctx, json.RawMessage(`0`), true)
			var re *mysqlxa.RecordError
			var me *mysql.MySQLError
			if err == nil || !errors.As(err, &re) || !errors.Is(err, source.ErrBadRecord) || !errors.As(err, &me) || me.Number != c.code ||
				re.Origin != (source.Origin{Name: "in/bad.jsonl", Num: 3}) || !strings.Contains(err.Error(), "in/bad.jsonl:3") || !strings.Contains(err.Error(), c.server) {
				t.Fatalf("checkpoint error %v; want a RecordError naming in/bad.jsonl:3 with the server's error %d %q", err, c.code, c.server)
			}
			if got := e.totals(); len(got) != 1 {
				t.Errorf("the failed checkpoint left rows: %v", got)
			}
			e.checkNoBranches()
		})
	}
}

// With a dead-letter table, the records the sink rejects and the rows the
// server rejects go to it, in the checkpoint's branch, and the rest of
// their batches are written: every good record exactly once in the table,
// every bad one exactly once in the dead letters, reported to the bad
// record function.
func TestDeadLetterTable(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	e.keys = 0 // a key per record: a duplicate is a bad record
	db := srv.Open(t, e.db)
	ctx := context.Background()
	var mu sync.Mutex
	var reported []string
	opts := []mysqlxa.Option{mysqlxa.WithMode(mysqlxa.Insert), mysqlxa.WithColumns(), mysqlxa.WithDeadLetterTable("dl"),
		mysqlxa.WithBadRecordFunc(func(b *source.BadRecordError) {
			mu.Lock()
			defer mu.Unlock()
			reported = append(reported, b.Origin)
		})}
	j, err := e.start(db, 1, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	long := strings.Repeat("x", 101)
	checkpoints := [][]string{
		{`{"k":"a","n":1,"amount":1}`, `{"k":"b","n":"two","amount":1}`, `{"k":"c","n":1,"amount":1,"note":"` + long + `"}`, `{"k":"d","n":1,"amount":1}`, `{"k":"a","n":9,"amount":1}`, `{"k":"e","n":1,"amount":1}`},
		{`[1]`, `{"k":"f","n":1,"amount":1e19}`},
		{`{"k":"d","n":2,"amount":2}`, `{"k":"g","n":7,"amount":0.5}`, `{"k":"h","n":8,"amount":1}`, `{"k":"i","n":1,"amount":2}`, `{"k":"j","n":1,"amount":3}`, `{"k":"k","n":1,"amount":4}`},
	}
	wantDead := map[string]string{
		"in/1.jsonl:2": "column n: want an integer", "in/1.jsonl:3": "Data too long", "in/1.jsonl:5": "Duplicate entry 'a'",
		"in/2.jsonl:1": "not a JSON object", "in/2.jsonl:2": "Out of range", "in/3.jsonl:1": "Duplicate entry 'd'",
	}
	for c, recs := range checkpoints {
		for i, r := range recs {
			if err := j.sinks[0].Write(ctx, []byte(r), source.Origin{Name: fmt.Sprintf("in/%d.jsonl", c+1), Num: int64(i + 1)}); err != nil {
				t.Fatalf("Write %s: %v", r, err)
			}
		}
		if _, err := j.coord.Checkpoint(ctx, json.RawMessage(`0`), c == len(checkpoints)-1); err != nil {
			t.Fatal(err)
		}
	}
	got := e.totals()
	want := map[string]total{"a": {1, "1.00"}, "d": {1, "1.00"}, "e": {1, "1.00"}, "g": {7, "0.50"}, "h": {8, "1.00"}, "i": {1, "2.00"}, "j": {1, "3.00"}, "k": {1, "4.00"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("table = %v, want %v", got, want)
	}
	rows, err := e.admin.Query("SELECT origin, error, record, checkpoint, target_table, subtask FROM "+e.db+".dl WHERE job = ?", e.job)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var origin, msg, rec, tbl string
		var ckpt uint64
		var subtask int
		if err := rows.Scan(&origin, &msg, &rec, &ckpt, &tbl, &subtask); err != nil {
			t.Fatal(err)
		}
		n++
		var c, i int
		fmt.Sscanf(origin, "in/%d.jsonl:%d", &c, &i)
		if w, ok := wantDead[origin]; !ok || !strings.Contains(msg, w) || rec != checkpoints[c-1][i-1] || ckpt != uint64(c) || tbl != e.table || subtask != 0 {
			t.Errorf("dead letter %s (checkpoint %d, table %s): %q, record %s; want %q", origin, ckpt, tbl, msg, rec, w)
		}
		delete(wantDead, origin)
	}
	if len(wantDead) > 0 || n != 6 {
		t.Errorf("%d dead letters; missing %v", n, wantDead)
	}
	if len(reported) != 6 || j.sinks[0].Stats().BadRecords.Load() != 6 {
		t.Errorf("reported %v, BadRecords %d; want the 6 bad records", reported, j.sinks[0].Stats().BadRecords.Load())
	}
	e.checkNoBranches()
}

// Bad records among the records of the crash tests: after a crash at each
// point of the protocol and a recovery, every good record is counted
// exactly once and every bad one is in the dead-letter table exactly once.
func TestDeadLettersCrash(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	for _, point := range []string{"prepared:mysqlxa/0", "phase1", "decided", "committed:1", "phase2"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, srv)
			e.withBadRecords(4)
			db := srv.Open(t, e.db)
			j, err := e.start(db, 1, crashOn(point, 2), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.run(crashN, crashPer); err == nil || !strings.Contains(err.Error(), "simulated crash") {
				t.Fatalf("run = %v, want the simulated crash", err)
			}
			db.Crash()
			j2 := e.recoverAndFinish(1)
			if n := j2.sinks[0].Stats().BadRecords.Load(); n == 0 {
				t.Errorf("the run after the crash sent no bad record to the dead letters")
			}
		})
	}
}
