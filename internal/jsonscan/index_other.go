//go:build !amd64 || purego

package jsonscan

// indexSpecialBlocks has no vector version here: IndexSpecial scans the
// whole slice itself.
func indexSpecialBlocks(b []byte, high bool) (idx, scanned int) { return -1, 0 }

// utf8Blocks has no vector version here: invalidUTF8 checks the whole
// slice itself.
func utf8Blocks(p []byte) (ok bool, checked int) { return true, 0 }
