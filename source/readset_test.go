package source

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func cmpReadFile(a, b readFile) int {
	switch {
	case a.path != b.path:
		return int(int64(a.path) - int64(b.path))
	case a.size != b.size:
		if a.size < b.size {
			return -1
		}
		return 1
	}
	return int(int64(a.head) - int64(b.head))
}

// TestReadSetDifference: the difference of two summaries of files read
// lists exactly the elements added and removed (a file changed is one of
// each, with the same path id), or says it cannot; with up to 12
// differences it always can (for these seeded cases), and what it lists
// is never wrong. The summary survives encode and decode.
func TestReadSetDifference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	failed := map[int]int{}
	for trial := range 500 {
		var then []readFile
		for i := range rng.IntN(1500) {
			then = append(then, newReadFile(fmt.Sprintf("t%d/f%06d.jsonl", trial, i), rng.Int64N(1<<30), []byte(fmt.Sprint(i))))
		}
		nAdd, nRemove, nChange := rng.IntN(10), rng.IntN(min(len(then), 8)+1), rng.IntN(min(len(then), 8)+1)
		now := slices.Clone(then)
		var added, removed []readFile
		for range nRemove {
			i := rng.IntN(len(now))
			removed = append(removed, now[i])
			now = slices.Delete(now, i, i+1)
		}
		for range min(nChange, len(now)) {
			i := rng.IntN(len(now))
			e := now[i]
			if slices.Contains(added, e) {
				continue
			}
			removed = append(removed, e)
			switch rng.IntN(3) {
			case 0:
				e.size += uint64(1 + rng.IntN(100)) // grew
			case 1:
				e.head = rng.Uint32() // rewritten
			default:
				e.size, e.head = uint64(rng.IntN(10)), rng.Uint32()
			}
			now[i] = e
			added = append(added, e)
		}
		for i := range nAdd {
			e := newReadFile(fmt.Sprintf("t%d/new%03d.jsonl", trial, i), int64(i), nil)
			now = append(now, e)
			added = append(added, e)
		}
		var thenSet, cur readSet
		for _, e := range then {
			thenSet.add(e, 1)
		}
		for _, e := range now {
			cur.add(e, 1)
		}
		enc, err := decodeReadSet(thenSet.n, thenSet.encode())
		if err != nil || enc != thenSet {
			t.Fatalf("encode/decode of %d files: %v", len(then), err)
		}
		gotAdded, gotRemoved, ok := cur.sub(&enc).decode()
		if !ok {
			failed[len(added)+len(removed)]++
			continue
		}
		for _, l := range [][]readFile{added, removed, gotAdded, gotRemoved} {
			slices.SortFunc(l, cmpReadFile)
		}
		if !slices.Equal(gotAdded, added) || !slices.Equal(gotRemoved, removed) {
			t.Fatalf("trial %d: listed %v added, %v removed; want %v, %v", trial, gotAdded, gotRemoved, added, removed)
		}
	}
	for d, n := range failed {
		if d <= 12 {
			t.Errorf("%d differences of %d elements could not be listed", n, d)
		}
	}
	t.Logf("differences that could not be listed, by size: %v", failed)
}

// TestReadSetSize: the encoded summary stays within what the docs say:
// 1.92 KB for a million files of up to 1 MiB, 3.4 KB at most.
func TestReadSetSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var s readSet
	for i := range 1_000_000 {
		s.add(readFile{path: uint32(fileID(fmt.Sprintf("f%07d", i))), size: uint64(rng.IntN(1 << 20)), head: rng.Uint32()}, 1)
	}
	if n := len(s.encode()); n > 1920 {
		t.Errorf("summary of a million files: %d bytes", n)
	}
	for i := range s.cells {
		s.cells[i].count, s.cells[i].size = 1<<62, 1<<63
	}
	if n := len(s.encode()); n > 3414 {
		t.Errorf("largest summary: %d bytes", n)
	}
}

// FuzzReadSet: any summary decodeReadSet accepts encodes back to one it
// reads as the same, and a difference that decodes lists elements that
// make up the same summary.
func FuzzReadSet(f *testing.F) {
	var s readSet
	for i := range 3 {
		s.add(newReadFile(fmt.Sprint(i), int64(i*1000), []byte{byte(i)}), 1)
	}
	f.Add(int64(3), s.encode())
	f.Add(int64(0), "")
	f.Add(int64(1), "AAAA")
	f.Fuzz(func(t *testing.T, n int64, enc string) {
		s, err := decodeReadSet(n, enc)
		if err != nil {
			return
		}
		again, err := decodeReadSet(n, s.encode())
		if err != nil || again != s {
			t.Fatalf("decode(encode(%q)): %v", enc, err)
		}
		var empty readSet
		added, removed, ok := s.sub(&empty).decode()
		if !ok {
			return
		}
		var r readSet
		for _, e := range added {
			r.add(e, 1)
		}
		for _, e := range removed {
			r.add(e, -1)
		}
		if r != s {
			t.Fatalf("the elements listed of %q make another summary", enc)
		}
	})
}
