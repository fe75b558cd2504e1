package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	icecommit "github.com/filesink/filesink/committer/iceberg"
	"github.com/filesink/filesink/filesink/bulk"
	"github.com/filesink/filesink/internal/testutil/icebergtest"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
	"github.com/filesink/filesink/sinks/icebergsink"
)

// filesink run with a checkpoint every 3000 records makes ten small data
// files per partition; filesink compact rewrites them into one per
// partition, printing one line; the independent reader finds every
// record once, each lane checkpoint still in one snapshot; a further run
// of the finished job appends nothing, and a second compact finds nothing
// to do.
func TestCLIIcebergCompact(t *testing.T) {
	for _, c := range []struct {
		name   string
		query  string
		bucket []string
		files  int
	}{
		{"unpartitioned", "", nil, 1},
		{"by key", "&keys=2", []string{"--bucket", "field:key"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			wh := filepath.Join(t.TempDir(), "lake")
			const count = 30000
			run := append([]string{"run", "--source", fmt.Sprintf("gen://?count=%d%s", count, c.query), "--sink", "iceberg://demo.events", "--warehouse", wh,
				"--checkpoint-interval", "5ms", "--checkpoint-records", "3000"}, c.bucket...)
			mustRun(t, run...)
			cat := icebergSQLite(filepath.Join(wh, "catalog.db"))
			before := checkIcebergTable(t, cat, "demo", "events", count)
			if len(before.Files) < 10*c.files {
				t.Fatalf("the job wrote %d data files; want at least %d", len(before.Files), 10*c.files)
			}
			r := mustRun(t, "compact", "--sink", "iceberg://demo.events", "--warehouse", wh)
			after := checkIcebergTable(t, cat, "demo", "events", count)
			checkCompacted(t, r.stdout, before, after, c.files)
			stateDir := filepath.Join(wh, "demo.db", "events", "_filesink")
			checkIcebergOnce(t, after, localManifests(t, filepath.Join(stateDir, "manifests")))

			mustRun(t, run...)
			if again := checkIcebergTable(t, cat, "demo", "events", count); len(again.Snapshots) != len(after.Snapshots) {
				t.Errorf("a further run of the finished job made %d snapshots", len(again.Snapshots)-len(after.Snapshots))
			}
			if r := mustRun(t, "compact", "--sink", "iceberg://demo.events", "--warehouse", wh); !strings.Contains(r.stdout, "nothing to compact") {
				t.Errorf("a second compact: %q", r.stdout)
			}
		})
	}
}

// checkCompacted checks compact's line and the table it compacted: files
// live data files, one per partition value, and the compaction's replace
// as the current snapshot.
func checkCompacted(t *testing.T, stdout string, before, after *icebergtest.Table, files int) {
	t.Helper()
	want := fmt.Sprintf("compact: demo.events: %d data files, ", len(before.Files))
	if !strings.HasPrefix(stdout, want) || strings.Count(stdout, "\n") != 1 || !strings.Contains(stdout, "replace snapshot "+after.CurrentSnapshotID+",") {
		t.Errorf("stdout %q: want one line starting %q and naming snapshot %s", stdout, want, after.CurrentSnapshotID)
	}
	last := after.Snapshots[len(after.Snapshots)-1]
	if last.ID != after.CurrentSnapshotID || last.Operation != "replace" || last.Summary["filesink.compaction"] == "" {
		t.Errorf("the current snapshot is %+v; want the compaction's replace", last)
	}
	partitions := map[string]bool{}
	for _, f := range after.Files {
		partitions[fmt.Sprint(f.Partition)] = true
	}
	if len(after.Files) != files || len(partitions) != files {
		t.Errorf("%d data files in %d partitions after compaction, want %d in %d", len(after.Files), len(partitions), files, files)
	}
}

