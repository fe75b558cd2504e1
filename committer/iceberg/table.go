package iceberg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// EnsureTable loads the table ident of cat, or creates it (and its
// namespace) with schema and opts when it does not exist. A table that
// exists must take what schema describes: each column of schema is a
// column of the table of the same type (nested fields alike), a column
// the table requires is required by schema too, and schema has every
// column the table requires; otherwise the error names the first
// difference in one line. A nil error means the table exists, is
// compatible, and its metadata locations fit the catalog. The table's
// own field ids (not schema's) are those its data files must carry.
func EnsureTable(ctx context.Context, cat *Catalog, ident table.Identifier, schema *iceberg.Schema, opts ...catalog.CreateTableOpt) (*table.Table, error) {
	name := strings.Join(ident, ".")
	tbl, err := cat.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
		tbl, err = create(ctx, cat, ident, schema, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("iceberg: table %s in %s: %w", name, cat.Desc, err)
	}
	if err := Compatible(tbl.Schema(), schema); err != nil {
		return nil, fmt.Errorf("iceberg: table %s: %w", name, err)
	}
	if err := cat.CheckLocation(tbl.Location()); err != nil {
		return nil, err
	}
	return tbl, nil
}

// create makes ident's namespace if missing, then the table; a table that
// another process created meanwhile is loaded.
func create(ctx context.Context, cat *Catalog, ident table.Identifier, schema *iceberg.Schema, opts []catalog.CreateTableOpt) (*table.Table, error) {
	ns := catalog.NamespaceFromIdent(ident)
	if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, err
	}
	tbl, err := cat.CreateTable(ctx, ident, schema, opts...)
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		return cat.LoadTable(ctx, ident)
	}
	if err != nil && cat.maxLocation > 0 && strings.Contains(err.Error(), "metadata_location") {
		// MySQL: "Data too long for column 'metadata_location'".
		return nil, fmt.Errorf("its metadata location would be longer than the %d characters the catalog's metadata_location column takes: use a shorter warehouse location", cat.maxLocation)
	}
	return tbl, err
}

// Compatible returns nil if files of schema can be appended to a table of
// schema have: see EnsureTable. The error names the first difference.
func Compatible(have, schema *iceberg.Schema) error {
	return compatibleFields("", have.Fields(), schema.Fields())
}

func compatibleFields(prefix string, have, want []iceberg.NestedField) error {
	byName := make(map[string]iceberg.NestedField, len(have))
	for _, f := range have {
		byName[f.Name] = f
	}
	for _, w := range want {
		h, ok := byName[w.Name]
		if !ok {
			return fmt.Errorf("column %s%s (%s) is not in the table", prefix, w.Name, w.Type)
		}
		if h.Required && !w.Required {
			return fmt.Errorf("column %s%s: the table requires it, the schema makes it optional", prefix, w.Name)
		}
		if err := compatibleTypes(prefix+w.Name, h.Type, w.Type); err != nil {
			return err
		}
		delete(byName, w.Name)
	}
	for _, h := range have {
		if _, left := byName[h.Name]; left && h.Required {
			return fmt.Errorf("column %s%s: the table requires it, the schema has no such column", prefix, h.Name)
		}
	}
	return nil
}

func compatibleTypes(name string, have, want iceberg.Type) error {
	switch w := want.(type) {
	case *iceberg.StructType:
		if h, ok := have.(*iceberg.StructType); ok {
			return compatibleFields(name+".", h.FieldList, w.FieldList)
		}
	case *iceberg.ListType:
		if h, ok := have.(*iceberg.ListType); ok {
			if h.ElementRequired && !w.ElementRequired {
				return fmt.Errorf("column %s: the table requires its elements, the schema makes them optional", name)
			}
			return compatibleTypes(name+"[]", h.Element, w.Element)
		}
	case *iceberg.MapType:
		if h, ok := have.(*iceberg.MapType); ok {
			if err := compatibleTypes(name+".key", h.KeyType, w.KeyType); err != nil {
				return err
			}
			return compatibleTypes(name+".value", h.ValueType, w.ValueType)
		}
	default:
		if have.Equals(want) {
			return nil
		}
	}
	return fmt.Errorf("column %s is %s in the table, %s in the schema", name, have, want)
}
