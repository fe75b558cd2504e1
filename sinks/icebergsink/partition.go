package icebergsink

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/filesink/filesink/bucketing"
)

// DataDir is the directory of the data files under the table location.
const DataDir = "data"

// Transforms of a partition field.
const (
	Identity = "identity"
	Day      = "day"
	Hour     = "hour"
)

// Partitioning is how a table is partitioned: at most one field, by the
// identity of a column or by the day or hour of a timestamp column.
// filesink computes each record's partition value itself and writes the
// record's file under data/NAME=VALUE/, so that each data file holds one
// partition; the value is read back from the directory at commit. The
// zero Partitioning is an unpartitioned table. It is immutable and safe
// for concurrent use.
type Partitioning struct {
	Column    string // the source column; "" for an unpartitioned table
	Transform string // Identity, Day or Hour
}

// ParsePartitioning reads the --bucket spec of an Iceberg sink: "" or
// "none" (unpartitioned), "field:COLUMN" (identity), "eventtime:COLUMN"
// or "eventtime:COLUMN:day" (day) and "eventtime:COLUMN:hour" (hour).
func ParsePartitioning(spec string) (Partitioning, error) {
	kind, rest, _ := strings.Cut(spec, ":")
	switch kind {
	case "", "none":
		if rest == "" {
			return Partitioning{}, nil
		}
	case "field":
		if rest != "" && !strings.Contains(rest, ":") {
			return Partitioning{Column: rest, Transform: Identity}, nil
		}
	case "eventtime":
		col, tr, _ := strings.Cut(rest, ":")
		switch {
		case col == "":
		case tr == "" || tr == Day:
			return Partitioning{Column: col, Transform: Day}, nil
		case tr == Hour:
			return Partitioning{Column: col, Transform: Hour}, nil
		}
	}
	return Partitioning{}, fmt.Errorf("%q: an Iceberg table is partitioned by none, field:COLUMN (identity), eventtime:COLUMN[:day] or eventtime:COLUMN:hour", spec)
}

// String returns the spec ParsePartitioning reads.
func (p Partitioning) String() string {
	switch p.Transform {
	case "":
		return "none"
	case Identity:
		return "field:" + p.Column
	}
	return "eventtime:" + p.Column + ":" + p.Transform
}

// Name is the partition field's name: the column for identity, else
// COLUMN_day or COLUMN_hour, as Iceberg names them.
func (p Partitioning) Name() string {
	if p.Transform == Identity {
		return p.Column
	}
	return p.Column + "_" + p.Transform
}

// Spec returns the partition spec of p over sc (a table's or a new
// table's schema). The column must be a top-level column; day and hour
// take a timestamp.
func (p Partitioning) Spec(sc *iceberg.Schema) (iceberg.PartitionSpec, error) {
	if p.Transform == "" {
		return *iceberg.UnpartitionedSpec, nil
	}
	f, ok := sc.FindFieldByName(p.Column)
	if !ok || strings.Contains(p.Column, ".") {
		return iceberg.PartitionSpec{}, fmt.Errorf("partition column %s: not a top-level column of the schema", p.Column)
	}
	var tr iceberg.Transform = iceberg.IdentityTransform{}
	switch p.Transform {
	case Day:
		tr = iceberg.DayTransform{}
	case Hour:
		tr = iceberg.HourTransform{}
	}
	ok = false
	switch f.Type.(type) {
	case iceberg.TimestampType, iceberg.TimestampTzType:
		ok = p.Transform != Identity
	case iceberg.StringType, iceberg.Int32Type, iceberg.Int64Type, iceberg.BooleanType, iceberg.DateType:
		ok = p.Transform == Identity
	}
	if !ok {
		return iceberg.PartitionSpec{}, fmt.Errorf("partition column %s: %s does not take the %s transform (identity: string, int, long, boolean, date; day and hour: timestamp)", p.Column, f.Type, p.Transform)
	}
	return iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{f.ID}, FieldID: 1000, Name: p.Name(), Transform: tr}), nil
}

// Check returns nil if spec, a table's default partition spec, is the
// spec of p; otherwise an error naming both.
func (p Partitioning) Check(spec iceberg.PartitionSpec, sc *iceberg.Schema) error {
	if p.Transform == "" && spec.IsUnpartitioned() {
		return nil
	}
	if spec.NumFields() == 1 {
		f := spec.Field(0)
		name, _ := sc.FindColumnName(f.SourceID())
		want := map[string]string{Identity: "identity", Day: "day", Hour: "hour"}[p.Transform]
		if name == p.Column && f.Transform.String() == want {
			return nil
		}
	}
	return fmt.Errorf("the table is partitioned by %s, --bucket asks for %s", spec, p)
}