// filesink compact, again and again while a job appends to the table:
// every record once, each lane checkpoint in one snapshot, and a further
// run of the finished job appends nothing.
func TestCLIIcebergCompactWhileAppending(t *testing.T) {
	wh := filepath.Join(t.TempDir(), "lake")
	const count = 200000
	createGenTable(t, wh, table.Identifier{"demo", "events"})
	run := []string{"run", "--source", fmt.Sprintf("gen://?count=%d", count), "--sink", "iceberg://demo.events", "--warehouse", wh,
		"--checkpoint-interval", "5ms", "--checkpoint-records", "5000"}
	done := make(chan cliResult)
	go func() { done <- cli(t, run...) }()
	var job *cliResult
	compacted := 0
	for job == nil {
		select {
		case r := <-done:
			job = &r // one more compaction, after the job
		default:
		}
		r := cli(t, "compact", "--sink", "iceberg://demo.events", "--warehouse", wh, "--target-size", "64MiB")
		if r.code != 0 {
			t.Errorf("compact while appending: %v", r)
		}
		if strings.Contains(r.stdout, "replace snapshot") {
			compacted++
			t.Log(strings.TrimSpace(r.stdout))
		}
	}
	if job.code != 0 {
		t.Fatalf("the job: %v", job)
	}
	cat := icebergSQLite(filepath.Join(wh, "catalog.db"))
	tbl := checkIcebergTable(t, cat, "demo", "events", count)
	t.Logf("%d compactions committed; %d snapshots, %d live data files", compacted, len(tbl.Snapshots), len(tbl.Files))
	if compacted == 0 {
		t.Error("no compaction committed")
	}
	checkIcebergOnce(t, tbl, localManifests(t, filepath.Join(wh, "demo.db", "events", "_filesink", "manifests")))
	mustRun(t, run...)
	if again := checkIcebergTable(t, cat, "demo", "events", count); len(again.Snapshots) != len(tbl.Snapshots) {
		t.Errorf("a further run of the finished job made %d snapshots", len(again.Snapshots)-len(tbl.Snapshots))
	}
}

// Mistakes get one line and exit 2; a table that is not there, exit 1.
func TestCLICompactMistakes(t *testing.T) {
	wh := filepath.Join(t.TempDir(), "lake")
	createGenTable(t, wh, table.Identifier{"demo", "events"})
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--sink", "s3://bucket/out", "--warehouse", wh}, 2, "compact: --sink s3://bucket/out: compact rewrites Iceberg tables; give iceberg://NAMESPACE.TABLE"},
		{[]string{"--sink", t.TempDir(), "--warehouse", wh}, 2, "compact rewrites Iceberg tables"},
		{[]string{"--warehouse", wh}, 2, "compact: --sink is required"},
		{[]string{"--sink", "iceberg://demo.events"}, 2, "compact: --warehouse is required"},
		{[]string{"--sink", "iceberg://events", "--warehouse", wh}, 2, "want iceberg://NAMESPACE.TABLE"},
		{[]string{"--sink", "iceberg://demo.events", "--warehouse", wh, "--target-size", "big"}, 2, "--target-size \"big\""},
		{[]string{"--sink", "iceberg://demo.events", "--warehouse", filepath.Join(t.TempDir(), "typo")}, 2, "no embedded catalog"},
		{[]string{"--sink", "iceberg://demo.missing", "--warehouse", wh}, 1, "demo.missing"},
	} {
		r := cli(t, append([]string{"compact"}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("compact %v: %v; want exit %d and one line with %q", c.args, r, c.code, c.want)
		}
	}
	if r := cli(t, "compact", "--help"); r.code != 0 || !strings.Contains(r.stdout, "Usage: filesink compact --sink iceberg://") || !strings.Contains(r.stdout, "-target-size") {
		t.Errorf("compact --help: %v", r)
	}
	if r := cli(t, "help"); !strings.Contains(r.stdout, "filesink compact --sink iceberg://") {
		t.Errorf("filesink help does not list compact: %v", r)
	}
}

