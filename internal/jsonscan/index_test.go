package jsonscan

import (
	"math/rand/v2"
	"testing"
)

// indexSpecialRef is IndexSpecial one byte at a time.
func indexSpecialRef(b []byte, high bool) int {
	for i, c := range b {
		if c == '"' || c == '\\' || c < 0x20 || high && c >= 0x80 {
			return i
		}
	}
	return len(b)
}

// TestIndexSpecial compares IndexSpecial with the byte-wise reference on
// every position of one special byte of each kind in slices of every
// length up to 100 (the vector, 8-byte and byte-wise parts and their
// boundaries), with the bytes around it the ones closest to special.
func TestIndexSpecial(t *testing.T) {
	specials := []byte{'"', '\\', 0x00, 0x1f, 0x80, 0xff, 0xc3}
	fills := []byte{'a', 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f}
	for _, high := range []bool{false, true} {
		for n := 0; n <= 100; n++ {
			for _, f := range fills {
				b := make([]byte, n)
				for i := range b {
					b[i] = f
				}
				if got, want := IndexSpecial(b, high), indexSpecialRef(b, high); got != want {
					t.Fatalf("high=%v len %d fill %#x: got %d, want %d", high, n, f, got, want)
				}
				for pos := 0; pos < n; pos++ {
					for _, s := range specials {
						b[pos] = s
						if got, want := IndexSpecial(b, high), indexSpecialRef(b, high); got != want {
							t.Fatalf("high=%v len %d fill %#x: %#x at %d: got %d, want %d", high, n, f, s, pos, got, want)
						}
						b[pos] = f
					}
				}
			}
		}
	}
}

// TestIndexSpecialRandom checks random slices, with an offset start so
// that unaligned loads are used.
func TestIndexSpecialRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := rng.IntN(300)
		b := make([]byte, n+7)[rng.IntN(8):][:n]
		for i := range b {
			b[i] = byte(0x20 + rng.IntN(0x5f))
			if b[i] == '"' || b[i] == '\\' {
				b[i] = 'x'
			}
		}
		for range rng.IntN(3) {
			if n > 0 {
				b[rng.IntN(n)] = byte(rng.IntN(256))
			}
		}
		for _, high := range []bool{false, true} {
			if got, want := IndexSpecial(b, high), indexSpecialRef(b, high); got != want {
				t.Fatalf("high=%v %q: got %d, want %d", high, b, got, want)
			}
		}
	}
}

func FuzzIndexSpecial(f *testing.F) {
	f.Add([]byte(`abcdefghijklmnopqrstuvwxyz0123456789"`), false)
	f.Fuzz(func(t *testing.T, b []byte, high bool) {
		if got, want := IndexSpecial(b, high), indexSpecialRef(b, high); got != want {
			t.Fatalf("high=%v %q: got %d, want %d", high, b, got, want)
		}
	})
}

func BenchmarkIndexSpecial(b *testing.B) {
	buf := make([]byte, 1000)
	for i := range buf {
		buf[i] = 'a' + byte(i%26)
	}
	buf[len(buf)-1] = '"'
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		IndexSpecial(buf, false)
	}
}
