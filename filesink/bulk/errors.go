package bulk

import (
	"fmt"

	"github.com/filesink/filesink/source"
)

// FieldError is a record that does not fit the schema: Field is the path of
// the field ("id", "addr.city", "tags[]"; "" for the record as a whole) and
// Problem says why. It matches source.ErrBadRecord with errors.Is; the
// filesink.Writer wraps it in a *source.BadRecordError naming the
// record's origin.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return "record: " + e.Problem
	}
	return fmt.Sprintf("field %q: %s", e.Field, e.Problem)
}

// Is reports a match with source.ErrBadRecord.
func (e *FieldError) Is(target error) bool { return target == source.ErrBadRecord }

func fieldErr(n *node, format string, args ...any) error {
	return &FieldError{Field: n.path, Problem: fmt.Sprintf(format, args...)}
}
