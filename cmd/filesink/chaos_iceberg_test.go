package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/internal/testutil/icebergtest"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
)

// icebergChaosKills is the least number of SIGKILLs of an Iceberg chaos run.
const icebergChaosKills = 40

// TestChaosKill9Iceberg kills `filesink run --sink iceberg://...` with
// SIGKILL at random instants, at least 40 times, on a local warehouse
// with the embedded SQLite catalog, and restarts it each time; then the
// independent reader (scripts/icebergread.mjs, not iceberg-go) must find
// every generated record exactly once in the table's current snapshot,
// no data file twice, each lane checkpoint in one snapshot only (one per
// commit manifest of the job), and no data file under the table that no
// snapshot references.
func TestChaosKill9Iceberg(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL and flock")
	}
	bin := buildCLI(t)
	rng := rand.New(rand.NewPCG(chaosSeed(t), 30))
	count := int64(1500000)
	if testing.Short() {
		count = 300000
	}
	wh := filepath.Join(t.TempDir(), "lake")
	tableDir := filepath.Join(wh, "demo.db", "events")
	args := []string{"run", "--source", fmt.Sprintf("gen://?count=%d&seed=%d", count, chaosGenSeed),
		"--sink", "iceberg://demo.events", "--warehouse", wh, "--checkpoint-interval", "100ms",
		"--bucket", "eventtime:ts:hour", "--parallelism", "2"}
	t.Logf("filesink %s", strings.Join(args, " "))
	stateDir := filepath.Join(tableDir, "_filesink")
	killUntilDone(t, bin, args, rng, count, func() int64 { return decidedNext(t, stateDir) })

	cat := icebergSQLite(filepath.Join(wh, "catalog.db"))
	tbl := checkIcebergTable(t, cat, "demo", "events", count)
	checkIcebergOnce(t, tbl, localManifests(t, filepath.Join(stateDir, "manifests")))
	checkNoOrphans(t, tbl, localDataFiles(t, tableDir))
	// The hour partition of each file is the hour of its records.
	for _, f := range tbl.Files {
		if _, ok := f.Partition["ts_hour"]; !ok {
			t.Errorf("data file %s has no ts_hour partition value: %v", f.Path, f.Partition)
			break
		}
	}

	before := len(tbl.Snapshots)
	if r := startRun(t, bin, args, 0, time.Minute); r.outcome != exitedOK {
		t.Fatalf("a further run of the finished job: %s\n%s", r.state, lastLines(r.stderr, 20))
	}
	if after := len(checkIcebergTable(t, cat, "demo", "events", count).Snapshots); after != before {
		t.Errorf("a further run of the finished job made %d snapshots", after-before)
	}
}

// killUntilDone runs the command args again and again, killing it at a
// random instant each time, until it has been killed icebergChaosKills
// times; then it lets a run finish, which must exit 0 with every record
// decided (next returns the decided checkpoint's next record).
func killUntilDone(t *testing.T, bin string, args []string, rng *rand.Rand, count int64, next func() int64) {
	t.Helper()
	lo, hi := chaosKillMin, chaosKillMax
	kills, failures := 0, 0
	var prev int64
	var finished time.Duration
	for run := 1; ; run++ {
		if run > chaosMaxRuns {
			t.Fatalf("no run exited 0 within %d runs (%d kills)", chaosMaxRuns, kills)
		}
		var killAt time.Duration
		switch {
		case kills >= icebergChaosKills:
		case finished > 0:
			killAt = time.Millisecond + time.Duration(rng.Int64N(int64(finished)))
		default:
			killAt = lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
		}
		r := startRun(t, bin, args, killAt, 3*time.Minute)
		n := next()
		t.Logf("run %d: kill at %v: %s after %v; decided next=%d (+%d)", run, killAt.Round(time.Millisecond), r.state, r.dur.Round(time.Millisecond), n, n-prev)
		switch r.outcome {
		case exitedOK:
			if n != count {
				t.Fatalf("run %d exited 0, but its last checkpoint covers %d of %d records; stderr:\n%s", run, n, count, lastLines(r.stderr, 20))
			}
			if kills >= icebergChaosKills {
				t.Logf("%d runs, %d kills", run, kills)
				return
			}
			finished = max(r.dur, 2*time.Millisecond)
		case wasKilled:
			kills++
			if finished == 0 {
				if rk := icebergChaosKills - kills; rk > 0 {
					hi = widenKillWindow(lo, hi, killAt, n-prev, count-n, rk)
				}
			}
		case failed:
			failures++
			t.Errorf("run %d failed on its own (%s); stderr:\n%s", run, r.state, lastLines(r.stderr, 20))
			if failures >= 3 {
				t.FailNow()
			}
		}
		prev = n
	}
}

