package iceberg_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	ice "github.com/filesink/filesink/committer/iceberg"
)

func field(id int, name string, typ iceberg.Type, required bool) iceberg.NestedField {
	return iceberg.NestedField{ID: id, Name: name, Type: typ, Required: required}
}

// EnsureTable creates the table and its namespace on first use, takes it
// again with the same or a narrower schema, and refuses one that differs
// with one line naming the first difference.
func TestEnsureTable(t *testing.T) {
	ctx := t.Context()
	cat, err := ice.OpenCatalog(ctx, "", filepath.Join(t.TempDir(), "lake"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	point := &iceberg.StructType{FieldList: []iceberg.NestedField{
		field(10, "x", iceberg.PrimitiveTypes.Float64, true), field(11, "y", iceberg.PrimitiveTypes.Float64, false),
	}}
	tags := &iceberg.ListType{ElementID: 12, Element: iceberg.PrimitiveTypes.String, ElementRequired: true}
	base := []iceberg.NestedField{
		field(1, "id", iceberg.PrimitiveTypes.Int64, true),
		field(2, "ts", iceberg.PrimitiveTypes.Timestamp, false),
		field(3, "point", point, false),
		field(4, "tags", tags, false),
	}
	ident := table.Identifier{"sales", "orders"}
	tbl, err := ice.EnsureTable(ctx, cat, ident, iceberg.NewSchema(0, base...))
	if err != nil {
		t.Fatal(err)
	}
	// Ids other than the table's, and an optional column left out: fine.
	again := []iceberg.NestedField{
		field(7, "id", iceberg.PrimitiveTypes.Int64, true),
		field(8, "point", &iceberg.StructType{FieldList: []iceberg.NestedField{field(20, "x", iceberg.PrimitiveTypes.Float64, true)}}, false),
	}
	if got, err := ice.EnsureTable(ctx, cat, ident, iceberg.NewSchema(0, again...)); err != nil || got.Location() != tbl.Location() {
		t.Fatalf("the same table again: %v", err)
	}
	for _, c := range []struct {
		fields []iceberg.NestedField
		want   string
	}{
		{[]iceberg.NestedField{field(1, "id", iceberg.PrimitiveTypes.Int32, true)}, "column id is long in the table, int in the schema"},
		{[]iceberg.NestedField{field(1, "id", iceberg.PrimitiveTypes.Int64, false)}, "column id: the table requires it"},
		{[]iceberg.NestedField{field(2, "ts", iceberg.PrimitiveTypes.Timestamp, false)}, "column id: the table requires it, the schema has no such column"},
		{append(base[:1:1], field(5, "color", iceberg.PrimitiveTypes.String, false)), "column color (string) is not in the table"},
		{append(base[:1:1], field(3, "point", &iceberg.StructType{FieldList: []iceberg.NestedField{field(10, "x", iceberg.PrimitiveTypes.String, true)}}, false)), "column point.x is double in the table, string in the schema"},
		{append(base[:1:1], field(4, "tags", &iceberg.ListType{ElementID: 12, Element: iceberg.PrimitiveTypes.String}, false)), "column tags: the table requires its elements"},
	} {
		_, err := ice.EnsureTable(ctx, cat, ident, iceberg.NewSchema(0, c.fields...))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "sales.orders") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v; want one line naming the table and %q", c.fields, err, c.want)
		}
	}
}
