package bucketing

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/filesink/filesink/internal/jsonscan"
)

// Assigner maps a record to its bucket: a relative slash-separated path
// under the sink's base directory ("" means the base itself).
//
// Implementations must be safe for concurrent use and must not read a clock:
// processing time is the now argument. Every Assigner of this package checks
// its result with Sanitize; a nil error guarantees a valid bucket path.
//
// The assigners of this package also implement fmt.Stringer: String returns
// their spec in the form Parse accepts (without the time zone), or "func".
type Assigner interface {
	Bucket(record []byte, now time.Time) (string, error)
}

// validator is implemented by the assigners that Parse builds.
type validator interface {
	Assigner
	fmt.Stringer
	validate() error
}

var (
	_ Assigner  = basePath{}
	_ Assigner  = funcAssigner{}
	_ validator = (*dateTime)(nil)
	_ validator = (*eventTime)(nil)
	_ validator = (*field)(nil)
	_ validator = (*hive)(nil)
)

// DefaultLayout is the date-time layout used when none is given: one bucket
// per hour, as Flink's DateTimeBucketAssigner ("yyyy-MM-dd--HH").
const DefaultLayout = "2006-01-02--15"

// BasePath returns an Assigner that puts every record in the base directory:
// its Bucket always returns "" and a nil error.
func BasePath() Assigner { return basePath{} }

type basePath struct{}

func (basePath) Bucket([]byte, time.Time) (string, error) { return "", nil }

// String returns the spec of the assigner, "none".
func (basePath) String() string { return "none" }

// timeFormat is a validated layout and zone.
type timeFormat struct {
	layout string
	loc    *time.Location
	err    error
}

func newTimeFormat(layout string, loc *time.Location) timeFormat {
	if layout == "" {
		layout = DefaultLayout
	}
	if loc == nil {
		loc = time.UTC
	}
	return timeFormat{layout: layout, loc: loc, err: checkLayout(layout, loc)}
}

// checkLayout rejects a layout that has no date or time element (a Java
// pattern like "yyyy-MM-dd" is the usual mistake) or that formats to an
// invalid bucket path.
func checkLayout(layout string, loc *time.Location) error {
	t1 := time.Date(2006, 1, 2, 15, 4, 5, 123456789, time.UTC).In(loc)
	t2 := time.Date(2017, 11, 28, 9, 37, 51, 987654321, time.UTC).In(loc)
	s1, s2 := t1.Format(layout), t2.Format(layout)
	if s1 == s2 {
		return specError("time layout " + strconv.Quote(layout) + " has no date or time element (use Go layouts like \"2006-01-02--15\")")
	}
	for _, s := range []string{s1, s2} {
		if _, err := Sanitize(s); err != nil {
			return specError("time layout " + strconv.Quote(layout) + " does not make a valid bucket path: " + err.(*InvalidBucketError).detail())
		}
	}
	return nil
}

// format formats t and checks the result.
func (f *timeFormat) format(t time.Time) (string, error) {
	return Sanitize(t.In(f.loc).Format(f.layout))
}

// DateTime returns an Assigner that buckets by processing time: now,
// formatted with the Go time layout in the zone loc. An empty layout means
// DefaultLayout ("2006-01-02--15"); a nil loc means UTC. A '/' in the layout
// makes nested directories ("2006/01/02").
//
// A layout with no date or time element, or one that formats to an invalid
// path (for example with a leading '/' or '_'), makes Bucket return an error
// matching ErrInvalidSpec.
func DateTime(layout string, loc *time.Location) Assigner {
	return &dateTime{f: newTimeFormat(layout, loc)}
}

type dateTime struct{ f timeFormat }

func (a *dateTime) Bucket(_ []byte, now time.Time) (string, error) {
	if a.f.err != nil {
		return "", a.f.err
	}
	return a.f.format(now)
}

// String returns the spec of the assigner, "datetime:LAYOUT".
func (a *dateTime) String() string { return "datetime:" + a.f.layout }

func (a *dateTime) validate() error { return a.f.err }

// EventTime returns an Assigner that buckets by event time: the time read
// from the JSON field of the record (a key of the top-level object, or a
// dotted path "a.b" into nested objects), formatted with layout in the zone
// loc, with the same defaults as DateTime.
//
// The field must hold an RFC 3339 string, with or without fractional seconds
// ("2024-05-01T12:30:00Z", "2024-05-01T14:30:00.123+02:00"), or a JSON number
// of milliseconds since the Unix epoch (a fraction is kept as sub-millisecond
// time). The time must fall within the years 1 to 9999 in loc. Otherwise
// Bucket returns a *FieldError (matching source.ErrBadRecord) that names the field
// and says why. The now argument is not used.
func EventTime(field, layout string, loc *time.Location) Assigner {
	return &eventTime{field: newFieldPath(field), f: newTimeFormat(layout, loc)}
}

