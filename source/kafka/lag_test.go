package kafka

import (
	"context"
	"errors"
	"maps"
	"testing"
)

// LastStableOffsets gives every partition's last stable offset: past an
// aborted transaction's marker and a committed one's, 0 for an empty
// partition, and before a transaction still open. An unknown topic is an
// *UnknownTopicError.
func TestLastStableOffsets(t *testing.T) {
	gt := newGroupTest(t)
	c := gt.c
	c.MustProduce(t, "t", 0, "a", "b")                 // 0 1
	c.MustProduceTxn(t, "x0", false, "t", 0, "x", "y") // 2 3, abort marker 4
	c.MustProduceTxn(t, "x1", true, "t", 1, "c")       // 0, commit marker 1
	c.MustProduce(t, "t", 3, "d")                      // 0
	c.MustOpenTxn(t, "B", "t", 3, "e")                 // 1, left open
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	got, err := LastStableOffsets(ctx, testConfig(c, "t"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[LaneID]int64{{"t", 0}: 5, {"t", 1}: 2, {"t", 2}: 0, {"t", 3}: 1}
	if !maps.Equal(got, want) {
		t.Fatalf("LastStableOffsets = %v, want %v", got, want)
	}
	_, err = LastStableOffsets(ctx, testConfig(c, "nope"))
	if _, ok := errors.AsType[*UnknownTopicError](err); !ok {
		t.Fatalf("LastStableOffsets of an unknown topic: %v, want an *UnknownTopicError", err)
	}
}
