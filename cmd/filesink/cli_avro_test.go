package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
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
			body, err := hamba.Marshal(s, map[string]any{"id": n, "at": time.UnixMilli(1767225600000 + n).UTC(),
				"price": big.NewRat(n, 100), "note": nil})
			if err != nil {
				t.Fatal(err)
			}
			h := []byte{0, 0, 0, 0, 0}
			binary.BigEndian.PutUint32(h[1:], uint32(id))
			vals = append(vals, string(append(h, body...)))
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
