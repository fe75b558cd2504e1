package bucketing

import (
	"strconv"
	"strings"

	"github.com/filesink/filesink/internal/jsonscan"
)

// Field lookup reads records lazily with jsonscan (Member, SkipLazy): it
// walks the members of an object, skips the values it does not need
// without decoding them, and stops at the member it looks for. Only what
// it reads is validated.

// jsonValue is a scanned value. For a string, raw is the text between the
// quotes, still escaped; for any other kind it is the literal JSON text.
type jsonValue struct {
	kind jsonscan.Kind
	raw  []byte
}

// synErr is the syntax error err of jsonscan, reported at the end of the
// record d as "unexpected end of record".
func synErr(d []byte, err error) error {
	if se, ok := err.(*jsonscan.SyntaxError); ok && se.Offset >= len(d) {
		return &jsonscan.SyntaxError{Offset: len(d), Msg: "unexpected end of record"}
	}
	return err
}

// fieldPath is a configured field name split into its dotted segments.
type fieldPath struct {
	name string
	segs []string
	err  error // configuration error, returned by every lookup
}

func newFieldPath(name string) fieldPath {
	f := fieldPath{name: name}
	if name == "" {
		f.err = specError("empty field name")
		return f
	}
	f.segs = strings.Split(name, ".")
	for _, s := range f.segs {
		if s == "" {
			f.err = specError("field name " + strconv.Quote(name) + " has an empty segment")
			return f
		}
	}
	return f
}

func (f *fieldPath) fail(reason string, err error) error {
	return &FieldError{Field: f.name, Reason: reason, Err: err}
}

// lookup returns the value of the field f in the JSON object d.
// Errors are *FieldError values (or the configuration error of f).
func (f *fieldPath) lookup(d []byte) (jsonValue, error) {
	if f.err != nil {
		return jsonValue{}, f.err
	}
	i := jsonscan.SkipSpace(d, 0)
	for n, seg := range f.segs {
		if i >= len(d) || d[i] != '{' {
			if n == 0 {
				return jsonValue{}, f.fail("record is not a JSON object", nil)
			}
			k := jsonscan.KindAt(d, i)
			if k == jsonscan.KindInvalid {
				return jsonValue{}, f.fail("", synErr(d, &jsonscan.SyntaxError{Offset: i, Msg: "invalid value"}))
			}
			parent := strings.Join(f.segs[:n], ".")
			return jsonValue{}, f.fail(strconv.Quote(parent)+" is "+k.String()+", not an object", nil)
		}
		var found bool
		var err error
		i, found, err = jsonscan.Member(d, i, seg)
		if err != nil {
			return jsonValue{}, f.fail("", synErr(d, err))
		}
		if !found {
			if n == 0 {
				return jsonValue{}, f.fail("missing", nil)
			}
			parent := strings.Join(f.segs[:n], ".")
			return jsonValue{}, f.fail("missing (object "+strconv.Quote(parent)+" has no key "+strconv.Quote(seg)+")", nil)
		}
	}
	return f.value(d, i)
}

// value scans the value of the field found at d[i], which must be followed
// by ',' or '}'.
func (f *fieldPath) value(d []byte, i int) (jsonValue, error) {
	k := jsonscan.KindAt(d, i)
	end, err := jsonscan.SkipLazy(d, i)
	if err != nil {
		return jsonValue{}, f.fail("", synErr(d, err))
	}
	v := jsonValue{kind: k, raw: d[i:end]}
	if k == jsonscan.KindString {
		v.raw = d[i+1 : end-1]
	}
	j := jsonscan.SkipSpace(d, end)
	if j >= len(d) || (d[j] != ',' && d[j] != '}') {
		return jsonValue{}, f.fail("", synErr(d, &jsonscan.SyntaxError{Offset: j, Msg: "expected ',' or '}' after value"}))
	}
	return v, nil
}
