package bulk

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/filesink/filesink/source"
)

// Keys not in the schema, at the top level, in structs and in the structs
// of lists: by default the record is bad, with the key's path in the
// error, and leaves nothing behind; with DropUnknown the record is added
// without them and they are counted, once per accepted record, with
// their names.
func TestUnknownFields(t *testing.T) {
	s := loadSchema(t, "all_types.json")
	cases := []struct{ rec, path string }{
		{`{"id":1,"extra":2}`, "extra"},
		{`{"extra":{"a":[1,2]},"id":1}`, "extra"},
		{`{"id":1,"e\u0078tra":"x"}`, "extra"},
		{`{"id":1,"addr":{"city":"c","zip5":12345}}`, "addr.zip5"},
		{`{"id":1,"addr":{"city":"c","geo":{"lat":1,"lon":2}}}`, "addr.geo.lon"},
		{`{"id":1,"items":[{"qty":1},{"qty":2,"color":"red"}]}`, "items[].color"},
	}
	for _, name := range []string{"parquet", "arrow"} {
		t.Run(name+"/reject", func(t *testing.T) {
			f, err := NewFormat(name, s)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			w, _ := f.NewWriter(&buf)
			for _, c := range cases {
				err := w.Add([]byte(c.rec))
				var fe *FieldError
				if !errors.Is(err, source.ErrBadRecord) || !errors.As(err, &fe) || fe.Field != c.path || fe.Problem != "not in the schema" {
					t.Errorf("Add(%s) = %v; want a bad record naming field %q, not in the schema", c.rec, err, c.path)
				}
			}
			good := `{"id":7,"addr":{"city":"c","geo":{"lat":1}},"items":[{"qty":3}]}`
			if err := w.Add([]byte(good)); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got := readBack(t, name, s, buf.Bytes())
			compareRecords(t, s, got, expectRows(t, s, [][]byte{[]byte(good)}))
			release(got)
			if d := f.(interface{ Dropped() *Dropped }).Dropped(); d.Records() != 0 || d.Fields() != 0 {
				t.Errorf("reject mode counted %d records, %d fields dropped", d.Records(), d.Fields())
			}
		})
		t.Run(name+"/drop", func(t *testing.T) {
			f, err := NewFormat(name, s, WithUnknownFields(DropUnknown))
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			w, _ := f.NewWriter(&buf)
			var recs [][]byte
			for _, c := range cases {
				recs = append(recs, []byte(c.rec))
			}
			recs = append(recs, []byte(`{"id":8,"extra":1,"addr":{"city":"c","more":[],"zip5":0}}`), []byte(`{"id":9}`))
			for _, r := range recs {
				if err := w.Add(r); err != nil {
					t.Fatalf("Add(%s): %v", r, err)
				}
			}
			// Bad for another reason: not counted.
			if err := w.Add([]byte(`{"id":"x","extra":1}`)); !errors.Is(err, source.ErrBadRecord) {
				t.Fatalf("a string id with an unknown key: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got := readBack(t, name, s, buf.Bytes())
			compareRecords(t, s, got, expectRows(t, s, recs))
			release(got)
			d := f.(interface{ Dropped() *Dropped }).Dropped()
			wantNames := []string{"extra", "addr.zip5", "addr.geo.lon", "items[].color", "addr.more"}
			if d.Records() != 7 || d.Fields() != 9 || !slices.Equal(d.Names(), wantNames) {
				t.Errorf("dropped: %d records, %d fields, names %q; want 7, 9, %q", d.Records(), d.Fields(), d.Names(), wantNames)
			}
		})
	}
	// The names kept are bounded; the counts are not.
	f, _ := Parquet(s, WithUnknownFields(DropUnknown))
	w, _ := f.NewParquetWriter(&bytes.Buffer{})
	for i := range 40 {
		if err := w.Add(fmt.Appendf(nil, `{"id":%d,"k%d":1}`, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	if d := f.Dropped(); d.Fields() != 40 || len(d.Names()) != maxDroppedNames || d.Names()[0] != "k0" {
		t.Errorf("40 distinct keys dropped: %d fields, names %q", d.Fields(), d.Names())
	}
	if _, err := Parquet(s, WithUnknownFields("ignore")); err == nil || !strings.Contains(err.Error(), `"ignore"`) {
		t.Errorf("WithUnknownFields(\"ignore\"): %v", err)
	}
}

// readBack reads the record batches of a Parquet or Arrow IPC file.
func readBack(t *testing.T, format string, s *Schema, data []byte) []arrow.Record {
	t.Helper()
	if format == "parquet" {
		got, _ := readParquet(t, s, data)
		return got
	}
	return readArrowIPC(t, data)
}
