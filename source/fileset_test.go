package source

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFileSetDifference: the difference of two summaries lists exactly the
// files added and the number removed, or says it cannot; with up to 12
// changes it always can (for these seeded cases), and what it lists is
// never wrong.
func TestFileSetDifference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	failed := map[int]int{}
	for trial := range 1000 {
		var then []string
		for i := range rng.IntN(1500) {
			then = append(then, fmt.Sprintf("t%d/f%06d.jsonl", trial, i))
		}
		nAdd, nRemove := rng.IntN(25), rng.IntN(min(len(then), 15)+1)
		now := slices.Clone(then)
		for range nRemove {
			i := rng.IntN(len(now))
			now = slices.Delete(now, i, i+1)
		}
		var added []string
		for i := range nAdd {
			added = append(added, fmt.Sprintf("t%d/new%03d.jsonl", trial, i))
		}
		now = append(now, added...)
		slices.Sort(now)
		slices.Sort(added)
		thenSet := summarize(then)
		enc, err := decodeFileSet(thenSet.n, thenSet.encode())
		if err != nil || enc != thenSet {
			t.Fatalf("encode/decode of %d files: %v", len(then), err)
		}
		cur := summarize(now)
		got, ok := addedFiles(now, &cur, &enc)
		if !ok {
			failed[nAdd+nRemove]++
			continue
		}
		if !slices.Equal(got, added) {
			t.Fatalf("trial %d: listed %q as added, want %q", trial, got, added)
		}
	}
	for d, n := range failed {
		if d <= 12 {
			t.Errorf("%d differences of %d files could not be listed", n, d)
		}
	}
	t.Logf("differences that could not be listed, by size: %v", failed)
}

// TestFileSetSize: the encoded summary stays within what the docs say:
// 2.4 KB at most, about 1.6 KB for a million files.
func TestFileSetSize(t *testing.T) {
	var s fileSet
	for i := range 1_000_000 {
		s.add(fileID(fmt.Sprintf("f%07d", i)), 1)
	}
	if n := len(s.encode()); n > 1700 {
		t.Errorf("summary of a million files: %d bytes", n)
	}
	for i := range s.cells {
		s.cells[i].count = 1 << 62
	}
	if n := len(s.encode()); n > 2400 {
		t.Errorf("largest summary: %d bytes", n)
	}
}
