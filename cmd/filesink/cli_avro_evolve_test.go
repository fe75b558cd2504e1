package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/filesink/filesink/internal/testutil/icebergtest"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
)

// The versions of the evolution tests' value schema: v2 adds a nullable
// column and one with a default; v3 retypes price (incompatible).
const (
	avroOrderV2 = `{"type": "record", "name": "Order", "fields": [
	{"name": "id", "type": "long"},
	{"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
	{"name": "note", "type": ["null", "string"], "default": null},
	{"name": "qty", "type": ["null", "long"], "default": null},
	{"name": "region", "type": "string", "default": "eu"}]}`
	avroOrderV3 = `{"type": "record", "name": "Order", "fields": [
	{"name": "id", "type": "long"},
	{"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "price", "type": "string"}]}`
)

// avroTopic is a topic of Avro orders and the registry of their schemas.
type avroTopic struct {
	kc      *kafkatest.Cluster
	reg     *srfake.Registry
	schemas map[string]int // schema text -> id
}

func newAvroTopic(t *testing.T) *avroTopic {
	reg := srfake.New()
	t.Cleanup(reg.Close)
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	if r := cl.SetCompatibility(context.Background(), sr.SetCompatibility{Level: sr.CompatNone}, "orders-value"); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	return &avroTopic{kc: kafkatest.Start(t, kafkatest.Topic{Name: "orders", Partitions: 1}), reg: reg, schemas: map[string]int{}}
}

// produce registers schema if it is new and produces the orders
// [from, to) with it; extra sets more fields of each.
func (a *avroTopic) produce(t *testing.T, schema string, from, to int64, extra func(n int64, m map[string]any)) {
	t.Helper()
	id, ok := a.schemas[schema]
	if !ok {
		var err error
		if id, _, err = a.reg.RegisterSchema("orders-value", sr.Schema{Schema: schema, Type: sr.TypeAvro}); err != nil {
			t.Fatal(err)
		}
		a.schemas[schema] = id
	}
	s := hamba.MustParse(schema)
	var vals []string
	for n := from; n < to; n++ {
		m := avroOrderOf(n)
		if extra != nil {
			extra(n, m)
		}
		vals = append(vals, string(avroFrame(t, id, s, m)))
	}
	a.kc.MustProduce(t, "orders", 0, vals...)
}

// A producer moves to a compatible version mid-topic while the job runs:
// the job does not stop, the files roll, the new columns are typed
// (qty BIGINT, region VARCHAR), a record of the old version after the
// change gets the new field's default, and the change is logged once.
// Then an incompatible version (price retyped) stops the job with one
// line naming the subject, both versions and the field, and every record
// committed before it is there once.
func TestAvroSchemaEvolution(t *testing.T) {
	for _, kind := range []string{"parquet", "iceberg"} {
		t.Run(kind, func(t *testing.T) { testAvroEvolution(t, kind) })
	}
}

func testAvroEvolution(t *testing.T, kind string) {
	a := newAvroTopic(t)
	a.produce(t, avroOrder, 0, 200, nil)
	dir := t.TempDir()
	args := []string{"run", "--source", "kafka://" + a.kc.Bootstrap() + "/orders", "--value-format", "avro",
		"--schema-registry", a.reg.URL(), "--checkpoint-interval", "200ms", "--state", filepath.Join(dir, "state")}
	out := filepath.Join(dir, "out")
	var count func(c orderCond) int
	if kind == "parquet" {
		args = append(args, "--sink", out, "--format", "parquet")
		count = func(c orderCond) int { return avroParquetCount(t, out, c.sql) }
	} else {
		wh := filepath.Join(dir, "lake")
		args = append(args, "--sink", "iceberg://shop.orders", "--warehouse", wh)
		count = func(c orderCond) int { return avroIcebergCount(t, wh, c.match) }
	}
	all := orderCond{"true", func(orderRow) bool { return true }}
	done := make(chan cliResult, 1)
	go func() { done <- cliWith(t, strings.NewReader(""), nil, args...) }()
	waitRun(t, done, func() bool { return count(all) == 200 })

	a.produce(t, avroOrderV2, 200, 400, func(n int64, m map[string]any) { m["qty"] = n; m["region"] = "us" })
	a.produce(t, avroOrder, 400, 450, nil) // a producer still on the first version
	waitRun(t, done, func() bool { return count(all) == 450 })

	a.produce(t, avroOrderV3, 450, 451, func(n int64, m map[string]any) { m["price"] = "4.50" })
	var r cliResult
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the job did not stop on the incompatible schema")
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	last := lines[len(lines)-1]
	if r.code == 0 || !strings.Contains(last, "subject orders-value: version 3 (id") || !strings.Contains(last, "field price changes type from decimal(9,2) to string") ||
		!strings.Contains(last, "since version 2 (id") {
		t.Errorf("the incompatible schema: want one line naming the subject, both versions and the field, got exit %d, %q", r.code, last)
	}
	if n := strings.Count(r.stderr, "the records' schema changed: new columns"); n != 1 {
		t.Errorf("the change is logged %d times, want once:\n%s", n, r.stderr)
	}
	if n := count(all); n != 450 {
		t.Errorf("%d records after the stop, want 450", n)
	}
	if n := count(orderCond{"qty = id AND region = 'us'", func(r orderRow) bool { return r.Qty != nil && *r.Qty == r.ID && r.Region != nil && *r.Region == "us" }}); n != 200 {
		t.Errorf("%d records of version 2 with their new columns, want 200", n)
	}
	if n := count(orderCond{"id >= 400 AND qty IS NULL AND region = 'eu'", func(r orderRow) bool { return r.ID >= 400 && r.Qty == nil && r.Region != nil && *r.Region == "eu" }}); n != 50 {
		t.Errorf("%d old-version records after the change with the default region, want 50", n)
	}
	st := mustRun(t, "state", "--state", filepath.Join(dir, "state"))
	if !strings.Contains(st.stdout, "schemas: orders/0: v1 (id 1), v2 (id 2)") {
		t.Errorf("state does not show the schemas seen per partition:\n%s\nrun stderr:\n%s", st.stdout, r.stderr)
	}
	if kind != "iceberg" {
		return // a new process starts part files from the registry's newest schema
	}
	// A rerun stops on the same record: the table keeps the columns, and
	// nothing committed is lost.
	r = cli(t, append(args, "--bounded")...)
	if r.code == 0 || !strings.Contains(r.stderr, "field price changes type") || count(all) != 450 {
		t.Errorf("rerun after the incompatible schema: %v; %d records", r, count(all))
	}
}

