package bulk

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/filesink"
)

func loadSchema(t testing.TB, name string) *Schema {
	t.Helper()
	doc, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSchema(doc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// canon turns a value decoded by encoding/json (with UseNumber) into the
// form arrowValue returns for the same field, independently of the
// converter under test.
func canon(t testing.TB, n *node, v any) any {
	t.Helper()
	if v == nil {
		return nil
	}
	fail := func(err error) any { t.Fatalf("canon %s: %v (%v)", n.path, err, v); return nil }
	if s, ok := v.(string); ok && (n.kind == kFloat32 || n.kind == kFloat64) {
		f := map[string]float64{"Infinity": math.Inf(1), "-Infinity": math.Inf(-1)}[s]
		switch {
		case s == "NaN":
			return "NaN" // as arrowValue reads it: NaN equals nothing
		case f == 0:
			return fail(fmt.Errorf("not a float"))
		case n.kind == kFloat32:
			return float32(f)
		}
		return f
	}
	switch n.kind {
	case kInt32, kInt64:
		i, err := v.(json.Number).Int64()
		if err != nil {
			return fail(err)
		}
		return i
	case kFloat32:
		f, err := strconv.ParseFloat(string(v.(json.Number)), 32)
		if err != nil {
			return fail(err)
		}
		return float32(f)
	case kFloat64:
		f, err := v.(json.Number).Float64()
		if err != nil {
			return fail(err)
		}
		return f
	case kBool, kString:
		return v
	case kBinary:
		b, err := base64.StdEncoding.DecodeString(v.(string))
		if err != nil {
			return fail(err)
		}
		return b
	case kTimestamp:
		if num, ok := v.(json.Number); ok {
			i, err := num.Int64()
			if err != nil {
				return fail(err)
			}
			return i
		}
		tm, err := time.Parse(time.RFC3339Nano, v.(string))
		if err != nil {
			return fail(err)
		}
		switch n.unit {
		case arrow.Second:
			return tm.Unix()
		case arrow.Millisecond:
			return tm.UnixMilli()
		case arrow.Microsecond:
			return tm.UnixMicro()
		}
		return tm.UnixNano()
	case kDate:
		if num, ok := v.(json.Number); ok {
			i, err := num.Int64()
			if err != nil {
				return fail(err)
			}
			return i
		}
		tm, err := time.Parse("2006-01-02", v.(string))
		if err != nil {
			return fail(err)
		}
		return tm.Unix() / 86400
	case kDecimal:
		var s string
		switch x := v.(type) {
		case json.Number:
			s = string(x)
		case string:
			s = x
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return fail(fmt.Errorf("not a number"))
		}
		r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.scale)), nil)))
		if !r.IsInt() {
			return fail(fmt.Errorf("too many fractional digits"))
		}
		return r.Num().String()
	case kList:
		arr := v.([]any)
		out := make([]any, len(arr))
		for i, e := range arr {
			out[i] = canon(t, n.elem, e)
		}
		return out
	case kMap:
		obj := v.(map[string]any)
		out := make(map[string]any, len(obj))
		for k, e := range obj {
			out[k] = canon(t, n.elem, e)
		}
		return out
	case kStruct:
		obj := v.(map[string]any)
		out := make(map[string]any, len(n.fields))
		for _, f := range n.fields {
			out[f.name] = canon(t, f, obj[f.name])
		}
		return out
	}
	return fail(fmt.Errorf("unknown kind"))
}

// arrowValue reads row i of a in the canon form.
func arrowValue(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Float32:
		if math.IsNaN(float64(a.Value(i))) {
			return "NaN"
		}
		return a.Value(i)
	case *array.Float64:
		if math.IsNaN(a.Value(i)) {
			return "NaN"
		}
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.Binary:
		return append([]byte{}, a.Value(i)...)
	case *array.Timestamp:
		return int64(a.Value(i))
	case *array.Date32:
		return int64(a.Value(i))
	case *array.Decimal128:
		return a.Value(i).BigInt().String()
	case *array.Map:
		s, e := a.ValueOffsets(i)
		out := make(map[string]any, e-s)
		for j := s; j < e; j++ {
			out[arrowValue(a.Keys(), int(j)).(string)] = arrowValue(a.Items(), int(j))
		}
		return out
	case *array.List:
		s, e := a.ValueOffsets(i)
		out := make([]any, 0, e-s)
		for j := s; j < e; j++ {
			out = append(out, arrowValue(a.ListValues(), int(j)))
		}
		return out
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		out := make(map[string]any, a.NumField())
		for f := 0; f < a.NumField(); f++ {
			out[st.Field(f).Name] = arrowValue(a.Field(f), i)
		}
		return out
	}
	panic(fmt.Sprintf("arrowValue: %T", a))
}

