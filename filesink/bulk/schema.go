package bulk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// Schema is the record schema of a bulk format: the fields every record
// has, their types and whether they may be null. It is immutable once made
// and safe for concurrent use.
//
// A Schema is made by ParseSchema (the JSON document of the --schema flag),
// SchemaFromArrow or SchemaFromStruct.
type Schema struct {
	root   *node // a struct node whose children are the top-level fields
	arrow  *arrow.Schema
	fields []Field
}

// Field is one field of a Schema, in the terms of the schema document.
type Field struct {
	Name string `json:"name"`
	// Type is a type name of the schema document: int32, int64, float32,
	// float64, bool, string, binary, timestamp_s, timestamp_ms,
	// timestamp_us, timestamp_ns, date, decimal(P,S), list<T>,
	// map<string,T>, struct (with Fields), or list<struct> or
	// map<string,struct> (with Fields for the element or value). A map's
	// keys are strings, its values and a list's elements nullable.
	Type     string  `json:"type"`
	Nullable bool    `json:"nullable"`
	Fields   []Field `json:"fields,omitempty"`
}

// Arrow returns the Arrow schema records are converted to. Timestamps are
// in UTC.
func (s *Schema) Arrow() *arrow.Schema { return s.arrow }

// Fields returns the top-level fields (a copy the caller may modify).
func (s *Schema) Fields() []Field { return cloneFields(s.fields) }

func cloneFields(fs []Field) []Field {
	if fs == nil {
		return nil
	}
	out := make([]Field, len(fs))
	for i, f := range fs {
		out[i] = f
		out[i].Fields = cloneFields(f.Fields)
	}
	return out
}

// MarshalJSON returns the schema document, in the form ParseSchema reads.
func (s *Schema) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Fields []Field `json:"fields"`
	}{s.fields})
}

// kind is what a node holds; it decides both the JSON conversion and the
// Arrow builder used.
type kind uint8

const (
	kInt32 kind = iota
	kInt64
	kFloat32
	kFloat64
	kBool
	kString
	kBinary
	kTimestamp
	kDate
	kDecimal
	kList
	kStruct
	kMap
)

// node is a compiled field: immutable after the schema is built.
type node struct {
	name     string
	path     string // for errors: "a.b", "tags[]", "items[].price", "attrs{}" (a map's values)
	kind     kind
	nullable bool
	dtype    arrow.DataType
	unit     arrow.TimeUnit // kTimestamp
	prec     int32          // kDecimal
	scale    int32          // kDecimal
	elem     *node          // kList: the element; kMap: the value
	fields   []*node        // kStruct
	index    map[string]int // kStruct: field name -> position
	nameB    [][]byte       // kStruct: field names as bytes, for the in-order fast path
	quoted   [][]byte       // kStruct: `"name"` when the name needs no escaping in JSON, else nil
}

// matchKey reports whether b (at a key's opening quote) holds exactly the
// key of field guess, unescaped, and returns the bytes it spans.
func (n *node) matchKey(b []byte, guess int) int {
	if guess >= len(n.quoted) {
		return 0
	}
	q := n.quoted[guess]
	if q == nil || len(b) < len(q) || string(b[:len(q)]) != string(q) {
		return 0
	}
	return len(q)
}

