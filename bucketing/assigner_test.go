package bucketing

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/source"
)

var (
	// Fixed zones: no tzdata is needed.
	zoneKolkata = time.FixedZone("IST", 5*3600+30*60)
	zoneNewYork = time.FixedZone("EST", -5*3600)
	// 2024-03-05 23:45:30.5 UTC
	testNow = time.Date(2024, 3, 5, 23, 45, 30, 500_000_000, time.UTC)
)

// wantErr describes an expected error: the sentinels it matches and
// fragments of its message.
type wantErr struct {
	is       []error
	contains []string
}

func checkResult(t *testing.T, got string, err error, want string, we *wantErr) {
	t.Helper()
	if we == nil {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		if got != want {
			t.Fatalf("bucket = %q, want %q", got, want)
		}
		return
	}
	if err == nil {
		t.Fatalf("bucket = %q, want an error", got)
	}
	if got != "" {
		t.Errorf("bucket = %q with an error, want \"\"", got)
	}
	for _, s := range we.is {
		if !errors.Is(err, s) {
			t.Errorf("error %v does not match %v", err, s)
		}
	}
	for _, c := range we.contains {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("error %q does not contain %q", err, c)
		}
	}
}

func bad(contains ...string) *wantErr {
	return &wantErr{is: []error{source.ErrBadRecord}, contains: contains}
}

func badSpecErr(contains ...string) *wantErr {
	return &wantErr{is: []error{ErrInvalidSpec}, contains: contains}
}

func TestBasePath(t *testing.T) {
	for _, rec := range []string{"", "{}", "garbage", `{"a":1}`} {
		got, err := BasePath().Bucket([]byte(rec), testNow)
		checkResult(t, got, err, "", nil)
	}
}

func TestDateTime(t *testing.T) {
	tests := []struct {
		name   string
		layout string
		loc    *time.Location
		now    time.Time
		want   string
		err    *wantErr
	}{
		{name: "default layout and zone", now: testNow, want: "2024-03-05--23"},
		{name: "default layout, non-UTC now", now: testNow.In(zoneNewYork), want: "2024-03-05--23"},
		{name: "Kolkata crosses midnight", loc: zoneKolkata, now: testNow, want: "2024-03-06--05"},
		{name: "New York", loc: zoneNewYork, now: testNow, want: "2024-03-05--18"},
		{name: "nested dirs", layout: "2006/01/02", now: testNow, want: "2024/03/05"},
		{name: "nested dirs with hour", layout: "2006/01/02/15", loc: zoneKolkata, now: testNow, want: "2024/03/06/05"},
		{name: "trailing slash removed", layout: "2006/01/", now: testNow, want: "2024/03"},
		{name: "colon in layout", layout: "2006-01-02T15:04", now: testNow, want: "2024-03-05T23:45"},
		{name: "hive-like layout", layout: "dt=2006-01-02/hour=15", now: testNow, want: "dt=2024-03-05/hour=23"},
		{name: "zone offset in layout", layout: "2006-01-02--15Z0700", loc: zoneKolkata, now: testNow, want: "2024-03-06--05+0530"},
		{name: "java pattern", layout: "yyyy-MM-dd--HH", now: testNow, err: badSpecErr(`"yyyy-MM-dd--HH"`, "no date or time element")},
		{name: "absolute layout", layout: "/2006/01", now: testNow, err: badSpecErr("absolute path")},
		{name: "underscore component", layout: "_2006", now: testNow, err: badSpecErr("'_'")},
		{name: "dot component", layout: "2006/.01", now: testNow, err: badSpecErr("'.'")},
		{name: "empty component", layout: "2006//01", now: testNow, err: badSpecErr("empty component")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := DateTime(tt.layout, tt.loc)
			got, err := a.Bucket([]byte(`{"ts":"1999-01-01T00:00:00Z"}`), tt.now)
			checkResult(t, got, err, tt.want, tt.err)
		})
	}
}

