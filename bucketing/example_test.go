package bucketing_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/source"
)

func ExampleParse() {
	now := time.Date(2024, 5, 1, 22, 30, 0, 0, time.UTC)
	record := []byte(`{"ts":"2024-05-01T12:30:00Z","country":"fr","tenant":{"id":"acme"}}`)
	for _, spec := range []string{
		"none",
		"datetime",
		"datetime:2006/01/02",
		"eventtime:ts",
		"eventtime:ts:2006-01-02T15:04",
		"field:tenant.id",
		"hive:country,tenant.id",
	} {
		a, err := bucketing.Parse(spec, nil)
		if err != nil {
			fmt.Println(err)
			continue
		}
		b, err := a.Bucket(record, now)
		fmt.Printf("%-30s %q %v\n", spec, b, err)
	}
	// Output:
	// none                           "" <nil>
	// datetime                       "2024-05-01--22" <nil>
	// datetime:2006/01/02            "2024/05/01" <nil>
	// eventtime:ts                   "2024-05-01--12" <nil>
	// eventtime:ts:2006-01-02T15:04  "2024-05-01T12:30" <nil>
	// field:tenant.id                "acme" <nil>
	// hive:country,tenant.id         "country=fr/tenant.id=acme" <nil>
}

func ExampleEventTime() {
	berlin := time.FixedZone("CEST", 2*3600) // or time.LoadLocation("Europe/Berlin")
	a := bucketing.EventTime("event.time", "2006/01/02/15", berlin)
	for _, rec := range []string{
		`{"event":{"time":"2024-05-01T23:15:00Z"}}`,
		`{"event":{"time":1714605300000}}`,
		`{"event":{"time":"yesterday"}}`,
		`{"event":{}}`,
	} {
		b, err := a.Bucket([]byte(rec), time.Time{})
		if errors.Is(err, source.ErrBadRecord) {
			fmt.Println("bad record:", err)
			continue
		}
		fmt.Println(b)
	}
	// Output:
	// 2024/05/02/01
	// 2024/05/02/01
	// bad record: bucketing: field "event.time": "yesterday" is not an RFC 3339 time: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"
	// bad record: bucketing: field "event.time": missing (object "event" has no key "time")
}

func ExampleSanitize() {
	for _, p := range []string{"dt=2024-05-01/hour=12/", "a/../../etc", "a/.inprogress", "_state"} {
		clean, err := bucketing.Sanitize(p)
		fmt.Printf("%q %v\n", clean, err)
	}
	// Output:
	// "dt=2024-05-01/hour=12" <nil>
	// "" bucketing: invalid bucket path "a/../../etc": ".." component
	// "" bucketing: invalid bucket path "a/.inprogress": component ".inprogress" starts with '.' (reserved for staging and state files)
	// "" bucketing: invalid bucket path "_state": component "_state" starts with '_' (reserved for staging and state files)
}

func ExampleFunc() {
	// A custom assigner: its result is sanitised like any other.
	a := bucketing.Func(func(record []byte, now time.Time) (string, error) {
		if len(record) > 0 && record[0] == '{' {
			return "json/" + now.Format("2006-01-02"), nil
		}
		return "../other", nil
	})
	now := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	fmt.Println(a.Bucket([]byte(`{}`), now))
	fmt.Println(a.Bucket([]byte(`x`), now))
	// Output:
	// json/2024-05-01 <nil>
	//  bucketing: invalid bucket path "../other": ".." component
}
