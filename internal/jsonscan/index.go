package jsonscan

import (
	"encoding/binary"
	"math/bits"
)

// IndexSpecial returns the index of the first byte of b that needs
// attention inside a JSON string: '"', '\\', a control character (below
// 0x20) or, when high is true, a byte of a multi-byte UTF-8 sequence (0x80
// and above). It returns len(b) when there is none. On amd64 with AVX2 it
// looks at 32 bytes per instruction; elsewhere (and with the purego build
// tag) at 8 bytes per step in portable Go. Safe for concurrent use.
func IndexSpecial(b []byte, high bool) int {
	idx, i := indexSpecialBlocks(b, high)
	if idx >= 0 {
		return idx
	}
	var hi uint64
	if high {
		hi = highs
	}
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if m := (specialBits(x) | x&hi) & highs; m != 0 {
			// The lowest flagged byte is the first special one (a borrow
			// can flag bytes above it, never below).
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 || high && c >= 0x80 {
			return i
		}
	}
	return len(b)
}