// createGenTable makes the table ident of the generator's records in the
// embedded catalog of the warehouse wh, as filesink run would.
func createGenTable(t *testing.T, wh string, ident table.Identifier) {
	t.Helper()
	doc, err := bulk.ParseSchema([]byte(genIcebergSchema))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := icebergsink.TableSchema(doc)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := icecommit.OpenCatalog(t.Context(), "", wh, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := icecommit.EnsureTable(t.Context(), cat, ident, schema); err != nil {
		t.Fatal(err)
	}
}

// failingCommits is a catalog whose commits fail without reaching it: a
// compaction through it dies before its commit, as a killed one does.
type failingCommits struct{ *icecommit.Catalog }

func (f failingCommits) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	tbl, err := f.Catalog.LoadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, f), nil
}

func (f failingCommits) CommitTable(context.Context, table.Identifier, []table.Requirement, []table.Update) (table.Metadata, string, error) {
	return nil, "", errors.New("killed")
}

// On MinIO with the MariaDB catalog: a compaction dies before its commit,
// leaving its file and journal object; filesink compact then rewrites the
// job's files, deletes that orphan and the journal, and the independent
// reader finds every record once in one data file.
func TestCLIIcebergCompactS3(t *testing.T) {
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	dsn := mariadbtest.Shared(t).DSN(mariadbtest.Shared(t).NewDatabase(t))
	bucket, client := srv.NewBucket(t), srv.Client(t)
	const count, prefix = 30000, "wh/demo.db/events"
	flags := []string{"--sink", "iceberg://demo.events", "--warehouse", "s3://" + bucket + "/wh", "--catalog", "mysql://" + dsn,
		"--s3-endpoint", srv.Endpoint(), "--s3-path-style"}
	mustRun(t, append([]string{"run", "--source", fmt.Sprintf("gen://?count=%d", count), "--checkpoint-records", "3000"}, flags...)...)
	cat := icebergCatalog{"mysql", dsn}
	read := icebergtest.WithS3(client, bucket, prefix)
	before := checkIcebergTable(t, cat, "demo", "events", count, read)

	props := iceberg.Properties{"s3.endpoint": srv.Endpoint(), "s3.force-virtual-addressing": "false"}
	ic, err := icecommit.OpenCatalog(t.Context(), "mysql://"+dsn, "s3://"+bucket+"/wh", props)
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	if _, err := icecommit.Compact(t.Context(), failingCommits{ic}, table.Identifier{"demo", "events"}, icecommit.CompactOptions{MaxAttempts: 1}); err == nil {
		t.Fatal("a compaction whose commit fails succeeded")
	}
	journal := s3Keys(t, client, bucket, prefix+"/"+icecommit.CompactDir+"/")
	if len(journal) != 1 {
		t.Fatalf("journal objects %v, want the dead compaction's one", journal)
	}

	r := mustRun(t, append([]string{"compact"}, flags...)...)
	after := checkIcebergTable(t, cat, "demo", "events", count, read)
	checkCompacted(t, r.stdout, before, after, 1)
	if !strings.Contains(r.stdout, "; 1 orphan file(s) of unfinished compactions deleted") {
		t.Errorf("stdout %q: want the dead compaction's file deleted", r.stdout)
	}
	if left := s3Keys(t, client, bucket, prefix+"/"+icecommit.CompactDir+"/"); len(left) != 0 {
		t.Errorf("journal objects left: %v", left)
	}
	live := map[string]bool{}
	for _, f := range before.Files {
		live[f.Path] = true
	}
	for _, f := range after.Files {
		live[f.Path] = true
	}
	for _, k := range s3Keys(t, client, bucket, prefix+"/data/") {
		if !live["s3://"+bucket+"/"+k] {
			t.Errorf("data object %s is neither a job's file nor the compacted one", k)
		}
	}
}
