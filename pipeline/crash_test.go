package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/filesink/filesink/internal/testutil/testjob"
	"github.com/filesink/filesink/vfs/crashfs"
)

func seed(t *testing.T) uint64 {
	s := uint64(rand.Int64())
	if v := os.Getenv("FILESINK_CRASH_SEED"); v != "" {
		s, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (set FILESINK_CRASH_SEED to reproduce)", s)
	return s
}

func mustExactlyOnce(t *testing.T, fs *crashfs.FS, count int64, what string) {
	t.Helper()
	if p := testjob.Check(fs, count); len(p) > 0 {
		t.Fatalf("%s: not exactly once:\n%v\nfilesystem:\n%s", what, p, fs)
	}
}

// TestCrashLoop crashes the whole job (source, sink, checkpoint store) at
// the k-th filesystem operation for k = 1, 2, ... until a run completes
// without reaching k. Each crash is followed by a power loss (a crash clone
// keeping the synced state plus a random share of the rest), a recovery that
// is itself crashed at a random operation, a second power loss, and a clean
// run to the end. Every record must be published exactly once.
func TestCrashLoop(t *testing.T) {
	jobs := map[string]testjob.Job{
		"plain":         {Count: 600},
		"buckets-zstd":  {Count: 600, Keys: 3, Bucket: "field:key", Compression: "zstd", Parallelism: 2},
		"gzip-ckptroll": {Count: 400, Compression: "gzip", RollOnCkpt: true, CheckpointEvery: 75},
	}
	for name, job := range jobs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed(t), 0))
			k := testjob.CrashLoop(t, job, rng)
			t.Logf("swept %d fault points", k)
		})
	}
}

// TestNamedCrashPoints crashes at each named point of the protocol on the
// real file sink, loses power (worst case: only synced state survives, and a
// random share), recovers, and checks exactly-once. Points with prefix
// "recover:" crash the recovery after a crash at "decided", and "twice"
// crashes the same recovery twice in a row from the same record.
func TestNamedCrashPoints(t *testing.T) {
	points := []string{
		"prepared:filesink/0", "phase1", "decided", "committed:1", "committed:2", "phase2", "pruned",
		"recover:committed:1", "recover:phase2", "recover:restored", "recover:swept", "twice",
	}
	ctx := context.Background()
	crash := errors.New("crash")
	for _, p := range points {
		for _, synced := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/synced=%v", p, synced), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed(t), 1))
				lose := func(fs *crashfs.FS) *crashfs.FS {
					if synced {
						return fs.CrashCloneSynced()
					}
					return fs.CrashClone(rng.Int64())
				}
				at := func(point string, after int) func(string) error {
					n := 0
					return func(s string) error {
						if s == point {
							if n++; n > after {
								return crash
							}
						}
						return nil
					}
				}
				job := testjob.Job{Count: 500, Keys: 2, Bucket: "field:key"}
				first, recoverAt := p, ""
				switch {
				case p == "twice":
					first, recoverAt = "decided", "recover:committed:1"
				case len(p) > 8 && p[:8] == "recover:":
					first, recoverAt = "decided", p
				}
				mem := crashfs.New()
				j := job
				j.Hook = at(first, 2) // crash in the third checkpoint
				if err := j.Run(ctx, mem); !errors.Is(err, crash) {
					t.Fatalf("run did not crash at %s: %v", first, err)
				}
				fs := lose(mem)
				if recoverAt != "" {
					times := 1
					if p == "twice" {
						times = 2
					}
					for range times {
						j := job
						j.Hook = at(recoverAt, 0)
						if err := j.Run(ctx, fs); !errors.Is(err, crash) {
							t.Fatalf("recovery did not crash at %s: %v", recoverAt, err)
						}
						fs = lose(fs)
					}
				}
				if err := job.Run(ctx, fs); err != nil {
					t.Fatalf("final run: %v\n%s", err, fs)
				}
				mustExactlyOnce(t, fs, job.Count, "after crash at "+p)
				// Running again over finished input publishes nothing.
				before := testjob.Files(fs)
				if err := job.Run(ctx, fs); err != nil {
					t.Fatal(err)
				}
				after := testjob.Files(fs)
				for name, size := range after {
					if before[name] != size && name[:len(testjob.Out)+2] != testjob.Out+"/_" {
						t.Errorf("second run changed %s (%d -> %d bytes)", name, before[name], size)
					}
				}
			})
		}
	}
}
