package committer

import (
	"errors"
	"fmt"
	"strings"
)

// ErrDataLoss is matched by an error reporting that a decided committable
// can no longer be published: its staging data and its target are both gone,
// or the target does not match what was recorded. It is never retried and
// never ignored.
var ErrDataLoss = errors.New("data loss")

// ErrAlreadyExists is matched by an error reporting that a publish target
// exists with other content: publishing would overwrite a finished file.
var ErrAlreadyExists = errors.New("target already exists")

// ErrNotCommitted is matched by the error of driver.Output.Check when the
// staging data of the part is still there: its commit has not run (yet).
// After a crash, the next run commits it; while a run is live, it may be
// committing it right now.
var ErrNotCommitted = errors.New("not yet committed")

// NotCommitted returns an error with the message format and args
// (fmt.Sprintf) that matches ErrNotCommitted.
func NotCommitted(format string, args ...any) error {
	return &notCommittedError{fmt.Sprintf(format, args...)}
}

type notCommittedError struct{ msg string }

func (e *notCommittedError) Error() string        { return e.msg }
func (e *notCommittedError) Is(target error) bool { return target == ErrNotCommitted }

// ErrParticipantMismatch is matched when a checkpoint record's participants
// differ from the running set (for example the parallelism changed).
var ErrParticipantMismatch = errors.New("participants differ from the checkpoint record")

// CommitError names the committable that failed in phase 2.
type CommitError struct {
	Checkpoint  uint64
	Participant string
	Target      string // what was being published (file path, object key, xid); "": the checkpoint's end step
	Err         error
}

func (e *CommitError) Error() string {
	if e.Target == "" {
		return fmt.Sprintf("commit of checkpoint %d (%s): %v", e.Checkpoint, e.Participant, e.Err)
	}
	return fmt.Sprintf("commit of checkpoint %d (%s) %s: %v", e.Checkpoint, e.Participant, e.Target, e.Err)
}

// participantError is err of participant name with context in front. The
// message names the participant once: an err whose message starts with
// "NAME: " (the async sinks' errors do) loses that start.
type participantError struct {
	msg string
	err error
}

func (e *participantError) Error() string { return e.msg }
func (e *participantError) Unwrap() error { return e.err }

// wrapParticipant returns err with "context NAME: " in front ("checkpoint
// 3: prepare http/0: ..."), naming the participant once.
func wrapParticipant(context, name string, err error) error {
	rest, _ := strings.CutPrefix(err.Error(), name+": ")
	return &participantError{msg: context + " " + name + ": " + rest, err: err}
}

func (e *CommitError) Unwrap() error { return e.Err }

// Permanent marks err so that the coordinator does not retry it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// IsPermanent reports whether err must not be retried: it was marked with
// Permanent, or it matches ErrDataLoss or ErrAlreadyExists.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p) || errors.Is(err, ErrDataLoss) || errors.Is(err, ErrAlreadyExists)
}