func TestEventTime(t *testing.T) {
	tests := []struct {
		name   string
		field  string
		layout string
		loc    *time.Location
		rec    string
		want   string
		err    *wantErr
	}{
		{name: "rfc3339 Z", field: "ts", rec: `{"ts":"2024-05-01T12:30:00Z"}`, want: "2024-05-01--12"},
		{name: "rfc3339 fraction", field: "ts", rec: `{"ts":"2024-05-01T12:30:00.123456789Z"}`, want: "2024-05-01--12"},
		{name: "rfc3339 offset converted to UTC", field: "ts", rec: `{"ts":"2024-05-01T01:30:00+02:00"}`, want: "2024-04-30--23"},
		{name: "rfc3339 in Kolkata", field: "ts", loc: zoneKolkata, rec: `{"ts":"2024-05-01T20:00:00Z"}`, want: "2024-05-02--01"},
		{name: "rfc3339 in New York nested layout", field: "ts", layout: "2006/01/02/15", loc: zoneNewYork,
			rec: `{"ts":"2024-05-01T03:00:00Z"}`, want: "2024/04/30/22"},
		{name: "epoch ms", field: "ts", rec: `{"ts":1714566600000}`, want: "2024-05-01--12"},
		{name: "epoch ms Kolkata", field: "ts", loc: zoneKolkata, rec: `{"ts":1714566600000}`, want: "2024-05-01--18"},
		{name: "epoch ms fraction", field: "ts", layout: "2006-01-02T15:04:05.000000", rec: `{"ts":1714566600000.25}`, want: "2024-05-01T12:30:00.000250"},
		{name: "epoch ms exponent", field: "ts", rec: `{"ts":1.7145666e12}`, want: "2024-05-01--12"},
		{name: "epoch ms negative", field: "ts", layout: "2006-01-02T15:04:05.000", rec: `{"ts":-1}`, want: "1969-12-31T23:59:59.999"},
		{name: "epoch zero", field: "ts", rec: `{"ts":0}`, want: "1970-01-01--00"},
		{name: "nested field", field: "meta.event.ts", rec: `{"id":1,"meta":{"x":[1,{"ts":"no"}],"event":{"ts":"2024-05-01T12:30:00Z"}}}`, want: "2024-05-01--12"},
		{name: "field after skipped values", field: "ts",
			rec:  `{"s":"a\"b\\","o":{"ts":"1999-01-01T00:00:00Z","a":[[],{}]},"n":-1.5e3,"t":true,"f":false,"z":null,"ts":"2024-05-01T12:30:00Z"}`,
			want: "2024-05-01--12"},
		{name: "escaped key", field: "ts", rec: `{"\u0074s":"2024-05-01T12:30:00Z"}`, want: "2024-05-01--12"},
		{name: "escaped value", field: "ts", rec: `{"ts":"2024-05-01T12\u003a30:00Z"}`, want: "2024-05-01--12"},
		{name: "first duplicate wins", field: "ts", rec: `{"ts":"2024-05-01T12:30:00Z","ts":"1999-01-01T00:00:00Z"}`, want: "2024-05-01--12"},
		{name: "whitespace", field: "ts", rec: " \t\n{ \"ts\" :\r\n 1714566600000 \n}\n", want: "2024-05-01--12"},
		{name: "layout with colon", field: "ts", layout: "2006-01-02T15:04", rec: `{"ts":"2024-05-01T12:30:00Z"}`, want: "2024-05-01T12:30"},

		{name: "missing", field: "ts", rec: `{"t":"2024-05-01T12:30:00Z"}`, err: bad(`field "ts": missing`)},
		{name: "empty object", field: "ts", rec: `{}`, err: bad(`field "ts": missing`)},
		{name: "missing nested", field: "a.ts", rec: `{"a":{"b":1}}`, err: bad(`field "a.ts": missing`, `object "a" has no key "ts"`)},
		{name: "parent not an object", field: "a.ts", rec: `{"a":[1]}`, err: bad(`"a" is an array, not an object`)},
		{name: "null", field: "ts", rec: `{"ts":null}`, err: bad(`field "ts": is null`)},
		{name: "bool", field: "ts", rec: `{"ts":true}`, err: bad("is a bool, want an RFC 3339 string")},
		{name: "object", field: "ts", rec: `{"ts":{"a":1}}`, err: bad("is an object")},
		{name: "bad time", field: "ts", rec: `{"ts":"yesterday"}`, err: bad(`"yesterday" is not an RFC 3339 time`)},
		{name: "date only", field: "ts", rec: `{"ts":"2024-05-01"}`, err: bad("is not an RFC 3339 time")},
		{name: "month out of range", field: "ts", rec: `{"ts":"2024-13-01T00:00:00Z"}`, err: bad("month out of range")},
		{name: "epoch out of range", field: "ts", rec: `{"ts":99999999999999999999}`, err: bad("out of range")},
		{name: "epoch beyond year 9999", field: "ts", rec: `{"ts":253402300800000}`, err: bad("outside the years 1 to 9999")},
		{name: "not an object", field: "ts", rec: `["ts"]`, err: bad("record is not a JSON object")},
		{name: "not JSON", field: "ts", rec: `ts=1`, err: bad("record is not a JSON object")},
		{name: "empty record", field: "ts", rec: ``, err: bad("record is not a JSON object")},
		{name: "truncated", field: "ts", rec: `{"a":"xx`, err: bad("invalid JSON", "unterminated string")},
		{name: "truncated after key", field: "ts", rec: `{"ts"`, err: bad("invalid JSON", "unexpected end")},
		{name: "bad number", field: "ts", rec: `{"ts":01}`, err: bad("invalid JSON")},
		{name: "garbage after value", field: "ts", rec: `{"ts":1714566600000x}`, err: bad("invalid JSON")},
		{name: "mismatched brackets", field: "ts", rec: `{"a":[1},"ts":1}`, err: bad("invalid JSON", "mismatched")},
		{name: "raw control char in value", field: "ts", rec: "{\"ts\":\"2024-05-01T12:30:00Z\x01\"}", err: bad("invalid JSON string")},
		{name: "empty field name", field: "", rec: `{"":1}`, err: badSpecErr("empty field name")},
		{name: "empty segment", field: "a..b", rec: `{}`, err: badSpecErr("empty segment")},
		{name: "bad layout", field: "ts", layout: "yyyy", rec: `{"ts":1}`, err: badSpecErr("no date or time element")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := EventTime(tt.field, tt.layout, tt.loc)
			got, err := a.Bucket([]byte(tt.rec), testNow)
			checkResult(t, got, err, tt.want, tt.err)
		})
	}
}

