package bucketing

import (
	"strings"
	"testing"
	"time"
)

// benchLine returns a ~1 KiB JSON line, a typical log event with nested
// objects, arrays and escaped strings; the fields read come last unless
// early is set.
func benchLine(early bool) []byte {
	head := `{"id":"0b7e5c1a-4d2f-4e0b-9a51-2f1c7e3d9b44","level":"info",`
	if early {
		head = `{"ts":"2024-05-01T12:30:00.123Z","country":"fr",` + head[1:]
	}
	body := `"msg":"user \"alice\" logged in from C:\\Users\\alice\\AppData \u00e9\u00e8 \ud83d\ude00",` +
		`"http":{"method":"POST","path":"/api/v1/sessions?redirect=%2Fhome","status":201,"duration_ms":12.75,` +
		`"headers":{"user-agent":"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36",` +
		`"accept":"application/json","x-request-id":"req-7f3a9c"}},` +
		`"tags":["auth","login","web",{"k":"v","n":[1,2,3,[4,5,{"deep":"}]"}]]}],` +
		`"geo":{"lat":48.8566,"lon":2.3522,"city":"Paris","ok":true,"prev":null},` +
		`"payload":"` + strings.Repeat(`abcdefghij\"klmnop\\qrstuvwxyz0123456789 `, 9) + `",`
	tail := `"seq":123456789}`
	if !early {
		tail = `"seq":123456789,"country":"fr","ts":"2024-05-01T12:30:00.123Z"}`
	}
	return []byte(head + body + tail)
}

func benchAssigner(b *testing.B, a Assigner, line []byte, want string) {
	got, err := a.Bucket(line, time.Time{})
	if err != nil || got != want {
		b.Fatalf("Bucket = %q, %v; want %q", got, err, want)
	}
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Bucket(line, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEventTime(b *testing.B) {
	a := EventTime("ts", "2006/01/02/15", time.FixedZone("", 2*3600))
	b.Run("field-last", func(b *testing.B) { benchAssigner(b, a, benchLine(false), "2024/05/01/14") })
	b.Run("field-first", func(b *testing.B) { benchAssigner(b, a, benchLine(true), "2024/05/01/14") })
}

func BenchmarkField(b *testing.B) {
	b.Run("field-last", func(b *testing.B) { benchAssigner(b, Field("country"), benchLine(false), "fr") })
	b.Run("nested", func(b *testing.B) { benchAssigner(b, Field("geo.city"), benchLine(false), "Paris") })
	b.Run("hive", func(b *testing.B) {
		benchAssigner(b, Hive("country", "http.method"), benchLine(false), "country=fr/http.method=POST")
	})
}

func BenchmarkSanitize(b *testing.B) {
	p := "dt=2024-05-01/hour=12/country=fr"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Sanitize(p); err != nil {
			b.Fatal(err)
		}
	}
}