// plainJSONName reports whether name is written in JSON as itself.
func plainJSONName(name string) bool {
	if !utf8.ValidString(name) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func (n *node) lookup(key []byte, guess int) int {
	if guess < len(n.nameB) && bytes.Equal(n.nameB[guess], key) {
		return guess
	}
	if i, ok := n.index[string(key)]; ok {
		return i
	}
	return -1
}

// schemaDoc is the --schema document.
type schemaDoc struct {
	Fields []fieldDoc `json:"fields"`
}

type fieldDoc struct {
	Name     string     `json:"name"`
	Type     string     `json:"type"`
	Nullable *bool      `json:"nullable"`
	Fields   []fieldDoc `json:"fields"`
}

// SchemaError is a schema document or type that cannot be used. Field is
// the path of the offending field ("" for the document as a whole).
type SchemaError struct {
	Field string
	Msg   string
}

func (e *SchemaError) Error() string {
	if e.Field == "" {
		return "bulk schema: " + e.Msg
	}
	return fmt.Sprintf("bulk schema: field %q: %s", e.Field, e.Msg)
}

// ParseSchema reads a schema document:
//
//	{"fields": [{"name": "id", "type": "int64", "nullable": false},
//	            {"name": "ts", "type": "timestamp_ms"},
//	            {"name": "tags", "type": "list<string>"},
//	            {"name": "attrs", "type": "map<string,int64>"},
//	            {"name": "price", "type": "decimal(10,2)"},
//	            {"name": "addr", "type": "struct", "fields": [...]}]}
//
// "nullable" defaults to true. Unknown keys, unknown types, duplicate or
// empty names are errors (a *SchemaError naming the field path). A nil
// error returns a schema with at least one field.
func ParseSchema(doc []byte) (*Schema, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	var d schemaDoc
	if err := dec.Decode(&d); err != nil {
		return nil, &SchemaError{Msg: "not a schema document: " + err.Error()}
	}
	if dec.More() {
		return nil, &SchemaError{Msg: "data after the schema document"}
	}
	fields, err := fieldsFromDoc(d.Fields, "")
	if err != nil {
		return nil, err
	}
	return newSchema(fields)
}

func fieldsFromDoc(ds []fieldDoc, prefix string) ([]Field, error) {
	out := make([]Field, len(ds))
	for i, d := range ds {
		path := joinPath(prefix, d.Name)
		if d.Name == "" {
			path = joinPath(prefix, fmt.Sprintf("#%d", i))
		}
		f := Field{Name: d.Name, Type: strings.TrimSpace(d.Type), Nullable: true}
		if d.Nullable != nil {
			f.Nullable = *d.Nullable
		}
		if d.Fields != nil {
			sub, err := fieldsFromDoc(d.Fields, path)
			if err != nil {
				return nil, err
			}
			f.Fields = sub
			if len(sub) == 0 {
				f.Fields = []Field{}
			}
		}
		out[i] = f
	}
	return out, nil
}

func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// NewSchema makes a schema from fields (as in the schema document).
func NewSchema(fields []Field) (*Schema, error) {
	return newSchema(cloneFields(fields))
}

func newSchema(fields []Field) (*Schema, error) {
	if len(fields) == 0 {
		return nil, &SchemaError{Msg: "no fields"}
	}
	root, err := structNode("", "", fields, false)
	if err != nil {
		return nil, err
	}
	afs := make([]arrow.Field, len(root.fields))
	for i, c := range root.fields {
		afs[i] = arrow.Field{Name: c.name, Type: c.dtype, Nullable: c.nullable}
	}
	return &Schema{root: root, arrow: arrow.NewSchema(afs, nil), fields: fields}, nil
}

func structNode(name, path string, fields []Field, nullable bool) (*node, error) {
	if len(fields) == 0 {
		return nil, &SchemaError{Field: path, Msg: "a struct needs at least one field in \"fields\""}
	}
	n := &node{name: name, path: path, kind: kStruct, nullable: nullable, index: make(map[string]int, len(fields))}
	afs := make([]arrow.Field, len(fields))
	for i, f := range fields {
		fp := joinPath(path, f.Name)
		if f.Name == "" {
			return nil, &SchemaError{Field: joinPath(path, fmt.Sprintf("#%d", i)), Msg: "empty name"}
		}
		if _, dup := n.index[f.Name]; dup {
			return nil, &SchemaError{Field: fp, Msg: "duplicate field name"}
		}
		c, err := fieldNode(f, fp)
		if err != nil {
			return nil, err
		}
		n.index[f.Name] = i
		n.fields = append(n.fields, c)
		n.nameB = append(n.nameB, []byte(f.Name))
		var q []byte
		if plainJSONName(f.Name) {
			q = []byte(`"` + f.Name + `"`)
		}
		n.quoted = append(n.quoted, q)
		afs[i] = arrow.Field{Name: c.name, Type: c.dtype, Nullable: c.nullable}
	}
	n.dtype = arrow.StructOf(afs...)
	return n, nil
}

func fieldNode(f Field, path string) (*node, error) {
	if f.Type == "" {
		return nil, &SchemaError{Field: path, Msg: "missing \"type\""}
	}
	n, err := typeNode(f.Type, f.Name, path, f.Fields)
	if err != nil {
		return nil, err
	}
	n.nullable = f.Nullable
	return n, nil
}

// typeNode compiles a type name. fields are the nested fields of a struct
// (or of the element of list<struct>).
func typeNode(typ, name, path string, fields []Field) (*node, error) {
	n := &node{name: name, path: path, nullable: true}
	typ = strings.TrimSpace(typ)
	usesFields := false
	switch {
	case typ == "int32":
		n.kind, n.dtype = kInt32, arrow.PrimitiveTypes.Int32
	case typ == "int64":
		n.kind, n.dtype = kInt64, arrow.PrimitiveTypes.Int64
	case typ == "float32":
		n.kind, n.dtype = kFloat32, arrow.PrimitiveTypes.Float32
	case typ == "float64":
		n.kind, n.dtype = kFloat64, arrow.PrimitiveTypes.Float64
	case typ == "bool":
		n.kind, n.dtype = kBool, arrow.FixedWidthTypes.Boolean
	case typ == "string":
		n.kind, n.dtype = kString, arrow.BinaryTypes.String
	case typ == "binary":
		n.kind, n.dtype = kBinary, arrow.BinaryTypes.Binary
	case typ == "date":
		n.kind, n.dtype = kDate, arrow.FixedWidthTypes.Date32
	case strings.HasPrefix(typ, "timestamp_"):
		unit, ok := map[string]arrow.TimeUnit{"s": arrow.Second, "ms": arrow.Millisecond, "us": arrow.Microsecond, "ns": arrow.Nanosecond}[typ[len("timestamp_"):]]
		if !ok {
			return nil, &SchemaError{Field: path, Msg: fmt.Sprintf("unknown type %q (timestamps are timestamp_s, timestamp_ms, timestamp_us, timestamp_ns)", typ)}
		}
		n.kind, n.unit, n.dtype = kTimestamp, unit, &arrow.TimestampType{Unit: unit, TimeZone: "UTC"}
	case strings.HasPrefix(typ, "decimal(") && strings.HasSuffix(typ, ")"):
		args := strings.Split(typ[len("decimal("):len(typ)-1], ",")
		if len(args) != 2 {
			return nil, &SchemaError{Field: path, Msg: fmt.Sprintf("%q: want decimal(P,S)", typ)}
		}
		p, err1 := strconv.Atoi(strings.TrimSpace(args[0]))
		s, err2 := strconv.Atoi(strings.TrimSpace(args[1]))
		if err1 != nil || err2 != nil || p < 1 || p > 38 || s < 0 || s > p {
			return nil, &SchemaError{Field: path, Msg: fmt.Sprintf("%q: want decimal(P,S) with 1 <= P <= 38 and 0 <= S <= P", typ)}
		}
		n.kind, n.prec, n.scale = kDecimal, int32(p), int32(s)
		n.dtype = &arrow.Decimal128Type{Precision: n.prec, Scale: n.scale}
	case strings.HasPrefix(typ, "list<") && strings.HasSuffix(typ, ">"):
		inner := strings.TrimSpace(typ[len("list<") : len(typ)-1])
		e, err := typeNode(inner, "element", path+"[]", fields)
		if err != nil {
			return nil, err
		}
		usesFields = true // passed down to the element
		n.kind, n.elem = kList, e
		n.dtype = arrow.ListOfField(arrow.Field{Name: "element", Type: e.dtype, Nullable: true})
	case strings.HasPrefix(typ, "map<") && strings.HasSuffix(typ, ">"):
		key, inner, ok := strings.Cut(typ[len("map<"):len(typ)-1], ",")
		if !ok || strings.TrimSpace(key) != "string" {
			return nil, &SchemaError{Field: path, Msg: fmt.Sprintf("%q: want map<string,T> (map keys are strings)", typ)}
		}
		v, err := typeNode(strings.TrimSpace(inner), "value", path+"{}", fields)
		if err != nil {
			return nil, err
		}
		usesFields = true // passed down to the value
		n.kind, n.elem = kMap, v
		n.dtype = arrow.MapOf(arrow.BinaryTypes.String, v.dtype)
	case typ == "struct":
		s, err := structNode(name, path, fields, true)
		if err != nil {
			return nil, err
		}
		return s, nil
	default:
		return nil, &SchemaError{Field: path, Msg: fmt.Sprintf("unknown type %q", typ)}
	}
	if fields != nil && !usesFields {
		return nil, &SchemaError{Field: path, Msg: fmt.Sprintf("\"fields\" given for type %q (only struct, list<struct> and map<string,struct> have fields)", typ)}
	}
	return n, nil
}

// SchemaFromArrow makes a schema from an Arrow schema. Supported types:
// int32, int64, float32, float64, bool, string, binary, timestamp (any
// unit; the time zone is kept as given), date32, decimal128, list, map
// with string keys and struct. The Arrow schema is kept as it is (Arrow returns s), so records
// of s can be added with AddArrow.
func SchemaFromArrow(s *arrow.Schema) (*Schema, error) {
	if s == nil || len(s.Fields()) == 0 {
		return nil, &SchemaError{Msg: "no fields"}
	}
	fields := make([]Field, len(s.Fields()))
	for i, f := range s.Fields() {
		ff, err := fieldFromArrow(f, f.Name)
		if err != nil {
			return nil, err
		}
		fields[i] = ff
	}
	sc, err := newSchema(fields)
	if err != nil {
		return nil, err
	}
	// Keep the caller's Arrow types (time zones, list element names) so
	// that its records match; the conversion is unaffected.
	if err := adoptArrow(sc.root, s); err != nil {
		return nil, err
	}
	sc.arrow = s
	return sc, nil
}

func adoptArrow(root *node, s *arrow.Schema) error {
	for i, f := range s.Fields() {
		adoptType(root.fields[i], f.Type)
	}
	return nil
}

func adoptType(n *node, t arrow.DataType) {
	n.dtype = t
	switch n.kind {
	case kList:
		adoptType(n.elem, t.(*arrow.ListType).Elem())
	case kMap:
		// A map whose values are required (an Iceberg table's, say)
		// refuses null values.
		mt := t.(*arrow.MapType)
		n.elem.nullable = mt.ItemField().Nullable
		adoptType(n.elem, mt.ItemType())
	case kStruct:
		st := t.(*arrow.StructType)
		for i, f := range st.Fields() {
			adoptType(n.fields[i], f.Type)
		}
	}
}

func fieldFromArrow(f arrow.Field, path string) (Field, error) {
	typ, sub, err := typeFromArrow(f.Type, path)
	if err != nil {
		return Field{}, err
	}
	return Field{Name: f.Name, Type: typ, Nullable: f.Nullable, Fields: sub}, nil
}

func typeFromArrow(t arrow.DataType, path string) (string, []Field, error) {
	switch t := t.(type) {
	case *arrow.Int32Type:
		return "int32", nil, nil
	case *arrow.Int64Type:
		return "int64", nil, nil
	case *arrow.Float32Type:
		return "float32", nil, nil
	case *arrow.Float64Type:
		return "float64", nil, nil
	case *arrow.BooleanType:
		return "bool", nil, nil
	case *arrow.StringType:
		return "string", nil, nil
	case *arrow.BinaryType:
		return "binary", nil, nil
	case *arrow.Date32Type:
		return "date", nil, nil
	case *arrow.TimestampType:
		return "timestamp_" + map[arrow.TimeUnit]string{arrow.Second: "s", arrow.Millisecond: "ms", arrow.Microsecond: "us", arrow.Nanosecond: "ns"}[t.Unit], nil, nil
	case *arrow.Decimal128Type:
		return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale), nil, nil
	case *arrow.ListType:
		et, sub, err := typeFromArrow(t.Elem(), path+"[]")
		if err != nil {
			return "", nil, err
		}
		return "list<" + et + ">", sub, nil
	case *arrow.MapType:
		if _, ok := t.KeyType().(*arrow.StringType); !ok {
			return "", nil, &SchemaError{Field: path, Msg: fmt.Sprintf("unsupported Arrow map key type %s (map keys are strings)", t.KeyType())}
		}
		vt, sub, err := typeFromArrow(t.ItemType(), path+"{}")
		if err != nil {
			return "", nil, err
		}
		return "map<string," + vt + ">", sub, nil
	case *arrow.StructType:
		sub := make([]Field, len(t.Fields()))
		for i, f := range t.Fields() {
			ff, err := fieldFromArrow(f, joinPath(path, f.Name))
			if err != nil {
				return "", nil, err
			}
			sub[i] = ff
		}
		return "struct", sub, nil
	}
	return "", nil, &SchemaError{Field: path, Msg: fmt.Sprintf("unsupported Arrow type %s", t)}
}

