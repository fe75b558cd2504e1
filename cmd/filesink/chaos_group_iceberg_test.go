//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/internal/testutil/icebergtest"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
)

// icebergGroupEvents is the number of chaos events of TestChaosGroupIceberg.
const icebergGroupEvents = 60

// icebergMember is one `filesink run --group` process of the test.
type icebergMember struct {
	cmd    *exec.Cmd
	stderr string // its log file
	done   chan struct{}
	err    error
	killed bool // SIGKILL
	termed bool // SIGTERM: it hands its lanes off and exits 0
}

// TestChaosGroupIceberg runs `filesink run --group` processes into an
// Iceberg table on MinIO with the MariaDB catalog, over a topic of 6
// partitions with aborted transactions, and hits them with random events:
// kill -9, a pause past the session timeout (a zombie that wakes up and
// commits late), scale up (a new process) and scale down (SIGTERM). After
// the events the processes finish the bounded job; the independent reader
// must find every committed record once and no aborted one, each lane
// checkpoint in one snapshot.
func TestChaosGroupIceberg(t *testing.T) {
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	maria := mariadbtest.Shared(t)
	dsn := maria.DSN(maria.NewDatabase(t))
	bin := buildCLI(t)
	rng := rand.New(rand.NewPCG(chaosSeed(t), 32))
	const parts = 6
	broker := kafkatest.StartBroker(t, kafkatest.BuildBroker(t), []kafkatest.Topic{{Name: "orders", Partitions: parts}},
		"-group-min-session-timeout", "500ms", "-fetch-delay", "400ms")
	in := produceKafkaInput(t, broker.Addr, "orders", parts, 60000, true, 8<<10, rng)
	bucket := srv.NewBucket(t)
	schema := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"word","type":"string"},{"name":"num","type":"int64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--source", fmt.Sprintf("kafka://%s/orders?fetch_max_partition_bytes=%d", broker.Addr, 8<<10), "--group", "g", "--bounded",
		"--sink", "iceberg://shop.orders", "--warehouse", "s3://" + bucket + "/wh", "--catalog", "mysql://" + dsn, "--schema", schema,
		"--checkpoint-interval", "200ms", "--session-timeout", "1s", "--rebalance-timeout", "3s",
		"--s3-endpoint", srv.Endpoint(), "--s3-path-style", "--progress", "off"}
	t.Logf("each process: filesink %s", strings.Join(args, " "))
	logs := t.TempDir()
	var members []*icebergMember
	started := 0
	start := func() {
		started++
		name := filepath.Join(logs, "p"+strconv.Itoa(started)+".log")
		f, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		m := &icebergMember{cmd: exec.Command(bin, args...), stderr: name, done: make(chan struct{})}
		m.cmd.Stderr = f
		if err := m.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { m.err = m.cmd.Wait(); f.Close(); close(m.done) }()
		members = append(members, m)
	}
	for range 3 {
		start()
	}
	counts := map[string]int{}
	finished := false
	for i := 0; i < icebergGroupEvents && !finished; i++ {
		time.Sleep(time.Duration(150+rng.IntN(450)) * time.Millisecond)
		members, finished = reapIcebergMembers(t, members)
		live := len(members)
		switch k := rng.IntN(100); {
		case live == 0 || (k < 20 && live < 4):
			counts["scale-up"]++
			start()
		case k < 60:
			counts["kill-9"]++
			m := members[rng.IntN(live)]
			m.killed = true
			m.cmd.Process.Signal(syscall.SIGKILL)
			start()
		case k < 80:
			counts["pause"]++
			m := members[rng.IntN(live)]
			m.cmd.Process.Signal(syscall.SIGSTOP)
			time.AfterFunc(3*time.Second, func() { m.cmd.Process.Signal(syscall.SIGCONT) })
		case live > 1:
			counts["scale-down"]++
			m := members[rng.IntN(live)]
			m.termed = true
			m.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	t.Logf("events: %v; %d processes", counts, started)
	time.Sleep(3 * time.Second) // every paused process is woken
	deadline := time.After(5 * time.Minute)
	for len(members) > 0 {
		select {
		case <-members[0].done:
			members, _ = reapIcebergMembers(t, members)
		case <-deadline:
			t.Fatalf("%d process(es) did not finish the bounded job within 5 minutes", len(members))
		}
	}
	// A last process finishes what the last ones left (a lane whose
	// owner was stopped by SIGTERM is handed off, not finished).
	r := startRun(t, bin, args, 0, 3*time.Minute)
	if r.outcome != exitedOK {
		t.Fatalf("final run: %s\n%s", r.state, lastLines(r.stderr, 20))
	}
	checkIcebergGroupTable(t, maria, dsn, srv.Client(t), bucket, in)
}

// reapIcebergMembers drops the processes that exited; one that exited
// with an error it was not killed for fails the test. finished reports
// that one exited 0 (the job is done).
func reapIcebergMembers(t *testing.T, members []*icebergMember) (live []*icebergMember, finished bool) {
	t.Helper()
	for _, m := range members {
		select {
		case <-m.done:
			if m.err == nil {
				finished = finished || !m.termed
			} else if !m.killed && !strings.Contains(m.err.Error(), "signal") {
				log, _ := os.ReadFile(m.stderr)
				t.Fatalf("process %d exited on its own: %v\n%s", m.cmd.Process.Pid, m.err, lastLines(string(log), 20))
			}
		default:
			live = append(live, m)
		}
	}
	return live, finished
}

// checkIcebergGroupTable reads the table with the independent reader:
// every committed input record once, no aborted one, each lane
// checkpoint in one snapshot.
func checkIcebergGroupTable(t *testing.T, maria *mariadbtest.Server, dsn string, client *s3api.Client, bucket string, in *kafkaInput) {
	t.Helper()
	loc := icebergCatalog{"mysql", dsn}.metadataLocation(t, "shop", "orders")
	tbl := icebergtest.MustRead(t, loc, icebergtest.WithS3(client, bucket, "wh/shop.db/orders"), icebergtest.WithColumns("id"))
	if len(tbl.Errors) > 0 || len(tbl.DuplicatePaths) > 0 {
		t.Fatalf("the reader found %v, paths twice: %v", tbl.Errors, tbl.DuplicatePaths)
	}
	got := map[int64]int{}
	for _, row := range tbl.Data {
		var r struct {
			ID json.Number `json:"id"`
		}
		if err := json.Unmarshal(row, &r); err != nil {
			t.Fatal(err)
		}
		id, err := strconv.ParseInt(strings.Trim(string(r.ID), `"`), 10, 64)
		if err != nil {
			t.Fatalf("row %s: %v", row, err)
		}
		got[id]++
	}
	missing, twice, aborted := 0, 0, 0
	for id, rec := range in.byID {
		switch n := got[id]; {
		case !rec.committed && n > 0:
			aborted++
		case rec.committed && n == 0:
			missing++
		case n > 1:
			twice++
		}
	}
	if missing+twice+aborted > 0 || int(tbl.Rows) != in.committed {
		t.Errorf("table: %d rows for %d committed records: %d missing, %d more than once, %d aborted ones", tbl.Rows, in.committed, missing, twice, aborted)
	}
	seen := laneSnapshots(t, tbl)
	t.Logf("%d rows; %d snapshots hold %d lane checkpoints; %d live files", tbl.Rows, len(tbl.Snapshots), len(seen), len(tbl.Files))
}