func TestEventTimeFieldError(t *testing.T) {
	_, err := EventTime("ts", "", nil).Bucket([]byte(`{"ts":"later"}`), testNow)
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %T is not a *FieldError", err)
	}
	if fe.Field != "ts" {
		t.Errorf("Field = %q, want ts", fe.Field)
	}
	var pe *time.ParseError
	if !errors.As(err, &pe) {
		t.Errorf("error %v does not wrap the *time.ParseError", err)
	}
	if errors.Is(err, ErrInvalidBucket) || errors.Is(err, ErrInvalidSpec) {
		t.Errorf("error %v matches the wrong sentinel", err)
	}
}

func TestField(t *testing.T) {
	tests := []struct {
		name  string
		field string
		rec   string
		want  string
		err   *wantErr
	}{
		{name: "string", field: "country", rec: `{"country":"fr"}`, want: "fr"},
		{name: "string with slash makes dirs", field: "p", rec: `{"p":"a/b/c"}`, want: "a/b/c"},
		{name: "escaped slash", field: "p", rec: `{"p":"a\u002fb"}`, want: "a/b"},
		{name: "escaped solidus", field: "p", rec: `{"p":"a\/b"}`, want: "a/b"},
		{name: "quoted", field: "p", rec: `{"p":"\"quoted\""}`, want: `"quoted"`},
		{name: "unicode", field: "p", rec: `{"p":"Zürich \u00e9\ud83d\ude00"}`, want: "Zürich é😀"},
		{name: "lone surrogate", field: "p", rec: `{"p":"a\ud800b"}`, want: "a\uFFFDb"},
		{name: "invalid utf8 replaced", field: "p", rec: "{\"p\":\"a\xffb\"}", want: "a\uFFFDb"},
		{name: "integer", field: "n", rec: `{"n":42}`, want: "42"},
		{name: "negative float", field: "n", rec: `{"n":-1.50}`, want: "-1.50"},
		{name: "exponent", field: "n", rec: `{"n":1E+5}`, want: "1E+5"},
		{name: "true", field: "b", rec: `{"b":true}`, want: "true"},
		{name: "false", field: "b", rec: `{"b":false}`, want: "false"},
		{name: "nested", field: "a.b", rec: `{"a":{"c":"x","b":"y"}}`, want: "y"},
		{name: "trailing slash cleaned", field: "p", rec: `{"p":"a/b/"}`, want: "a/b"},
		{name: "dot inside name", field: "p", rec: `{"p":"v1.2"}`, want: "v1.2"},

		{name: "missing", field: "p", rec: `{"q":"x"}`, err: bad(`field "p": missing`)},
		{name: "null", field: "p", rec: `{"p":null}`, err: bad(`field "p": is null`)},
		{name: "object", field: "p", rec: `{"p":{}}`, err: bad("is an object")},
		{name: "array", field: "p", rec: `{"p":["a"]}`, err: bad("is an array")},
		{name: "empty string", field: "p", rec: `{"p":""}`, err: bad("empty string")},
		{name: "dot dot", field: "p", rec: `{"p":"../etc"}`,
			err: &wantErr{is: []error{source.ErrBadRecord, ErrInvalidBucket}, contains: []string{`field "p"`, `"../etc"`, `".." component`}}},
		{name: "absolute", field: "p", rec: `{"p":"/etc"}`, err: &wantErr{is: []error{source.ErrBadRecord, ErrInvalidBucket}, contains: []string{"absolute"}}},
		{name: "underscore", field: "p", rec: `{"p":"_state"}`, err: &wantErr{is: []error{ErrInvalidBucket}, contains: []string{"'_'"}}},
		{name: "hidden", field: "p", rec: `{"p":"a/.inprogress"}`, err: &wantErr{is: []error{ErrInvalidBucket}, contains: []string{"'.'"}}},
		{name: "newline", field: "p", rec: `{"p":"a\nb"}`, err: &wantErr{is: []error{ErrInvalidBucket}, contains: []string{"control character"}}},
		{name: "NUL", field: "p", rec: `{"p":"a\u0000b"}`, err: &wantErr{is: []error{ErrInvalidBucket}, contains: []string{"control character"}}},
		{name: "backslash", field: "p", rec: `{"p":"a\\b"}`, err: &wantErr{is: []error{ErrInvalidBucket}, contains: []string{"backslash"}}},
		{name: "bad escape", field: "p", rec: `{"p":"a\qb"}`, err: bad("invalid JSON string")},
		{name: "not an object", field: "p", rec: `"p"`, err: bad("not a JSON object")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Field(tt.field).Bucket([]byte(tt.rec), testNow)
			checkResult(t, got, err, tt.want, tt.err)
		})
	}
}

