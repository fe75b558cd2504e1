package bucketing

import (
	"errors"
	"strconv"
	"strings"

	"github.com/filesink/filesink/source"
)

var (
	// ErrInvalidBucket is matched (with errors.Is) by every error that reports
	// a bucket path rejected by Sanitize. The concrete error is an
	// *InvalidBucketError.
	ErrInvalidBucket = errors.New("bucketing: invalid bucket path")

	// ErrInvalidSpec is matched by every error that reports a misconfigured
	// assigner: a spec that Parse does not accept, or an invalid argument
	// given to a constructor (an empty field name, a layout that contains no
	// date or time element or yields an invalid path, ...).
	ErrInvalidSpec = errors.New("bucketing: invalid bucket assigner spec")
)

// InvalidBucketError reports a bucket path that Sanitize rejects.
// It matches ErrInvalidBucket with errors.Is.
type InvalidBucketError struct {
	// Path is the offending path, as the assigner produced it.
	Path string
	// Reason says what is wrong with Path, for example `".." component`.
	Reason string
}

// maxQuoted bounds how much of a path or value is quoted in an error message.
const maxQuoted = 256

// quoteTrunc quotes s with strconv.Quote (as %q does), cutting it to
// maxQuoted bytes first so that a huge value does not flood the logs.
func quoteTrunc(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:maxQuoted]) + "..."
}

func (e *InvalidBucketError) detail() string {
	return "invalid bucket path " + quoteTrunc(e.Path) + ": " + e.Reason
}

// Error returns a message with the quoted path and the reason.
func (e *InvalidBucketError) Error() string { return "bucketing: " + e.detail() }

// Is reports whether target is ErrInvalidBucket.
func (e *InvalidBucketError) Is(target error) bool { return target == ErrInvalidBucket }

// FieldError reports a record whose bucket cannot be computed from its JSON
// field: not a JSON object, a missing, null or mistyped field, an
// unparseable time, or a field value that is not a valid bucket path. It
// matches source.ErrBadRecord with errors.Is, and also whatever Err
// matches (for example ErrInvalidBucket when the field's value is not a valid
// path).
type FieldError struct {
	// Field is the field name as configured, a dotted path for nested fields.
	Field string
	// Reason says what is wrong, for example "missing" or
	// "is null, want a string, number or bool".
	Reason string
	// Err is the underlying error, if any (a *time.ParseError, an
	// *InvalidBucketError, ...). It may be nil.
	Err error
}

// Error returns a message naming the field and the reason.
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString("bucketing: field ")
	b.WriteString(strconv.Quote(e.Field))
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Err != nil {
		if e.Reason != "" {
			b.WriteString(": ")
		}
		var ib *InvalidBucketError
		if errors.As(e.Err, &ib) {
			b.WriteString(ib.detail())
		} else {
			b.WriteString(e.Err.Error())
		}
	}
	return b.String()
}

// Is reports whether target is source.ErrBadRecord. Such an error concerns
// this record only; the caller should name the record's origin when it
// reports it.
func (e *FieldError) Is(target error) bool { return target == source.ErrBadRecord }

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// specError returns an error that matches ErrInvalidSpec.
func specError(msg string) error {
	return &wrapped{sentinel: ErrInvalidSpec, msg: msg}
}

// wrapped is a sentinel with a detail message.
type wrapped struct {
	sentinel error
	msg      string
}

func (e *wrapped) Error() string { return e.sentinel.Error() + ": " + e.msg }
func (e *wrapped) Unwrap() error { return e.sentinel }
