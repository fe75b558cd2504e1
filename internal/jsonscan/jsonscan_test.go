package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var cases = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e10`, `-1E-2`, `true`, `false`, `null`, ` {"a" : [1, 2, {"b": null}], "c": "x\"y\\z\u00e9\n"} `,
	`{"a":1,}`, `[1,]`, `01`, `1.`, `.5`, `-`, `1e`, `"abc`, `"a\x"`, `"\u12"`, "\"a\x01b\"", `{"a"}`, `{a:1}`, `nul`, `truex`, `{} {}`, ``, ` `,
	`"` + strings.Repeat("abcdefgh", 10) + `"`, "\"\xff\xfe\"", `[[[[[]]]]]`, `{"a":{"b":{"c":[true,false,null]}}}`, `1 2`, `"\/"`,
}

func TestMatchesEncodingJSON(t *testing.T) {
	for _, c := range cases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json says %v", c, got, want)
		}
	}
}

func TestObjectCheck(t *testing.T) {
	if err := ObjectCheck([]byte(` {"a":1}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{`[1]`, `"x"`, `{`, `1`} {
		if ObjectCheck([]byte(c)) == nil {
			t.Errorf("ObjectCheck(%q) accepted a non-object", c)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	s := []byte(`{"id":12345,"key":"k-17","ts":"2026-01-01T00:00:00.123Z","payload":"` + strings.Repeat("abcdefghij", 95) + `"}`)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if !Valid(s) {
			b.Fatal("invalid")
		}
	}
}

// TestStringStrides puts each kind of byte the string scanner must stop at
// (or must not) at every position of strings longer than its 32- and
// 8-byte strides, and compares with encoding/json.
func TestStringStrides(t *testing.T) {
	for _, c := range []string{`"`, `\`, `\n`, `\u00e9`, "\x01", "\x1f", "\x7f", "\x80", "é", " ", "\t"} {
		for n := 0; n < 80; n++ {
			for at := 0; at <= n; at++ {
				body := strings.Repeat("a", at) + c + strings.Repeat("b", n-at)
				doc := []byte(`{"k":"` + body + `","n":1}`)
				if got, want := Valid(doc), json.Valid(doc); got != want {
					t.Fatalf("Valid(%q) = %v, encoding/json says %v", doc, got, want)
				}
			}
		}
	}
}

func TestCheckLine(t *testing.T) {
	for _, c := range []struct {
		in     string
		want   error
		syntax bool // want a *SyntaxError
	}{
		{`{"a":1}`, nil, false},
		{"{\"a\":\n1}", ErrNewline, false},
		{"{\"a\":1}\n", ErrNewline, false},
		{"\n{}", ErrNewline, false},
		{`{"a":"x\ny"}`, nil, false},    // an escaped newline is fine
		{"{\"a\":\"x\ny\"}", nil, true}, // a raw one in a string is invalid JSON
	} {
		err := CheckLine([]byte(c.in))
		var se *SyntaxError
		if c.syntax && !errors.As(err, &se) || !c.syntax && err != c.want {
			t.Errorf("CheckLine(%q) = %v, want %v (syntax error: %v)", c.in, err, c.want, c.syntax)
		}
	}
}

// checkLineUTF8Ref is what CheckLineUTF8 must accept: valid JSON (as
// encoding/json says), valid UTF-8 and no newline.
func checkLineUTF8Ref(b []byte) bool {
	return json.Valid(b) && utf8.Valid(b) && !bytes.ContainsRune(b, '\n')
}

func TestCheckLineUTF8(t *testing.T) {
	for _, c := range []struct {
		in  string
		off int // offset of the first invalid byte; -1: valid
	}{
		{`{"a":"héllo ☃ 東京 🙂"}`, -1},
		{`{"a":"\ufffd is fine, and so is ` + "\uFFFD" + `"}`, -1},
		{"{\"a\":\"x\xffy\"}", 7},
		{"{\"a\":\"\xc3\"}", 6},                    // a lead byte without its continuation
		{"{\"a\":\"\xe6\x9d\"}", 6},                // a truncated 3-byte sequence
		{"{\"a\":\"\xed\xa0\x80\"}", 6},            // a UTF-16 surrogate encoded in UTF-8
		{"{\"a\":\"\xc0\xaf\"}", 6},                // an overlong encoding of '/'
		{"{\"a\":\"\xf4\x90\x80\x80\"}", 6},        // above U+10FFFF
		{"{\"a\":\"é\x80\"}", 8},                   // a stray continuation byte
		{"{\"a\":\"ok\",\"b\":\"é\\\"\xff\"}", 19}, // after an escape
		{"{\"k\xff\":1}", 3},                       // in a key
	} {
		err := CheckLineUTF8([]byte(c.in))
		var se *SyntaxError
		switch {
		case c.off < 0 && err != nil:
			t.Errorf("CheckLineUTF8(%q) = %v, want nil", c.in, err)
		case c.off >= 0 && (!errors.As(err, &se) || !errors.Is(err, ErrInvalidUTF8) || se.Offset != c.off):
			t.Errorf("CheckLineUTF8(%q) = %v, want invalid UTF-8 at byte %d", c.in, err, c.off)
		}
		if got, want := err == nil, checkLineUTF8Ref([]byte(c.in)); got != want {
			t.Errorf("CheckLineUTF8(%q) accepts: %v, reference: %v", c.in, got, want)
		}
		// CheckLine keeps accepting what encoding/json accepts.
		if got, want := CheckLine([]byte(c.in)) == nil, json.Valid([]byte(c.in)); got != want {
			t.Errorf("CheckLine(%q) accepts: %v, encoding/json: %v", c.in, got, want)
		}
	}
	if err := CheckLineUTF8([]byte("{\"a\":\"é\"}\n")); err != ErrNewline {
		t.Errorf("newline: %v, want ErrNewline", err)
	}
	if err := CheckLineUTF8([]byte("{\"a\":\xff}")); err == nil || errors.Is(err, ErrInvalidUTF8) {
		t.Errorf("a byte above 0x7f outside a string: %v, want a plain syntax error", err)
	}
}

// TestCheckLineUTF8Strides puts valid and invalid UTF-8 at every position
// of strings longer than the string scanner's strides.
func TestCheckLineUTF8Strides(t *testing.T) {
	for _, c := range []string{"é", "東", "🙂", "\xff", "\xc3", "\xe6\x9d", "\x80", "é\\n", "\xed\xa0\x80"} {
		for n := 0; n < 70; n++ {
			for at := 0; at <= n; at++ {
				doc := []byte(`{"k":"` + strings.Repeat("a", at) + c + strings.Repeat("b", n-at) + `","n":1}`)
				if got, want := CheckLineUTF8(doc) == nil, checkLineUTF8Ref(doc); got != want {
					t.Fatalf("CheckLineUTF8(%q) accepts: %v, want %v", doc, got, want)
				}
			}
		}
	}
}

func FuzzCheckLineUTF8(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Add([]byte("{\"a\":\"é\xff\"}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := CheckLineUTF8(b) == nil, checkLineUTF8Ref(b); got != want {
			t.Fatalf("CheckLineUTF8(%q) accepts: %v, want %v", b, got, want)
		}
	})
}

// TestInvalidUTF8Index: invalidUTF8 finds the first invalid byte exactly
// where decoding rune by rune does.
func TestInvalidUTF8Index(t *testing.T) {
	ref := utf8Ref
	pieces := []string{"a", "abcdefgh", "é", "東", "🙂", "\xff", "\xc3", "\xe6\x9d", "\x80", "\xed\xa0\x80", "\xed\x9f\xbf",
		"\xe0\x9f\xbf", "\xe0\xa0\x80", "\xf0\x8f\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xc1\xbf", "\xc2\x80"}
	rng := rand.New(rand.NewPCG(3, 4))
	for k := range 40000 {
		var b []byte
		for range rng.IntN(12 + k%4*20) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		if got, want := invalidUTF8(b), ref(b); got != want {
			t.Fatalf("invalidUTF8(%q) = %d, want %d", b, got, want)
		}
		if got, want := invalidUTF8Scalar(b), ref(b); got != want {
			t.Fatalf("invalidUTF8Scalar(%q) = %d, want %d", b, got, want)
		}
	}
}

// utf8Ref is the index of the first invalid byte of p, decoding rune by
// rune, or -1.
func utf8Ref(p []byte) int {
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// TestInvalidUTF8Blocks: valid text of every length around the 32-byte
// blocks passes, and one byte changed anywhere in it is found where
// decoding rune by rune finds it.
func TestInvalidUTF8Blocks(t *testing.T) {
	valid := []string{"a", "abcdefgh", "é", "東", "🙂", "\xed\x9f\xbf", "\xe0\xa0\x80", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xc2\x80", "\U0010FFFF"}
	rng := rand.New(rand.NewPCG(5, 6))
	for k := range 400 {
		var b []byte
		for len(b) < 40+k {
			b = append(b, valid[rng.IntN(len(valid))]...)
		}
		if got := invalidUTF8(b); got != -1 {
			t.Fatalf("invalidUTF8(%q) = %d, want -1", b, got)
		}
		for i := range b {
			c := slices.Clone(b)
			c[i] = byte(rng.IntN(256))
			if got, want := invalidUTF8(c), utf8Ref(c); got != want {
				t.Fatalf("invalidUTF8(%q) = %d, want %d", c, got, want)
			}
		}
	}
}

func FuzzInvalidUTF8(f *testing.F) {
	f.Add([]byte(strings.Repeat("é東🙂a", 20) + "\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := invalidUTF8(b), utf8Ref(b); got != want {
			t.Fatalf("invalidUTF8(%q) = %d, want %d", b, got, want)
		}
	})
}