func TestHive(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		rec   string
		want  string
		err   *wantErr
	}{
		{name: "one", names: []string{"country"}, rec: `{"country":"fr"}`, want: "country=fr"},
		{name: "two", names: []string{"country", "year"}, rec: `{"year":2024,"country":"fr"}`, want: "country=fr/year=2024"},
		{name: "nested and bool", names: []string{"a.b", "ok"}, rec: `{"ok":false,"a":{"b":"x"}}`, want: "a.b=x/ok=false"},
		{name: "slash escaped", names: []string{"p"}, rec: `{"p":"a\u002fb"}`, want: "p=a%2Fb"},
		{name: "specials escaped", names: []string{"p"}, rec: `{"p":"\"#%'*/:=?\\{[]^"}`, want: "p=%22%23%25%27%2A%2F%3A%3D%3F%5C%7B%5B%5D%5E"},
		{name: "not escaped", names: []string{"p"}, rec: `{"p":"a b-c_d.e~f}!@$&()+,;<>|"}`, want: "p=a b-c_d.e~f}!@$&()+,;<>|"},
		{name: "controls escaped", names: []string{"p"}, rec: `{"p":"a\u0000\n\u001f\u007f\u0085b"}`, want: "p=a%00%0A%1F%7F%85b"},
		{name: "unicode kept", names: []string{"p"}, rec: `{"p":"Zürich"}`, want: "p=Zürich"},
		{name: "dot dot value is harmless", names: []string{"p"}, rec: `{"p":".."}`, want: "p=.."},
		{name: "empty string default partition", names: []string{"p"}, rec: `{"p":""}`, want: "p=__HIVE_DEFAULT_PARTITION__"},
		{name: "name escaped", names: []string{"a:b"}, rec: `{"a:b":1}`, want: "a%3Ab=1"},

		{name: "missing", names: []string{"a", "b"}, rec: `{"a":1}`, err: bad(`field "b": missing`)},
		{name: "null", names: []string{"a"}, rec: `{"a":null}`, err: bad(`field "a": is null`)},
		{name: "array", names: []string{"a"}, rec: `{"a":[]}`, err: bad(`field "a": is an array`)},
		{name: "too long", names: []string{"a"}, rec: `{"a":"` + strings.Repeat("x", 300) + `"}`, err: &wantErr{is: []error{source.ErrBadRecord, ErrInvalidBucket}, contains: []string{"longer than 255"}}},
		{name: "no names", rec: `{}`, err: badSpecErr("at least one")},
		{name: "duplicate", names: []string{"a", "a"}, rec: `{"a":1}`, err: badSpecErr("duplicate")},
		{name: "underscore name", names: []string{"_a"}, rec: `{"_a":1}`, err: badSpecErr(`"_a"`, "'_'")},
		{name: "empty name", names: []string{""}, rec: `{"":1}`, err: badSpecErr("empty field name")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Hive(tt.names...).Bucket([]byte(tt.rec), testNow)
			checkResult(t, got, err, tt.want, tt.err)
		})
	}
}

