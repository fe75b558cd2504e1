package bulk

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// FuzzConvert checks the JSON -> Arrow converter against encoding/json:
// what the converter accepts is valid JSON and holds, field by field, the
// values encoding/json decodes (canon); what is not valid JSON is
// rejected (possibly for a type error met first); a rejected record
// appends nothing. Keys not in the schema are dropped (their values
// checked and skipped).
func FuzzConvert(f *testing.F) {
	for _, r := range genRecords(50, 11) {
		f.Add(r)
	}
	for _, r := range []string{`{"id":1,"s":"\ud83d\ude00\ud800x"}`, `{"id":1,"s":"a\u0000b"}`, "{\"id\":1,\"s\":\"\xff\xfe\"}", `{"id":1,"id":2}`, `{"id":-0}`, `{"id":1,"price":"1.10"}`} {
		f.Add([]byte(r))
	}
	doc := []byte(`{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"i32","type":"int32"},{"name":"f64","type":"float64"},{"name":"ok","type":"bool"},{"name":"s","type":"string"},{"name":"bin","type":"binary"},{"name":"price","type":"decimal(10,2)"},{"name":"tags","type":"list<string>"},{"name":"addr","type":"struct","fields":[{"name":"city","type":"string","nullable":false},{"name":"zip","type":"int32"}]}]}`)
	s, err := ParseSchema(doc)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		conv := dropConverter(s, memory.NewGoAllocator())
		defer conv.release()
		err := conv.add(rec)
		valid := json.Valid(rec)
		if err != nil {
			for i := range s.root.fields {
				if n, _ := conv.lens(i); n != 0 {
					t.Fatalf("rejected %q left %d values in field %d", rec, n, i)
				}
			}
			return
		}
		if !valid {
			t.Fatalf("accepted invalid JSON %q", rec)
		}
		dec := json.NewDecoder(bytes.NewReader(rec))
		dec.UseNumber()
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			t.Fatalf("accepted %q, which encoding/json rejects as an object: %v", rec, err)
		}
		batch := conv.record()
		defer batch.Release()
		for i, n := range s.root.fields {
			want := canon(t, n, obj[n.name])
			got := arrowValue(batch.Column(i), 0)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q field %s: converter %#v, encoding/json %#v", rec, n.name, got, want)
			}
		}
	})
}
