package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/filesink/filesink/internal/testutil/icebergtest"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
)

const avroOrder = `{"type": "record", "name": "Order", "fields": [
	{"name": "id", "type": "long"},
	{"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
	{"name": "note", "type": ["null", "string"], "default": null}]}`

// Avro records from a Schema Registry (srfake) on a Kafka topic, into
// Parquet and into an Iceberg table with no --schema: the columns are
// typed from the registry (DuckDB reads a timestamp and a decimal), every
// record is there once, and a value that is not Avro goes to the dead
// letters with --on-bad-record skip.
func TestAvroFromRegistry(t *testing.T) {
	reg := srfake.New()
	t.Cleanup(reg.Close)
	id, _, err := reg.RegisterSchema("orders-value", sr.Schema{Schema: avroOrder, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	s := hamba.MustParse(avroOrder)
	kc := kafkatest.Start(t, kafkatest.Topic{Name: "orders", Partitions: 2})
	const per = 300
	for p := range int32(2) {
		var vals []string
		for i := range per {
			n := int64(p)*per + int64(i)
			vals = append(vals, string(avroFrame(t, id, s, avroOrderOf(n))))
		}
		if p == 0 {
			vals = append(vals, `{"id": -1}`) // not Avro
		}
		kc.MustProduce(t, "orders", p, vals...)
	}
	dir := t.TempDir()
	src := "kafka://" + kc.Bootstrap() + "/orders"
	common := []string{"--source", src, "--bounded", "--value-format", "avro", "--schema-registry", reg.URL(), "--on-bad-record", "skip"}

	out := filepath.Join(dir, "out")
	mustRun(t, append([]string{"run", "--sink", out, "--format", "parquet"}, common...)...)
	got, err := duckDB(t)(fmt.Sprintf(`SELECT count(*) AS n, count(DISTINCT id) AS ids, typeof(any_value("at")) AS at_type,
		typeof(any_value(price)) AS price_type, max(price) AS max_price FROM read_parquet('%s/*.parquet')`, out))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"n": "600", "ids": "600", "at_type": "TIMESTAMP WITH TIME ZONE", "price_type": "DECIMAL(9,2)", "max_price": "5.99"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DuckDB reads %v, want %v", got, want)
	}
	dead, err := filepath.Glob(filepath.Join(out, "_dead-letter", "*"))
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters %v (%v), want one file", dead, err)
	}
	if b, _ := os.ReadFile(dead[0]); !strings.Contains(string(b), "Confluent wire format") {
		t.Errorf("the dead letter does not say why: %s", b)
	}

	wh := filepath.Join(dir, "lake")
	mustRun(t, append([]string{"run", "--sink", "iceberg://shop.orders", "--warehouse", wh}, common...)...)
	loc := icebergSQLite(filepath.Join(wh, "catalog.db")).metadataLocation(t, "shop", "orders")
	tbl := icebergtest.MustRead(t, strings.TrimPrefix(loc, "file://"), icebergtest.WithColumns("id", "at"))
	ids := map[string]bool{}
	for _, row := range tbl.Data {
		var r struct {
			ID json.Number
			At string
		}
		if err := json.Unmarshal(row, &r); err != nil || r.At == "" {
			t.Fatalf("row %s: %v", row, err)
		}
		ids[r.ID.String()] = true
	}
	if len(tbl.Errors) > 0 || tbl.Rows != 2*per || len(ids) != 2*per {
		t.Errorf("table: %d rows, %d distinct ids, errors %v", tbl.Rows, len(ids), tbl.Errors)
	}
}

// avroFrame is v in the Confluent wire format with schema s of id.
func avroFrame(t testing.TB, id int, s hamba.Schema, v any) []byte {
	t.Helper()
	body, err := hamba.Marshal(s, v)
	if err != nil {
		t.Fatal(err)
	}
	h := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[1:], uint32(id))
	return append(h, body...)
}

// avroOrderOf is order n of the schema avroOrder.
func avroOrderOf(n int64) map[string]any {
	return map[string]any{"id": n, "at": time.UnixMilli(1767225600000 + n).UTC(), "price": big.NewRat(n, 100), "note": nil}
}

