package bucketing

import (
	"testing"
	"time"
	_ "time/tzdata"
)

func TestWindow(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York") // time/tzdata if the system has none
	if err != nil {
		t.Fatal(err)
	}
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		a          Windowed
		path       string
		start, end time.Time
		ok         bool
	}{
		{DateTime("", nil).(Windowed), "2026-12-01--10", utc("2026-12-01T10:00:00Z"), utc("2026-12-01T11:00:00Z"), true},
		{DateTime("2006-01-02", nil).(Windowed), "2026-12-31", utc("2026-12-31T00:00:00Z"), utc("2027-01-01T00:00:00Z"), true},
		{DateTime("2006/01", nil).(Windowed), "2026/02", utc("2026-02-01T00:00:00Z"), utc("2026-03-01T00:00:00Z"), true},
		{EventTime("ts", "dt=2006-01-02/hour=15", nil).(Windowed), "dt=2026-12-01/hour=23", utc("2026-12-01T23:00:00Z"), utc("2026-12-02T00:00:00Z"), true},
		{EventTime("ts", "2006-01-02--15-04", nil).(Windowed), "2026-12-01--23-59", utc("2026-12-01T23:59:00Z"), utc("2026-12-02T00:00:00Z"), true},
		// A day that lasts 25 hours (the end of daylight saving time).
		{DateTime("2006-01-02", ny).(Windowed), "2026-11-01", utc("2026-11-01T04:00:00Z"), utc("2026-11-02T05:00:00Z"), true},
		{DateTime("15", nil).(Windowed), "10", time.Time{}, time.Time{}, false},             // no year
		{DateTime("", nil).(Windowed), "2026-12-01", time.Time{}, time.Time{}, false},       // not made by the layout
		{DateTime("", nil).(Windowed), "2026-12-01--7", time.Time{}, time.Time{}, false},    // does not round-trip
		{DateTime("", nil).(Windowed), "x/2026-12-01--07", time.Time{}, time.Time{}, false}, // another prefix
	} {
		start, end, ok := c.a.Window(c.path)
		if ok != c.ok || !start.Equal(c.start) || !end.Equal(c.end) {
			t.Errorf("%v.Window(%q) = %v, %v, %v; want %v, %v, %v", c.a, c.path, start, end, ok, c.start, c.end, c.ok)
		}
	}
	bt, at, err := EventTime("ts", "", nil).(EventTimed).BucketTime([]byte(`{"ts":"2026-12-01T10:30:00Z"}`))
	if err != nil || bt != "2026-12-01--10" || !at.Equal(utc("2026-12-01T10:30:00Z")) {
		t.Errorf("BucketTime = %q, %v, %v", bt, at, err)
	}
}

func TestHasWindows(t *testing.T) {
	for _, c := range []struct {
		a    Assigner
		want bool
	}{
		{DateTime("", nil), true},
		{EventTime("ts", "dt=2006-01-02/hour=15", nil), true},
		{DateTime("15", nil), false},
		{Field("country"), false},
		{BasePath(), false},
	} {
		if got := HasWindows(c.a); got != c.want {
			t.Errorf("HasWindows(%v) = %v, want %v", c.a, got, c.want)
		}
	}
}