// waitRun polls cond until it holds; a run that ends first fails the test.
func waitRun(t *testing.T, done <-chan cliResult, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		select {
		case r := <-done:
			t.Fatalf("the job ended early: %v", r)
		case <-time.After(300 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the job")
		}
	}
}

// avroParquetCount counts the distinct ids of the orders in the part
// files under out that match where (0 while there are none).
func avroParquetCount(t *testing.T, out, where string) int {
	files, _ := filepath.Glob(filepath.Join(out, "*.parquet"))
	if len(files) == 0 {
		return 0
	}
	got, err := duckDB(t)(fmt.Sprintf(`SELECT count(*) AS n, count(DISTINCT id) AS d FROM read_parquet('%s/*.parquet', union_by_name=true) WHERE %s`, out, where))
	if err != nil {
		t.Fatal(err)
	}
	if got["n"] != got["d"] {
		t.Fatalf("duplicates: %v", got)
	}
	var n int
	fmt.Sscan(got["n"], &n)
	return n
}

// orderCond selects orders: SQL for DuckDB, match for the rows of the
// Iceberg reader.
type orderCond struct {
	sql   string
	match func(orderRow) bool
}

// orderRow is an order as the Iceberg reader gives it (64-bit integers
// as strings).
type orderRow struct {
	ID     int64   `json:"id,string"`
	Qty    *int64  `json:"qty,string"`
	Region *string `json:"region"`
}

