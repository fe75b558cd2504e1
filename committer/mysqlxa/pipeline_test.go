package mysqlxa_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/source"
)

// The real pipeline overlaps a checkpoint's decide and commit with the next
// records, and calls Commit from the goroutine that calls Write: rows of the
// next checkpoint must not wait for the row locks of the prepared branch
// (increment mode, few keys). A crash at a decided checkpoint is recovered
// by running the job again; the sums of ids per key are exact.
func TestPipelineIncrement(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	e.exec("CREATE TABLE " + e.db + ".sums (`key` VARCHAR(32) NOT NULL PRIMARY KEY, id BIGINT NOT NULL) ENGINE=InnoDB")
	const count, keys = 3000, 5
	gen := source.GenConfig{Count: count, Keys: keys, Size: 80}
	open := func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
		return source.NewGenerator(gen, pos)
	}
	run := func(hook func(string) error) (pipeline.Result, error) {
		db := srv.Open(t, e.db)
		s, err := mysqlxa.New(context.Background(), db.DB, "sums", mysqlxa.WithMode(mysqlxa.Increment), mysqlxa.WithJob(e.job),
			mysqlxa.WithBatchRows(50), mysqlxa.WithZombieGrace(100e6), mysqlxa.WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		opts := []committer.Option{}
		if hook != nil {
			opts = append(opts, committer.WithHook(hook))
		}
		res, err := pipeline.Run(context.Background(), pipeline.Config{OpenSource: open, Store: e.store,
			Sinks: []pipeline.Sink{s}, CheckpointEvery: 250, BatchSize: 50, CheckpointInterval: -1,
			CommitterOptions: opts, Logger: testLogger(t)})
		if err != nil {
			db.Crash()
		}
		return res, err
	}
	if _, err := run(crashOn("decided", 4)); err == nil || !strings.Contains(err.Error(), "simulated crash") {
		t.Fatalf("first run = %v, want the simulated crash", err)
	}
	res, err := run(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.EndOfInput || res.Restored != 4 {
		t.Errorf("result %+v: want end of input after restoring checkpoint 4", res)
	}
	want := map[string]int64{}
	for i := range int64(count) {
		want["k-"+itoa(i%keys)] += i
	}
	rows, err := e.admin.Query("SELECT `key`, id FROM " + e.db + ".sums")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		got[k] = v
	}
	if len(got) != len(want) {
		t.Errorf("%d keys, want %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("sum of ids of %s = %d, want %d", k, got[k], w)
		}
	}
	e.checkNoBranches()
}

func itoa(i int64) string { b, _ := json.Marshal(i); return string(b) }
