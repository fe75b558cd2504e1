package kafka

import (
	"errors"
	"strings"
	"time"
)

// Sentinel errors. Test for them with errors.Is; the struct errors below
// match them and carry the details. Errors of this package also use the
// sentinels of package source: source.ErrBadURI, source.ErrBadPosition,
// source.ErrInputChanged (a position for other topics or partitions, or for
// records that were deleted), source.ErrClosed. Context errors and io.EOF
// are returned as they are.
//
// No error of this package contains a password.
var (
	// ErrUnknownTopic means a configured topic does not exist on the
	// brokers. The concrete error is an *UnknownTopicError.
	ErrUnknownTopic = errors.New("kafka: topic does not exist")

	// ErrUnreachable means Open could not talk to any broker within the
	// connect timeout. The concrete error is an *UnreachableError.
	ErrUnreachable = errors.New("kafka: brokers unreachable")

	// ErrLaneRevoked means a lane's partition is no longer assigned to
	// this member of the group: the lane's records end there, and nothing
	// is wrong with the process. A lane taken again (Group.Retake) whose
	// partition was revoked before it ran fails with it too.
	ErrLaneRevoked = errors.New("its partition is no longer assigned to this member")
)

// UnknownTopicError reports a topic (or a partition of it) that does not
// exist. It matches ErrUnknownTopic.
type UnknownTopicError struct {
	Topic     string
	Partition int32 // -1: the topic itself is missing
	Brokers   []string
}

func (e *UnknownTopicError) Error() string {
	if e.Partition >= 0 {
		return "kafka: partition " + itoa(int64(e.Partition)) + " of topic " + e.Topic + " does not exist on brokers " + strings.Join(e.Brokers, ",")
	}
	return "kafka: topic " + e.Topic + " does not exist on brokers " + strings.Join(e.Brokers, ",")
}

// Unwrap returns ErrUnknownTopic.
func (e *UnknownTopicError) Unwrap() error { return ErrUnknownTopic }

// UnreachableError reports brokers that did not answer within the connect
// timeout. It matches ErrUnreachable and, through Err, the cause.
type UnreachableError struct {
	Brokers []string
	Timeout time.Duration
	Err     error  // the last error of the client, or context.DeadlineExceeded
	Hint    string // another possible cause, e.g. failed authentication
}

func (e *UnreachableError) Error() string {
	s := "kafka: cannot reach brokers " + strings.Join(e.Brokers, ",") + " (connect timeout " + e.Timeout.String() + "): " + e.Err.Error()
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// Unwrap returns ErrUnreachable and the cause.
func (e *UnreachableError) Unwrap() []error { return []error{ErrUnreachable, e.Err} }
