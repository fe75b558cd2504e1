//go:build !amd64 || purego

package jsonscan

// indexSpecialBlocks has no vector version here: IndexSpecial scans the
// whole slice itself.
func indexSpecialBlocks(b []byte, high bool) (idx, scanned int) { return -1, 0 }
