package jsonscan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
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
