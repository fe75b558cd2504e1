package jsonscan

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// tokenCases are seeds for the token functions: strings, numbers and
// objects, valid and not.
var tokenCases = []string{
	`"abc"`, `"a\"b\\c\/\b\f\n\r\t"`, `"\u0041\u00e9\u20ac"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`,
	"\"\xff\xfe\"", `"é"`, `"\x"`, `"\u12"`, `"\u12G4"`, `"\`, "\"a\x01\"", `"abc`, `"" x`,
	`0`, `-0`, `12`, `-12.5e+3`, `1E9`, `01`, `-`, `1.`, `1e`, `1e+`, `.5`, `123456789012345678`, `1234567890123456789`,
	`-9223372036854775808`, `9223372036854775808`, `1 `, `7,`,
	`{}`, ` { "a" : 1 , "b":"x\"y", "c":[1,{"d":"}"}], "e":null,"a":2 } `, `{"\u0061":true,"k":-1.5e3}`, `{"s":"\\"}`,
	`{"a":{"b":[[],{}]},"c":"x"}`, `{"a":1,}`, `{"a" 1}`, `{"a":[1},"b":2}`, `{1:2}`, `{"a":tru}`, `{"a":01}`, `{"a":"x`,
	`true`, `false`, `null`, `nul`, `[1,"]",{"a":"["}]`,
}

// checkString compares String and Unquote with encoding/json on b, which
// starts with '"'.
func checkString(t *testing.T, b []byte) {
	end, esc, err := String(b, 0)
	if err != nil {
		if json.Valid(b) {
			t.Fatalf("String(%q): %v, but encoding/json accepts it", b, err)
		}
		return
	}
	var want string
	if e := json.Unmarshal(b[:end], &want); e != nil {
		t.Fatalf("String(%q) ends at %d, but encoding/json rejects %q: %v", b, end, b[:end], e)
	}
	if json.Valid(b) != (SkipSpace(b, end) == len(b)) {
		t.Fatalf("String(%q) ends at %d; encoding/json.Valid says %v", b, end, json.Valid(b))
	}
	raw := b[1 : end-1]
	got, ok := Unquote(raw)
	if !ok || got != want {
		t.Fatalf("Unquote(%q) = %q, %v; encoding/json decodes %q", raw, got, ok, want)
	}
	if !esc && string(raw) != want {
		t.Fatalf("String(%q) says no decoding needed, but it decodes to %q", b, want)
	}
	if q, err := StringEnd(b, 0); err != nil || q != end {
		t.Fatalf("StringEnd(%q) = %d, %v; String says %d", b, q, err, end)
	}
}

// checkNumber compares Number and ShortInt with encoding/json and strconv
// on b, which starts with '-' or a digit.
func checkNumber(t *testing.T, b []byte) {
	end, isInt, err := Number(b, 0)
	if err != nil {
		if json.Valid(b) {
			t.Fatalf("Number(%q): %v, but encoding/json accepts it", b, err)
		}
		if _, _, ok := ShortInt(b, 0); ok {
			t.Fatalf("ShortInt(%q) accepts what Number rejects", b)
		}
		return
	}
	if !json.Valid(b[:end]) || json.Valid(b) != (SkipSpace(b, end) == len(b)) {
		t.Fatalf("Number(%q) ends at %d; encoding/json disagrees", b, end)
	}
	if want := !bytes.ContainsAny(b[:end], ".eE"); isInt != want {
		t.Fatalf("Number(%q): isInt %v", b, isInt)
	}
	v, sEnd, ok := ShortInt(b, 0)
	if !ok {
		// A short integer is accepted unless a digit follows it ("01").
		if isInt && end-strings.IndexAny(string(b), "0123456789") <= 18 && (end == len(b) || b[end] < '0' || b[end] > '9') {
			t.Fatalf("ShortInt(%q) rejects a short integer", b)
		}
		return
	}
	want, perr := strconv.ParseInt(string(b[:end]), 10, 64)
	if !isInt || sEnd != end || perr != nil || v != want {
		t.Fatalf("ShortInt(%q) = %d, %d; Number ends at %d, strconv says %d, %v", b, v, sEnd, end, want, perr)
	}
}

// member is one member of an object: its decoded key and its value text.
type member struct{ key, val string }

// refMembers lists the members of the JSON object b with encoding/json's
// tokenizer, or reports false when b is not an object.
func refMembers(t *testing.T, b []byte) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("reference: %v", err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("reference: %v", err)
		}
		ms = append(ms, member{tok.(string), string(raw)})
	}
	return ms, true
}

