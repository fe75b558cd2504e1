package iceberg

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// NewColumns returns the top-level columns of schema that the table
// schema have lacks, in schema's order.
func NewColumns(have, schema *iceberg.Schema) []iceberg.NestedField {
	var out []iceberg.NestedField
	for _, f := range schema.Fields() {
		if _, ok := have.FindFieldByName(f.Name); !ok {
			out = append(out, f)
		}
	}
	return out
}

// DroppedColumns returns the names of the top-level columns of the table
// schema have that schema lacks.
func DroppedColumns(have, schema *iceberg.Schema) []string {
	var out []string
	for _, f := range have.Fields() {
		if _, ok := schema.FindFieldByName(f.Name); !ok {
			out = append(out, f.Name)
		}
	}
	return out
}

// AddColumns adds the top-level columns of schema that the table ident
// lacks, all in one metadata commit (a new schema, no snapshot), and
// returns the table as it is then with the names added (none: the table
// had them all). Each added column must be optional: rows appended before
// it have no value for it. A nil error means the table's current schema
// has every column of schema; a commit that lost a race with another
// writer is decided again on the reloaded table.
func AddColumns(ctx context.Context, cat table.CatalogIO, ident table.Identifier, schema *iceberg.Schema) (*table.Table, []string, error) {
	name := strings.Join(ident, ".")
	var lastErr error
	for range 5 {
		tbl, err := cat.LoadTable(ctx, ident)
		if err != nil {
			return nil, nil, fmt.Errorf("iceberg: loading table %s: %w", name, err)
		}
		cols := NewColumns(tbl.Schema(), schema)
		if len(cols) == 0 {
			return tbl, nil, nil
		}
		var names []string
		txn := tbl.NewTransaction()
		upd := txn.UpdateSchema(true, false)
		for _, c := range cols {
			if c.Required {
				return nil, nil, fmt.Errorf("iceberg: table %s: new column %s is required: a column added to a table must be optional (its earlier rows have no value)", name, c.Name)
			}
			upd.AddColumn([]string{c.Name}, c.Type, c.Doc, false, nil)
			names = append(names, c.Name)
		}
		if err := upd.Commit(); err != nil {
			return nil, nil, fmt.Errorf("iceberg: table %s: adding columns %s: %w", name, strings.Join(names, ", "), err)
		}
		out, err := txn.Commit(ctx)
		if err == nil {
			return out, names, nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		lastErr = err // another writer changed the table: decide again
	}
	return nil, nil, fmt.Errorf("iceberg: table %s: adding columns: %w", name, lastErr)
}