// expectRows decodes records with encoding/json into canon rows.
func expectRows(t testing.TB, s *Schema, recs [][]byte) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(recs))
	for i, r := range recs {
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.UseNumber()
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		row := make(map[string]any, len(s.root.fields))
		for _, f := range s.root.fields {
			row[f.name] = canon(t, f, obj[f.name])
		}
		out[i] = row
	}
	return out
}

// compareRecords checks that recs hold exactly the rows want, in order.
func compareRecords(t testing.TB, s *Schema, recs []arrow.Record, want []map[string]any) {
	t.Helper()
	k := 0
	for _, rec := range recs {
		for i := 0; i < int(rec.NumRows()); i++ {
			if k >= len(want) {
				t.Fatalf("more rows than the %d written", len(want))
			}
			for c, f := range rec.Schema().Fields() {
				got := arrowValue(rec.Column(c), i)
				if !reflect.DeepEqual(got, want[k][f.Name]) {
					t.Fatalf("row %d field %q: got %#v, want %#v", k, f.Name, got, want[k][f.Name])
				}
			}
			k++
		}
	}
	if k != len(want) {
		t.Fatalf("read %d rows, wrote %d", k, len(want))
	}
}

// readParquet reads a Parquet file with pqarrow; it returns the record
// batches (one per row group) and the number of row groups.
func readParquet(t testing.TB, s *Schema, data []byte) ([]arrow.Record, int) {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not a Parquet file: %v", err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 20}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range s.Arrow().Fields() {
		g := got.Field(i)
		if g.Name != f.Name || g.Nullable != f.Nullable || !arrow.TypeEqual(g.Type, f.Type) {
			t.Fatalf("field %d read back as %v, want %v", i, g, f)
		}
	}
	var recs []arrow.Record
	cols := make([]int, pf.MetaData().Schema.NumColumns())
	for i := range cols {
		cols[i] = i
	}
	for rg := 0; rg < pf.NumRowGroups(); rg++ {
		tbl, err := fr.ReadRowGroups(context.Background(), cols, []int{rg})
		if err != nil {
			t.Fatal(err)
		}
		tr := array.NewTableReader(tbl, 1<<30)
		for tr.Next() {
			rec := tr.Record()
			rec.Retain()
			recs = append(recs, rec)
		}
		tr.Release()
		tbl.Release()
	}
	return recs, pf.NumRowGroups()
}

func readArrowIPC(t testing.TB, data []byte) []arrow.Record {
	t.Helper()
	r, err := ipc.NewFileReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not an Arrow IPC file: %v", err)
	}
	defer r.Close()
	var recs []arrow.Record
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	return recs
}

