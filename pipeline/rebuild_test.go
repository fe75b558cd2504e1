package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"testing"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/internal/testutil/testjob"
	"github.com/filesink/filesink/vfs"
	"github.com/filesink/filesink/vfs/crashfs"
)

// removeStaging deletes the staging files (in-progress and pending part
// files) of the output, as a store that lost them would, and returns how
// many it deleted.
func removeStaging(t *testing.T, fsys vfs.FS) int {
	t.Helper()
	n := 0
	var walk func(dir string)
	walk = func(dir string) {
		ents, err := fsys.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			name := path.Join(dir, e.Name())
			switch {
			case e.Name() == "_filesink":
			case e.IsDir():
				walk(name)
			case strings.HasPrefix(e.Name(), "."):
				if err := fsys.Remove(name); err != nil {
					t.Fatal(err)
				}
				n++
			}
		}
	}
	walk(testjob.Out)
	return n
}

// TestRebuildAfterLostStaging crashes a job right after a checkpoint is
// decided (its parts staged, not yet published; others in progress), loses
// every staging file, and recovers: with the source's replayer every
// record ends up exactly once; without it, recovery stops on data loss
// and publishes nothing the checkpoint did not decide.
func TestRebuildAfterLostStaging(t *testing.T) {
	ctx := context.Background()
	crash := errors.New("crash")
	for _, job := range []testjob.Job{
		{Count: 600, Keys: 3, Bucket: "field:key"},
		{Count: 600, Keys: 2, Bucket: "field:key", Compression: "zstd", Parallelism: 2},
		{Count: 400, Compression: "gzip", RollOnCkpt: true, CheckpointEvery: 75},
	} {
		t.Run(fmt.Sprintf("%s-%s-p%d", job.Bucket, job.Compression, job.Parallelism), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed(t), 3))
			mem := crashfs.New()
			n := 0
			j := job
			j.Hook = func(p string) error {
				if p == "decided" {
					if n++; n > 2 {
						return crash
					}
				}
				return nil
			}
			if err := j.Run(ctx, mem); !errors.Is(err, crash) {
				t.Fatalf("run did not crash: %v", err)
			}
			base := mem.CrashClone(rng.Int64())
			lost := func() *crashfs.FS {
				fs := base.CrashCloneSynced()
				if removeStaging(t, fs) == 0 {
					t.Fatal("no staging file to lose")
				}
				return fs
			}
			// Without a replayer: data loss, nothing published beyond.
			if err := job.Run(ctx, lost()); !errors.Is(err, committer.ErrDataLoss) {
				t.Fatalf("recovery without a replayer: %v, want data loss", err)
			} else if !strings.Contains(err.Error(), "cannot be rebuilt") {
				t.Errorf("the data-loss error does not say the part cannot be rebuilt: %v", err)
			}
			var rebuilt int64
			j = job
			j.Replay, j.Rebuilt = true, &rebuilt
			fs := lost()
			if err := j.Run(ctx, fs); err != nil {
				t.Fatalf("recovery with the replayer: %v\n%s", err, fs)
			}
			if rebuilt == 0 {
				t.Error("no part was rebuilt")
			}
			mustExactlyOnce(t, fs, job.Count, "after the rebuild")
		})
	}
}
