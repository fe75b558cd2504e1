package pipeline_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/sinks/async"
)

func validHTTP() pipeline.HTTPSpec {
	return pipeline.HTTPSpec{Workers: 1, BatchRecords: 1, Timeout: time.Second, Retries: 3}
}

func TestJobValidate(t *testing.T) {
	given := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	mysql := pipeline.MySQLSpec{Table: "t", Mode: "insert", BatchRows: 10}
	cases := []struct {
		name string
		job  pipeline.Job
		want string // "" valid; else a part of the message
	}{
		{"file defaults", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1}, ""},
		{"mysql flag on files", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Given: given("mysql-table")}, "--mysql-table applies to a mysql:// sink only"},
		{"http flag on files", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Given: given("http-workers")}, "--http-workers applies to an http(s):// sink only"},
		{"direct-io on s3", pipeline.Job{Source: "in", Sink: "s3://b/p", Parallelism: 1, Given: given("direct-io")}, "--direct-io applies to local sinks only"},
		{"parallelism", pipeline.Job{Source: "in", Sink: "out"}, "--parallelism must be at least 1"},
		{"retain 0 given", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Given: given("retain")}, "--retain 0: at least one checkpoint record must be kept"},
		{"retain negative", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Retain: -1}, "--retain -1"},
		{"retain not given", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1}, ""},
		{"retain 1", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Retain: 1, Given: given("retain")}, ""},
		{"bulk flag on jsonl", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Format: "jsonl", Given: given("schema")}, "--schema applies to --format parquet or arrow only"},
		{"compression on parquet", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Format: "parquet", Given: given("compression")}, "use --parquet-compression"},
		{"parquet flag on arrow", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Format: "arrow", Given: given("parquet-stats")}, "--parquet-stats does not apply to --format arrow"},
		{"bounded without kafka", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Given: given("bounded")}, "--bounded and --start apply to kafka:// sources only"},
		{"bounded with kafka", pipeline.Job{Source: "kafka://h:1/t", Sink: "out", Parallelism: 1, Given: given("bounded")}, ""},
		{"max-record-size", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, MaxRecordSize: 64 << 20, Given: given("max-record-size")}, ""},
		{"max-record-size stdin", pipeline.Job{Source: "-", Sink: "out", Parallelism: 1, MaxRecordSize: 1, Given: given("max-record-size")}, ""},
		{"max-record-size mysql", pipeline.Job{Source: "file:///in", Sink: "mysql://x", State: "st", Parallelism: 1, MySQL: mysql, MaxRecordSize: 1 << 20, Given: given("max-record-size")}, ""},
		{"max-record-size kafka", pipeline.Job{Source: "kafka://h:1/t", Sink: "out", Parallelism: 1, MaxRecordSize: 1 << 20, Given: given("max-record-size")}, "--max-record-size applies to sources of lines"},
		{"max-record-size gen", pipeline.Job{Source: "gen://?count=1", Sink: "out", Parallelism: 1, MaxRecordSize: 1 << 20, Given: given("max-record-size")}, "--max-record-size applies to sources of lines"},
		{"max-record-size too large", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, MaxRecordSize: 2 << 30, Given: given("max-record-size")}, "want from 1 byte to 1GiB"},
		{"max-record-size zero", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Given: given("max-record-size")}, "want from 1 byte to 1GiB"},
		{"invalid-utf8 replace", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, InvalidUTF8: "replace", Given: given("invalid-utf8")}, ""},
		{"invalid-utf8 unknown", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, InvalidUTF8: "drop", Given: given("invalid-utf8")}, "--invalid-utf8 must be reject or replace"},
		{"invalid-utf8 on csv", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Format: "csv", InvalidUTF8: "replace", Given: given("invalid-utf8")}, "--invalid-utf8 applies to --format jsonl only"},
		{"invalid-utf8 on mysql", pipeline.Job{Source: "in", Sink: "mysql://x", State: "st", Parallelism: 1, MySQL: mysql, InvalidUTF8: "replace", Given: given("invalid-utf8")}, "--invalid-utf8 applies to file and S3 sinks"},
		{"guarantee unknown", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Guarantee: "twice"}, "--guarantee must be"},
		{"at-most-once on files", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Guarantee: pipeline.AtMostOnce}, "a file or S3 sink supports exactly-once"},
		{"memory limit", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, MemoryLimit: "lots"}, "--memory-limit: want auto, none or a size"},
		{"max open files", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, MaxOpenFiles: 16, Given: given("max-open-files")}, ""},
		{"max open files low", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, MaxOpenFiles: 15, Given: given("max-open-files")}, "--max-open-files 15 is below the minimum 16"},
		{"max open files 0 given", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, Given: given("max-open-files")}, "--max-open-files 0 is below the minimum 16"},
		{"max open files per subtask", pipeline.Job{Source: "in", Sink: "s3://b/p", Parallelism: 20, MaxOpenFiles: 16}, "for each of the 20 subtasks"},
		{"max open files on mysql", pipeline.Job{Source: "in", Sink: "mysql://x", State: "st", Parallelism: 1, MySQL: mysql, Given: given("max-open-files")}, "--max-open-files applies to file and S3 sinks"},
		{"mysql valid", pipeline.Job{Source: "in", Sink: "mysql://x", State: "st", Parallelism: 1, MySQL: mysql}, ""},
		{"mysql skip", pipeline.Job{Source: "in", Sink: "mysql://x", State: "st", Parallelism: 1, MySQL: mysql, OnBadRecord: "skip", Given: given("on-bad-record", "mysql-dead-letter-table")}, ""},
		{"mysql dead-letter table without skip", pipeline.Job{Source: "in", Sink: "mysql://x", State: "st", Parallelism: 1, MySQL: mysql, Given: given("mysql-dead-letter-table")}, "--mysql-dead-letter-table applies with --on-bad-record skip only"},
		{"dead-letter table on files", pipeline.Job{Source: "in", Sink: "out", Parallelism: 1, OnBadRecord: "skip", Given: given("mysql-dead-letter-table")}, "--mysql-dead-letter-table applies to a mysql:// sink only"},
		{"on-bad-record unknown", pipeline.Job{Source: "in", Sink: "mysql://x", State: "st", Parallelism: 1, MySQL: mysql, OnBadRecord: "ignore"}, "--on-bad-record must be fail or skip"},
		{"on-bad-record on http", pipeline.Job{Source: "in", Sink: "http://h/p", State: "st", Parallelism: 1, HTTP: validHTTP(), OnBadRecord: "skip", Given: given("on-bad-record")}, "--on-bad-record does not apply to an http(s):// sink"},
		{"mysql without state", pipeline.Job{Source: "in", Sink: "mysql://x", Parallelism: 1, MySQL: mysql}, "a mysql:// sink needs --state"},
		{"file flag on mysql", pipeline.Job{Source: "in", Sink: "mysql://x", State: "st", Parallelism: 1, MySQL: mysql, Given: given("format")}, "--format applies to file and S3 sinks, not to a mysql:// sink"},
		{"mysql at-least-once", pipeline.Job{Source: "in", Sink: "mysql://x", State: "st", Parallelism: 1, MySQL: mysql, Guarantee: pipeline.AtLeastOnce}, "a mysql:// sink supports exactly-once (two-phase commit) only"},
		{"mysql mode", pipeline.Job{Source: "in", Sink: "mysql://x", State: "st", Parallelism: 1, MySQL: pipeline.MySQLSpec{Table: "t", Mode: "merge", BatchRows: 1}}, "--mysql-mode must be"},
		{"mysql upsert parallel without key", pipeline.Job{Source: "in", Sink: "mysql://x", State: "st", Parallelism: 2, MySQL: pipeline.MySQLSpec{Table: "t", Mode: "upsert", BatchRows: 1}}, "needs --mysql-key"},
		{"http valid", pipeline.Job{Source: "in", Sink: "http://h/p", State: "st", Parallelism: 1, HTTP: validHTTP(), Given: given("job")}, ""},
		{"file flag on http", pipeline.Job{Source: "in", Sink: "http://h/p", State: "st", Parallelism: 1, HTTP: validHTTP(), Given: given("prefix")}, "--prefix does not apply to an http(s):// sink"},
		{"http exactly-once", pipeline.Job{Source: "in", Sink: "https://h/p", State: "st", Parallelism: 1, HTTP: validHTTP(), Guarantee: pipeline.ExactlyOnce}, "an HTTP endpoint has no transaction"},
		{"http at-most-once retries", pipeline.Job{Source: "in", Sink: "http://h/p", State: "st", Parallelism: 1, HTTP: validHTTP(), Guarantee: pipeline.AtMostOnce, Given: given("http-retries")}, "--http-retries must be 1"},
		{"http workers", pipeline.Job{Source: "in", Sink: "http://h/p", State: "st", Parallelism: 1}, "--http-workers must be at least 1"},
	}
	for _, c := range cases {
		err := c.job.Validate()
		var se *pipeline.SpecError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: Validate = %v; want nil", c.name, err)
		case c.want != "" && (!errors.As(err, &se) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: Validate = %v; want a SpecError containing %q", c.name, err, c.want)
		}
	}
}

func TestJobMemoryLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	cases := []struct {
		format, limit string
		budget, want  int64
	}{
		{"jsonl", "auto", 64 << 20, 0},
		{"parquet", "auto", 64 << 20, 64 << 20 * pipeline.BulkHeapFactor},
		{"arrow", "", 1 << 20, pipeline.MinAutoMemoryLimit},
		{"parquet", "none", 64 << 20, 0},
		{"jsonl", "1GiB", 64 << 20, 1 << 30},
	}
	for _, c := range cases {
		j := pipeline.Job{Format: c.format, MemoryLimit: c.limit, BufferBudget: c.budget}
		got, err := j.MemoryLimitBytes()
		if err != nil || got != c.want {
			t.Errorf("%s %q budget %d: MemoryLimitBytes = %d, %v; want %d", c.format, c.limit, c.budget, got, err, c.want)
		}
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	j := pipeline.Job{Format: "parquet", MemoryLimit: "auto", BufferBudget: 64 << 20}
	if got, err := j.MemoryLimitBytes(); got != 0 || err != nil {
		t.Errorf("with GOMEMLIMIT set: MemoryLimitBytes = %d, %v; want 0 (the runtime's)", got, err)
	}
}

func TestJobGuarantee(t *testing.T) {
	for _, c := range []struct {
		sink, g string
		want    async.Guarantee
		onRoll  bool
	}{
		{"http://h/p", "", async.AtLeastOnce, false},
		{"http://h/p", pipeline.AtMostOnce, async.AtMostOnce, false},
		{"out", pipeline.AtLeastOnce, async.AtLeastOnce, true},
		{"s3://b/p", pipeline.AtLeastOnce, async.AtLeastOnce, true},
		{"out", pipeline.ExactlyOnce, 0, false},
	} {
		j := pipeline.Job{Sink: c.sink, Guarantee: c.g}
		got, err := j.DeliveryGuarantee()
		if err != nil || got != c.want || j.PublishOnRoll() != c.onRoll {
			t.Errorf("%s %q: DeliveryGuarantee = %v, %v, PublishOnRoll %v; want %v, %v", c.sink, c.g, got, err, j.PublishOnRoll(), c.want, c.onRoll)
		}
	}
}