var timeType = reflect.TypeOf(time.Time{})

// SchemaFromStruct makes a schema from a Go struct type (v is a struct or a
// pointer to one). Each exported field becomes a field named by its tag
// `parquet:"name"` or else `json:"name"` or else the Go name; "-" skips it.
// Types: int32, int64 (and int), float32, float64, bool, string, []byte
// (binary), time.Time (timestamp_us; the tag option ",timestamp_ms",
// ",timestamp_s", ",timestamp_ns" or ",date" chooses another), slices
// (list<T>), maps with string keys (map<string,T>) and structs. A pointer
// field is nullable; any other field is required (nil slices are written
// as empty lists, nil []byte as empty binary).
func SchemaFromStruct(v any) (*Schema, error) {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil, &SchemaError{Msg: fmt.Sprintf("SchemaFromStruct needs a struct, not %T", v)}
	}
	fields, err := fieldsFromStruct(t, "", 0)
	if err != nil {
		return nil, err
	}
	return newSchema(fields)
}

// goField maps a struct field to its schema name and type option.
func goField(sf reflect.StructField) (name, opt string, skip bool) {
	if !sf.IsExported() {
		return "", "", true
	}
	tag, ok := sf.Tag.Lookup("parquet")
	if !ok {
		tag, ok = sf.Tag.Lookup("json")
	}
	if !ok {
		return sf.Name, "", false
	}
	name, opt, _ = strings.Cut(tag, ",")
	if name == "-" && opt == "" {
		return "", "", true
	}
	if name == "" {
		name = sf.Name
	}
	return name, opt, false
}