// Assigner returns the bucket assigner of p's records: DataDir for an
// unpartitioned table, else DataDir/NAME=VALUE with the value as the
// directory shows it (an escaped string or number for identity,
// YYYY-MM-DD for day, YYYY-MM-DD-HH for hour, in UTC). An event time is
// an RFC 3339 string or a number of microseconds since the epoch, as the
// timestamp column stores it. typ is the type of the column in the table
// (unused when unpartitioned): a value that the commit could not read back
// as one of it makes the record a bad one, at once.
func (p Partitioning) Assigner(typ iceberg.Type) bucketing.Assigner {
	switch p.Transform {
	case "":
		return bucketing.Func(func([]byte, time.Time) (string, error) { return DataDir, nil })
	case Identity:
		h := bucketing.Hive(p.Column)
		cut := len(bucketing.HiveEscape(p.Column)) + 1
		return bucketing.Func(func(rec []byte, now time.Time) (string, error) {
			b, err := h.Bucket(rec, now)
			if err != nil {
				return "", err
			}
			if _, isString := typ.(iceberg.StringType); !isString {
				// Read back as the commit will: a value of the wrong
				// kind is this record's fault, not the commit's.
				if _, err := p.value(b[cut:], typ); err != nil {
					return "", &bucketing.FieldError{Field: p.Column, Reason: err.Error()}
				}
			}
			return DataDir + "/" + b, nil
		})
	}
	f := bucketing.Field(p.Column)
	layout := "2006-01-02"
	if p.Transform == Hour {
		layout = "2006-01-02-15"
	}
	prefix := DataDir + "/" + p.Name() + "="
	return bucketing.Func(func(rec []byte, now time.Time) (string, error) {
		s, err := f.Bucket(rec, now)
		if err != nil {
			return "", err
		}
		t, err := eventTime(s)
		if err != nil {
			return "", &bucketing.FieldError{Field: p.Column, Reason: err.Error()}
		}
		return prefix + t.UTC().Format(layout), nil
	})
}

func eventTime(s string) (time.Time, error) {
	if us, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMicro(us), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a whole number of microseconds", s)
	}
	return t, nil
}

// Values returns the partition values of a data file at file (a path
// relative to the table location, under DataDir) for spec over the table
// schema sc, keyed by partition field id, as committer/iceberg's
// FileRecord holds them.
func (p Partitioning) Values(file string, spec iceberg.PartitionSpec, sc *iceberg.Schema) (map[int]json.RawMessage, error) {
	dir := path.Dir(file)
	if p.Transform == "" {
		if dir != DataDir {
			return nil, fmt.Errorf("data file %s: not in %s/ of an unpartitioned table", file, DataDir)
		}
		return nil, nil
	}
	raw, ok := strings.CutPrefix(dir, DataDir+"/"+bucketing.HiveEscape(p.Name())+"=")
	if !ok || strings.Contains(raw, "/") || spec.NumFields() != 1 {
		return nil, fmt.Errorf("data file %s: not in a partition directory %s/%s=VALUE", file, DataDir, p.Name())
	}
	src, ok := sc.FindFieldByID(spec.Field(0).SourceID())
	if !ok {
		return nil, fmt.Errorf("data file %s: the table has no column %d", file, spec.Field(0).SourceID())
	}
	v, err := p.value(raw, src.Type)
	if err != nil {
		return nil, fmt.Errorf("data file %s: %w", file, err)
	}
	return map[int]json.RawMessage{spec.Field(0).FieldID: v}, nil
}

// value reads a partition directory's value back; typ is the source
// column's type.
func (p Partitioning) value(raw string, typ iceberg.Type) (json.RawMessage, error) {
	switch p.Transform {
	case Day, Hour:
		layout, unit := "2006-01-02", int64(86400)
		if p.Transform == Hour {
			layout, unit = "2006-01-02-15", 3600
		}
		t, err := time.Parse(layout, raw)
		if err != nil {
			return nil, fmt.Errorf("partition value %q: %v", raw, err)
		}
		return json.RawMessage(strconv.FormatInt(floorDiv(t.Unix(), unit), 10)), nil
	}
	s, err := bucketing.HiveUnescape(raw)
	if err != nil {
		return nil, fmt.Errorf("partition value %q: %v", raw, err)
	}
	if s == bucketing.HiveDefaultPartition {
		s = ""
	}
	switch typ.(type) {
	case iceberg.Int32Type, iceberg.Int64Type:
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return nil, fmt.Errorf("partition value %q: not an integer", s)
		}
		return json.RawMessage(s), nil
	case iceberg.BooleanType:
		if s != "true" && s != "false" {
			return nil, fmt.Errorf("partition value %q: not a boolean", s)
		}
		return json.RawMessage(s), nil
	case iceberg.DateType:
		t, err := time.Parse("2006-01-02", s)
		if err != nil {
			return nil, fmt.Errorf("partition value %q: not a date YYYY-MM-DD", s)
		}
		return json.RawMessage(strconv.FormatInt(floorDiv(t.Unix(), 86400), 10)), nil
	}
	return json.Marshal(s)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
