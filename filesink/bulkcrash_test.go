package filesink_test

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/filesink/filesink/filesink/bulk"
	"github.com/filesink/filesink/internal/testutil/testjob"
)

func crashSeed(t *testing.T) uint64 {
	s := uint64(rand.Int64())
	if v := os.Getenv("FILESINK_CRASH_SEED"); v != "" {
		s, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (set FILESINK_CRASH_SEED to reproduce)", s)
	return s
}

// The crash loop of the foundation (testjob.CrashLoop: a crash at every
// filesystem operation, power loss, crashed recovery, power loss, clean
// run) with bulk part files: every record exactly once, and every
// published file complete (DecodeFakeBulk fails without the footer).
func TestBulkCrashLoopFake(t *testing.T) {
	jobs := map[string]testjob.Job{
		"fake":            {Count: 500, Bulk: testjob.FakeBulk{RowGroupBytes: 1 << 10}, PartSize: 16 << 10},
		"fake-buckets-p2": {Count: 500, Keys: 3, Bucket: "field:key", Parallelism: 2, Bulk: testjob.FakeBulk{RowGroupBytes: 2 << 10}},
	}
	for name, job := range jobs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := testjob.CrashLoop(t, job, rand.New(rand.NewPCG(crashSeed(t), 0)))
			t.Logf("swept %d fault points", k)
		})
	}
}

// The same crash loop with Parquet part files (filesink/bulk, pqarrow):
// every published file opens with a Parquet reader and has the PAR1 footer,
// every record exactly once.
func TestBulkCrashLoopParquet(t *testing.T) {
	schema, err := bulk.ParseSchema([]byte(testjob.GenSchema))
	if err != nil {
		t.Fatal(err)
	}
	format := func(opts ...bulk.Option) *bulk.ParquetFormat {
		f, err := bulk.Parquet(schema, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	jobs := map[string]testjob.Job{
		"parquet": {Count: 400, Bulk: format(bulk.WithRowGroupRows(40)), PartSize: 12 << 10},
		"parquet-buckets-p2": {Count: 400, Keys: 3, Bucket: "field:key", Parallelism: 2, CheckpointEvery: 150,
			Bulk: format(bulk.WithRowGroupRows(30))},
	}
	for name, job := range jobs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := testjob.CrashLoop(t, job, rand.New(rand.NewPCG(crashSeed(t), 0)), testjob.ParquetReader())
			t.Logf("swept %d fault points", k)
		})
	}
}
