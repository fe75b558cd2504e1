package avro

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/filesink/filesink/source"
)

// Version names one schema of a subject: its registry id and its version
// number under the subject (0 when the registry does not list the id
// under the subject).
type Version struct {
	ID, Version int
}

func (v Version) String() string {
	if v.Version == 0 {
		return fmt.Sprintf("schema id %d", v.ID)
	}
	return fmt.Sprintf("version %d (id %d)", v.Version, v.ID)
}

// ChangeError is returned by Decode for the first value of a schema that
// adds columns to those the records are written as. It matches
// source.ErrSchemaChanged: the value is not delivered, the run ends at a
// checkpoint and the job is opened again with Doc. The decoder has taken
// the change: the next values of that schema decode.
type ChangeError struct {
	Subject  string
	From, To Version
	Added    []string // the new columns, all nullable
	Doc      []byte   // the bulk formats' schema document with them
}

func (e *ChangeError) Error() string {
	return fmt.Sprintf("subject %s moved from %s to %s: new column(s) %s", e.Subject, e.From, e.To, strings.Join(e.Added, ", "))
}

// Is reports a match with source.ErrSchemaChanged.
func (e *ChangeError) Is(target error) bool { return target == source.ErrSchemaChanged }

// IncompatibleError reports a schema whose values cannot be written as
// the columns the job writes: a field retyped, a required field gone with
// no default, a required field made nullable. It is not a bad record: the
// run stops on it (nothing committed is lost), for the operator to decide.
type IncompatibleError struct {
	Subject  string
	From, To Version
	Field    string
	Why      string
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("subject %s: %s is incompatible with the columns written since %s: field %s %s; "+
		"the job stops before its values (nothing committed is lost): see \"An incompatible schema\" in the runbook",
		e.Subject, e.To, e.From, e.Field, e.Why)
}

// follower keeps the columns the values of one subject are written as,
// and decides for each new schema whether its values fit them.
type follower struct {
	subject, unit string
	fields        []docField
	defaults      map[string]json.RawMessage // by top-level field: the JSON of its Avro default
	from          Version                    // the schema the columns last changed with
}

// fit is what a writer schema's values need to fit the columns: fill, the
// JSON of the defaults of the columns the schema lacks (",\"a\":0..."),
// inserted before the record's closing brace.
type fit struct {
	schema  avro.Schema
	fill    []byte
	version int // under the followed subject; 0: not known
}

// Follow makes d check every new schema against the columns the records
// are written as: doc, the bulk formats' schema document (nil: the first
// schema met makes them), for the values of subject, with timestampUnit
// as in SchemaDoc. Call it before the first Decode. A schema whose
// values fit the columns decodes (the columns it lacks get their Avro
// default or null); one that adds columns makes Decode return a
// *ChangeError once; one that cannot fit them an *IncompatibleError.
func (d *Decoder) Follow(subject string, doc []byte, timestampUnit string) error {
	f := &follower{subject: subject, unit: timestampUnit, defaults: map[string]json.RawMessage{}}
	var err error
	if f.fields, err = parseDoc(doc); err != nil {
		return err
	}
	d.follow = f
	return nil
}

// Accept takes the schema id into the columns, as a value of it would,
// and returns the columns' schema document: the CLI calls it with the
// subject's newest schema before the run, so that the columns start with
// every field the producers may send. It returns the *IncompatibleError
// of a schema that cannot fit the columns.
func (d *Decoder) Accept(ctx context.Context, id int) ([]byte, error) {
	s, err := d.reg.Schema(ctx, id)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.admit(ctx, id, s); err != nil {
		if ce, ok := err.(*ChangeError); ok {
			return ce.Doc, nil
		}
		return nil, err
	}
	return d.follow.doc()
}