// TestJobSelfFeeding: a job whose sink or state is inside its file source,
// or whose source is inside its sink, would read its own output on its next
// run; Validate refuses it with one line naming both.
func TestJobSelfFeeding(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name                string
		source, sink, state string
		want                string // "" valid
	}{
		{"sink is the source", in, in, "", "--sink " + in + " is inside --source " + in},
		{"sink inside the source", in, filepath.Join(in, "out"), "", "is inside --source"},
		{"sink inside the source as file://", "file://" + in, "file://" + in + "/out", "", "is inside --source"},
		{"sink inside the source through a link", in, filepath.Join(link, "out"), "", "is inside --source"},
		{"sink inside the source, not yet made", in, filepath.Join(in, "a", "b"), "", "is inside --source"},
		{"source inside the sink", filepath.Join(dir, "out", "in"), filepath.Join(dir, "out"), "", "--source " + filepath.Join(dir, "out", "in") + " is inside --sink"},
		{"state inside the source", in, filepath.Join(dir, "out"), filepath.Join(in, "state"), "--state " + filepath.Join(in, "state") + " is inside --source"},
		{"state inside the source, mysql sink", in, "mysql://u@tcp(h:1)/db", filepath.Join(in, "state"), "--state"},
		{"siblings", in, filepath.Join(dir, "inside"), filepath.Join(dir, "state"), ""},
		{"generator", "gen://?count=1", in, "", ""},
		{"stdin", "-", in, "", ""},
		{"s3 sink", in, "s3://b/p", "", ""},
	}
	for _, c := range cases {
		j := pipeline.Job{Source: c.source, Sink: c.sink, State: c.state, Parallelism: 1}
		if strings.HasPrefix(c.sink, "mysql://") {
			j.MySQL = pipeline.MySQLSpec{Table: "t", Mode: "insert", BatchRows: 10}
		}
		err := j.Validate()
		var se *pipeline.SpecError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: Validate = %v; want nil", c.name, err)
		case c.want != "" && (!errors.As(err, &se) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: Validate = %v; want a SpecError containing %q", c.name, err, c.want)
		}
	}
}

func TestOpenPartsPerSubtask(t *testing.T) {
	for _, c := range []struct{ max, parallelism, want int }{
		{160, 1, 160}, {160, 3, 53}, {16, 16, 1}, {16, 0, 16},
	} {
		if got := pipeline.OpenPartsPerSubtask(c.max, c.parallelism); got != c.want {
			t.Errorf("OpenPartsPerSubtask(%d, %d) = %d, want %d", c.max, c.parallelism, got, c.want)
		}
	}
	if got, want := pipeline.OpenPartsPerSubtask(0, 2), max(filesink.DefaultMaxOpenParts()/2, 1); got != want {
		t.Errorf("OpenPartsPerSubtask(0, 2) = %d, want half the default, %d", got, want)
	}
}
