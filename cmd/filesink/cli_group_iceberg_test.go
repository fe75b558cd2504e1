package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filesink/filesink/internal/testutil/icebergtest"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/internal/testutil/pgtest"
)

// Group mode into an Iceberg table on MinIO with the PostgreSQL catalog:
// two processes (in process) read a bounded topic of 6 partitions to its
// end and both exit 0; the independent reader finds every record once,
// each lane checkpoint in one snapshot, and fewer snapshots than lane
// checkpoints (each process gathers the lanes it decided into one append).
func TestGroupIceberg(t *testing.T) {
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bucket := srv.NewBucket(t)
	dsn := pgtest.NewDatabase(t)
	const parts = 6
	kc := kafkatest.Start(t, kafkatest.Topic{Name: "orders", Partitions: parts})
	want := map[string]bool{}
	for p := range int32(parts) {
		var vals []string
		for i := range 300 {
			v := fmt.Sprintf("%d-%d", p, i)
			vals = append(vals, fmt.Sprintf(`{"id":%q,"n":%d}`, v, i))
			want[v] = true
		}
		kc.MustProduce(t, "orders", p, vals...)
	}
	schema := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"string","nullable":false},{"name":"n","type":"int64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--source", "kafka://" + kc.Bootstrap() + "/orders", "--group", "g", "--bounded",
		"--sink", "iceberg://shop.orders", "--warehouse", "s3://" + bucket + "/wh", "--catalog", dsn, "--schema", schema,
		"--checkpoint-interval", "100ms", "--session-timeout", "6s", "--s3-endpoint", srv.Endpoint(), "--s3-path-style"}
	done := make(chan cliResult, 2)
	for range 2 {
		go func() { done <- cli(t, args...) }()
	}
	for range 2 {
		if r := <-done; r.code != 0 {
			t.Fatalf("group member: %v", r)
		}
	}
	loc := icebergCatalog{"pgx", dsn}.metadataLocation(t, "shop", "orders")
	tbl := icebergtest.MustRead(t, loc, icebergtest.WithS3(srv.Client(t), bucket, "wh/shop.db/orders"), icebergtest.WithColumns("id"))
	if len(tbl.Errors) > 0 || len(tbl.DuplicatePaths) > 0 {
		t.Fatalf("the reader found %v, paths twice: %v", tbl.Errors, tbl.DuplicatePaths)
	}
	got := map[string]int{}
	for _, row := range tbl.Data {
		var r struct{ ID string }
		if err := json.Unmarshal(row, &r); err != nil {
			t.Fatal(err)
		}
		got[r.ID]++
	}
	for id := range want {
		if got[id] != 1 {
			t.Errorf("record %s is in the table %d times", id, got[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d distinct records in the table, want %d", len(got), len(want))
	}
	seen := laneSnapshots(t, tbl)
	for key := range seen {
		if !strings.HasPrefix(key, "orders/") {
			t.Errorf("a snapshot names lane checkpoint %q, want orders/PARTITION@N", key)
		}
	}
	laneCheckpoints := len(seen)
	t.Logf("%d snapshots hold %d lane checkpoints, %d live files", len(tbl.Snapshots), laneCheckpoints, len(tbl.Files))
	if len(tbl.Snapshots) >= laneCheckpoints {
		t.Errorf("%d snapshots for %d lane checkpoints: the lanes of a process are not gathered", len(tbl.Snapshots), laneCheckpoints)
	}
	v := mustRun(t, "verify", "--sink", "iceberg://shop.orders", "--warehouse", "s3://"+bucket+"/wh", "--catalog", dsn,
		"--s3-endpoint", srv.Endpoint(), "--s3-path-style")
	if !strings.Contains(v.stdout, fmt.Sprintf("%d lane(s) whose snapshots match", parts)) {
		t.Errorf("verify of the group's table: %v", v)
	}
}
