package bucketing

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	rec := []byte(`{"ts":"2024-05-01T12:30:00Z","c":"fr","y":2024,"m":{"d":"01"}}`)
	tests := []struct {
		spec string
		loc  *time.Location
		want string // bucket of rec at testNow
	}{
		{spec: "none", want: ""},
		{spec: "NONE", want: ""},
		{spec: "datetime", want: "2024-03-05--23"},
		{spec: "DateTime", want: "2024-03-05--23"},
		{spec: "datetime", loc: zoneKolkata, want: "2024-03-06--05"},
		{spec: "datetime:2006/01/02", want: "2024/03/05"},
		{spec: "datetime:2006-01-02T15:04", want: "2024-03-05T23:45"},
		{spec: "eventtime:ts", want: "2024-05-01--12"},
		{spec: "eventtime:ts", loc: zoneNewYork, want: "2024-05-01--07"},
		{spec: "eventtime:ts:2006/01/02/15", want: "2024/05/01/12"},
		{spec: "eventtime:ts:2006-01-02T15:04", want: "2024-05-01T12:30"},
		{spec: "eventtime:ts:15:04:05", loc: zoneKolkata, want: "18:00:00"},
		{spec: "field:c", want: "fr"},
		{spec: "field:m.d", want: "01"},
		{spec: "hive:c", want: "c=fr"},
		{spec: "hive:c,y", want: "c=fr/y=2024"},
		{spec: "hive:c, y ,m.d", want: "c=fr/y=2024/m.d=01"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			a, err := Parse(tt.spec, tt.loc)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, err := a.Bucket(rec, testNow)
			checkResult(t, got, err, tt.want, nil)
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		spec     string
		contains []string
	}{
		{"", []string{`""`, "unknown kind", SpecForms}},
		{"hourly", []string{`"hourly"`, "unknown kind", SpecForms}},
		{"date:2006", []string{`unknown kind "date"`, SpecForms}},
		{"none:x", []string{"no argument"}},
		{"datetime:", []string{"empty layout"}},
		{"datetime:yyyy-MM-dd", []string{`"yyyy-MM-dd"`, "no date or time element"}},
		{"datetime:/2006", []string{"absolute path"}},
		{"datetime:2006/_01", []string{"'_'"}},
		{"eventtime", []string{"missing FIELD"}},
		{"eventtime:", []string{"missing FIELD"}},
		{"eventtime::2006", []string{"missing FIELD"}},
		{"eventtime:ts:", []string{"empty layout"}},
		{"eventtime:ts:HH:mm", []string{"no date or time element"}},
		{"eventtime:a..b", []string{"empty segment"}},
		{"field", []string{"missing NAME"}},
		{"field:", []string{"missing NAME"}},
		{"field:.a", []string{"empty segment"}},
		{"hive", []string{"missing NAME"}},
		{"hive:", []string{"missing NAME"}},
		{"hive:a,,b", []string{"empty field name"}},
		{"hive:a,a", []string{"duplicate"}},
		{"hive:_a", []string{"'_'"}},
		{"hive:.a", []string{"empty segment"}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			a, err := Parse(tt.spec, nil)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want an error", tt.spec, a)
			}
			if !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("error %v does not match ErrInvalidSpec", err)
			}
			if !strings.Contains(err.Error(), `"`+tt.spec+`"`) {
				t.Errorf("error %q does not quote the spec", err)
			}
			for _, c := range tt.contains {
				if !strings.Contains(err.Error(), c) {
					t.Errorf("error %q does not contain %q", err, c)
				}
			}
		})
	}
}
