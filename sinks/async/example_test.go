package async_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/sinks/async"
	"github.com/filesink/filesink/source"
)

// A user's client plugs in as a Sender. Phase 1 (Prepare) returns once the
// client acknowledged every closed batch; the open batch's records go into
// the checkpoint's state, and a final checkpoint sends them too.
func Example() {
	send := async.SenderFunc(func(ctx context.Context, b *async.Batch) error {
		var recs []string
		for _, r := range b.Records {
			recs = append(recs, string(r))
		}
		fmt.Printf("batch %d (%s): %s\n", b.Seq, b.Reason, strings.Join(recs, " "))
		return nil // nil: the target has every record of b
	})
	s, err := async.New(send, 0, async.WithWorkers(1), async.WithMaxRecords(3), async.WithLinger(0), async.WithSinkID("orders"))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, r := range []string{"a", "b", "c", "d", "e"} {
		if err := s.Write(ctx, []byte(r), source.Origin{}); err != nil {
			panic(err)
		}
	}
	snap, err := committer.PrepareNow(ctx, s, 1, false)
	if err != nil {
		panic(err)
	}
	fmt.Printf("checkpoint 1 state: %s\n", snap.State)
	if _, err := committer.PrepareNow(ctx, s, 2, true); err != nil {
		panic(err)
	}
	// Output:
	// batch 0 (count): a b c
	// checkpoint 1 state: {"checkpoint":1,"seq":1,"ord":3,"tail":["ZA==","ZQ=="]}
	// batch 1 (checkpoint): d e
}
