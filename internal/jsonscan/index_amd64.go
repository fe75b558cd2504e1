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

//go:noescape
func validUTF8AVX2(p []byte) bool

// utf8Blocks reports whether the first len(p)&^31 bytes of p hold no
// invalid UTF-8, a sequence cut at their end aside, and how many bytes it
// checked: 0 when it could not use AVX2 or p is short.
func utf8Blocks(p []byte) (ok bool, checked int) {
	if !hasAVX2 || len(p) < 64 {
		return true, 0
	}
	return validUTF8AVX2(p), len(p) &^ 31
}
