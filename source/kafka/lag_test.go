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
	want := produceTxnMix(t, gt.c)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	got, err := LastStableOffsets(ctx, testConfig(gt.c, "t"))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("LastStableOffsets = %v, want %v", got, want)
	}
	_, err = LastStableOffsets(ctx, testConfig(gt.c, "nope"))
	if _, ok := errors.AsType[*UnknownTopicError](err); !ok {
		t.Fatalf("LastStableOffsets of an unknown topic: %v, want an *UnknownTopicError", err)
	}
}
