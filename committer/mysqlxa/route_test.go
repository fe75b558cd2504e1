package mysqlxa

import (
	"fmt"
	"testing"
)

func TestKeyPartitioner(t *testing.T) {
	part := KeyPartitioner([]string{"word", "day"})
	const n = 4
	seen := map[int]int{}
	for i := range 400 {
		a := fmt.Appendf(nil, `{"word":"w%d","num":1,"day":%d}`, i, i%7)
		b := fmt.Appendf(nil, `{ "day" : %d, "num": 17, "word":"w%d" }`, i%7, i)
		pa, pb := part(a, n), part(b, n)
		if pa != pb {
			t.Fatalf("%s -> %d but %s -> %d: same key, different subtasks", a, pa, b, pb)
		}
		if pa < 0 || pa >= n {
			t.Fatalf("%s -> %d, want [0, %d)", a, pa, n)
		}
		seen[pa]++
	}
	for i := range n {
		if seen[i] < 50 {
			t.Errorf("subtask %d got %d of 400 keys: %v", i, seen[i], seen)
		}
	}
	for _, bad := range []string{`{"word":"x"}`, `not json`, `["word"]`, `{"word":"x","day":1`} {
		if got := part([]byte(bad), n); got != 0 {
			t.Errorf("%s -> %d, want 0 (its sink reports it)", bad, got)
		}
	}
	if got := part([]byte(`{"word":"x","day":1}`), 1); got != 0 {
		t.Errorf("n=1 -> %d", got)
	}
}
