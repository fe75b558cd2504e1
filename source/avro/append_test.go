package avro

import (
	"encoding/json"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// appendString writes valid JSON whose value is the string, escaping
// only what JSON requires; invalid UTF-8 becomes U+FFFD, byte by byte.
func TestAppendString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", `""`},
		{"plain ascii", `"plain ascii"`},
		{`say "hi" \ bye`, `"say \"hi\" \\ bye"`},
		{"tab\tnl\ncr\r", `"tab\tnl\ncr\r"`},
		{"nul\x00 bell\x07 esc\x1b del\x7f", `"nul\u0000 bell\u0007 esc\u001b del` + "\x7f" + `"`},
		{"Valparaíso, Tromsø, 東京, 🙂, \u2028", `"Valparaíso, Tromsø, 東京, 🙂, ` + "\u2028" + `"`},
		{"bad \xff\xfe end", `"bad ` + "\uFFFD\uFFFD" + ` end"`},
		{"cut \xe6\x9d", `"cut ` + "\uFFFD\uFFFD" + `"`},
	} {
		got := appendString([]byte("x"), c.in)
		if string(got[1:]) != c.want {
			t.Errorf("appendString(%q) = %s, want %s", c.in, got[1:], c.want)
		}
		var back string
		if err := json.Unmarshal(got[1:], &back); err != nil {
			t.Errorf("appendString(%q) = %s: not JSON: %v", c.in, got[1:], err)
		}
		if want := strings.ToValidUTF8(c.in, "\uFFFD"); utf8.ValidString(c.in) && back != want {
			t.Errorf("appendString(%q) reads back as %q", c.in, back)
		}
	}
}

// appendDecimal writes what math/big makes of the unscaled value, the
// point scale digits from the right, for values of 0 to 12 bytes.
func TestAppendDecimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := [][]byte{nil, {0}, {0xff}, {0x80}, {0x7f}, {0x80, 0, 0, 0, 0, 0, 0, 0}, {0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {0x80, 0, 0, 0, 0, 0, 0, 0, 0}}
	for range 2000 {
		raw := make([]byte, rng.IntN(13))
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		cases = append(cases, raw)
	}
	for _, raw := range cases {
		for _, scale := range []int{0, 1, 2, 5, 20} {
			n := new(big.Int).SetBytes(raw)
			if len(raw) > 0 && raw[0]&0x80 != 0 {
				n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(raw))*8))
			}
			want := `"` + new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)).FloatString(scale) + `"`
			if got := string(appendDecimal(nil, raw, scale)); got != want {
				t.Fatalf("appendDecimal(%x, %d) = %s, want %s", raw, scale, got, want)
			}
		}
	}
}
