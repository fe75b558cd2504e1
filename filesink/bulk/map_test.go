package bulk

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/filesink/filesink/source"
)

const mapSchema = `{"fields": [
	{"name": "id", "type": "int64", "nullable": false},
	{"name": "counts", "type": "map<string,int64>"},
	{"name": "req", "type": "map<string, string>", "nullable": false},
	{"name": "lines", "type": "map<string,struct>", "fields": [
		{"name": "sku", "type": "string", "nullable": false}, {"name": "price", "type": "decimal(9,2)"}]},
	{"name": "nested", "type": "list<map<string,list<int32>>>"},
	{"name": "inner", "type": "struct", "fields": [{"name": "at", "type": "map<string,timestamp_us>"}]}
]}`

var mapRecords = []string{
	`{"id":1,"counts":{"a":1,"b":-2},"req":{"k":"v"},"lines":{"x":{"sku":"s1","price":"1.25"},"y":{"sku":"s2"}},` +
		`"nested":[{"p":[1,2]},{},{"q":null}],"inner":{"at":{"t":"2026-03-04T05:06:07.000008Z","n":null}}}`,
	`{"id":2,"counts":null,"req":{},"lines":{},"nested":null}`, // a null map, empty maps, missing fields
	`{"id":3,"counts":{"a\u00e9\n":7,"dup\"q":null},"req":{"":""},"lines":{"z":null}}`,
}

func mapRecs() [][]byte {
	out := make([][]byte, len(mapRecords))
	for i, r := range mapRecords {
		out[i] = []byte(r)
	}
	return out
}

// A map<string,T> field converts JSON objects to an Arrow map<utf8, T>,
// written as a Parquet MAP (read back as the same Arrow type) and as an
// Arrow IPC map: values of every kind, null and empty maps, escaped keys.
func TestMapRoundTrip(t *testing.T) {
	s, err := ParseSchema([]byte(mapSchema))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Arrow().Field(1).Type.String(), "map<utf8, int64, items_nullable>"; got != want {
		t.Errorf("counts is %s, want %s", got, want)
	}
	recs := mapRecs()
	want := expectRows(t, s, recs)
	pf, err := Parquet(s)
	if err != nil {
		t.Fatal(err)
	}
	data := writeAll(t, pf, recs, 2)
	got, _ := readParquet(t, s, data)
	compareRecords(t, s, got, want)
	release(got)

	// The file's own schema: a MAP logical type with a required string key.
	rd, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	root := rd.MetaData().Schema.Root()
	counts := root.Field(root.FieldIndexByName("counts")).(*schema.GroupNode)
	if _, ok := counts.LogicalType().(schema.MapLogicalType); !ok {
		t.Errorf("counts has logical type %v, want MAP", counts.LogicalType())
	}
	kv := counts.Field(0).(*schema.GroupNode)
	if key := kv.Field(0); key.Name() != "key" || key.RepetitionType() != 0 /* required */ {
		t.Errorf("counts key is %s (%v), want a required key", key.Name(), key.RepetitionType())
	}

	af, err := ArrowIPC(s)
	if err != nil {
		t.Fatal(err)
	}
	ipcRecs := readArrowIPC(t, writeAll(t, af, recs, 0))
	if !ipcRecs[0].Schema().Equal(s.Arrow()) {
		t.Errorf("Arrow IPC schema %s, want %s", ipcRecs[0].Schema(), s.Arrow())
	}
	compareRecords(t, s, ipcRecs, want)
	release(ipcRecs)
}

// The map type in the schema document, its mistakes, and back from Arrow
// (SchemaFromArrow, as for an Iceberg table's schema).
func TestMapSchema(t *testing.T) {
	s, err := ParseSchema([]byte(mapSchema))
	if err != nil {
		t.Fatal(err)
	}
	back, err := SchemaFromArrow(s.Arrow())
	if err != nil {
		t.Fatal(err)
	}
	want := s.Fields()
	want[2].Type = "map<string,string>" // as written, "map<string, string>"
	if got := back.Fields(); !reflect.DeepEqual(got, want) {
		t.Errorf("SchemaFromArrow:\n got %+v\nwant %+v", got, want)
	}
	// A map whose values the Arrow schema makes required refuses a null value.
	req := arrow.NewSchema([]arrow.Field{{Name: "m", Type: arrow.MapOfFields(
		arrow.Field{Name: "key", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "value", Type: arrow.PrimitiveTypes.Int64}), Nullable: true}}, nil)
	rs, err := SchemaFromArrow(req)
	if err != nil {
		t.Fatal(err)
	}
	c := newConverter(rs, memory.DefaultAllocator)
	defer c.release()
	var fe *FieldError
	if err := c.add([]byte(`{"m":{"a":null}}`)); !errors.As(err, &fe) || fe.Field != "m{}" || !strings.Contains(fe.Problem, "not nullable") {
		t.Errorf("a null value in a map of required values: %v", err)
	}
	if err := c.add([]byte(`{"m":{"a":1}}`)); err != nil {
		t.Errorf("a value in a map of required values: %v", err)
	}
	intKeys := arrow.NewSchema([]arrow.Field{{Name: "m", Type: arrow.MapOf(arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.String)}}, nil)
	if _, err := SchemaFromArrow(intKeys); err == nil || !strings.Contains(err.Error(), `field "m": unsupported Arrow map key type int32`) {
		t.Errorf("an Arrow map with int32 keys: %v", err)
	}

	for _, c := range []struct{ doc, want string }{
		{`{"fields":[{"name":"a","type":"map<int64,string>"}]}`, `field "a": "map<int64,string>": want map<string,T>`},
		{`{"fields":[{"name":"a","type":"map<string>"}]}`, `want map<string,T>`},
		{`{"fields":[{"name":"a","type":"map<string,int9>"}]}`, `field "a{}": unknown type "int9"`},
		{`{"fields":[{"name":"a","type":"map<string,int64>","fields":[{"name":"b","type":"int64"}]}]}`, `field "a{}": "fields" given for type "int64"`},
		{`{"fields":[{"name":"a","type":"map<string,struct>","fields":[{"name":"b","type":"int9"}]}]}`, `field "a{}.b": unknown type "int9"`},
	} {
		var se *SchemaError
		if _, err := ParseSchema([]byte(c.doc)); !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a *SchemaError containing %q", c.doc, err, c.want)
		}
	}

	type row struct {
		Attrs map[string]int64 `json:"attrs"`
	}
	gs, err := SchemaFromStruct(row{})
	if err != nil || gs.Fields()[0].Type != "map<string,int64>" {
		t.Errorf("SchemaFromStruct of a map[string]int64: %v, %v", gs, err)
	}
}