type eventTime struct {
	field fieldPath
	f     timeFormat
}

func (a *eventTime) Bucket(record []byte, _ time.Time) (string, error) {
	s, _, err := a.BucketTime(record)
	return s, err
}

// String returns the spec of the assigner, "eventtime:FIELD:LAYOUT".
func (a *eventTime) String() string { return "eventtime:" + a.field.name + ":" + a.f.layout }

func (a *eventTime) validate() error {
	if a.field.err != nil {
		return a.field.err
	}
	return a.f.err
}

// Bounds of epoch milliseconds that can be in the years 1 to 9999 in some
// zone; the exact check is done on the converted time.
const (
	minEpochMilli = -62135596800000 - 2*86400000 // 0001-01-01 UTC, minus 2 days
	maxEpochMilli = 253402300799999 + 2*86400000 // 9999-12-31 UTC, plus 2 days
)

// eventTime converts a scanned value to a time.
func (f *fieldPath) eventTime(v jsonValue) (time.Time, error) {
	switch v.kind {
	case jsonscan.KindString:
		s, ok := jsonscan.Unquote(v.raw)
		if !ok {
			return time.Time{}, f.fail("invalid JSON string", nil)
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return time.Time{}, f.fail(quoteTrunc(s)+" is not an RFC 3339 time", err)
		}
		return t, nil
	case jsonscan.KindNumber:
		if ms, err := strconv.ParseInt(string(v.raw), 10, 64); err == nil {
			if ms < minEpochMilli || ms > maxEpochMilli {
				return time.Time{}, f.fail("epoch milliseconds "+string(v.raw)+" out of range", nil)
			}
			return time.UnixMilli(ms), nil
		}
		x, err := strconv.ParseFloat(string(v.raw), 64)
		if err != nil || x < minEpochMilli || x > maxEpochMilli {
			return time.Time{}, f.fail("epoch milliseconds "+quoteTrunc(string(v.raw))+" out of range", nil)
		}
		whole := math.Floor(x)
		frac := time.Duration(math.Round((x - whole) * 1e6))
		return time.UnixMilli(int64(whole)).Add(frac), nil
	}
	return time.Time{}, f.fail("is "+v.kind.String()+", want an RFC 3339 string or a number of epoch milliseconds", nil)
}

// scalar returns the text of a string, number or bool value.
func (f *fieldPath) scalar(v jsonValue) (string, error) {
	switch v.kind {
	case jsonscan.KindString:
		s, ok := jsonscan.Unquote(v.raw)
		if !ok {
			return "", f.fail("invalid JSON string", nil)
		}
		return s, nil
	case jsonscan.KindNumber, jsonscan.KindTrue, jsonscan.KindFalse:
		return string(v.raw), nil
	}
	return "", f.fail("is "+v.kind.String()+", want a string, number or bool", nil)
}

// Field returns an Assigner whose bucket is the value of the JSON field name
// (a key of the top-level object, or a dotted path "a.b"). A string is used
// with its escapes decoded; a number or bool as its JSON text. The value is
// used as the path as is, so "a/b" makes nested directories, and must pass
// Sanitize.
//
// A missing field, null, an object, an array, an empty string or a value
// that is not a valid path makes Bucket return a *FieldError (matching
// source.ErrBadRecord; for an invalid path, also ErrInvalidBucket).
func Field(name string) Assigner { return &field{f: newFieldPath(name)} }

type field struct{ f fieldPath }

func (a *field) Bucket(record []byte, _ time.Time) (string, error) {
	v, err := a.f.lookup(record)
	if err != nil {
		return "", err
	}
	s, err := a.f.scalar(v)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", a.f.fail("is an empty string", nil)
	}
	b, err := Sanitize(s)
	if err != nil {
		return "", a.f.fail("", err)
	}
	return b, nil
}

// String returns the spec of the assigner, "field:NAME".
func (a *field) String() string { return "field:" + a.f.name }

func (a *field) validate() error { return a.f.err }

// HiveDefaultPartition is the value Hive uses for an empty partition value.
const HiveDefaultPartition = "__HIVE_DEFAULT_PARTITION__"

