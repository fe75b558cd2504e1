package icebergsink

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/filesink/filesink/filesink/bulk"
)

// TableSchema returns the Iceberg schema of the records doc describes, with
// fresh field ids, for a table made on first use: a list<T> is an Iceberg
// list of optional elements, a map<string,T> an Iceberg map of string keys
// and optional values, a struct a struct. Iceberg stores
// timestamps in microseconds: a timestamp field of another unit is refused
// (a number in it would be read in one unit and stored in another), with
// an error naming the field.
func TableSchema(doc *bulk.Schema) (*iceberg.Schema, error) {
	if err := checkUnits(doc.Arrow().Fields(), ""); err != nil {
		return nil, err
	}
	sc, err := table.ArrowSchemaToIcebergWithFreshIDs(doc.Arrow(), false)
	if err != nil {
		return nil, fmt.Errorf("iceberg schema: %w", err)
	}
	return sc, nil
}

func checkUnits(fields []arrow.Field, prefix string) error {
	for _, f := range fields {
		name := prefix + f.Name
		switch t := f.Type.(type) {
		case *arrow.TimestampType:
			if t.Unit != arrow.Microsecond {
				return fmt.Errorf("field %s: an Iceberg table stores timestamps in microseconds: declare it timestamp_us (numbers then count microseconds; RFC 3339 strings are read as they are)", name)
			}
		case *arrow.StructType:
			if err := checkUnits(t.Fields(), name+"."); err != nil {
				return err
			}
		case *arrow.ListType:
			if err := checkUnits([]arrow.Field{unnamed(t.ElemField())}, name+"[]"); err != nil {
				return err
			}
		case *arrow.MapType:
			if err := checkUnits([]arrow.Field{unnamed(t.ItemField())}, name+"{}"); err != nil {
				return err
			}
		}
	}
	return nil
}

// unnamed is f without its name: a list's element or a map's value is
// named by its path alone ("tags[]", "attrs{}"), as the bulk schema's
// errors name it.
func unnamed(f arrow.Field) arrow.Field {
	f.Name = ""
	return f
}

// WriteSchema returns the schema the Parquet writer converts records to:
// the columns of doc, typed and numbered as the table sc has them (the
// table's field ids, which readers match columns by). sc must hold every
// column of doc (committer/iceberg's EnsureTable checks it).
func WriteSchema(sc *iceberg.Schema, doc *bulk.Schema) (*bulk.Schema, error) {
	names := make([]string, len(doc.Fields()))
	for i, f := range doc.Fields() {
		names[i] = f.Name
	}
	sel, err := sc.Select(true, names...)
	if err != nil {
		return nil, fmt.Errorf("iceberg schema: %w", err)
	}
	// Select keeps the table's order; the writer keeps doc's.
	ordered := make([]iceberg.NestedField, len(names))
	for i, n := range names {
		f, ok := sel.FindFieldByName(n)
		if !ok {
			return nil, fmt.Errorf("iceberg schema: the table has no column %s", n)
		}
		ordered[i] = f
	}
	as, err := table.SchemaToArrowSchema(iceberg.NewSchema(sc.ID, ordered...), nil, true, false)
	if err != nil {
		return nil, fmt.Errorf("iceberg schema: %w", err)
	}
	out, err := bulk.SchemaFromArrow(as)
	if err != nil {
		return nil, fmt.Errorf("iceberg schema: %w", err)
	}
	return out, nil
}

// ColumnsDoc returns the bulk formats' schema document of the columns of
// sc, a table's schema (timestamps in microseconds, the table's field
// order). A nil error means every column has a bulk type.
func ColumnsDoc(sc *iceberg.Schema) ([]byte, error) {
	as, err := table.SchemaToArrowSchema(sc, nil, false, false)
	if err != nil {
		return nil, fmt.Errorf("iceberg schema: %w", err)
	}
	s, err := bulk.SchemaFromArrow(as)
	if err != nil {
		return nil, fmt.Errorf("iceberg schema: %w", err)
	}
	return s.MarshalJSON()
}
