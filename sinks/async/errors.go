package async

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by calls on a closed Sink.
var ErrClosed = errors.New("async sink closed")

// ErrWorkerDead is matched by the error of a worker whose Send panicked or
// did not return within the send timeout plus the grace period.
var ErrWorkerDead = errors.New("send worker died")

// SendError reports a batch that was not acknowledged. It names the batch
// so that a person can find it on the receiving side (Key).
type SendError struct {
	Sink    string // the participant's name, e.g. "http/0"
	Seq     uint64
	Key     string
	Records int
	Err     error
}

func (e *SendError) Error() string {
	return fmt.Sprintf("%s: batch %d (%d records, key %s) not acknowledged: %v", e.Sink, e.Seq, e.Records, e.Key, e.Err)
}

func (e *SendError) Unwrap() error { return e.Err }
