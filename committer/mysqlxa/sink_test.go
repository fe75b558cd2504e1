package mysqlxa_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
	"github.com/filesink/filesink/source"
)

var _ interface {
	committer.Participant
	Write(context.Context, []byte, source.Origin) error
	Close() error
} = (*mysqlxa.Sink)(nil)

func TestIncrementExactlyOnce(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	db := srv.Open(t, e.db)
	j, err := e.start(db, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.run(103, 20); err != nil {
		t.Fatal(err)
	}
	j.close()
	e.checkExactlyOnce(103)
	st := j.sinks[0].Stats()
	if st.Records.Load() != 103 || st.Prepared.Load() != 6 || st.Committed.Load() != 6 {
		t.Errorf("stats: records %d prepared %d committed %d", st.Records.Load(), st.Prepared.Load(), st.Committed.Load())
	}
	// Running again over the finished input publishes nothing new.
	j2, err := e.start(srv.Open(t, e.db), 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j2.run(103, 20); err != nil {
		t.Fatal(err)
	}
	j2.close()
	e.checkExactlyOnce(103)
}

func TestTwoSubtasks(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	e.keys = 0 // a key per record: subtasks never write the same row
	j, err := e.start(srv.Open(t, e.db), 2, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.run(57, 10); err != nil {
		t.Fatal(err)
	}
	j.close()
	e.checkExactlyOnce(57)
}

func TestUpsertAndInsert(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	ctx := context.Background()
	db := srv.Open(t, e.db)
	write := func(mode mysqlxa.Mode, recs ...string) error {
		// every column
		j, err := e.start(db, 1, nil, []mysqlxa.Option{mysqlxa.WithMode(mode), mysqlxa.WithColumns()})
		if err != nil {
			return err
		}
		defer j.close()
		for i, r := range recs {
			if err := j.sinks[0].Write(ctx, []byte(r), source.Origin{Name: "t", Num: int64(i)}); err != nil {
				return err
			}
		}
		_, err = j.coord.Checkpoint(ctx, json.RawMessage(`0`), true)
		return err
	}
	if err := write(mysqlxa.Insert, `{"k":"a","n":1,"amount":1.5}`, `{"k":"b","n":2,"amount":"2","note":"x"}`); err == nil {
		t.Fatal("a string for a DECIMAL column was accepted")
	} else if !errors.Is(err, source.ErrBadRecord) || !strings.Contains(err.Error(), "t:1") || !strings.Contains(err.Error(), "amount") {
		t.Fatalf("error %q does not name the record t:1 and column amount", err)
	}
	if err := write(mysqlxa.Insert, `{"k":"a","n":1,"amount":1.5}`, `{"k":"b","n":2,"amount":2,"note":"x"}`); err != nil {
		t.Fatal(err)
	}
	if err := write(mysqlxa.Insert, `{"k":"a","n":1,"amount":1.5}`); err == nil {
		t.Fatal("insert of a duplicate key succeeded")
	}
	e.checkNoBranches()
	if err := write(mysqlxa.Upsert, `{"k":"a","n":10,"amount":3}`, `{"k":"c","n":5,"amount":0.01,"note":"new"}`); err != nil {
		t.Fatal(err)
	}
	got := e.totals()
	want := map[string]total{"a": {10, "3.00"}, "b": {2, "2.00"}, "c": {5, "0.01"}}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %+v, want %+v", k, got[k], w)
		}
	}
	var note string
	if err := e.admin.QueryRow("SELECT note FROM " + e.table + " WHERE k = 'c'").Scan(&note); err != nil || note != "new" {
		t.Errorf("note of c = %q, %v", note, err)
	}
	e.checkNoBranches()
}

func TestBadRecords(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	j, err := e.start(srv.Open(t, e.db), 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	s := j.sinks[0]
	ctx := context.Background()
	for i, c := range []struct{ rec, want string }{
		{`[1,2]`, "JSON object"},
		{`{"k":`, "not JSON"},
		{`{"n":1}`, "missing key column"},
		{`{"k":"a","n":"one"}`, "want an integer"},
		{`{"k":"a","n":1.5}`, "not an integer"},
		{`{"k":null,"n":1}`, "NOT NULL"},
		{`{"k":7,"n":1}`, "want a string"},
	} {
		origin := source.Origin{Name: "in/bad.jsonl", Num: int64(i + 1)}
		err := s.Write(ctx, []byte(c.rec), origin)
		var re *mysqlxa.RecordError
		if !errors.As(err, &re) || re.Origin != origin || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), origin.String()) {
			t.Errorf("Write(%s) = %v; want a RecordError naming %s and %q", c.rec, err, origin, c.want)
		}
	}
	// The sink stays usable: good records after bad ones are written.
	if err := s.Write(ctx, []byte(`{"k":"ok","n":2,"amount":1,"unknown":true}`), source.Origin{Name: "x", Num: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.coord.Checkpoint(ctx, json.RawMessage(`0`), true); err != nil {
		t.Fatal(err)
	}
	if got := e.totals(); len(got) != 1 || got["ok"] != (total{2, "1.00"}) {
		t.Fatalf("table = %v", got)
	}
}

func TestEmptyCheckpoints(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	j, err := e.start(srv.Open(t, e.db), 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if _, err := j.coord.Checkpoint(ctx, json.RawMessage(`0`), false); err != nil {
			t.Fatal(err)
		}
	}
	j.close()
	var markers int
	if err := e.admin.QueryRow("SELECT COUNT(*) FROM " + e.db + ".filesink_xa_marker WHERE checkpoint BETWEEN 1 AND 3 AND row_count = 0").Scan(&markers); err != nil {
		t.Fatal(err)
	}
	if markers != 3 {
		t.Fatalf("%d marker rows for 3 empty checkpoints", markers)
	}
	e.checkExactlyOnce(0)
}

// Old marker rows are deleted, inside a later branch, once no retained
// checkpoint record can need them.
func TestMarkerCleanup(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	db := srv.Open(t, e.db)
	j, err := e.start(db, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.run(60, 5); err != nil { // checkpoints 1..12
		t.Fatal(err)
	}
	j.close()
	j2, err := e.start(db, 1, nil, nil) // the sweep sees records 10..12
	if err != nil {
		t.Fatal(err)
	}
	if err := j2.run(70, 5); err != nil {
		t.Fatal(err)
	}
	j2.close()
	var lo int
	if err := e.admin.QueryRow("SELECT MIN(checkpoint) FROM " + e.db + ".filesink_xa_marker").Scan(&lo); err != nil {
		t.Fatal(err)
	}
	if lo != 10 {
		t.Fatalf("oldest marker row is of checkpoint %d, want 10 (the oldest retained record)", lo)
	}
	e.checkExactlyOnce(70)
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	e.exec("CREATE TABLE " + e.db + ".nokey (a INT, s VARCHAR(10)) ENGINE=InnoDB")
	e.exec("CREATE TABLE " + e.db + ".myisam (a INT PRIMARY KEY) ENGINE=MyISAM")
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		table string
		opts  []mysqlxa.Option
		want  string
	}{
		{"no job", e.table, nil, "Job is required"},
		{"missing", e.db + ".missing", []mysqlxa.Option{mysqlxa.WithJob("j")}, "does not exist"},
		{"myisam", e.db + ".myisam", []mysqlxa.Option{mysqlxa.WithJob("j")}, "MyISAM"},
		{"upsert nokey", e.db + ".nokey", []mysqlxa.Option{mysqlxa.WithJob("j"), mysqlxa.WithMode(mysqlxa.Upsert)}, "no primary key"},
		{"increment text", e.table, []mysqlxa.Option{mysqlxa.WithJob("j"), mysqlxa.WithMode(mysqlxa.Increment)}, "not numeric"},
		{"unknown column", e.table, []mysqlxa.Option{mysqlxa.WithJob("j"), mysqlxa.WithColumns("k", "nope")}, "no column"},
		{"unknown mode", e.table, []mysqlxa.Option{mysqlxa.WithJob("j"), mysqlxa.WithMode("merge")}, "unknown mode"},
		{"bad job id", e.table, []mysqlxa.Option{mysqlxa.WithJob("j k")}, "job id"},
		{"long job id", e.table, []mysqlxa.Option{mysqlxa.WithJob(strings.Repeat("j", 60))}, "longer than 64"},
	} {
		_, err := mysqlxa.New(ctx, e.admin, c.table, c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New %s (table %s) = %v, want an error containing %q", c.name, c.table, err, c.want)
		}
	}
	// Increment over the numeric columns only is fine.
	if _, err := mysqlxa.New(ctx, e.admin, e.table, mysqlxa.WithJob("j"), mysqlxa.WithMode(mysqlxa.Increment), mysqlxa.WithColumns("n", "amount")); err != nil {
		t.Fatal(err)
	}
}

func TestOpenHidesPassword(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	cfg := srv.Config("test")
	cfg.Passwd = "hunter2-secret"
	_, err := mysqlxa.Open(context.Background(), cfg.FormatDSN(), "counters", mysqlxa.WithJob("j"))
	if err == nil {
		t.Fatal("wrong password accepted")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error shows the password: %v", err)
	}
	if _, err := mysqlxa.Open(context.Background(), "root:hunter2-secret@bad((", "t", mysqlxa.WithJob("j")); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("bad DSN: %v", err)
	}
}