// A record whose map does not fit is bad, naming the field, and leaves
// nothing behind.
func TestMapBadRecords(t *testing.T) {
	s, err := ParseSchema([]byte(mapSchema))
	if err != nil {
		t.Fatal(err)
	}
	const good = `{"id":9,"req":{"a":"b"}}`
	for _, c := range []struct{ rec, field, problem string }{
		{`{"id":1,"req":{},"counts":{"a":"x"}}`, "counts{}", "want int64, got a string"},
		{`{"id":1,"req":{},"counts":[1]}`, "counts", "want a map (JSON object), got an array"},
		{`{"id":1,"req":{},"counts":{"a":1,"a":2}}`, "counts", `key "a" twice in the map`},
		{`{"id":1,"req":{},"counts":{"a":1,"\u0061":2}}`, "counts", `key "a" twice in the map`},
		{`{"id":1,"req":null}`, "req", "not nullable"},
		{`{"id":1}`, "req", "missing required field"},
		{`{"id":1,"req":{"k":5}}`, "req{}", "want string, got a number"},
		{`{"id":1,"req":{},"lines":{"x":{"price":1}}}`, "lines{}.sku", "missing required field"},
		{`{"id":1,"req":{},"lines":{"x":{"sku":"a","zz":1}}}`, "lines{}.zz", "not in the schema"},
		{`{"id":1,"req":{},"nested":[{"p":["1"]}]}`, "nested[]{}[]", "want int32, got a string"},
		{`{"id":1,"req":{},"inner":{"at":{"t":"noon"}}}`, "inner.at{}", "invalid RFC 3339"},
		{`{"id":1,"req":{},"counts":{"a":1,}}`, "", "invalid JSON"},
		{`{"id":1,"req":{},"counts":{"a" 1}}`, "", "expected ':'"},
		{`{"id":1,"req":{},"counts":{1:1}}`, "", "invalid JSON"},
	} {
		for _, name := range []string{"parquet", "arrow"} {
			f, err := NewFormat(name, s)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			w, _ := f.NewWriter(&buf)
			if err := w.Add([]byte(good)); err != nil {
				t.Fatal(err)
			}
			err = w.Add([]byte(c.rec))
			var fe *FieldError
			if !errors.Is(err, source.ErrBadRecord) || !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Problem, c.problem) {
				t.Errorf("%s %s: error %v, want field %q: ...%s...", name, c.rec, err, c.field, c.problem)
			}
			if err := w.Add(mapRecs()[0]); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var got []arrow.Record
			if name == "parquet" {
				got, _ = readParquet(t, s, buf.Bytes())
			} else {
				got = readArrowIPC(t, buf.Bytes())
			}
			compareRecords(t, s, got, expectRows(t, s, [][]byte{[]byte(good), mapRecs()[0]}))
			release(got)
		}
	}
}

// Maps of more keys than the pairwise check covers still find a key
// twice, and keep every key once.
func TestMapManyKeys(t *testing.T) {
	s, err := ParseSchema([]byte(`{"fields":[{"name":"m","type":"map<string,int32>"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := newConverter(s, memory.DefaultAllocator)
	defer c.release()
	var b strings.Builder
	b.WriteString(`{"m":{`)
	for i := range 40 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":1`)
	}
	if err := c.add([]byte(b.String() + `}}`)); err != nil {
		t.Fatalf("40 keys: %v", err)
	}
	if err := c.add([]byte(b.String() + `,"k1":2}}`)); err == nil || !strings.Contains(err.Error(), `key "k1" twice`) {
		t.Errorf("a key twice among 41: %v", err)
	}
	if err := c.add([]byte(`{"m":{"k1":1}}`)); err != nil {
		t.Errorf("a map after one with the key twice: %v", err)
	}
}
