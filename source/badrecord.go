package source

import (
	"errors"
	"fmt"
)

// ErrBadRecord is matched by every error that reports a record that cannot
// be written or bucketed: not a JSON object, a value of the wrong type for
// its column or field, a record the format's schema rejects, a bucket path
// that is not valid. Such an error concerns that record only: the sink (or
// the bucket assigner) that returns it stays usable, and nothing committed
// is affected. Every sink and assigner of this module reports bad records
// with errors that match it: a *BadRecordError (filesink, filesink/bulk), a
// *mysqlxa.RecordError, a *bucketing.FieldError.
var ErrBadRecord = errors.New("bad record")

// BadRecordError names a record that cannot be written and says why. It
// matches ErrBadRecord with errors.Is, and whatever Err matches.
type BadRecordError struct {
	// Origin names the record, as Origin.String() does ("in/a.jsonl:17");
	// for a batch of records, the origin of its first record followed by
	// " (a batch)".
	Origin string
	// Err is the cause.
	Err error
}

func (e *BadRecordError) Error() string {
	return fmt.Sprintf("bad record %s: %v", e.Origin, e.Err)
}

// Unwrap returns the cause.
func (e *BadRecordError) Unwrap() error { return e.Err }

// Is reports a match with ErrBadRecord.
func (e *BadRecordError) Is(target error) bool { return target == ErrBadRecord }
