package committer

import (
	"errors"
	"fmt"
)

// ErrDataLoss is matched by an error reporting that a decided committable
// can no longer be published: its staging data and its target are both gone,
// or the target does not match what was recorded. It is never retried and
// never ignored.
var ErrDataLoss = errors.New("data loss")

// ErrAlreadyExists is matched by an error reporting that a publish target
// exists with other content: publishing would overwrite a finished file.
var ErrAlreadyExists = errors.New("target already exists")

// ErrParticipantMismatch is matched when a checkpoint record's participants
// differ from the running set (for example the parallelism changed).
var ErrParticipantMismatch = errors.New("participants differ from the checkpoint record")

// CommitError names the committable that failed in phase 2.
type CommitError struct {
	Checkpoint  uint64
	Participant string
	Target      string // what was being published (file path, object key, xid)
	Err         error
}

func (e *CommitError) Error() string {
	return fmt.Sprintf("commit of checkpoint %d (%s) %s: %v", e.Checkpoint, e.Participant, e.Target, e.Err)
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