func fieldsFromStruct(t reflect.Type, prefix string, depth int) ([]Field, error) {
	if depth > 32 {
		return nil, &SchemaError{Field: prefix, Msg: "struct nesting too deep (recursive type?)"}
	}
	var out []Field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, opt, skip := goField(sf)
		if skip {
			continue
		}
		path := joinPath(prefix, name)
		ft := sf.Type
		nullable := false
		if ft.Kind() == reflect.Pointer {
			nullable, ft = true, ft.Elem()
		}
		typ, sub, err := typeFromGo(ft, opt, path, depth)
		if err != nil {
			return nil, err
		}
		out = append(out, Field{Name: name, Type: typ, Nullable: nullable, Fields: sub})
	}
	if len(out) == 0 {
		return nil, &SchemaError{Field: prefix, Msg: "struct has no exported fields"}
	}
	return out, nil
}

func typeFromGo(t reflect.Type, opt, path string, depth int) (string, []Field, error) {
	if t == timeType {
		switch opt {
		case "":
			return "timestamp_us", nil, nil
		case "date", "timestamp_s", "timestamp_ms", "timestamp_us", "timestamp_ns":
			return opt, nil, nil
		}
		return "", nil, &SchemaError{Field: path, Msg: fmt.Sprintf("unknown time option %q", opt)}
	}
	switch t.Kind() {
	case reflect.Int32:
		return "int32", nil, nil
	case reflect.Int64, reflect.Int:
		return "int64", nil, nil
	case reflect.Float32:
		return "float32", nil, nil
	case reflect.Float64:
		return "float64", nil, nil
	case reflect.Bool:
		return "bool", nil, nil
	case reflect.String:
		return "string", nil, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "binary", nil, nil
		}
		et := t.Elem()
		if et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		inner, sub, err := typeFromGo(et, opt, path+"[]", depth+1)
		if err != nil {
			return "", nil, err
		}
		return "list<" + inner + ">", sub, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return "", nil, &SchemaError{Field: path, Msg: fmt.Sprintf("unsupported Go map key type %s (map keys are strings)", t.Key())}
		}
		vt := t.Elem()
		if vt.Kind() == reflect.Pointer {
			vt = vt.Elem()
		}
		inner, sub, err := typeFromGo(vt, opt, path+"{}", depth+1)
		if err != nil {
			return "", nil, err
		}
		return "map<string," + inner + ">", sub, nil
	case reflect.Struct:
		sub, err := fieldsFromStruct(t, path, depth+1)
		if err != nil {
			return "", nil, err
		}
		return "struct", sub, nil
	}
	return "", nil, &SchemaError{Field: path, Msg: fmt.Sprintf("unsupported Go type %s", t)}
}

var errNoSchema = errors.New("bulk: nil schema")