// genRecords makes n JSON records of testdata/all_types.json: keys in
// and out of order, unknown keys, nulls, missing nullable fields, string
// escapes and non-ASCII text, every accepted spelling of timestamps,
// dates and decimals.
func genRecords(n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	str := func() string {
		parts := []string{"a", "é", "日本", "\"q\"", "\\", "\n", "\t", "x/y", "\u2028", "😀", " ", "z"}
		var b strings.Builder
		for k := rng.IntN(8); k > 0; k-- {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		return b.String()
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	out := make([][]byte, n)
	for i := range out {
		type kv struct{ k, v string }
		var kvs []kv
		add := func(k, v string) { kvs = append(kvs, kv{k, v}) }
		maybe := func(k string, gen func() string) {
			switch rng.IntN(10) {
			case 0: // missing
			case 1:
				add(k, "null")
			default:
				add(k, gen())
			}
		}
		add("id", strconv.FormatInt(rng.Int64()-rng.Int64(), 10))
		maybe("i32", func() string { return strconv.Itoa(int(rng.Int32()) - int(rng.Int32())) })
		maybe("f32", func() string { return strconv.FormatFloat(float64(rng.Float32()*1000-500), 'g', -1, 32) })
		maybe("f64", func() string {
			return []string{strconv.FormatFloat(rng.NormFloat64()*1e6, 'g', -1, 64), "1e300", "-0.0", "0", "12.5E-3"}[rng.IntN(5)]
		})
		maybe("ok", func() string { return []string{"true", "false"}[rng.IntN(2)] })
		maybe("s", func() string { return js(str()) })
		maybe("bin", func() string {
			b := make([]byte, rng.IntN(20))
			for j := range b {
				b[j] = byte(rng.UintN(256))
			}
			return js(b)
		})
		maybe("ts_ms", func() string {
			ms := rng.Int64N(4e12) - 1e12
			if rng.IntN(2) == 0 {
				return strconv.FormatInt(ms, 10)
			}
			return js(time.UnixMilli(ms).In(time.FixedZone("x", 3600*rng.IntN(10))).Format("2006-01-02T15:04:05.000Z07:00"))
		})
		maybe("ts_us", func() string {
			us := rng.Int64N(4e15)
			if rng.IntN(2) == 0 {
				return strconv.FormatInt(us, 10)
			}
			return js(time.UnixMicro(us).UTC().Format(time.RFC3339Nano))
		})
		maybe("day", func() string {
			d := rng.IntN(40000) - 10000
			if rng.IntN(2) == 0 {
				return strconv.Itoa(d)
			}
			return js(time.Unix(int64(d)*86400, 0).UTC().Format("2006-01-02"))
		})
		maybe("price", func() string {
			v := strconv.FormatFloat(float64(rng.IntN(2e9)-1e9)/100, 'f', rng.IntN(3), 64)
			if rng.IntN(3) == 0 {
				return js(v)
			}
			return v
		})
		maybe("big", func() string {
			return []string{"12345678901234567890123456789012.3456", "-0.0001", "1e10", "0", "99999999999999999999999999999999.9999"}[rng.IntN(5)]
		})
		maybe("tags", func() string {
			var parts []string
			for k := rng.IntN(4); k > 0; k-- {
				if rng.IntN(6) == 0 {
					parts = append(parts, "null")
				} else {
					parts = append(parts, js(str()))
				}
			}
			return "[" + strings.Join(parts, ",") + "]"
		})
		maybe("matrix", func() string { return []string{"[]", "[[1,2],[3]]", "[[],null,[-5]]", "[null]"}[rng.IntN(4)] })
		maybe("addr", func() string {
			geo := []string{``, `,"geo":null`, `,"geo":{"lat":1.5}`, `,"geo":{}`}[rng.IntN(4)]
			zip := []string{``, `,"zip":12345`, `,"zip":null`}[rng.IntN(3)]
			return `{"city":` + js(str()) + zip + geo + `,"extra":[1,{"a":null}]}`
		})
		maybe("items", func() string {
			return []string{`[]`, `[{"sku":"a","qty":1},{"qty":2}]`, `[null,{"qty":-3,"sku":null}]`}[rng.IntN(3)]
		})
		if rng.IntN(4) == 0 {
			add("unknown", `{"deep":[1,2,{"x":"y"}],"n":null}`)
		}
		if rng.IntN(3) == 0 {
			rng.Shuffle(len(kvs), func(a, b int) { kvs[a], kvs[b] = kvs[b], kvs[a] })
		}
		var b strings.Builder
		b.WriteString("{")
		for j, e := range kvs {
			if j > 0 {
				b.WriteString(", "[:1+rng.IntN(2)])
			}
			b.WriteString(js(e.k) + ":" + e.v)
		}
		b.WriteString("}")
		out[i] = []byte(b.String())
	}
	return out
}

func getenv(k string) string { return os.Getenv(k) }

// dropConverter is a converter that drops keys not in the schema
// (DropUnknown), for genRecords' records.
func dropConverter(s *Schema, mem memory.Allocator) *converter {
	c := newConverter(s, mem)
	c.drop = new(Dropped)
	return c
}

// commitFinal takes w's final checkpoint (Prepare), commits its parts and
// returns how many there were.
func commitFinal(t testing.TB, w *filesink.Writer) int {
	t.Helper()
	ctx := context.Background()
	snap, err := committer.PrepareNow(ctx, w, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range snap.Committables {
		if err := w.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	return len(snap.Committables)
}
