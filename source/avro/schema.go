package avro

import (
	"encoding/json"
	"fmt"

	"github.com/hamba/avro/v2"
)

// docField is a field of the bulk formats' schema document (the --schema
// file; filesink/bulk.Field, which this package cannot import).
type docField struct {
	Name     string     `json:"name"`
	Type     string     `json:"type"`
	Nullable bool       `json:"nullable"`
	Fields   []docField `json:"fields,omitempty"`
}

// SchemaDoc returns the bulk formats' schema document ({"fields": [...]})
// of the records of s, a record schema, for the JSON Decode writes:
// boolean, int, long, float, double, string, bytes and fixed map to bool,
// int32, int64, float32, float64, string and binary; enums and uuids (a
// string's logical type; a fixed(16) "uuid" is no logical type to the
// Avro library, so binary) to string; records to struct; arrays to
// list<T>; maps to map<string,T>; a union of null and one type to that
// type, nullable (an array's elements and a map's values are nullable
// whatever their type); date to date; decimal(P,S), on bytes or fixed, to
// decimal(P,S); timestamp-millis and local-timestamp-millis to
// timestamp_ms (or timestampUnit, "us" for an Iceberg table: the values
// are RFC 3339 strings either way), the micros ones to timestamp_us (a
// local timestamp is written as if in UTC); time-millis and time-micros
// to int32 and int64. A nil error means every field has a column type. A
// union of several non-null types and a duration have none: the error
// names the field, in one line.
func SchemaDoc(s avro.Schema, timestampUnit string) ([]byte, error) {
	rec, ok := deref(s).(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("the value schema is %s, not a record: a record's fields make the columns", s.Type())
	}
	m := mapper{tsUnit: timestampUnit}
	fields, err := m.fields("", rec)
	if err != nil {
		return nil, err
	}
	return marshalDoc(fields)
}

// marshalDoc is the schema document of fields.
func marshalDoc(fields []docField) ([]byte, error) {
	return json.Marshal(struct {
		Fields []docField `json:"fields"`
	}{fields})
}

// parseDoc returns the fields of the schema document doc (nil: none).
func parseDoc(doc []byte) ([]docField, error) {
	if doc == nil {
		return nil, nil
	}
	var parsed struct {
		Fields []docField `json:"fields"`
	}
	if err := json.Unmarshal(doc, &parsed); err != nil {
		return nil, fmt.Errorf("avro: the columns' schema document: %w", err)
	}
	return parsed.Fields, nil
}

func deref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

type mapper struct{ tsUnit string }

func (m mapper) fields(prefix string, rec *avro.RecordSchema) ([]docField, error) {
	out := make([]docField, 0, len(rec.Fields()))
	for _, f := range rec.Fields() {
		df, err := m.field(prefix+f.Name(), f.Name(), f.Type())
		if err != nil {
			return nil, err
		}
		out = append(out, df)
	}
	return out, nil
}

// field maps the field path (name for the document) of schema s.
func (m mapper) field(path, name string, s avro.Schema) (docField, error) {
	f := docField{Name: name}
	s = deref(s)
	if u, ok := s.(*avro.UnionSchema); ok {
		var other []avro.Schema
		for _, t := range u.Types() {
			if t.Type() == avro.Null {
				f.Nullable = true
			} else {
				other = append(other, t)
			}
		}
		if len(other) != 1 {
			return f, fmt.Errorf("field %s: a union of %d non-null types has no column type (only a union of null and one type does)", path, len(other))
		}
		s = deref(other[0])
	}
	var err error
	switch s := s.(type) {
	case *avro.RecordSchema:
		f.Type = "struct"
		f.Fields, err = m.fields(path+".", s)
	case *avro.ArraySchema:
		var e docField
		if e, err = m.field(path+"[]", "element", s.Items()); err == nil {
			f.Type, f.Fields = "list<"+e.Type+">", e.Fields
		}
	case *avro.MapSchema:
		var v docField
		if v, err = m.field(path+"{}", "value", s.Values()); err == nil {
			f.Type, f.Fields = "map<string,"+v.Type+">", v.Fields
		}
	default:
		f.Type, err = m.scalar(path, s)
	}
	return f, err
}

// scalar maps a type with no fields.
func (m mapper) scalar(path string, s avro.Schema) (string, error) {
	switch s := s.(type) {
	case *avro.EnumSchema:
		return "string", nil
	case *avro.FixedSchema:
		if ls, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return fmt.Sprintf("decimal(%d,%d)", ls.Precision(), ls.Scale()), nil
		}
		if s.Logical() != nil {
			return "", fmt.Errorf("field %s: fixed with logical type %s has no column type", path, s.Logical().Type())
		}
		return "binary", nil
	case *avro.PrimitiveSchema:
		return m.primitive(path, s)
	}
	return "", fmt.Errorf("field %s: an Avro %s has no column type in the bulk formats", path, s.Type())
}

func (m mapper) primitive(path string, s *avro.PrimitiveSchema) (string, error) {
	if ls := s.Logical(); ls != nil {
		switch ls.Type() {
		case avro.Date:
			return "date", nil
		case avro.TimestampMillis, avro.LocalTimestampMillis:
			if m.tsUnit != "" {
				return "timestamp_" + m.tsUnit, nil
			}
			return "timestamp_ms", nil
		case avro.TimestampMicros, avro.LocalTimestampMicros:
			return "timestamp_us", nil
		case avro.Decimal:
			d := ls.(*avro.DecimalLogicalSchema)
			return fmt.Sprintf("decimal(%d,%d)", d.Precision(), d.Scale()), nil
		}
	}
	switch s.Type() {
	case avro.Boolean:
		return "bool", nil
	case avro.Int:
		return "int32", nil
	case avro.Long:
		return "int64", nil
	case avro.Float:
		return "float32", nil
	case avro.Double:
		return "float64", nil
	case avro.String:
		return "string", nil
	case avro.Bytes:
		return "binary", nil
	}
	return "", fmt.Errorf("field %s: an Avro %s has no column type", path, s.Type())
}

// KeyColumn returns the bulk formats' schema document doc (nil: none)
// with a nullable column name for the records' keys of schema key first,
// mapped as SchemaDoc maps a field (timestampUnit likewise). A doc that
// has the column already is returned as it is (a table written with keys
// before).
func KeyColumn(doc []byte, name string, key avro.Schema, timestampUnit string) ([]byte, error) {
	fields, err := parseDoc(doc)
	if err != nil {
		return nil, err
	}
	for _, f := range fields {
		if f.Name == name {
			return doc, nil
		}
	}
	col, err := mapper{tsUnit: timestampUnit}.field(name, name, key)
	if err != nil {
		return nil, fmt.Errorf("the key schema: %v", err)
	}
	col.Nullable = true // a record without a key
	return marshalDoc(append([]docField{col}, fields...))
}