func TestFunc(t *testing.T) {
	myErr := errors.New("my error")
	tests := []struct {
		name string
		fn   func([]byte, time.Time) (string, error)
		want string
		err  *wantErr
	}{
		{name: "uses record and now", fn: func(r []byte, now time.Time) (string, error) {
			return fmt.Sprintf("%s/%d", r, now.Year()), nil
		}, want: "rec/2024"},
		{name: "cleaned", fn: func([]byte, time.Time) (string, error) { return "a/b/", nil }, want: "a/b"},
		{name: "base", fn: func([]byte, time.Time) (string, error) { return "", nil }, want: ""},
		{name: "escape rejected", fn: func([]byte, time.Time) (string, error) { return "a/../../b", nil },
			err: &wantErr{is: []error{ErrInvalidBucket}, contains: []string{`"a/../../b"`}}},
		{name: "absolute rejected", fn: func([]byte, time.Time) (string, error) { return "/tmp", nil },
			err: &wantErr{is: []error{ErrInvalidBucket}}},
		{name: "error wrapped", fn: func([]byte, time.Time) (string, error) { return "x", myErr },
			err: &wantErr{is: []error{myErr}, contains: []string{"custom assigner", "my error"}}},
		{name: "nil func", err: badSpecErr("nil")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Func(tt.fn).Bucket([]byte("rec"), testNow)
			checkResult(t, got, err, tt.want, tt.err)
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		a    Assigner
		want string
	}{
		{BasePath(), "none"},
		{DateTime("", nil), "datetime:2006-01-02--15"},
		{DateTime("2006/01", zoneKolkata), "datetime:2006/01"},
		{EventTime("a.ts", "15:04", nil), "eventtime:a.ts:15:04"},
		{Field("x"), "field:x"},
		{Hive("a", "b"), "hive:a,b"},
		{Func(nil), "func"},
	}
	for _, tt := range tests {
		if got := tt.a.(fmt.Stringer).String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
		if tt.want == "func" {
			continue
		}
		b, err := Parse(tt.want, nil)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.want, err)
		} else if got := b.(fmt.Stringer).String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %q", tt.want, got)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	assigners := []Assigner{
		DateTime("2006/01/02", zoneKolkata),
		EventTime("ts", "", zoneNewYork),
		Field("p"),
		Hive("p", "ts"),
	}
	rec := []byte(`{"p":"x","ts":"2024-05-01T12:30:00Z"}`)
	want := make([]string, len(assigners))
	for i, a := range assigners {
		var err error
		if want[i], err = a.Bucket(rec, testNow); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func() {
			for n := 0; n < 200; n++ {
				for i, a := range assigners {
					got, err := a.Bucket(rec, testNow)
					if err != nil || got != want[i] {
						done <- fmt.Errorf("got %q, %v; want %q", got, err, want[i])
						return
					}
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
