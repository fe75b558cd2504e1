package recovery

import (
	"errors"
	"fmt"
)

// ErrCorruptCheckpoint is matched (errors.Is) by every error reporting a
// checkpoint record that is truncated, fails its checksum or cannot be parsed.
var ErrCorruptCheckpoint = errors.New("corrupt checkpoint record")

// ErrUnsupportedVersion is matched by an error reporting a checkpoint record
// written in a format version this build does not understand.
var ErrUnsupportedVersion = errors.New("unsupported checkpoint format version")

// CorruptError names the record that could not be read and why.
type CorruptError struct {
	File   string // the record's location (file path or object key)
	Reason string
	Err    error // ErrCorruptCheckpoint or ErrUnsupportedVersion
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v %s: %s (the record is not skipped: restoring an older checkpoint could publish duplicates; see docs for the runbook)", e.Err, e.File, e.Reason)
}

// Unwrap returns ErrCorruptCheckpoint or ErrUnsupportedVersion.
func (e *CorruptError) Unwrap() error { return e.Err }
