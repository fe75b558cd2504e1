package testjob

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/filesink/filesink/vfs/crashfs"
	"github.com/filesink/filesink/vfs/errorfs"
)

// CrashLoop crashes job at the k-th filesystem operation for k = 1, 2, ...
// until a run completes without reaching k (docs/testing.md, layer 2). Each
// crash is followed by a power loss (a crash clone keeping the synced
// state plus a random share of the rest, from rng), a recovery that is
// itself crashed at a random early operation, a second power loss, and a
// clean run to the end; then every record must be published exactly once
// (read with readers, see Check). It returns the number of fault points
// swept.
func CrashLoop(t *testing.T, job Job, rng *rand.Rand, readers ...FileReader) int64 {
	t.Helper()
	ctx := context.Background()
	check := func(fs *crashfs.FS, what string) {
		t.Helper()
		if p := Check(fs, job.Count, readers...); len(p) > 0 {
			t.Fatalf("%s: not exactly once:\n%v\nfilesystem:\n%s", what, p, fs)
		}
	}
	for k := int64(1); ; k++ {
		mem := crashfs.New()
		efs := errorfs.Wrap(mem, errorfs.OnIndex(k))
		err := job.Run(ctx, efs)
		if !efs.Fired() {
			if err != nil {
				t.Fatalf("k=%d: run without fault failed: %v", k, err)
			}
			check(mem, "no fault")
			return k
		}
		op, _ := efs.FirstInjected()
		if err == nil {
			t.Fatalf("k=%d: fault injected at %v but the run succeeded", k, op)
		}
		if !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("k=%d: error does not wrap the injected fault: %v", k, err)
		}
		clone := mem.CrashClone(rng.Int64())
		efs2 := errorfs.Wrap(clone, errorfs.OnIndex(1+rng.Int64N(40)))
		if err := job.Run(ctx, efs2); err != nil && !efs2.Fired() {
			t.Fatalf("k=%d: recovery run failed without a fault: %v", k, err)
		}
		final := clone.CrashClone(rng.Int64())
		if err := job.Run(ctx, final); err != nil {
			t.Fatalf("k=%d (fault at %v): final run: %v\n%s", k, op, err, final)
		}
		check(final, fmt.Sprintf("k=%d fault at %v", k, op))
	}
}
