package bulk

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/source"
)

func TestParseSchemaAllTypes(t *testing.T) {
	s := loadSchema(t, "all_types.json")
	want := []string{
		"id: type=int64",
		"i32: type=int32, nullable",
		"f32: type=float32, nullable",
		"f64: type=float64, nullable",
		"ok: type=bool, nullable",
		"s: type=utf8, nullable",
		"bin: type=binary, nullable",
		"ts_ms: type=timestamp[ms, tz=UTC], nullable",
		"ts_us: type=timestamp[us, tz=UTC], nullable",
		"day: type=date32, nullable",
		"price: type=decimal(10, 2), nullable",
		"big: type=decimal(38, 4), nullable",
		"tags: type=list<element: utf8, nullable>, nullable",
		"matrix: type=list<element: list<element: int32, nullable>, nullable>, nullable",
		"addr: type=struct<city: utf8, zip: int32 nullable, geo: struct<lat: float64 nullable> nullable>, nullable",
		"items: type=list<element: struct<sku: utf8 nullable, qty: int64>, nullable>, nullable",
	}
	fs := s.Arrow().Fields()
	if len(fs) != len(want) {
		t.Fatalf("%d fields, want %d", len(fs), len(want))
	}
	for i, f := range fs {
		if got := f.String(); got != want[i] {
			t.Errorf("field %d: %s, want %s", i, got, want[i])
		}
	}
	if st := fs[14].Type.(*arrow.StructType); st.Field(0).Nullable || !st.Field(1).Nullable {
		t.Errorf("addr.city must be required, addr.zip nullable: %v", st)
	}
	// The document round-trips through MarshalJSON.
	doc, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	s2, err := ParseSchema(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !s2.Arrow().Equal(s.Arrow()) {
		t.Errorf("re-parsed schema differs:\n%v\n%v", s2.Arrow(), s.Arrow())
	}
	for _, typ := range []string{"timestamp_s", "timestamp_ns", "decimal(38,0)", "decimal( 5 , 5 )", "list<decimal(3,1)>", "list<list<list<bool>>>"} {
		if _, err := ParseSchema([]byte(`{"fields":[{"name":"x","type":"` + typ + `"}]}`)); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
}

func TestParseSchemaErrors(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"fields":[]}`, "no fields"},
		{`{"fields":[{"name":"a","type":"int"}]}`, `field "a": unknown type "int"`},
		{`{"fields":[{"name":"a","type":"int64"},{"name":"a","type":"int64"}]}`, `field "a": duplicate field name`},
		{`{"fields":[{"name":"","type":"int64"}]}`, `empty name`},
		{`{"fields":[{"name":"a"}]}`, `field "a": missing "type"`},
		{`{"fields":[{"name":"a","type":"int64","nulable":false}]}`, `unknown field "nulable"`},
		{`{"fields":[{"name":"a","type":"decimal(39,2)"}]}`, `field "a": "decimal(39,2)"`},
		{`{"fields":[{"name":"a","type":"decimal(5,6)"}]}`, `field "a": "decimal(5,6)"`},
		{`{"fields":[{"name":"a","type":"decimal(5)"}]}`, `want decimal(P,S)`},
		{`{"fields":[{"name":"a","type":"list<>"}]}`, `field "a[]": unknown type ""`},
		{`{"fields":[{"name":"a","type":"list<int8>"}]}`, `field "a[]": unknown type "int8"`},
		{`{"fields":[{"name":"a","type":"timestamp_min"}]}`, `unknown type "timestamp_min"`},
		{`{"fields":[{"name":"a","type":"struct"}]}`, `field "a": a struct needs at least one field`},
		{`{"fields":[{"name":"a","type":"struct","fields":[{"name":"b","type":"struct","fields":[{"name":"c","type":"nope"}]}]}]}`, `field "a.b.c": unknown type "nope"`},
		{`{"fields":[{"name":"a","type":"string","fields":[{"name":"b","type":"int64"}]}]}`, `field "a": "fields" given for type "string"`},
		{`{"fields":[{"name":"a","type":"list<struct>","fields":[{"name":"b","type":"int9"}]}]}`, `field "a[].b": unknown type "int9"`},
		{`{"fields":[{"name":"a","type":"int64"}]} {}`, `data after the schema document`},
		{`[1]`, `not a schema document`},
	} {
		_, err := ParseSchema([]byte(c.doc))
		var se *SchemaError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want a *SchemaError containing %q", c.doc, err, c.want)
		}
	}
}

func writeAll(t testing.TB, f filesink.BulkFormat, recs [][]byte, flushEvery int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := f.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if err := w.Add(r); err != nil {
			t.Fatalf("record %d %s: %v", i, r, err)
		}
		if flushEvery > 0 && (i+1)%flushEvery == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestParquetRoundTrip(t *testing.T) {
	s := loadSchema(t, "all_types.json")
	recs := genRecords(2500, 1)
	want := expectRows(t, s, recs)
	for _, comp := range []Compression{"", Snappy, Zstd, Gzip, Uncompressed} {
		for _, dict := range []Dictionary{DictAuto, DictOn, DictOff} {
			t.Run(fmt.Sprintf("%s/%s", comp, dict), func(t *testing.T) {
				f, err := Parquet(s, WithCompression(comp), WithDictionary(dict), WithUnknownFields(DropUnknown))
				if err != nil {
					t.Fatal(err)
				}
				data := writeAll(t, f, recs, 1000)
				got, groups := readParquet(t, s, data)
				if groups != 3 {
					t.Errorf("%d row groups, want 3 (flush at 1000 and 2000, close)", groups)
				}
				compareRecords(t, s, got, want)
				release(got)
			})
		}
	}
}

func release(recs []arrow.Record) {
	for _, r := range recs {
		r.Release()
	}
}

func TestArrowIPCRoundTrip(t *testing.T) {
	s := loadSchema(t, "all_types.json")
	recs := genRecords(2500, 2)
	want := expectRows(t, s, recs)
	for _, comp := range []Compression{"", Uncompressed, LZ4, Zstd} {
		t.Run(string(comp), func(t *testing.T) {
			f, err := ArrowIPC(s, WithCompression(comp), WithUnknownFields(DropUnknown))
			if err != nil {
				t.Fatal(err)
			}
			if f.Extension() != ".arrow" {
				t.Errorf("extension %q", f.Extension())
			}
			data := writeAll(t, f, recs, 1000)
			got := readArrowIPC(t, data)
			if len(got) != 3 {
				t.Errorf("%d record batches, want 3", len(got))
			}
			compareRecords(t, s, got, want)
			release(got)
		})
	}
}

func TestEmptyFiles(t *testing.T) {
	s := loadSchema(t, "all_types.json")
	pf, _ := Parquet(s)
	got, groups := readParquet(t, s, writeAll(t, pf, nil, 0))
	if len(got) != 0 || groups != 0 {
		t.Errorf("empty Parquet file has %d batches, %d row groups", len(got), groups)
	}
	af, _ := ArrowIPC(s)
	if got := readArrowIPC(t, writeAll(t, af, nil, 0)); len(got) != 0 {
		t.Errorf("empty Arrow file has %d batches", len(got))
	}
}

func TestBadRecords(t *testing.T) {
	s := loadSchema(t, "all_types.json")
	good := `{"id":7,"s":"ok"}`
	for _, c := range []struct{ rec, field, problem string }{
		{`{"s":"x"}`, "id", "missing required field"},
		{`{"id":null}`, "id", "not nullable"},
		{`{"id":"7"}`, "id", "want int64, got a string"},
		{`{"id":1.5}`, "id", "not an integer"},
		{`{"id":1e3}`, "id", "not an integer"},
		{`{"id":9223372036854775808}`, "id", "overflows int64"},
		{`{"id":-9223372036854775809}`, "id", "overflows int64"},
		{`{"id":1,"i32":2147483648}`, "i32", "overflows int32"},
		{`{"id":1,"i32":-2147483649}`, "i32", "overflows int32"},
		{`{"id":1,"f32":1e39}`, "f32", "overflows float32"},
		{`{"id":1,"f64":1e309}`, "f64", "overflows float64"},
		{`{"id":1,"ok":1}`, "ok", "want bool, got a number"},
		{`{"id":1,"s":5}`, "s", "want string, got a number"},
		{`{"id":1,"bin":"!!"}`, "bin", "invalid base64"},
		{`{"id":1,"ts_ms":1.5}`, "ts_ms", "not an integer number of milliseconds"},
		{`{"id":1,"ts_ms":"yesterday"}`, "ts_ms", "invalid RFC 3339"},
		{`{"id":1,"ts_us":true}`, "ts_us", "want timestamp"},
		{`{"id":1,"day":"2024-02-30"}`, "day", "invalid date"},
		{`{"id":1,"day":3000000000}`, "day", "not a day number"},
		{`{"id":1,"price":123456789.12}`, "price", "overflows decimal(10,2)"},
		{`{"id":1,"price":1.234}`, "price", "more than 2 fractional digits"},
		{`{"id":1,"price":"12x"}`, "price", "not a decimal number"},
		{`{"id":1,"price":"1e999"}`, "price", "overflows"},
		{`{"id":1,"big":123456789012345678901234567890123456789}`, "big", "overflows decimal(38,4)"},
		{`{"id":1,"tags":"a"}`, "tags", "want a list"},
		{`{"id":1,"tags":["a",1]}`, "tags[]", "want string, got a number"},
		{`{"id":1,"matrix":[[1],[2147483648]]}`, "matrix[][]", "overflows int32"},
		{`{"id":1,"addr":{"zip":1}}`, "addr.city", "missing required field"},
		{`{"id":1,"addr":{"city":"x","geo":{"lat":"n"}}}`, "addr.geo.lat", "want float64, got a string"},
		{`{"id":1,"addr":[]}`, "addr", "want a struct"},
		{`{"id":1,"items":[{"sku":"a"}]}`, "items[].qty", "missing required field"},
		{`{"id":1,"items":[{"qty":null}]}`, "items[].qty", "not nullable"},
		{`{"id":1,"s":"x"`, "", "invalid JSON"},
		{`{"id":1,}`, "", "invalid JSON"},
		{`{"id":1} x`, "", "data after"},
		{`[1]`, "", "not a JSON object"},
		{``, "", "empty record"},
		{"{\"id\":1,\"s\":\"\x01\"}", "", "control character"},
		{`{"id":1,"s":"\q"}`, "", "invalid escape"},
		{`{"id":1,"zz":[1,}`, "", "invalid JSON"},
		{`{"id":1,"zz":tru}`, "", "invalid literal"},
		{`{"id":01}`, "", "invalid JSON"},
	} {
		for _, name := range []string{"parquet", "arrow"} {
			f, err := NewFormat(name, s, WithUnknownFields(DropUnknown)) // the key zz: syntax checked when skipped
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			w, _ := f.NewWriter(&buf)
			if err := w.Add([]byte(good)); err != nil {
				t.Fatal(err)
			}
			before := w.Buffered()
			err = w.Add([]byte(c.rec))
			var fe *FieldError
			if !errors.Is(err, source.ErrBadRecord) || !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Problem, c.problem) {
				t.Errorf("%s %s: error %v, want field %q: ...%s...", name, c.rec, err, c.field, c.problem)
			}
			if w.Buffered() < before {
				t.Errorf("Buffered dropped after a bad record")
			}
			if err := w.Add([]byte(`{"id":8,"s":"next","addr":{"city":"c"},"tags":["t"],"items":[{"qty":1}],"matrix":[[3]]}`)); err != nil {
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
			want := expectRows(t, s, [][]byte{[]byte(good), []byte(`{"id":8,"s":"next","addr":{"city":"c"},"tags":["t"],"items":[{"qty":1}],"matrix":[[3]]}`)})
			compareRecords(t, s, got, want)
			release(got)
		}
	}
}

func TestFlushRowGroupsAndBuffered(t *testing.T) {
	s := loadSchema(t, "all_types.json")
	recs := genRecords(3000, 3)
	f, _ := Parquet(s, WithUnknownFields(DropUnknown))
	var buf bytes.Buffer
	w, _ := f.NewParquetWriter(&buf)
	if w.Buffered() != 0 {
		t.Errorf("new writer buffers %d bytes", w.Buffered())
	}
	var peak int64
	for i, r := range recs {
		prev := w.Buffered()
		if err := w.Add(r); err != nil {
			t.Fatal(err)
		}
		if w.Buffered() < prev {
			t.Fatalf("Buffered dropped from %d to %d on Add", prev, w.Buffered())
		}
		peak = w.Buffered()
		if i%1000 == 999 {
			if buf.Len() != 0 && i == 999 {
				t.Errorf("bytes written before the first Flush")
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if after := w.Buffered(); after > peak/2 {
				t.Errorf("Buffered %d after Flush, %d before", after, peak)
			}
		}
	}
	if peak < 100<<10 {
		t.Errorf("Buffered peaked at %d bytes for 1000 rows: not counting", peak)
	}
	if err := w.Flush(); err != nil { // nothing to flush: no empty row group
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.Add(recs[0]); !errors.Is(err, errClosed) {
		t.Errorf("Add after Close: %v", err)
	}
	got, groups := readParquet(t, s, buf.Bytes())
	if groups != 3 {
		t.Errorf("%d row groups, want 3", groups)
	}
	compareRecords(t, s, got, expectRows(t, s, recs))
	release(got)
}

func TestRowGroupSizeOptions(t *testing.T) {
	s := loadSchema(t, "all_types.json")
	recs := genRecords(1000, 4)
	f, _ := Parquet(s, WithRowGroupRows(300), WithUnknownFields(DropUnknown))
	got, groups := readParquet(t, s, writeAll(t, f, recs, 0))
	if groups != 4 {
		t.Errorf("RowGroupRows 300: %d row groups for 1000 rows, want 4", groups)
	}
	release(got)
	f, _ = Parquet(s, WithRowGroupBytes(64<<10), WithUnknownFields(DropUnknown))
	got, groups = readParquet(t, s, writeAll(t, f, recs, 0))
	if groups < 3 {
		t.Errorf("RowGroupBytes 64 KiB: %d row groups", groups)
	}
	compareRecords(t, s, got, expectRows(t, s, recs))
	release(got)
}

func TestDictionaryAuto(t *testing.T) {
	s, err := ParseSchema([]byte(`{"fields":[{"name":"id","type":"int64"},{"name":"country","type":"string"},{"name":"text","type":"string"},{"name":"flag","type":"bool"},{"name":"tags","type":"list<string>"},` +
		`{"name":"small","type":"int32"},{"name":"mid","type":"int32"},{"name":"mid64","type":"int64"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := Parquet(s)
	var buf bytes.Buffer
	w, _ := f.NewParquetWriter(&buf)
	for i := 0; i < 5000; i++ {
		// small: 200 distinct int32s (a dictionary); mid: 1,000 (not for
		// 4-byte values); mid64: 1,000 int64s (a dictionary).
		rec := fmt.Sprintf(`{"id":%d,"country":"c%d","text":"free text %d","flag":true,"tags":["t%d"],"small":%d,"mid":%d,"mid64":%d}`, i, i%20, i*7919, i%3, i%200, i%1000, i%1000)
		if err := w.Add([]byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// DictionaryColumns is kept after Close for inspection.
	got := w.DictionaryColumns()
	want := map[string]bool{"id": false, "country": true, "text": false, "flag": false, "tags.list.element": true, "small": true, "mid": false, "mid64": true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dictionary columns %v, want %v", got, want)
	}
}

func TestAddArrow(t *testing.T) {
	s := loadSchema(t, "all_types.json")
	recs := genRecords(600, 5)
	// A batch of records 150..299, built with Arrow builders as a library
	// user would (here with a converter of its own).
	conv := dropConverter(s, memory.DefaultAllocator)
	defer conv.release()
	for _, r := range recs[150:300] {
		if err := conv.add(r); err != nil {
			t.Fatal(err)
		}
	}
	batch := conv.record()
	defer batch.Release()
	other := array.NewRecord(arrow.NewSchema(s.Arrow().Fields()[:1], nil), []arrow.Array{batch.Column(0)}, batch.NumRows())
	defer other.Release()
	for _, name := range []string{"parquet", "arrow"} {
		f, _ := NewFormat(name, s, WithUnknownFields(DropUnknown))
		var buf bytes.Buffer
		w, _ := f.NewWriter(&buf)
		aw := w.(interface{ AddArrow(arrow.Record) error })
		for _, r := range recs[:150] {
			if err := w.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := aw.AddArrow(other); !errors.Is(err, source.ErrBadRecord) {
			t.Errorf("%s: AddArrow of another schema: %v", name, err)
		}
		if err := aw.AddArrow(batch); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs[300:] {
			if err := w.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		var got []arrow.Record
		if name == "parquet" {
			var groups int
			got, groups = readParquet(t, s, buf.Bytes())
			if groups != 1 {
				t.Errorf("%d row groups, want 1 (JSON and Arrow rows share a row group)", groups)
			}
		} else {
			got = readArrowIPC(t, buf.Bytes())
		}
		compareRecords(t, s, got, expectRows(t, s, recs))
		release(got)
	}
}

func TestAddArrowNullInRequired(t *testing.T) {
	s, _ := ParseSchema([]byte(`{"fields":[{"name":"id","type":"int64","nullable":false}]}`))
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendNull()
	col := b.NewArray()
	rec := array.NewRecord(s.Arrow(), []arrow.Array{col}, 1)
	f, _ := Parquet(s)
	w, _ := f.NewParquetWriter(&bytes.Buffer{})
	var fe *FieldError
	if err := w.AddArrow(rec); !errors.As(err, &fe) || fe.Field != "id" {
		t.Errorf("AddArrow with a null id: %v", err)
	}
	if w.Rows() != 0 {
		t.Errorf("Rows %d after a rejected batch", w.Rows())
	}
}

// Builders reserved from the previous row group's sizes do not end row
// groups early by themselves: every row group but the last holds about as
// many rows as the first, and the data comes back whole.
func TestRowGroupsStayWholeWithReserve(t *testing.T) {
	s, err := ParseSchema([]byte(benchSchemaDoc))
	if err != nil {
		t.Fatal(err)
	}
	d := makeBenchData(20000)
	for _, limit := range []int64{64 << 10, 256 << 10, 1 << 20} {
		f, _ := Parquet(s, WithRowGroupBytes(limit))
		var buf bytes.Buffer
		w, _ := f.NewParquetWriter(&buf)
		for _, l := range d.lines {
			if err := w.Add(l); err != nil {
				t.Fatal(err)
			}
			// The row group being built and the one being encoded (see
			// ParquetWriter; each may pass the limit by the regrowth of
			// the buffer that reached it), and the spool's chunks of
			// encoded bytes (at most half a row group).
			if got := w.Buffered(); got > 4*limit {
				t.Fatalf("limit %d: Buffered %d", limit, got)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		md := pf.MetaData()
		var total int64
		first := md.RowGroup(0).NumRows()
		for i := 0; i < pf.NumRowGroups(); i++ {
			n := md.RowGroup(i).NumRows()
			total += n
			if i < pf.NumRowGroups()-1 && n < first/2 {
				t.Errorf("limit %d: row group %d has %d rows, the first %d", limit, i, n, first)
			}
		}
		if total != int64(len(d.lines)) || pf.NumRowGroups() < 3 {
			t.Errorf("limit %d: %d rows in %d row groups", limit, total, pf.NumRowGroups())
		}
		pf.Close()
	}
}

// TestPageBytes checks that WithPageBytes (and its default) sets the
// size at which a Parquet column's data pages are cut, that the rows read
// back whatever the size, and that a negative size is refused.
func TestPageBytes(t *testing.T) {
	s, err := ParseSchema([]byte(benchSchemaDoc))
	if err != nil {
		t.Fatal(err)
	}
	d := makeBenchData(20000)
	// pages returns the data pages of the column "note" (long, distinct
	// strings: plain encoded) in the file's one row group, and the
	// column's uncompressed bytes.
	pages := func(pageBytes int64) (int, int64) {
		t.Helper()
		f, err := Parquet(s, WithPageBytes(pageBytes), WithRowGroupRows(len(d.lines)))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		w, _ := f.NewParquetWriter(&buf)
		for _, l := range d.lines {
			if err := w.Add(l); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, _ := readParquet(t, s, buf.Bytes())
		compareRecords(t, s, got, expectRows(t, s, d.lines))
		release(got)
		pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		defer pf.Close()
		col := pf.MetaData().Schema.ColumnIndexByName("note")
		cc, err := pf.MetaData().RowGroup(0).ColumnChunk(col)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := pf.RowGroup(0).GetColumnPageReader(col)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for pr.Next() {
			if _, ok := pr.Page().(file.DataPage); ok {
				n++
			}
		}
		if err := pr.Err(); err != nil {
			t.Fatal(err)
		}
		return n, cc.TotalUncompressedSize()
	}
	// A page is cut when a batch of 1,024 values takes it past the size.
	const batch = 1024 * 64
	for _, size := range []int64{16 << 10, DefaultPageBytes, 1 << 20} {
		pageBytes := size
		if size == DefaultPageBytes {
			pageBytes = 0
		}
		n, total := pages(pageBytes)
		if lo, hi := total/(size+batch), total/size+1; int64(n) < lo || int64(n) > hi {
			t.Errorf("PageBytes %d: %d data pages for %d bytes, want %d to %d", pageBytes, n, total, lo, hi)
		}
	}
	if _, err := Parquet(s, WithPageBytes(-1)); err == nil {
		t.Error("PageBytes -1: no error")
	}
}
