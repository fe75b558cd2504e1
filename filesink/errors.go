package filesink

import (
	"errors"
	"fmt"
)

// ErrBadRecord is matched by every *BadRecordError.
var ErrBadRecord = errors.New("bad record")

// BadRecordError names a record that cannot be written: it cannot be
// encoded in the format, or its bucket path is invalid. Nothing committed is
// affected by it.
type BadRecordError struct {
	Origin string // the record's origin, e.g. "in/a.jsonl:17"
	Err    error
}

func (e *BadRecordError) Error() string {
	return fmt.Sprintf("bad record %s: %v", e.Origin, e.Err)
}

// Unwrap returns the cause.
func (e *BadRecordError) Unwrap() error { return e.Err }

// Is reports a match with ErrBadRecord.
func (e *BadRecordError) Is(target error) bool { return target == ErrBadRecord }
