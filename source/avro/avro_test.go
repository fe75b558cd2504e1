package avro_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/filesink/filesink/filesink/bulk"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/source/avro"
)

// everyType has every Avro type and logical type the package maps.
const everyType = `{"type": "record", "name": "Order", "namespace": "shop", "fields": [
	{"name": "id", "type": "long"},
	{"name": "qty", "type": "int"},
	{"name": "ok", "type": "boolean"},
	{"name": "ratio", "type": "float"},
	{"name": "score", "type": "double"},
	{"name": "note", "type": ["null", "string"]},
	{"name": "raw", "type": "bytes"},
	{"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 2}},
	{"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
	{"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
	{"name": "day", "type": {"type": "int", "logicalType": "date"}},
	{"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
	{"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
	{"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
		{"name": "sku", "type": "string"}, {"name": "n", "type": ["null", "int"]}]}}},
	{"name": "ship", "type": ["null", {"type": "record", "name": "Ship", "fields": [{"name": "city", "type": "string"}]}]},
	{"name": "counts", "type": {"type": "map", "values": "long"}},
	{"name": "by_sku", "type": {"type": "map", "values": "Line"}},
	{"name": "opt_map", "type": ["null", {"type": "map", "values": ["null", "int"]}]},
	{"name": "cost", "type": {"type": "fixed", "name": "Money", "size": 8, "logicalType": "decimal", "precision": 12, "scale": 3}},
	{"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
	{"name": "local_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
	{"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
	{"name": "tm_us", "type": {"type": "long", "logicalType": "time-micros"}},
	{"name": "nan", "type": "double"},
	{"name": "uid16", "type": {"type": "fixed", "name": "U", "size": 16, "logicalType": "uuid"}}
]}`

// frame encodes v with schema s as the Confluent wire format with id.
func frame(t *testing.T, s hamba.Schema, id int, v any) []byte {
	t.Helper()
	body, err := hamba.Marshal(s, v)
	if err != nil {
		t.Fatal(err)
	}
	h := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[1:], uint32(id))
	return append(h, body...)
}

