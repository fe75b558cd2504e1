package bulk

import (
	"bytes"
	"fmt"
	"math/big"
	"reflect"
	"testing"

	pgo "github.com/parquet-go/parquet-go"
)

// TestParquetSecondReader reads our Parquet files with a second, unrelated
// implementation (parquet-go/parquet-go) at the level of Parquet values,
// for every compression: every row, leaf value, null and list.
func TestParquetSecondReader(t *testing.T) {
	s, err := ParseSchema([]byte(`{"fields": [
		{"name": "id", "type": "int64", "nullable": false},
		{"name": "i32", "type": "int32"},
		{"name": "f32", "type": "float32"},
		{"name": "f64", "type": "float64"},
		{"name": "ok", "type": "bool"},
		{"name": "s", "type": "string"},
		{"name": "bin", "type": "binary"},
		{"name": "ts_ms", "type": "timestamp_ms"},
		{"name": "ts_us", "type": "timestamp_us"},
		{"name": "day", "type": "date"},
		{"name": "price", "type": "decimal(10,2)"},
		{"name": "tags", "type": "list<string>"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	recs := genRecords(1500, 9) // keys not in this schema are dropped
	want := expectRows(t, s, recs)
	for _, comp := range []Compression{Snappy, Zstd, Gzip, Uncompressed} {
		t.Run(string(comp), func(t *testing.T) {
			f, _ := Parquet(s, WithCompression(comp), WithUnknownFields(DropUnknown))
			data := writeAll(t, f, recs, 700)
			pf, err := pgo.OpenFile(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatalf("parquet-go cannot open the file: %v", err)
			}
			if n := len(pf.RowGroups()); n != 3 {
				t.Errorf("%d row groups, want 3", n)
			}
			k := 0
			for _, rg := range pf.RowGroups() {
				rows := rg.Rows()
				buf := make([]pgo.Row, 64)
				for {
					n, err := rows.ReadRows(buf)
					for _, row := range buf[:n] {
						if k >= len(want) {
							t.Fatal("more rows than written")
						}
						got := pgoRow(t, s, row)
						for _, fn := range s.root.fields {
							if !reflect.DeepEqual(got[fn.name], want[k][fn.name]) {
								t.Fatalf("row %d field %q: parquet-go read %#v, want %#v", k, fn.name, got[fn.name], want[k][fn.name])
							}
						}
						k++
					}
					if err != nil {
						break
					}
				}
				rows.Close()
			}
			if k != len(want) {
				t.Fatalf("parquet-go read %d rows, want %d", k, len(want))
			}
		})
	}
}

// pgoRow turns a parquet-go row of the flat-plus-list schema into canon
// values (see canon).
func pgoRow(t *testing.T, s *Schema, row pgo.Row) map[string]any {
	out := make(map[string]any)
	row.Range(func(col int, vals []pgo.Value) bool {
		n := s.root.fields[col] // one leaf per top-level field here
		if n.kind == kList {
			if len(vals) == 1 && vals[0].DefinitionLevel() == 0 {
				out[n.name] = nil
				return true
			}
			list := []any{}
			for _, v := range vals {
				switch v.DefinitionLevel() {
				case 1: // empty list
				case 2:
					list = append(list, nil)
				default:
					list = append(list, string(v.ByteArray()))
				}
			}
			out[n.name] = list
			return true
		}
		v := vals[0]
		if v.IsNull() {
			out[n.name] = nil
			return true
		}
		switch n.kind {
		case kInt32, kDate:
			out[n.name] = int64(v.Int32())
		case kInt64, kTimestamp:
			out[n.name] = v.Int64()
		case kFloat32:
			out[n.name] = v.Float()
		case kFloat64:
			out[n.name] = v.Double()
		case kBool:
			out[n.name] = v.Boolean()
		case kString:
			out[n.name] = string(v.ByteArray())
		case kBinary:
			out[n.name] = append([]byte{}, v.ByteArray()...)
		case kDecimal:
			b := v.ByteArray()
			x := new(big.Int).SetBytes(b)
			if len(b) > 0 && b[0]&0x80 != 0 {
				x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
			}
			out[n.name] = x.String()
		default:
			t.Fatalf("pgoRow: %s", n.path)
		}
		return true
	})
	if len(out) != len(s.root.fields) {
		t.Fatalf("row has %d columns: %v", len(out), fmt.Sprint(out))
	}
	return out
}
