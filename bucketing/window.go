package bucketing

import (
	"strings"
	"time"
)

// Windowed is implemented by the time assigners (DateTime and EventTime):
// their buckets are time ranges. The file sink's partition-complete
// markers use it to tell when a bucket can receive no more records.
type Windowed interface {
	Assigner
	// Window returns the time range [start, end) of records whose bucket
	// is path. ok is false when path cannot be read back with the
	// assigner's layout (a layout without a year, or a path the assigner
	// did not make).
	Window(path string) (start, end time.Time, ok bool)
}

// EventTimed is implemented by the EventTime assigner.
type EventTimed interface {
	// BucketTime returns the record's bucket, as Bucket does, and its
	// event time.
	BucketTime(record []byte) (string, time.Time, error)
}

var (
	_ Windowed   = (*dateTime)(nil)
	_ Windowed   = (*eventTime)(nil)
	_ EventTimed = (*eventTime)(nil)
)

// Window implements Windowed.
func (a *dateTime) Window(path string) (time.Time, time.Time, bool) { return a.f.window(path) }

// Window implements Windowed.
func (a *eventTime) Window(path string) (time.Time, time.Time, bool) { return a.f.window(path) }

// window parses path with the layout and finds where the bucket ends: the
// first of one second, minute, hour, day, month or year later that formats
// to another path.
func (f *timeFormat) window(path string) (start, end time.Time, ok bool) {
	if f.err != nil || !strings.Contains(f.layout, "2006") {
		return time.Time{}, time.Time{}, false
	}
	start, err := time.ParseInLocation(f.layout, path, f.loc)
	if err != nil {
		return time.Time{}, time.Time{}, false
	}
	if s, err := f.format(start); err != nil || s != path {
		return time.Time{}, time.Time{}, false
	}
	for _, next := range []func(time.Time) time.Time{
		func(t time.Time) time.Time { return t.Add(time.Second) },
		func(t time.Time) time.Time { return t.Add(time.Minute) },
		func(t time.Time) time.Time { return t.Add(time.Hour) },
		func(t time.Time) time.Time { return t.AddDate(0, 0, 1) },
		func(t time.Time) time.Time { return t.AddDate(0, 1, 0) },
		func(t time.Time) time.Time { return t.AddDate(1, 0, 0) },
	} {
		if e := next(start); func() bool { s, _ := f.format(e); return s != path }() {
			return start, e, true
		}
	}
	return time.Time{}, time.Time{}, false
}

// BucketTime implements EventTimed.
func (a *eventTime) BucketTime(record []byte) (string, time.Time, error) {
	if err := a.validate(); err != nil {
		return "", time.Time{}, err
	}
	v, err := a.field.lookup(record)
	if err != nil {
		return "", time.Time{}, err
	}
	t, err := a.field.eventTime(v)
	if err != nil {
		return "", time.Time{}, err
	}
	if y := t.In(a.f.loc).Year(); y < 1 || y > 9999 {
		return "", time.Time{}, a.field.fail("time "+t.UTC().Format(time.RFC3339Nano)+" is outside the years 1 to 9999", nil)
	}
	s, err := a.f.format(t)
	if err != nil {
		return "", time.Time{}, a.field.fail("", err)
	}
	return s, t, nil
}

// HasWindows reports whether a is a time assigner whose bucket paths can
// be read back into time ranges (its layout has a year and round-trips).
func HasWindows(a Assigner) bool {
	var f *timeFormat
	switch a := a.(type) {
	case *dateTime:
		f = &a.f
	case *eventTime:
		f = &a.f
	default:
		return false
	}
	probe := time.Date(2026, 6, 15, 10, 30, 45, 0, time.UTC)
	p, err := f.format(probe)
	if err != nil {
		return false
	}
	start, end, ok := f.window(p)
	return ok && !probe.Before(start) && probe.Before(end)
}