func registry(t *testing.T, opts ...srfake.Option) (*srfake.Registry, *avro.Registry) {
	t.Helper()
	fake := srfake.New(opts...)
	t.Cleanup(fake.Close)
	reg, err := avro.NewRegistry([]string{fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return fake, reg
}

// wallClock is t's UTC wall clock in the local time zone: the Avro
// library encodes a local timestamp as the wall clock of the time given,
// in the local time zone, and the decoder reads it back as UTC.
func wallClock(t time.Time) time.Time {
	u := t.UTC()
	return time.Date(u.Year(), u.Month(), u.Day(), u.Hour(), u.Minute(), u.Second(), u.Nanosecond(), time.Local)
}

func order() map[string]any {
	at := time.Date(2026, 3, 4, 5, 6, 7, 8e6, time.UTC)
	return map[string]any{
		"id": int64(7), "qty": int32(3), "ok": true, "ratio": float32(0.5), "score": 2.25,
		"note": "hi", "raw": []byte{1, 2, 3}, "tag": [2]byte{9, 8}, "state": "PAID",
		"at": at, "at_us": at.Add(5 * time.Microsecond), "day": time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC),
		"price": big.NewRat(-12345, 100), "uid": "6f1c9e0a-2b1d-4c3e-9f00-123456789abc",
		"lines":   []any{map[string]any{"sku": "a", "n": int32(2)}, map[string]any{"sku": "b", "n": nil}},
		"ship":    nil,
		"counts":  map[string]any{"a": int64(1), "b\"": int64(-2)},
		"by_sku":  map[string]any{"x": map[string]any{"sku": "x", "n": int32(5)}},
		"opt_map": map[string]any{"map": map[string]any{"k": nil, "l": int32(4)}}, // a union branch, by name
		"cost":    big.NewRat(123456789, 1000),
		"local":   wallClock(at), "local_us": wallClock(at.Add(5 * time.Microsecond)),
		"tm": 3*time.Hour + 4*time.Millisecond, "tm_us": 5 * time.Microsecond,
		"nan":   math.NaN(),
		"uid16": [16]byte{0x6f, 0x1c, 15: 0xbc},
	}
}

// Every type decodes to the JSON the bulk converter reads, and the
// schema document the registry's schema maps to makes typed Parquet
// columns of it: a timestamp is a timestamp, a decimal a decimal.
func TestDecodeEveryTypeIntoParquet(t *testing.T) {
	fake, reg := registry(t)
	s := hamba.MustParse(everyType)
	id, _, err := fake.RegisterSchema("orders-value", sr.Schema{Schema: everyType, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	got, gotID, err := avro.NewDecoder(reg).Decode(context.Background(), nil, frame(t, s, id, order()))
	if err != nil || gotID != id {
		t.Fatalf("Decode: id %d, %v", gotID, err)
	}
	want := `{"id":7,"qty":3,"ok":true,"ratio":0.5,"score":2.25,"note":"hi","raw":"AQID","tag":"CQg=","state":"PAID",` +
		`"at":"2026-03-04T05:06:07.008Z","at_us":"2026-03-04T05:06:07.008005Z","day":"2026-03-04","price":"-123.45",` +
		`"uid":"6f1c9e0a-2b1d-4c3e-9f00-123456789abc","lines":[{"sku":"a","n":2},{"sku":"b","n":null}],"ship":null,` +
		`"counts":{"a":1,"b\"":-2},"by_sku":{"x":{"sku":"x","n":5}},"opt_map":{"k":null,"l":4},"cost":"123456.789",` +
		`"local":"2026-03-04T05:06:07.008Z","local_us":"2026-03-04T05:06:07.008005Z","tm":10800004,"tm_us":5,"nan":"NaN",` +
		`"uid16":"bxwAAAAAAAAAAAAAAAAAvA=="}`
	// Maps come from Go maps, encoded in any order: compare with the
	// object keys sorted.
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("JSON %s: %v", got, err)
	}
	_ = json.Unmarshal([]byte(want), &w)
	if gs, ws := fmt.Sprint(g), fmt.Sprint(w); gs != ws {
		t.Fatalf("JSON:\n got %s\nwant %s", got, want)
	}
	doc, err := avro.SchemaDoc(s, "")
	if err != nil {
		t.Fatal(err)
	}
	bs, err := bulk.ParseSchema(doc)
	if err != nil {
		t.Fatalf("the schema document %s: %v", doc, err)
	}
	types := parquetTypes(t, bs, got)
	for col, typ := range map[string]string{"id": "int64", "qty": "int32", "ok": "bool", "ratio": "float32", "score": "float64",
		"note": "utf8", "raw": "binary", "tag": "binary", "state": "utf8", "uid": "utf8", "uid16": "binary",
		"at": "timestamp[ms, tz=UTC]", "at_us": "timestamp[us, tz=UTC]", "day": "date32", "price": "decimal(9, 2)",
		"lines": "list<element: struct<sku: utf8, n: int32 nullable>, nullable>", "ship": "struct<city: utf8>",
		"counts": "map<utf8, int64, items_nullable>", "by_sku": "map<utf8, struct<sku: utf8, n: int32 nullable>, items_nullable>",
		"opt_map": "map<utf8, int32, items_nullable>", "cost": "decimal(12, 3)", "local": "timestamp[ms, tz=UTC]",
		"local_us": "timestamp[us, tz=UTC]", "tm": "int32", "tm_us": "int64", "nan": "float64"} {
		if types[col] != typ {
			t.Errorf("column %s is %s, want %s", col, types[col], typ)
		}
	}
	if len(types) != 26 {
		t.Errorf("%d columns, want 26: %v", len(types), types)
	}
	usDoc, _ := avro.SchemaDoc(s, "us")
	if !bytes.Contains(usDoc, []byte(`{"name":"at","type":"timestamp_us"`)) {
		t.Errorf("timestamp unit us: %s", usDoc)
	}
}

// parquetTypes writes record with schema bs as a Parquet file (the bulk
// encoder the sinks use) and returns its columns' Arrow types as read back.
func parquetTypes(t *testing.T, bs *bulk.Schema, record []byte) map[string]string {
	t.Helper()
	f, err := bulk.NewFormat("parquet", bs)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := f.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(record); err != nil {
		t.Fatalf("the bulk converter refused %s: %v", record, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(rd, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, fl := range sc.Fields() {
		out[fl.Name] = fl.Type.String()
	}
	return out
}

// A value without the header, with an id the registry lacks, or whose
// body does not decode is a bad record with its reason; the registry down
// is not (it says nothing of the record), and once it is back the value
// decodes.
func TestDecodeErrors(t *testing.T) {
	fake, reg := registry(t)
	s := hamba.MustParse(`{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`)
	id, _, err := fake.RegisterSchema("t-value", sr.Schema{Schema: s.String(), Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	dec := avro.NewDecoder(reg)
	ctx := context.Background()
	good := frame(t, s, id, map[string]any{"a": int64(1)})
	for name, tc := range map[string]struct {
		value []byte
		want  error
	}{
		"plain JSON":      {[]byte(`{"a":1}`), avro.ErrNotFramed},
		"short":           {[]byte{0, 0}, avro.ErrNotFramed},
		"unknown id":      {frame(t, s, 999, map[string]any{"a": int64(1)}), avro.ErrUnknownSchema},
		"cut body":        {good[:len(good)-1], avro.ErrBadValue},
		"bytes left over": {append(append([]byte{}, good...), 7), avro.ErrBadValue},
	} {
		if _, _, err := dec.Decode(ctx, nil, tc.value); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}

	// A fresh registry client (nothing cached) while the registry fails:
	// it retries (and the test ends the retries at the first).
	var down atomic.Bool
	down.Store(true)
	fake.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	downCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	reg2, err := avro.NewRegistry([]string{fake.URL()}, avro.WithRetryHook(func(error) { cancel() }))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = avro.NewDecoder(reg2).Decode(downCtx, nil, good)
	if !errors.Is(err, context.Canceled) || errors.Is(err, avro.ErrUnknownSchema) || errors.Is(err, avro.ErrBadValue) {
		t.Errorf("registry down: %v, want the registry's error, not a bad record", err)
	}
	down.Store(false)
	if out, _, err := avro.NewDecoder(reg2).Decode(ctx, nil, good); err != nil || string(out) != `{"a":1}` {
		t.Errorf("registry back: %s, %v", out, err)
	}
}

// Types with no column are refused naming the field.
func TestSchemaDocRefusals(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type":"record","name":"R","fields":[{"name":"u","type":["null","long","string"]}]}`:                                                                "field u: a union of 2 non-null types",
		`{"type":"record","name":"R","fields":[{"name":"s","type":{"type":"record","name":"S","fields":[{"name":"x","type":["int","string"]}]}}]}`:            "field s.x: a union of 2",
		`{"type":"record","name":"R","fields":[{"name":"m","type":{"type":"map","values":["int","string"]}}]}`:                                                "field m{}: a union of 2",
		`{"type":"record","name":"R","fields":[{"name":"d","type":{"type":"fixed","name":"D","size":12,"logicalType":"duration"}}]}`:                          "field d: fixed with logical type duration has no column type",
		`{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"array","items":{"type":"fixed","name":"D","size":12,"logicalType":"duration"}}}]}`: "field a[]: fixed with logical type duration",
		`"long"`: "not a record",
	} {
		_, err := avro.SchemaDoc(hamba.MustParse(schema), "")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", schema, err, want)
		}
	}
}

// Through source.Decoded, a value that does not decode is a bad record
// naming its origin, and the next one decodes.
func TestDecodedSource(t *testing.T) {
	fake, reg := registry(t)
	s := hamba.MustParse(`{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`)
	id, _, err := fake.RegisterSchema("t-value", sr.Schema{Schema: s.String(), Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	for _, v := range [][]byte{frame(t, s, id, map[string]any{"a": int64(1)}), []byte("plain"), frame(t, s, id, map[string]any{"a": int64(2)})} {
		in.Write(v)
		in.WriteByte('\n')
	}
	src, err := source.NewReader(&in, "in")
	if err != nil {
		t.Fatal(err)
	}
	dec := source.Decoded(src, avro.NewDecoder(reg).Values(), nil)
	ctx := context.Background()
	var got []string
	for {
		rec, err := dec.Next(ctx)
		if err == io.EOF {
			break
		}
		var ue *source.UndecodableError
		if errors.As(err, &ue) {
			got = append(got, "bad "+ue.Origin.String())
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(rec.Value))
	}
	if want := `{"a":1}|bad in:2|{"a":2}`; strings.Join(got, "|") != want {
		t.Errorf("got %q, want %q", strings.Join(got, "|"), want)
	}
}
