package source

import (
	"errors"
	"strconv"
)

// Sentinel errors. Test for them with errors.Is; the struct errors below
// match them too and carry the details a person needs to act.
//
// Context errors (context.Canceled, context.DeadlineExceeded) and io.EOF are
// returned as they are, never wrapped.
var (
	// ErrInputChanged means the input no longer matches a checkpoint
	// position: the file named in the position is gone, shorter than the
	// recorded offset or rewritten, a file that sorts before it was added,
	// or changed after it was read to its end, or the generator's count is
	// below the position.
	// Replaying would lose or duplicate records, so the source refuses to
	// open. The concrete error is an *InputChangedError.
	ErrInputChanged = errors.New("source: input changed since the checkpoint")

	// ErrNotReplayable is returned when a position is given to a source that
	// cannot resume from one (stdin, any io.Reader).
	ErrNotReplayable = errors.New("source: source is not replayable")

	// ErrBadPosition is returned for a position document that is not valid
	// JSON of the expected shape (unknown or missing fields, negative
	// offsets, an unclean file path).
	ErrBadPosition = errors.New("source: malformed position")

	// ErrBadURI is returned by Open for a URI it cannot parse or whose
	// scheme it does not support; the message lists the supported forms.
	ErrBadURI = errors.New("source: bad source URI")

	// ErrLineTooLong is returned by Next for a line longer than the
	// configured maximum. The concrete error is a *LineTooLongError; it is
	// sticky unless the source skips long lines (WithSkipLongLines).
	ErrLineTooLong = errors.New("source: line too long")

	// ErrClosed is returned by Next after Close.
	ErrClosed = errors.New("source: source is closed")
)

// InputChangedError reports that the input no longer matches a checkpoint
// position. It matches ErrInputChanged.
type InputChangedError struct {
	// Input names the input the position refers to: a file path (the
	// directory joined with the position's relative path) or "gen".
	Input string
	// Reason says what no longer matches, e.g. "file no longer exists".
	Reason string
}

func (e *InputChangedError) Error() string {
	return "source: input changed since the checkpoint: " + e.Input + ": " + e.Reason +
		" (resuming would lose or duplicate records)"
}

// Unwrap returns ErrInputChanged.
func (e *InputChangedError) Unwrap() error { return ErrInputChanged }

// LineTooLongError reports a line longer than the configured maximum. It
// matches ErrLineTooLong.
type LineTooLongError struct {
	Origin Origin // the file (or reader name) and 1-based line number
	Max    int    // the configured maximum, in bytes, without the terminator
	// Skipped is true when the source has read past the line
	// (WithSkipLongLines): the error is not sticky, the next call to Next
	// returns the line after it, and Position covers the skipped line.
	Skipped bool
	// Length is the skipped line's length in bytes, without its
	// terminator; 0 unless Skipped.
	Length int64
	// Head holds the skipped line's first bytes: at most LongLineHead and
	// at most Max of them; nil unless Skipped. The error owns it.
	Head []byte
}

func (e *LineTooLongError) Error() string {
	if e.Skipped {
		return "source: " + e.Origin.String() + ": line of " + strconv.FormatInt(e.Length, 10) +
			" bytes is longer than " + strconv.Itoa(e.Max) + " bytes (raise the maximum line size)"
	}
	return "source: " + e.Origin.String() + ": line longer than " + strconv.Itoa(e.Max) +
		" bytes (raise the maximum line size)"
}

// Unwrap returns ErrLineTooLong.
func (e *LineTooLongError) Unwrap() error { return ErrLineTooLong }
