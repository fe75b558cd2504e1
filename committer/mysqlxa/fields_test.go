package mysqlxa

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/filesink/filesink/internal/jsonscan"
)

func FuzzObjectFields(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : 1 , "b":"x\"y", "c":[1,{"d":"}"}], "e":null,"a":2 } `,
		`{"\u0061":true,"k":-1.5e3}`, `{"s":"\\"}`, `[1]`, `{"a":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if jsonscan.ObjectCheck(b) != nil || !utf8.Valid(b) {
			return // invalid UTF-8 in a key never names a column
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(b, &want); err != nil {
			t.Skip() // invalid UTF-8 in keys and similar: both accept, decode differently
		}
		got := map[string]string{}
		objectFields(b, func(k, v []byte) { got[string(keyBytes(k))] = string(v) })
		if len(got) != len(want) {
			t.Fatalf("%q: %d fields, encoding/json finds %d", b, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != string(v) {
				t.Fatalf("%q: field %q = %q, encoding/json says %q", b, k, got[k], v)
			}
		}
	})
}

func TestObjectFieldsAllocs(t *testing.T) {
	b := []byte(` { "a" : 1 , "b":"x\"y", "c":[1,{"d":"}"}], "e":null } `)
	n := 0
	if a := testing.AllocsPerRun(100, func() { objectFields(b, func(k, v []byte) { n += len(k) + len(v) }) }); a != 0 {
		t.Errorf("objectFields allocates %v times per record", a)
	}
}