// icebergCatalog reads a table's metadata location from an SQL catalog's
// iceberg_tables table, the way every SQL catalog keeps it, without
// iceberg-go.
type icebergCatalog struct {
	driver, dsn string
}

func icebergSQLite(path string) icebergCatalog { return icebergCatalog{"sqlite", "file:" + path} }

func (c icebergCatalog) metadataLocation(t *testing.T, ns, name string) string {
	t.Helper()
	db, err := sql.Open(c.driver, c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?"
	if c.driver == "pgx" {
		q = "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = $1 AND table_name = $2"
	}
	var loc string
	if err := db.QueryRowContext(context.Background(), q, ns, name).Scan(&loc); err != nil {
		t.Fatalf("the catalog's metadata location of %s.%s: %v", ns, name, err)
	}
	return loc
}

// checkIcebergTable reads the table's current snapshot with the
// independent reader: every generated id in [0, count) exactly once, no
// path twice, nothing the reader finds wrong.
func checkIcebergTable(t *testing.T, cat icebergCatalog, ns, name string, count int64, opts ...icebergtest.Option) *icebergtest.Table {
	t.Helper()
	loc := cat.metadataLocation(t, ns, name)
	opts = append(opts, icebergtest.WithColumns("id"))
	tbl := icebergtest.MustRead(t, strings.TrimPrefix(loc, "file://"), opts...)
	if len(tbl.Errors) > 0 || len(tbl.DuplicatePaths) > 0 {
		t.Fatalf("the reader found %v, paths twice: %v", tbl.Errors, tbl.DuplicatePaths)
	}
	seen := make([]int, count)
	for _, row := range tbl.Data {
		var r struct {
			ID json.Number `json:"id"`
		}
		if err := json.Unmarshal(row, &r); err != nil {
			t.Fatalf("row %s: %v", row, err)
		}
		id, err := strconv.ParseInt(strings.Trim(string(r.ID), `"`), 10, 64)
		if err != nil || id < 0 || id >= count {
			t.Fatalf("row %s: id out of range", row)
		}
		seen[id]++
	}
	missing, twice := 0, 0
	for id, n := range seen {
		if n == 0 {
			missing++
		} else if n > 1 {
			twice++
			if twice == 1 {
				t.Errorf("record %d is in the table %d times", id, n)
			}
		}
	}
	if missing > 0 || twice > 0 || tbl.Rows != count {
		t.Fatalf("table %s.%s: %d rows, %d of %d records missing, %d more than once", ns, name, tbl.Rows, missing, count, twice)
	}
	return tbl
}

// laneSnapshots returns the snapshot of each lane checkpoint the table's
// snapshot summaries hold ("lane@checkpoint"), failing t for one in two
// snapshots.
func laneSnapshots(t *testing.T, tbl *icebergtest.Table) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, s := range tbl.Snapshots {
		raw, ok := s.Summary["filesink.lanes"]
		if !ok {
			continue
		}
		var lanes map[string]uint64
		if err := json.Unmarshal([]byte(raw), &lanes); err != nil {
			t.Fatalf("snapshot %s: filesink.lanes %q: %v", s.ID, raw, err)
		}
		for lane, cp := range lanes {
			key := fmt.Sprintf("%s@%d", lane, cp)
			if prev, dup := got[key]; dup {
				t.Errorf("checkpoint %d of lane %s is in snapshots %s and %s", cp, lane, prev, s.ID)
			}
			got[key] = s.ID
		}
	}
	return got
}