// checkObject compares Members, Member and SkipLazy with encoding/json on
// valid JSON b; on any b they must not panic.
func checkObject(t *testing.T, b []byte) {
	i := SkipSpace(b, 0)
	valid := json.Valid(b)
	if valid {
		if end, err := SkipLazy(b, i); err != nil || SkipSpace(b, end) != len(b) {
			t.Fatalf("SkipLazy(%q) = %d, %v on valid JSON", b, end, err)
		}
	}
	if KindAt(b, i) != KindObject {
		return
	}
	var got []member
	var offs []int // where each value starts
	err := Members(b, i, func(k, v []byte) bool {
		key, ok := Unquote(k)
		if !ok {
			key = "\x00invalid"
		}
		got = append(got, member{key, string(v)})
		offs = append(offs, cap(b)-cap(v))
		return true
	})
	if !valid {
		for _, m := range got {
			Member(b, i, m.key) // must not panic
		}
		return
	}
	want, _ := refMembers(t, b)
	if err != nil || len(got) != len(want) {
		t.Fatalf("Members(%q) = %q, %v; encoding/json finds %q", b, got, err, want)
	}
	for n, w := range want {
		if got[n] != w {
			t.Fatalf("Members(%q) member %d = %q; encoding/json finds %q", b, n, got[n], w)
		}
		first := n // the first member with this key
		for k := n - 1; k >= 0; k-- {
			if want[k].key == w.key {
				first = k
			}
		}
		if v, found, err := Member(b, i, w.key); err != nil || !found || v != offs[first] {
			t.Fatalf("Member(%q, %q) = %d, %v, %v; want %d", b, w.key, v, found, err, offs[first])
		}
	}
	if _, found, err := Member(b, i, "\x00absent"); found || err != nil {
		t.Fatalf("Member(%q) found an absent key (%v)", b, err)
	}
}

func checkTokens(t *testing.T, b []byte) {
	if len(b) == 0 {
		return
	}
	switch KindOf(b[0]) {
	case KindString:
		checkString(t, b)
	case KindNumber:
		checkNumber(t, b)
	case KindTrue, KindFalse, KindNull:
		w := map[Kind]string{KindTrue: "true", KindFalse: "false", KindNull: "null"}[KindOf(b[0])]
		end, err := Literal(b, 0, w)
		if (err == nil) != bytes.HasPrefix(b, []byte(w)) || err == nil && end != len(w) {
			t.Fatalf("Literal(%q, %q) = %d, %v", b, w, end, err)
		}
	}
	checkObject(t, b)
}

func TestTokens(t *testing.T) {
	for _, c := range append(tokenCases, cases...) {
		checkTokens(t, []byte(c))
	}
}

// FuzzTokens checks String, Unquote, Number, ShortInt, Literal, SkipLazy,
// Members and Member against encoding/json (and strconv).
func FuzzTokens(f *testing.F) {
	for _, c := range append(tokenCases, cases...) {
		f.Add([]byte(c))
	}
	f.Fuzz(checkTokens)
}

func TestUnquoteInvalid(t *testing.T) {
	for _, raw := range []string{`\x`, `\u12`, `\u12G4`, `\`, "a\x01", `\ud83d\u12G4`} {
		if s, ok := Unquote([]byte(raw)); ok {
			t.Errorf("Unquote(%q) = %q, true; want false", raw, s)
		}
	}
}

// TestLazyErrors pins the offsets and messages of the lazy scan's errors.
func TestLazyErrors(t *testing.T) {
	for _, c := range []struct {
		in, key string
		off     int
		msg     string
	}{
		{`{"a":"xx`, "z", 5, "unterminated string"},
		{`{"a":[1},"z":1}`, "z", 7, "mismatched '}'"},
		{`{"a":[1`, "z", 7, "unexpected end of input"},
		{`{"a":1,}`, "z", 7, "expected a string key"},
		{`{"a" 1}`, "z", 5, "expected ':' after key"},
		{`{"a":1 "b":2}`, "z", 7, "expected ',' or '}' in object"},
		{`{"a":01}`, "z", 6, "expected ',' or '}' in object"},
		{`{"a":-}`, "z", 6, "invalid number"},
		{`{"a":tru}`, "z", 5, "invalid literal"},
		{`{"a":x}`, "z", 5, "invalid value"},
	} {
		_, _, err := Member([]byte(c.in), 0, c.key)
		se, ok := err.(*SyntaxError)
		if !ok || se.Offset != c.off || se.Msg != c.msg {
			t.Errorf("Member(%q): %v; want %q at %d", c.in, err, c.msg, c.off)
		}
	}
}
