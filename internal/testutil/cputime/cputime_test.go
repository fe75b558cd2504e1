package cputime

import (
	"runtime"
	"testing"
)

func TestProcessGrows(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix only")
	}
	before, err := Process()
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 50_000_000 {
		x += i ^ x
	}
	after, err := Process()
	if err != nil {
		t.Fatal(err)
	}
	if after <= before || x == 1 {
		t.Fatalf("CPU time went from %v to %v over a busy loop", before, after)
	}
}