// avroIcebergCount counts the rows of the table shop.orders that match
// (0 while there is no table); an id twice fails the test.
func avroIcebergCount(t *testing.T, wh string, match func(orderRow) bool) int {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(wh, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var loc string
	if err := db.QueryRow("SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'shop' AND table_name = 'orders'").Scan(&loc); err != nil {
		return 0 // no catalog or no table yet
	}
	tbl := icebergtest.MustRead(t, strings.TrimPrefix(loc, "file://"), icebergtest.WithColumns("id", "qty", "region"))
	seen, n := map[int64]bool{}, 0
	for _, row := range tbl.Data {
		var r orderRow
		if err := json.Unmarshal(row, &r); err != nil {
			t.Fatalf("row %s: %v", row, err)
		}
		if seen[r.ID] {
			t.Fatalf("order %d twice in the table", r.ID)
		}
		seen[r.ID] = true
		if match(r) {
			n++
		}
	}
	return n
}

// Values whose schema is Protobuf or JSON Schema (the same wire format)
// are refused with one line naming the schema's type, at the start when
// the subject's newest schema is one, during the run otherwise; nothing
// is written for them.
func TestAvroOtherSchemaTypes(t *testing.T) {
	a := newAvroTopic(t)
	a.produce(t, avroOrder, 0, 10, nil)
	pid, _, err := a.reg.RegisterSchema("other", sr.Schema{Schema: `syntax = "proto3"; message M { int64 id = 1; }`, Type: sr.TypeProtobuf})
	if err != nil {
		t.Fatal(err)
	}
	h := []byte{0, 0, 0, 0, 0, 0} // a Protobuf value: the header and message index 0
	binary.BigEndian.PutUint32(h[1:5], uint32(pid))
	a.kc.MustProduce(t, "orders", 0, string(h))
	dir := t.TempDir()
	r := cli(t, "run", "--source", "kafka://"+a.kc.Bootstrap()+"/orders", "--bounded", "--value-format", "avro",
		"--schema-registry", a.reg.URL(), "--sink", filepath.Join(dir, "out"), "--format", "parquet", "--state", filepath.Join(dir, "state"))
	if r.code == 0 || !strings.Contains(r.stderr, "is PROTOBUF, not Avro") || strings.Count(strings.TrimSpace(lastLine(r.stderr)), "\n") > 0 {
		t.Errorf("a Protobuf value: want a stop naming its type, got %v", r)
	}
	if _, _, err := a.reg.RegisterSchema("orders-value", sr.Schema{Schema: `{"type": "object"}`, Type: sr.TypeJSON}); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "run", "--source", "kafka://"+a.kc.Bootstrap()+"/orders", "--bounded", "--value-format", "avro",
		"--schema-registry", a.reg.URL(), "--sink", filepath.Join(dir, "out2"), "--format", "parquet")
	if r.code != 2 || !strings.Contains(r.stderr, "is JSON, not Avro") {
		t.Errorf("a JSON Schema subject: want a one-line refusal at the start, got %v", r)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// --key-format avro: each record's Avro key lands in the first column,
// key, typed from the TOPIC-key subject (a struct here); a record without
// a key gets null, one whose key is not Avro goes to the dead letters.
func TestAvroKeys(t *testing.T) {
	a := newAvroTopic(t)
	const keySchema = `{"type": "record", "name": "K", "fields": [{"name": "customer", "type": "string"}]}`
	kid, _, err := a.reg.RegisterSchema("orders-key", sr.Schema{Schema: keySchema, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	vid, _, err := a.reg.RegisterSchema("orders-value", sr.Schema{Schema: avroOrder, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	frame := func(id int, s string, v any) []byte { return avroFrame(t, id, hamba.MustParse(s), v) }
	var recs []*kgo.Record
	for n := range int64(100) {
		v := frame(vid, avroOrder, avroOrderOf(n))
		var k []byte
		switch {
		case n == 98:
			k = []byte("plain") // not Avro: a bad record
		case n < 98:
			k = frame(kid, keySchema, map[string]any{"customer": fmt.Sprintf("c%d", n%7)})
		} // n == 99: no key
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: 0, Key: k, Value: v})
	}
	if err := a.kc.ProduceRecords(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	common := []string{"--source", "kafka://" + a.kc.Bootstrap() + "/orders", "--bounded", "--value-format", "avro", "--key-format", "avro",
		"--schema-registry", a.reg.URL(), "--on-bad-record", "skip"}
	mustRun(t, append([]string{"run", "--sink", out, "--format", "parquet"}, common...)...)
	got, err := duckDB(t)(fmt.Sprintf(`SELECT count(*) AS n, count(key) AS keyed, typeof(any_value(key)) AS key_type,
		count(DISTINCT key.customer) AS customers, max(id) FILTER (WHERE key IS NULL) AS unkeyed FROM read_parquet('%s/*.parquet')`, out))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"n": "99", "keyed": "98", "key_type": "STRUCT(customer VARCHAR)", "customers": "7", "unkeyed": "99"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DuckDB reads %v, want %v", got, want)
	}
	dead, _ := filepath.Glob(filepath.Join(out, "_dead-letter", "*"))
	if len(dead) != 1 {
		t.Fatalf("dead letters %v, want one file", dead)
	}
	if b, _ := os.ReadFile(dead[0]); !strings.Contains(string(b), "key: ") || !strings.Contains(string(b), "orders/0:98") {
		t.Errorf("the dead letter does not name the record and its key: %s", b)
	}

	wh := filepath.Join(dir, "lake")
	mustRun(t, append([]string{"run", "--sink", "iceberg://shop.orders", "--warehouse", wh}, common...)...)
	loc := icebergSQLite(filepath.Join(wh, "catalog.db")).metadataLocation(t, "shop", "orders")
	tbl := icebergtest.MustRead(t, strings.TrimPrefix(loc, "file://"), icebergtest.WithColumns("id", "key"))
	keyed := 0
	for _, row := range tbl.Data {
		var r struct {
			Key *struct{ Customer string } `json:"key"`
		}
		if err := json.Unmarshal(row, &r); err != nil {
			t.Fatalf("row %s: %v", row, err)
		}
		if r.Key != nil && strings.HasPrefix(r.Key.Customer, "c") {
			keyed++
		}
	}
	if tbl.Rows != 99 || keyed != 98 {
		t.Errorf("table: %d rows, %d with their key, want 99 and 98", tbl.Rows, keyed)
	}
}
