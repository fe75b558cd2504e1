package bucketing

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/filesink/filesink/internal/jsonscan"
)

// refLookup is the reference for fieldPath.lookup on valid JSON, built on
// encoding/json's tokenizer: the first occurrence of each key wins. It
// returns the decoded value (with UseNumber) and "ok", "missing" or
// "notobject".
func refLookup(t *testing.T, data []byte, segs []string) (any, string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for _, seg := range segs {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("reference: %v", err)
		}
		if tok != json.Delim('{') {
			return nil, "notobject"
		}
		found := false
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			if tok.(string) == seg {
				found = true
				break
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				t.Fatalf("reference: %v", err)
			}
		}
		if !found {
			return nil, "missing"
		}
	}
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("reference: %v", err)
	}
	return v, "ok"
}

// checkLookup compares fieldPath.lookup with refLookup; data must be valid
// JSON.
func checkLookup(t *testing.T, data []byte, name string) {
	t.Helper()
	f := newFieldPath(name)
	if f.err != nil {
		return
	}
	want, status := refLookup(t, data, f.segs)
	got, err := f.lookup(data)
	var fe *FieldError
	switch {
	case err == nil:
		if status != "ok" {
			t.Fatalf("lookup(%q, %q) found %s %q, reference says %s", data, name, got.kind.String(), got.raw, status)
		}
	case errors.As(err, &fe):
		switch {
		case status == "missing" && strings.HasPrefix(fe.Reason, "missing"):
		case status == "notobject" && (fe.Reason == "record is not a JSON object" || strings.HasSuffix(fe.Reason, ", not an object")):
		default:
			t.Fatalf("lookup(%q, %q): %v; reference says %s", data, name, err, status)
		}
		return
	default:
		t.Fatalf("lookup(%q, %q): unexpected error %v", data, name, err)
	}
	switch w := want.(type) {
	case string:
		s, ok := jsonscan.Unquote(got.raw)
		if got.kind != jsonscan.KindString || !ok || s != w {
			t.Fatalf("lookup(%q, %q) = %s %q (%q), want string %q", data, name, got.kind.String(), got.raw, s, w)
		}
	case json.Number:
		if got.kind != jsonscan.KindNumber || string(got.raw) != string(w) {
			t.Fatalf("lookup(%q, %q) = %s %q, want number %s", data, name, got.kind.String(), got.raw, w)
		}
	case bool:
		if (w && got.kind != jsonscan.KindTrue) || (!w && got.kind != jsonscan.KindFalse) {
			t.Fatalf("lookup(%q, %q) = %s %q, want %v", data, name, got.kind.String(), got.raw, w)
		}
	case nil:
		if got.kind != jsonscan.KindNull {
			t.Fatalf("lookup(%q, %q) = %s %q, want null", data, name, got.kind.String(), got.raw)
		}
	case map[string]any, []any:
		wantKind := jsonscan.KindObject
		if _, ok := w.([]any); ok {
			wantKind = jsonscan.KindArray
		}
		if got.kind != wantKind || !json.Valid(got.raw) {
			t.Fatalf("lookup(%q, %q) = %s %q, want %T", data, name, got.kind.String(), got.raw, w)
		}
	}
}

// jsonSeeds are valid and invalid records shared by the table and fuzz tests.
var jsonSeeds = []string{
	`{"p":"x","ts":"2024-05-01T12:30:00Z"}`,
	`{"ts":1714566600000,"p":42}`,
	`{"ts":1.7145666e12,"p":-0.5e-3}`,
	`{"a":{"b":"nested","ts":"2024-05-01T12:30:00.5+02:00"},"p":true}`,
	`{"s":"a\"b\\","o":{"p":1,"a":[[],{"}":"]"}]},"n":-1.5e3,"t":true,"f":false,"z":null,"p":"last"}`,
	`{"\u0070":"escaped key","p":"second"}`,
	`{"p":"a\u002fb\ud83d\ude00\ud800\n\"q\""}`,
	`{"p":"\\\\\"","q":"\\"}`,
	`{"p":null}`,
	`{"p":[1,2,{"p":3}]}`,
	`{"p":{"q":{}}}`,
	` {"a" : { "b" : "sp" } , "p" : "w" } `,
	`{"a":"x","a":{"b":"dup"}}`,
	`{"a":{"b":1},"a":{"b":2}}`,
	"{\"p\":\"\xff\xfe\"}",
	`[{"p":1}]`,
	`"p"`,
	`{}`,
	`{"p":"../../etc/passwd"}`,
	`{"p":"_x/.y"}`,
	`{"p":"`,
	`{"p":1,}`,
	`{"p":01}`,
	`{"a":[}`,
	`{"p":tru}`,
}

var lookupNames = []string{"p", "q", "ts", "a.b", "a.ts", "a", "o.p", "s", "\u00e9"}

func TestLookupMatchesEncodingJSON(t *testing.T) {
	extra := []string{
		`{"é":"accent","p":"\u00e9"}`,
		`{"\u00e9":"escaped accent"}`,
		`{"a.b":"literal dotted key","a":{"b":"nested"}}`,
		`{"p":1E400}`,
		`{"p":"` + strings.Repeat(`\\`, 50) + `","q":"` + strings.Repeat(`\"`, 50) + `"}`,
		`{"x":` + strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200) + `,"p":"deep"}`,
	}
	for _, s := range append(jsonSeeds, extra...) {
		if !json.Valid([]byte(s)) {
			continue
		}
		for _, name := range lookupNames {
			checkLookup(t, []byte(s), name)
		}
	}
}

func TestUnquote(t *testing.T) {
	tests := []struct {
		raw  string
		want string
		ok   bool
	}{
		{`abc`, "abc", true},
		{`a\"b`, `a"b`, true},
		{`\\\/\b\f\n\r\t`, "\\/\b\f\n\r\t", true},
		{`\u0041\u00e9\u20ac`, "Aé€", true},
		{`\ud83d\ude00`, "😀", true},
		{`\ud83d`, "\uFFFD", true},
		{`\ude00\ud83d`, "\uFFFD\uFFFD", true},
		{`\ud83d\u0041`, "\uFFFDA", true},
		{"\xff", "\uFFFD", true},
		{`\x`, "", false},
		{`\u12`, "", false},
		{`\u12G4`, "", false},
		{`\`, "", false},
		{"a\x01", "", false},
	}
	for _, tt := range tests {
		got, ok := jsonscan.Unquote([]byte(tt.raw))
		if got != tt.want || ok != tt.ok {
			t.Errorf("Unquote(%q) = %q, %v; want %q, %v", tt.raw, got, ok, tt.want, tt.ok)
		}
		if tt.ok {
			var ref string
			if err := json.Unmarshal([]byte(`"`+tt.raw+`"`), &ref); err != nil || ref != got {
				t.Errorf("encoding/json decodes %q to %q, %v; unquote to %q", tt.raw, ref, err, got)
			}
		}
	}
}