// --value-format mistakes, each one line.
func TestAvroMistakes(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--source", filepath.Join(dir, "in"), "--sink", filepath.Join(dir, "o"), "--value-format", "avro", "--schema-registry", "http://127.0.0.1:1"}, "reads kafka:// sources only"},
		{[]string{"--source", "kafka://127.0.0.1:1/t", "--sink", filepath.Join(dir, "o"), "--value-format", "avro"}, "needs --schema-registry"},
		{[]string{"--source", "kafka://127.0.0.1:1/t", "--sink", filepath.Join(dir, "o"), "--schema-registry", "http://127.0.0.1:1"}, "applies with --value-format avro only"},
		{[]string{"--source", "kafka://127.0.0.1:1/t", "--sink", filepath.Join(dir, "o"), "--value-format", "avro", "--schema-registry", "ftp://x"}, "want http(s)://"},
	} {
		r := cli(t, append([]string{"run"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%v: want one line with %q: %v", tc.args, tc.want, r)
		}
	}
}

// avroEvery has every Avro type and logical type with a column type.
const avroEvery = `{"type": "record", "name": "Every", "namespace": "shop", "fields": [
	{"name": "id", "type": "long"},
	{"name": "flag", "type": "boolean"},
	{"name": "qty", "type": "int"},
	{"name": "ratio", "type": "float"},
	{"name": "score", "type": "double"},
	{"name": "name", "type": "string"},
	{"name": "raw", "type": "bytes"},
	{"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
	{"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 2}},
	{"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
		{"name": "sku", "type": "string"}, {"name": "n", "type": ["null", "int"]}]}}},
	{"name": "counts", "type": {"type": "map", "values": "long"}},
	{"name": "by_sku", "type": {"type": "map", "values": "Line"}},
	{"name": "note", "type": ["null", "string"]},
	{"name": "ship", "type": {"type": "record", "name": "Ship", "fields": [{"name": "city", "type": "string"}]}},
	{"name": "day", "type": {"type": "int", "logicalType": "date"}},
	{"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
	{"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
	{"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
	{"name": "cost", "type": {"type": "fixed", "name": "Money", "size": 8, "logicalType": "decimal", "precision": 12, "scale": 3}},
	{"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
	{"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}}]}`

// everyRecord is record i of avroEvery; record 1 has nulls and empty
// collections.
func everyRecord(i int64) map[string]any {
	at := time.Date(2026, 3, 4, 5, 6, 7, 8e6, time.UTC).Add(time.Duration(i) * time.Hour)
	v := map[string]any{"id": i, "flag": true, "qty": int32(3 + i), "ratio": float32(0.5), "score": 2.25, "name": "ñame",
		"raw": []byte{1, 2, 3}, "state": "PAID", "tag": [2]byte{9, 8},
		"lines":  []any{map[string]any{"sku": "a", "n": int32(2)}, map[string]any{"sku": "b", "n": nil}},
		"counts": map[string]any{"a": int64(1), "b": int64(-2)}, "by_sku": map[string]any{"x": map[string]any{"sku": "x", "n": int32(5)}},
		"note": "hi", "ship": map[string]any{"city": "Lyon"}, "day": time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC),
		"at": at, "at_us": at.Add(5 * time.Microsecond), "local": wallClock(at),
		"price": big.NewRat(-12345, 100), "cost": big.NewRat(123456789, 1000),
		"uid": "6f1c9e0a-2b1d-4c3e-9f00-123456789abc", "tm": 3*time.Hour + 4*time.Millisecond,
	}
	if i == 1 {
		v["note"], v["lines"], v["counts"], v["by_sku"] = nil, []any{}, map[string]any{}, map[string]any{}
	}
	return v
}

// wallClock is t's UTC wall clock in the local time zone: the Avro
// library encodes a local timestamp as the wall clock of the time given,
// in the local time zone, and the decoder reads it back as UTC.
func wallClock(t time.Time) time.Time {
	u := t.UTC()
	return time.Date(u.Year(), u.Month(), u.Day(), u.Hour(), u.Minute(), u.Second(), u.Nanosecond(), time.Local)
}