// checkIcebergOnce checks that each lane checkpoint is in exactly one
// snapshot of the table, and that the snapshots hold exactly the
// checkpoints that published files (manifests: "filesink/SUBTASK@CHECKPOINT").
func checkIcebergOnce(t *testing.T, tbl *icebergtest.Table, manifests map[string]bool) {
	t.Helper()
	got := laneSnapshots(t, tbl)
	for key := range manifests {
		if _, ok := got[key]; !ok {
			t.Errorf("lane checkpoint %s published files (its manifest) but no snapshot holds it", key)
		}
	}
	for key := range got {
		if !manifests[key] {
			t.Errorf("lane checkpoint %s is in a snapshot but has no manifest", key)
		}
	}
	t.Logf("%d snapshots, %d lane checkpoints, %d live data files", len(tbl.Snapshots), len(got), len(tbl.Files))
}

// localManifests lists the commit manifests of a local state directory
// as manifestKey names them.
func localManifests(t *testing.T, dir string) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		if key, ok := manifestKey(e.Name()); ok {
			out[key] = true
		}
	}
	return out
}

// manifestKey reads "<checkpoint>-part-<subtask>.json" as
// "filesink/subtask@checkpoint".
func manifestKey(name string) (string, bool) {
	base, ok := strings.CutSuffix(name, ".json")
	if !ok {
		return "", false
	}
	cp, writer, ok := strings.Cut(base, "-")
	n, err := strconv.ParseUint(cp, 10, 64)
	i := strings.LastIndex(writer, "-")
	if !ok || err != nil || i < 0 {
		return "", false
	}
	return fmt.Sprintf("filesink/%s@%d", writer[i+1:], n), true
}

// localDataFiles lists the files under a local table's data directory.
func localDataFiles(t *testing.T, tableDir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(tableDir, "data"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, "file://"+filepath.ToSlash(p))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkNoOrphans checks that every data file under the table is live.
func checkNoOrphans(t *testing.T, tbl *icebergtest.Table, files []string) {
	t.Helper()
	live := map[string]bool{}
	for _, f := range tbl.Files {
		live[f.Path] = true
	}
	var orphans []string
	for _, f := range files {
		if !live[f] {
			orphans = append(orphans, f)
		}
	}
	sort.Strings(orphans)
	if len(orphans) > 0 {
		t.Errorf("%d data files no snapshot references: %v", len(orphans), orphans[:min(5, len(orphans))])
	}
	if len(files) != len(tbl.Files) {
		t.Errorf("%d data files under the table, %d live", len(files), len(tbl.Files))
	}
}

// TestChaosKill9IcebergS3 is TestChaosKill9Iceberg with the warehouse on
// MinIO and the catalog on the machine's MariaDB.
func TestChaosKill9IcebergS3(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	db := mariadbtest.Shared(t).NewDatabase(t)
	dsn := mariadbtest.Shared(t).DSN(db)
	bin := buildCLI(t)
	rng := rand.New(rand.NewPCG(chaosSeed(t), 31))
	count := int64(1500000)
	if testing.Short() {
		count = 300000
	}
	bucket, client := srv.NewBucket(t), srv.Client(t)
	const prefix = "wh/demo.db/events"
	args := []string{"run", "--source", fmt.Sprintf("gen://?count=%d&seed=%d", count, chaosGenSeed),
		"--sink", "iceberg://demo.events", "--warehouse", "s3://" + bucket + "/wh", "--catalog", "mysql://" + dsn,
		"--s3-endpoint", srv.Endpoint(), "--s3-path-style", "--checkpoint-interval", "100ms", "--bucket", "field:key"}
	t.Logf("filesink %s", strings.Join(args, " "))
	store, err := s3sink.NewStore(client, bucket, prefix+"/_filesink")
	if err != nil {
		t.Fatal(err)
	}
	c := &s3Chaos{t: t, client: client, bucket: bucket, store: store}
	killUntilDone(t, bin, args, rng, count, c.decidedNext)

	cat := icebergCatalog{"mysql", dsn}
	read := icebergtest.WithS3(client, bucket, prefix)
	tbl := checkIcebergTable(t, cat, "demo", "events", count, read)
	manifests := map[string]bool{}
	for _, k := range s3Keys(t, client, bucket, prefix+"/_filesink/manifests/") {
		if key, ok := manifestKey(path.Base(k)); ok {
			manifests[key] = true
		}
	}
	checkIcebergOnce(t, tbl, manifests)
	var files []string
	for _, k := range s3Keys(t, client, bucket, prefix+"/data/") {
		files = append(files, "s3://"+bucket+"/"+k)
	}
	checkNoOrphans(t, tbl, files)
}