// Hive returns an Assigner that builds Hive-style partition directories,
// "name1=value1/name2=value2", from the JSON fields names (each a key of the
// top-level object or a dotted path). Values are taken as by Field. Names and
// values are escaped as Hive's FileUtils.escapePathName does: control
// characters, DEL and `"#%'*/:=?\{[]^` become %XX (upper-case hex); so do the
// C1 control characters U+0080 to U+009F (Hive leaves them, but they are not
// valid in a bucket path), which Hive's unescapePathName decodes back to
// the same characters. An empty string becomes HiveDefaultPartition.
//
// A missing field, null, an object or an array makes Bucket return a
// *FieldError (matching source.ErrBadRecord). No names, an empty or duplicate name,
// or a name starting with '.' or '_' makes Bucket return an error matching
// ErrInvalidSpec.
func Hive(names ...string) Assigner {
	a := &hive{}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		f := newFieldPath(n)
		a.fields = append(a.fields, f)
		a.prefixes = append(a.prefixes, HiveEscape(n)+"=")
		switch {
		case a.err != nil:
		case f.err != nil:
			a.err = f.err
		case seen[n]:
			a.err = specError("duplicate Hive partition name " + strconv.Quote(n))
		default:
			if _, err := Sanitize(HiveEscape(n) + "=x"); err != nil {
				a.err = specError("Hive partition name " + strconv.Quote(n) + " does not make a valid bucket path: " + err.(*InvalidBucketError).detail())
			}
		}
		seen[n] = true
	}
	if len(names) == 0 {
		a.err = specError("Hive partitioning needs at least one field name")
	}
	return a
}

type hive struct {
	fields   []fieldPath
	prefixes []string // escaped "name="
	err      error
}

func (a *hive) Bucket(record []byte, _ time.Time) (string, error) {
	if a.err != nil {
		return "", a.err
	}
	var b strings.Builder
	for i := range a.fields {
		f := &a.fields[i]
		v, err := f.lookup(record)
		if err != nil {
			return "", err
		}
		s, err := f.scalar(v)
		if err != nil {
			return "", err
		}
		if s == "" {
			s = HiveDefaultPartition
		}
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(a.prefixes[i])
		hiveEscapeTo(&b, s)
	}
	p, err := Sanitize(b.String())
	if err != nil {
		return "", &FieldError{Field: a.String()[len("hive:"):], Err: err}
	}
	return p, nil
}

// String returns the spec of the assigner, "hive:NAME[,NAME...]".
func (a *hive) String() string {
	names := make([]string, len(a.fields))
	for i, f := range a.fields {
		names[i] = f.name
	}
	return "hive:" + strings.Join(names, ",")
}

func (a *hive) validate() error { return a.err }

// hiveEscaped reports whether Hive's escapePathName escapes c (or, for the
// C1 controls, whether this package escapes it).
func hiveEscaped(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	}
	switch r {
	case '"', '#', '%', '\'', '*', '/', ':', '=', '?', '\\', '{', '[', ']', '^':
		return true
	}
	return false
}

// HiveEscape escapes s as Hive's escapePathName does, the way Hive
// writes partition names and values into a directory name (see Hive).
func HiveEscape(s string) string {
	var b strings.Builder
	hiveEscapeTo(&b, s)
	return b.String()
}

// HiveUnescape reads back a name or value HiveEscape escaped: each %XX is
// the code point XX (below 0x100). A nil error means every escape was
// whole and hexadecimal.
func HiveUnescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("%q: a %% escape is cut short", s)
		}
		n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("%q: bad %% escape %q", s, s[i:i+3])
		}
		b.WriteRune(rune(n))
		i += 2
	}
	return b.String(), nil
}

func hiveEscapeTo(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for _, r := range s {
		if hiveEscaped(r) {
			b.WriteByte('%')
			b.WriteByte(hex[r>>4])
			b.WriteByte(hex[r&0xf])
		} else {
			b.WriteRune(r)
		}
	}
}

// Func returns an Assigner that calls fn. The result of fn is checked with
// Sanitize and returned cleaned; an error from fn is returned wrapped (errors.Is
// and errors.As see through it). fn must be safe for concurrent use if the
// Assigner is used concurrently. A nil fn makes Bucket return an error
// matching ErrInvalidSpec.
func Func(fn func(record []byte, now time.Time) (string, error)) Assigner {
	return funcAssigner{fn: fn}
}

type funcAssigner struct {
	fn func(record []byte, now time.Time) (string, error)
}

func (a funcAssigner) Bucket(record []byte, now time.Time) (string, error) {
	if a.fn == nil {
		return "", specError("nil bucket function")
	}
	s, err := a.fn(record, now)
	if err != nil {
		return "", fmt.Errorf("bucketing: custom assigner: %w", err)
	}
	return Sanitize(s)
}

// String returns "func".
func (funcAssigner) String() string { return "func" }
