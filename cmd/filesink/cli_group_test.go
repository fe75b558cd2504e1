package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filesink/filesink/internal/testutil/kafkatest"
)

// Group mode refuses what it cannot run exactly once, with one line
// naming the reason, before it contacts anything.
func TestGroupRefusals(t *testing.T) {
	dir := t.TempDir()
	const kafkaSrc = "kafka://127.0.0.1:1/orders"
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"directory source", []string{"--source", dir, "--sink", "s3://b/out"}, "--group needs a kafka:// source"},
		{"generator source", []string{"--source", "gen://?count=5", "--sink", "s3://b/out"}, "not a gen:// source"},
		{"local sink", []string{"--source", kafkaSrc, "--sink", filepath.Join(dir, "out")}, "--group writes to S3 only"},
		{"MySQL sink", []string{"--source", kafkaSrc, "--sink", "mysql://root@tcp(127.0.0.1:3306)/test", "--mysql-table", "t", "--state", dir}, "a MySQL or HTTP sink"},
		{"HTTP sink", []string{"--source", kafkaSrc, "--sink", "http://127.0.0.1:1/in", "--state", dir}, "a MySQL or HTTP sink"},
		{"local state", []string{"--source", kafkaSrc, "--sink", "s3://b/out", "--state", dir}, "keeps its state on S3"},
		{"at-least-once", []string{"--source", kafkaSrc, "--sink", "s3://b/out", "--guarantee", "at-least-once"}, "exactly-once only"},
		{"parallelism", []string{"--source", kafkaSrc, "--sink", "s3://b/out", "--parallelism", "2"}, "--parallelism does not apply in group mode"},
		{"resume from output", []string{"--source", kafkaSrc, "--sink", "s3://b/out", "--resume-from-output"}, "--resume-from-output does not apply in group mode"},
		{"partitions in the URI", []string{"--source", kafkaSrc + "?partitions=0,1", "--sink", "s3://b/out"}, "partitions= in --source does not apply"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "--group", "g"}, tc.args...)
			r := cli(t, args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2 (a usage error): %v", r.code, r)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Fatalf("stderr is not one line naming %q:\n%s", tc.want, r.stderr)
			}
		})
	}
	r := cli(t, "run", "--source", kafkaSrc, "--sink", "s3://b/out", "--session-timeout", "5s")
	if r.code != 2 || !strings.Contains(r.stderr, "--session-timeout applies in group mode") {
		t.Fatalf("--session-timeout without --group: %v", r)
	}
}

// A job in group mode over a kfake broker and MinIO: two processes (in
// process) read a bounded topic to its end and both exit 0; every record
// is in the output once; `state` lists the lanes and `verify` passes. A
// one-process job on the same state is then refused as another job.
func TestGroupRunStateVerify(t *testing.T) {
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bucket := srv.NewBucket(t)
	kc := kafkatest.Start(t, kafkatest.Topic{Name: "orders", Partitions: 4})
	var want []string
	for p := range int32(4) {
		var vals []string
		for i := range 50 {
			v := fmt.Sprintf(`{"id":"%d-%d"}`, p, i)
			vals = append(vals, v)
			want = append(want, v)
		}
		kc.MustProduce(t, "orders", p, vals...)
	}
	src := "kafka://" + kc.Bootstrap() + "/orders"
	sink := "s3://" + bucket + "/out"
	args := []string{"run", "--source", src, "--group", "g", "--sink", sink, "--bounded", "--checkpoint-interval", "200ms",
		"--session-timeout", "6s", "--s3-endpoint", srv.Endpoint(), "--s3-path-style"}
	done := make(chan cliResult, 2)
	for range 2 {
		go func() { done <- cli(t, args...) }()
	}
	for range 2 {
		if r := <-done; r.code != 0 {
			t.Fatalf("group member: %v", r)
		}
	}
	got := map[string]int{}
	for _, l := range s3OutputLines(t, srv.Client(t), bucket, "out") {
		if !strings.HasPrefix(l.file, "out/part-orders.") {
			t.Errorf("visible object %s is not a lane's part file", l.file)
		}
		got[l.line]++
	}
	for _, w := range want {
		if got[w] != 1 {
			t.Errorf("record %s is in the output %d times", w, got[w])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d distinct records in the output, want %d", len(got), len(want))
	}
	st := mustRun(t, "state", "--state", sink+"/_filesink", "--s3-endpoint", srv.Endpoint(), "--s3-path-style")
	if !strings.Contains(st.stdout, "4 lane(s), 4 finished") || !strings.Contains(st.stdout, "finished") {
		t.Errorf("state does not list 4 finished lanes:\n%s", st.stdout)
	}
	if strings.Contains(st.stdout, "LAG") {
		t.Errorf("state without --source shows a lag column:\n%s", st.stdout)
	}
	// Records produced after the job: with --source, state shows them as
	// the lag of their partition's lane.
	kc.MustProduce(t, "orders", 2, "{}", "{}", "{}", "{}", "{}", "{}", "{}")
	st = mustRun(t, "state", "--state", sink+"/_filesink", "--source", src, "--s3-endpoint", srv.Endpoint(), "--s3-path-style")
	lags := map[string]string{}
	for _, line := range strings.Split(st.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 6 && f[0] == "orders" {
			lags[f[1]] = f[6]
		}
	}
	if want := map[string]string{"0": "0", "1": "0", "2": "7", "3": "0"}; !maps.Equal(lags, want) {
		t.Errorf("state --source: lag per partition %v, want %v:\n%s", lags, want, st.stdout)
	}
	js := mustRun(t, "state", "--state", sink+"/_filesink", "--source", src, "--json", "--s3-endpoint", srv.Endpoint(), "--s3-path-style")
	if !strings.Contains(js.stdout, `"partition":2,`) || strings.Count(js.stdout, `"lag":7`) != 1 || strings.Count(js.stdout, `"lag":0`) != 3 {
		t.Errorf("state --source --json: want lag 7 on one lane and 0 on three:\n%s", js.stdout)
	}
	if r := cli(t, "state", "--state", sink+"/_filesink", "--source", "in.jsonl"); r.code != 2 || !strings.Contains(r.stderr, "only a kafka:// source") {
		t.Errorf("state --source with a file: %v", r)
	}
	v := mustRun(t, "verify", "--sink", sink, "--s3-endpoint", srv.Endpoint(), "--s3-path-style")
	if !strings.Contains(v.stdout, "4 lane state(s)") {
		t.Errorf("verify did not check the lanes:\n%s", v.stdout)
	}
	one := cli(t, "run", "--source", src, "--sink", sink, "--bounded", "--s3-endpoint", srv.Endpoint(), "--s3-path-style")
	if one.code == 0 || !strings.Contains(one.stderr, "group=g") {
		t.Fatalf("a one-process job on the group job's state was not refused as another job: %v", one)
	}
}