// Every Avro type, from a Schema Registry on a Kafka topic with no
// --schema: into Parquet, DuckDB reads each column with its own type (a
// map a MAP, a decimal a DECIMAL(P,S), a timestamp a TIMESTAMP WITH TIME
// ZONE, a date a DATE...) and the values; into an Iceberg table, the
// table's schema has the Iceberg types and the reader reads every column.
func TestAvroEveryType(t *testing.T) {
	reg := srfake.New()
	t.Cleanup(reg.Close)
	id, _, err := reg.RegisterSchema("every-value", sr.Schema{Schema: avroEvery, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	s := hamba.MustParse(avroEvery)
	kc := kafkatest.Start(t, kafkatest.Topic{Name: "every", Partitions: 1})
	var vals []string
	for i := range int64(3) {
		vals = append(vals, string(avroFrame(t, id, s, everyRecord(i))))
	}
	kc.MustProduce(t, "every", 0, vals...)
	dir := t.TempDir()
	common := []string{"--source", "kafka://" + kc.Bootstrap() + "/every", "--bounded", "--value-format", "avro", "--schema-registry", reg.URL()}

	out := filepath.Join(dir, "out")
	mustRun(t, append([]string{"run", "--sink", out, "--format", "parquet"}, common...)...)
	at := time.Date(2026, 3, 4, 5, 6, 7, 8e6, time.UTC)
	lines := "[{'sku': a, 'n': 2}, {'sku': b, 'n': NULL}]"
	cols := []struct{ name, typ, expr, want string }{
		{"id", "BIGINT", "", "0"}, {"flag", "BOOLEAN", "", "true"}, {"qty", "INTEGER", "", "3"}, {"ratio", "FLOAT", "", "0.5"},
		{"score", "DOUBLE", "", "2.25"}, {"name", "VARCHAR", "", "ñame"}, {"raw", "BLOB", "", `\x01\x02\x03`},
		{"state", "VARCHAR", "", "PAID"}, {"tag", "BLOB", "", `\x09\x08`},
		{"lines", "STRUCT(sku VARCHAR, n INTEGER)[]", "", lines},
		// Map entries come in no set order: sorted by key.
		{"counts", "MAP(VARCHAR, BIGINT)", "list_sort(map_entries(counts))", "[{'key': a, 'value': 1}, {'key': b, 'value': -2}]"},
		{"by_sku", "MAP(VARCHAR, STRUCT(sku VARCHAR, n INTEGER))", "", "{x={'sku': x, 'n': 5}}"},
		{"note", "VARCHAR", "", "hi"}, {"ship", "STRUCT(city VARCHAR)", "", "{'city': Lyon}"}, {"day", "DATE", "", "2026-03-04"},
		{"at", "TIMESTAMP WITH TIME ZONE", `epoch_ms("at")`, fmt.Sprint(at.UnixMilli())},
		{"at_us", "TIMESTAMP WITH TIME ZONE", "epoch_us(at_us)", fmt.Sprint(at.UnixMicro() + 5)},
		{"local", "TIMESTAMP WITH TIME ZONE", "epoch_ms(local)", fmt.Sprint(at.UnixMilli())},
		{"price", "DECIMAL(9,2)", "", "-123.45"}, {"cost", "DECIMAL(12,3)", "", "123456.789"},
		{"uid", "VARCHAR", "", "6f1c9e0a-2b1d-4c3e-9f00-123456789abc"}, {"tm", "INTEGER", "", "10800004"},
	}
	var sel []string
	want := map[string]string{"n": "3"}
	for _, c := range cols {
		if c.expr == "" {
			c.expr = fmt.Sprintf(`"%s"`, c.name)
		}
		sel = append(sel, fmt.Sprintf(`typeof("%[1]s") AS "%[1]s_type", (%[2]s)::VARCHAR AS "%[1]s"`, c.name, c.expr))
		want[c.name+"_type"], want[c.name] = c.typ, c.want
	}
	query := fmt.Sprintf(`SELECT (SELECT count(*) FROM read_parquet('%[1]s/*.parquet')) AS n, %[2]s FROM read_parquet('%[1]s/*.parquet') WHERE id = `,
		out, strings.Join(sel, ", "))
	got, err := duckDB(t)(query + "0")
	if err != nil {
		t.Fatal(err)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("DuckDB reads %s as %q, want %q", k, got[k], w)
		}
	}
	// Nulls and empty collections.
	got, err = duckDB(t)(query + "1")
	if err != nil {
		t.Fatal(err)
	}
	for k, w := range map[string]string{"note": "<nil>", "lines": "[]", "counts": "[]", "by_sku": "{}", "qty": "4"} {
		if got[k] != w {
			t.Errorf("record 1: DuckDB reads %s as %q, want %q", k, got[k], w)
		}
	}

	wh := filepath.Join(dir, "lake")
	mustRun(t, append([]string{"run", "--sink", "iceberg://shop.every", "--warehouse", wh}, common...)...)
	loc := strings.TrimPrefix(icebergSQLite(filepath.Join(wh, "catalog.db")).metadataLocation(t, "shop", "every"), "file://")
	checkIcebergTypes(t, loc, map[string]string{
		"id": "long", "flag": "boolean", "qty": "int", "ratio": "float", "score": "double", "name": "string", "raw": "binary",
		"state": "string", "tag": "binary", "lines": "list<struct<sku: string, n: int?>?>", "counts": "map<string, long?>",
		"by_sku": "map<string, struct<sku: string, n: int?>?>", "note": "string?", "ship": "struct<city: string>", "day": "date",
		"at": "timestamptz", "at_us": "timestamptz", "local": "timestamptz", "price": "decimal(9, 2)", "cost": "decimal(12, 3)",
		"uid": "string", "tm": "int",
	})
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	tbl := icebergtest.MustRead(t, loc, icebergtest.WithColumns(names...))
	if len(tbl.Errors) > 0 || tbl.Rows != 3 || len(tbl.Data) != 3 {
		t.Fatalf("the reader read %d rows (%d), errors %v", tbl.Rows, len(tbl.Data), tbl.Errors)
	}
	rows := map[string]map[string]any{}
	for _, r := range tbl.Data {
		var row map[string]any
		if err := json.Unmarshal(r, &row); err != nil {
			t.Fatal(err)
		}
		rows[fmt.Sprint(row["id"])] = row
	}
	for col, w := range map[string]string{
		"counts": `[{"key":"a","value":"1"},{"key":"b","value":"-2"}]`, "by_sku": `[{"key":"x","value":{"n":5,"sku":"x"}}]`,
		"lines": `[{"n":2,"sku":"a"},{"n":null,"sku":"b"}]`, "day": `"2026-03-04"`, "price": `"-123.45"`, "cost": `"123456.789"`, "raw": `"\\x01\\x02\\x03"`,
		"tag": `"\\x09\\x08"`, "state": `"PAID"`, "uid": `"6f1c9e0a-2b1d-4c3e-9f00-123456789abc"`, "tm": "10800004",
		"ship": `{"city":"Lyon"}`, "note": `"hi"`, "ratio": "0.5", "flag": "true",
	} {
		v := rows["0"][col]
		if entries, ok := v.([]any); ok && col == "counts" {
			sort.Slice(entries, func(i, j int) bool {
				return fmt.Sprint(entries[i].(map[string]any)["key"]) < fmt.Sprint(entries[j].(map[string]any)["key"])
			})
		}
		if g, _ := json.Marshal(v); string(g) != w {
			t.Errorf("the Iceberg reader reads %s as %s, want %s", col, g, w)
		}
	}
	// DuckDB writes a timestamp in its time zone (the machine's).
	for _, col := range []string{"at", "local"} {
		v, _ := rows["0"][col].(string)
		ts, err := time.Parse("2006-01-02 15:04:05.999999-07", v)
		if err != nil {
			ts, err = time.Parse("2006-01-02 15:04:05.999999-07:00", v)
		}
		if err != nil || !ts.Equal(at) {
			t.Errorf("the Iceberg reader reads %s as %q (%v), want %s", col, v, err, at)
		}
	}
	if r := rows["1"]; r == nil || r["note"] != nil || fmt.Sprint(r["counts"]) != "[]" {
		t.Errorf("record 1 read as %v, want a null note and no counts", r)
	}
}

// checkIcebergTypes checks the current schema of the table whose metadata
// file is meta: each column's Iceberg type, "?" after an optional one.
func checkIcebergTypes(t *testing.T, meta string, want map[string]string) {
	t.Helper()
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Current int `json:"current-schema-id"`
		Schemas []struct {
			ID     int             `json:"schema-id"`
			Fields json.RawMessage `json:"fields"`
		} `json:"schemas"`
	}
	if err := json.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range md.Schemas {
		if s.ID != md.Current {
			continue
		}
		var fields []icebergField
		if err := json.Unmarshal(s.Fields, &fields); err != nil {
			t.Fatal(err)
		}
		for _, f := range fields {
			got[f.Name] = f.typeString()
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		for k := range want {
			if got[k] != want[k] {
				t.Errorf("the table's column %s is %s, want %s", k, got[k], want[k])
			}
		}
		t.Errorf("the table's columns %v, want %v", got, want)
	}
}

// icebergField is a field of an Iceberg schema in its JSON form.
type icebergField struct {
	Name     string          `json:"name"`
	Required bool            `json:"required"`
	Type     json.RawMessage `json:"type"`
}

func (f icebergField) typeString() string {
	s := icebergTypeString(f.Type)
	if !f.Required {
		s += "?"
	}
	return s
}

// icebergTypeString writes an Iceberg type (its JSON form) as
// list<E>, map<K, V>, struct<name: T, ...>, "?" after what is optional.
func icebergTypeString(raw json.RawMessage) string {
	var prim string
	if json.Unmarshal(raw, &prim) == nil {
		return prim
	}
	var t struct {
		Type            string          `json:"type"`
		Element         json.RawMessage `json:"element"`
		ElementRequired bool            `json:"element-required"`
		Key             json.RawMessage `json:"key"`
		Value           json.RawMessage `json:"value"`
		ValueRequired   bool            `json:"value-required"`
		Fields          []icebergField  `json:"fields"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return "?" + string(raw)
	}
	opt := map[bool]string{false: "?", true: ""}
	switch t.Type {
	case "list":
		return "list<" + icebergTypeString(t.Element) + opt[t.ElementRequired] + ">"
	case "map":
		return "map<" + icebergTypeString(t.Key) + ", " + icebergTypeString(t.Value) + opt[t.ValueRequired] + ">"
	case "struct":
		var fs []string
		for _, f := range t.Fields {
			fs = append(fs, f.Name+": "+f.typeString())
		}
		return "struct<" + strings.Join(fs, ", ") + ">"
	}
	return t.Type
}
