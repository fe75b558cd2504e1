package s3

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"

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

// JobRecords implements recovery.Store: the objects PREFIX/job-<version>.json.
func (s *Store) JobRecords(ctx context.Context) ([]*recovery.JobRecord, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var out []*recovery.JobRecord
	p := s3api.NewListObjectsV2Paginator(s.client, &s3api.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.dir() + "job-"), Delimiter: aws.String("/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx, s.call())
		if err != nil {
			return nil, fmt.Errorf("job record: %s: %w", s.Location(), err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			v, ok := recovery.ParseJobRecordName(strings.TrimPrefix(key, s.dir()))
			if !ok {
				continue
			}
			b, err := s.read(ctx, key)
			if err != nil {
				return nil, fmt.Errorf("job record: %s: %w", s.url(key), err)
			}
			r, err := recovery.DecodeJobRecord(s.url(key), v, b)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *recovery.JobRecord) int { return cmp.Compare(a.Version, b.Version) })
	return out, nil
}

// AddJobRecord implements recovery.Store: the version's object is written
// once (If-None-Match: *); an existing one is an error matching
// fs.ErrExist.
func (s *Store) AddJobRecord(ctx context.Context, r *recovery.JobRecord) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	b, err := recovery.EncodeJobRecord(r)
	if err != nil {
		return err
	}
	key := s.dir() + recovery.JobRecordName(r.Version)
	in := &s3api.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b))),
		ContentType:          aws.String("application/json"),
		ServerSideEncryption: s.o.sseType(), SSEKMSKeyId: s.o.kmsKey(),
	}
	exists, err := s.putIfAbsent(ctx, in, b)
	switch {
	case err != nil:
		return fmt.Errorf("job record: write %s: %w", s.url(key), err)
	case exists:
		got, gerr := s.read(ctx, key)
		if gerr == nil && bytes.Equal(got, b) {
			return nil // our own write, whose reply was lost
		}
		return fmt.Errorf("job record: %s was written meanwhile: %w", s.url(key), fs.ErrExist)
	}
	return nil
}
