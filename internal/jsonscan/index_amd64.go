//go:build !purego

package jsonscan

import "golang.org/x/sys/cpu"

// hasAVX2 is set once from the CPU's features; never written after.
var hasAVX2 = cpu.X86.HasAVX2

//go:noescape
func indexSpecialAVX2(b []byte, high uint32) int

// indexSpecialBlocks returns the index of the first special byte among
// the first len(b)&^31 bytes of b, or -1 with the number of bytes it
// scanned (0 when it could not use AVX2).
func indexSpecialBlocks(b []byte, high bool) (idx, scanned int) {
	if !hasAVX2 || len(b) < 32 {
		return -1, 0
	}
	var h uint32
	if high {
		h = 0xffffffff
	}
	if i := indexSpecialAVX2(b, h); i >= 0 {
		return i, 0
	}
	return -1, len(b) &^ 31
}
