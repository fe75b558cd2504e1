package s3

import (
	"bytes"
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/recovery"
)

func (s *Store) jobKey() string { return s.dir() + recovery.JobFile }

// JobIDLocation implements recovery.Store: s3://bucket/prefix/JOB.
func (s *Store) JobIDLocation() string { return s.url(s.jobKey()) }

// JobID implements recovery.Store: the id in the object PREFIX/JOB, ""
// if there is none.
func (s *Store) JobID(ctx context.Context) (string, error) {
	if err := s.check(ctx); err != nil {
		return "", err
	}
	b, err := s.read(ctx, s.jobKey())
	if isNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("job id: %s: %w", s.JobIDLocation(), err)
	}
	return recovery.ParseJobID(s.JobIDLocation(), b)
}

// SetJobID implements recovery.Store: PREFIX/JOB is written once, as
// a record is (If-None-Match: *, or a check first where the store has no
// conditional writes); an object found with the same id is success. A
// store whose lease is lost or released writes nothing (an error matching
// ErrLeaseLost).
func (s *Store) SetJobID(ctx context.Context, id string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := s.leaseFenced(); err != nil {
		return fmt.Errorf("job id: %w", err)
	}
	key, b := s.jobKey(), []byte(id+"\n")
	in := &s3api.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b))),
		ContentType:          aws.String("text/plain"),
		ServerSideEncryption: s.o.sseType(), SSEKMSKeyId: s.o.kmsKey(),
	}
	exists, err := s.putIfAbsent(ctx, in, b)
	switch {
	case err != nil:
		return fmt.Errorf("job id: keep it in %s: %w", s.JobIDLocation(), err)
	case !exists:
		return nil
	default:
		kept, kerr := s.JobID(ctx)
		if kerr != nil {
			return kerr
		}
		if kept != id {
			return &recovery.JobIDError{Location: s.JobIDLocation(), Kept: kept, Given: id, Meanwhile: true}
		}
		return nil
	}
}
