package bulk_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/filesink/bulk"
)

func TestCountRecordsBulk(t *testing.T) {
	schema, err := bulk.ParseSchema([]byte(`{"fields": [{"name": "id", "type": "int64"}, {"name": "s", "type": "string"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"parquet", "arrow"} {
		bf, err := bulk.NewFormat(name, schema, bulk.WithRowGroupRows(7), bulk.WithRowGroupBytes(-1))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		w, err := bf.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		const n = 50 // several row groups (record batches)
		for i := range n {
			if err := w.Add(fmt.Appendf(nil, `{"id":%d,"s":"x%d"}`, i, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f := &filesink.ManifestFile{Path: "b/part-0" + bf.Extension()}
		got, err := filesink.CountRecords(f, bytes.NewReader(buf.Bytes()), bulk.Counters()...)
		if err != nil || got != n {
			t.Errorf("%s: CountRecords = %d, %v; want %d", name, got, err, n)
		}
		rc, ok := bf.(filesink.RecordCounter)
		if !ok {
			t.Fatalf("%s format is not a RecordCounter", name)
		}
		if got, err := rc.CountRecords(bytes.NewReader(buf.Bytes()), false); err != nil || got != n {
			t.Errorf("%s: format's CountRecords = %d, %v; want %d", name, got, err, n)
		}
		if _, err := filesink.CountRecords(f, bytes.NewReader(buf.Bytes()[:buf.Len()/2]), bulk.Counters()...); err == nil {
			t.Errorf("%s: a truncated file was counted", name)
		}
	}
}