// admit decides whether the values of schema id fit the columns, with
// d.mu held: a nil error means they do (and d.fits has id), a
// *ChangeError that the columns grew for them (d.fits has id too).
func (d *Decoder) admit(ctx context.Context, id int, s avro.Schema) (*fit, error) {
	f := d.follow
	rec, ok := deref(s).(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("avro: subject %s: schema %d is %s, not a record: a record's fields make the columns", f.subject, id, s.Type())
	}
	m := mapper{tsUnit: f.unit}
	w, err := m.fields("", rec)
	if err != nil {
		return nil, fmt.Errorf("avro: subject %s: schema %d: %v", f.subject, id, err)
	}
	to := Version{ID: id, Version: d.reg.versionOf(ctx, f.subject, id)}
	first := f.fields == nil
	merged, added, field, why := mergeFields(f.fields, w)
	if why != "" {
		return nil, &IncompatibleError{Subject: f.subject, From: f.from, To: to, Field: field, Why: why}
	}
	for _, af := range rec.Fields() {
		if af.HasDefault() {
			if b, ok := defaultJSON(af); ok {
				f.defaults[af.Name()] = b
			}
		}
	}
	ft := &fit{schema: s, version: to.Version}
	have := map[string]bool{}
	for _, x := range w {
		have[x.Name] = true
	}
	for _, o := range merged {
		if have[o.Name] {
			continue
		}
		def, ok := f.defaults[o.Name]
		switch {
		case ok:
			ft.fill = fmt.Appendf(ft.fill, ",%q:%s", o.Name, def)
		case !o.Nullable:
			return nil, &IncompatibleError{Subject: f.subject, From: f.from, To: to, Field: o.Name, Why: "is required by the columns and absent from this schema, with no default"}
		}
	}
	if len(added) > 0 {
		// The schemas met before lack the new columns: decide them again
		// (their fills take the new columns' defaults).
		d.fits.Store(&map[int]*fit{})
	}
	d.setFit(id, ft)
	f.fields = merged
	if first || len(added) == 0 {
		if first {
			f.from = to
		}
		return ft, nil
	}
	from := f.from
	f.from = to
	doc, err := f.doc()
	if err != nil {
		return nil, err
	}
	return ft, &ChangeError{Subject: f.subject, From: from, To: to, Added: added, Doc: doc}
}

func (f *follower) doc() ([]byte, error) { return marshalDoc(f.fields) }

// mergeFields returns the columns out with the fields of w they lack
// (nullable: earlier records have no value), and the names added; or the
// field and why w's values cannot be written as out.
func mergeFields(out, w []docField) (merged []docField, added []string, field, why string) {
	if out == nil {
		return w, nil, "", ""
	}
	byName := make(map[string]docField, len(w))
	for _, x := range w {
		byName[x.Name] = x
	}
	merged = append([]docField(nil), out...)
	for _, o := range out {
		x, ok := byName[o.Name]
		if !ok {
			continue // a default or null fills it (admit checks)
		}
		if a, b := typeOf(o), typeOf(x); a != b {
			return nil, nil, o.Name, fmt.Sprintf("changes type from %s to %s", a, b)
		}
		if x.Nullable && !o.Nullable {
			return nil, nil, o.Name, "becomes nullable where the column is required"
		}
		delete(byName, o.Name)
	}
	for _, x := range w {
		if _, ok := byName[x.Name]; ok {
			x.Nullable = true
			merged = append(merged, x)
			added = append(added, x.Name)
		}
	}
	return merged, added, "", ""
}

// typeOf is a column's type with its nested fields, for comparing.
func typeOf(f docField) string {
	if len(f.Fields) == 0 {
		return f.Type
	}
	b, _ := json.Marshal(f.Fields)
	return f.Type + string(b)
}

// defaultJSON is the JSON of f's default as Decode would write the
// value, for the types whose default reads the same (null, booleans,
// numbers without a logical type, strings and enums).
func defaultJSON(f *avro.Field) ([]byte, bool) {
	s := deref(f.Type())
	if u, ok := s.(*avro.UnionSchema); ok && len(u.Types()) > 0 {
		s = deref(u.Types()[0]) // a union's default is of its first type
	}
	switch t := s.(type) {
	case *avro.NullSchema, *avro.EnumSchema:
	case *avro.PrimitiveSchema:
		if t.Logical() != nil || t.Type() == avro.Bytes {
			return nil, false
		}
	default:
		return nil, false
	}
	v := f.Default()
	if v == nil {
		return []byte("null"), true
	}
	b, err := json.Marshal(v)
	return b, err == nil
}

// versionOf is the version number of schema id under subject, 0 when the
// registry does not list it there or cannot say (it only names the
// schema in messages).
func (r *Registry) versionOf(ctx context.Context, subject string, id int) int {
	// Not bounded by ctx, which may be a read's short wait for the next
	// record: the version is asked once per schema.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	vs, err := r.cl.SchemaVersionsByID(ctx, id)
	if err != nil {
		return 0
	}
	for _, v := range vs {
		if v.Subject == subject {
			return v.Version
		}
	}
	return 0
}
