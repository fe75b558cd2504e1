package filesink_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/vfs"
)

// TestClaimOutput: of many jobs claiming one empty output at once, one
// gets it and every other one a *ClaimError naming the winner's state; the
// winner claims it again without writing; a takeover writes the next
// version naming the job it replaced.
func TestClaimOutput(t *testing.T) {
	ctx := t.Context()
	out := localfs.New(vfs.OS{}, t.TempDir())
	if c, err := filesink.ReadClaim(ctx, out); c != nil || err != nil {
		t.Fatalf("claim of an empty output = %+v, %v", c, err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = filesink.ClaimOutput(ctx, out, "out", string(rune('a'+i)), "state-"+string(rune('a'+i)), false)
		})
	}
	wg.Wait()
	var winner string
	for i, err := range errs {
		var ce *filesink.ClaimError
		switch {
		case err == nil && winner == "":
			winner = string(rune('a' + i))
		case err == nil:
			t.Fatalf("jobs %s and %c both claimed the output", winner, 'a'+i)
		case !errors.As(err, &ce) || !errors.Is(err, filesink.ErrClaimed):
			t.Fatalf("job %c: %v; want a *ClaimError", 'a'+i, err)
		}
	}
	if winner == "" {
		t.Fatal("no job claimed the output")
	}
	for i, err := range errs {
		if err != nil && !strings.Contains(err.Error(), "state-"+winner) {
			t.Errorf("job %c's refusal does not name the owner's state state-%s: %v", 'a'+i, winner, err)
		}
	}
	c, err := filesink.ClaimOutput(ctx, out, "out", winner, "moved", false)
	if err != nil || c.Version != 1 || c.Job != winner {
		t.Fatalf("the owner's claim again = %+v, %v", c, err)
	}
	if err := filesink.CheckClaim(ctx, out, "out", "z", "state-z", false); !errors.Is(err, filesink.ErrClaimed) {
		t.Errorf("CheckClaim of another job = %v", err)
	}
	if err := filesink.CheckClaim(ctx, out, "out", "z", "state-z", true); err != nil {
		t.Errorf("CheckClaim of a takeover = %v", err)
	}
	c, err = filesink.ClaimOutput(ctx, out, "out", "z", "state-z", true)
	if err != nil || c.Version != 2 || c.Job != "z" || c.TakenFrom != winner {
		t.Fatalf("takeover = %+v, %v", c, err)
	}
	if err := filesink.CheckClaim(ctx, out, "out", winner, "state-"+winner, false); !errors.Is(err, filesink.ErrClaimed) {
		t.Errorf("the former owner after a takeover: %v; want refused", err)
	}
}
