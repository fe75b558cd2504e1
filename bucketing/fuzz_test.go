package bucketing

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/source"
)

// The seed corpus is in testdata/fuzz/FuzzXxx, plus the f.Add calls below.
// Run a fuzzer with, for example:
//
//	go test -run '^$' -fuzz '^FuzzSanitize$' -fuzztime 20s ./bucketing/

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "a", "a/b/", "a//b", "../x", "x/..", ".a", "_a", "/abs", "C:x",
		"a\\b", "a\x00b", "a\u0085", "\xff", "a/./b", "é/ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := Sanitize(in)
		if err != nil {
			var ib *InvalidBucketError
			if out != "" || !errors.Is(err, ErrInvalidBucket) || !errors.As(err, &ib) || ib.Path != in {
				t.Fatalf("Sanitize(%q) = %q, %v", in, out, err)
			}
			return
		}
		checkSanitized(t, in, out)
	})
}

func fuzzAssigners() []Assigner {
	return []Assigner{
		EventTime("ts", "", nil),
		EventTime("a.ts", "2006/01/02/15", time.FixedZone("", -9*3600-30*60)),
		EventTime("p", "2006-01-02T15:04:05.000Z07:00", time.FixedZone("X", 14*3600)),
	}
}

func FuzzEventTime(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"ts":"0001-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"ts":"9999-12-31T23:59:59.999999999-23:59"}`))
	f.Add([]byte(`{"ts":-62135596800000}`))
	f.Add([]byte(`{"ts":253402300799999.9999}`))
	assigners := fuzzAssigners()
	f.Fuzz(func(t *testing.T, record []byte) {
		valid := json.Valid(record)
		for _, a := range assigners {
			b, err := a.Bucket(record, time.Time{})
			if err != nil {
				if b != "" || !errors.Is(err, source.ErrBadRecord) {
					t.Fatalf("%v.Bucket(%q) = %q, %v", a, record, b, err)
				}
				continue
			}
			if b == "" {
				t.Fatalf("%v.Bucket(%q) = \"\"", a, record)
			}
			checkSanitized(t, b, b)
			if valid {
				name := strings.SplitN(a.(interface{ String() string }).String(), ":", 3)[1]
				v, status := refLookup(t, record, newFieldPath(name).segs)
				if status != "ok" {
					t.Fatalf("%v.Bucket(%q) = %q, but the field is %s", a, record, b, status)
				}
				switch v.(type) {
				case string, json.Number:
				default:
					t.Fatalf("%v.Bucket(%q) = %q from a %T", a, record, b, v)
				}
			}
		}
	})
}

func FuzzField(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	field := Field("p")
	nested := Field("a.b")
	hive := Hive("p", "a.b")
	f.Fuzz(func(t *testing.T, record []byte) {
		for _, a := range []Assigner{field, nested, hive} {
			b, err := a.Bucket(record, time.Time{})
			if err != nil {
				if b != "" || !errors.Is(err, source.ErrBadRecord) {
					t.Fatalf("%v.Bucket(%q) = %q, %v", a, record, b, err)
				}
				continue
			}
			if b == "" {
				t.Fatalf("%v.Bucket(%q) = \"\"", a, record)
			}
			checkSanitized(t, b, b)
		}
		if json.Valid(record) {
			for _, name := range lookupNames {
				checkLookup(t, record, name)
			}
		}
	})
}
