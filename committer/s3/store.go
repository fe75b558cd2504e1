package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/recovery"
)

// Store is a recovery.Store on an S3 prefix, with the semantics of
// recovery.DirStore: each checkpoint record is one object
// "PREFIX/ckpt-<20-digit id>", written once with If-None-Match: * (never
// overwritten; a PUT that S3 acknowledged is durable and atomic: a record
// is absent or complete), encoded and checksummed by recovery.Encode.
// Beside them, PREFIX/LEASE keeps other runs off the store once Acquire
// took it (see Acquire), and PREFIX/JOB the job id. Safe for concurrent
// use.
type Store struct {
	client *s3api.Client
	bucket string
	prefix string
	o      options
	lease  lease
}

var _ recovery.Store = (*Store)(nil)

const recordPrefix = "ckpt-"

// maxRecord bounds the size of a record read back.
const maxRecord = 1<<30 + 64

// NewStore returns a checkpoint store in s3://bucket/prefix (leading and
// trailing slashes of prefix are ignored). Of the options, WithSSES3,
// WithSSEKMS, WithIntegrity, WithPartChecksums, WithRetryer, WithLogger
// and WithLeaseTTL apply; all are validated. A nil error means the
// arguments are valid (the store is not contacted). The store takes no
// lease until Acquire: without it, it only reads, or writes without
// excluding other runs.
func NewStore(client *s3api.Client, bucket, prefix string, opts ...Option) (*Store, error) {
	s := &Store{client: client, bucket: bucket}
	s.o = defaultOptions()
	for _, opt := range opts {
		opt.apply(&s.o)
	}
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("s3: nil client"))
	}
	if err := checkBucket(bucket); err != nil {
		errs = append(errs, err)
	}
	p, err := cleanPrefix(prefix)
	if err != nil {
		errs = append(errs, err)
	}
	s.prefix = p
	if err := s.o.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("checkpoint store s3://%s/%s: %w", bucket, prefix, errors.Join(errs...))
	}
	return s, nil
}

// Location implements recovery.Store: "s3://bucket/prefix".
func (s *Store) Location() string {
	if s.prefix == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + s.prefix
}

func (s *Store) dir() string {
	if s.prefix == "" {
		return ""
	}
	return s.prefix + "/"
}

func (s *Store) key(id uint64) string { return fmt.Sprintf("%s%s%020d", s.dir(), recordPrefix, id) }

func (s *Store) call() func(*s3api.Options) { return s.o.apply }

func (s *Store) check(ctx context.Context) error { return ctx.Err() }

// Put implements recovery.Store. A nil error means the record is durable.
// A record with the same id is an error, and is never replaced; a record
// found with the same bytes (an attempt whose reply was lost wrote it) is
// success. With a lease (Acquire), the lease is checked first and the
// write must end within its safe time (see Acquire); a lost or released
// lease is an error matching ErrLeaseLost, and nothing is written.
func (s *Store) Put(ctx context.Context, c *recovery.Checkpoint) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	b, err := recovery.Encode(c)
	if err != nil {
		return err
	}
	key := s.key(c.ID)
	in := &s3api.PutObjectInput{
		Bucket: &s.bucket, Key: &key, ContentLength: aws.Int64(int64(len(b))),
		ContentType:          aws.String("application/octet-stream"),
		ServerSideEncryption: s.o.sseType(), SSEKMSKeyId: s.o.kmsKey(),
	}
	if s.o.checksums {
		in.ChecksumCRC32 = crcBase64(crc32.ChecksumIEEE(b))
	}
	var exists bool
	for attempt := 1; ; attempt++ {
		pctx, cancel, gerr := s.leaseGuard(ctx)
		if gerr != nil {
			return fmt.Errorf("write checkpoint %d: %w", c.ID, gerr)
		}
		in.Body = bytes.NewReader(b)
		exists, err = s.putIfAbsent(pctx, in, b)
		cut := err != nil && pctx.Err() != nil && ctx.Err() == nil
		cancel()
		if !cut || attempt == 3 {
			break
		}
		// The lease's deadline cut the write off: renew, then write again
		// (an attempt that landed is found with the same bytes).
	}
	switch {
	case err != nil:
		return fmt.Errorf("write checkpoint %d to %s: %w", c.ID, s.Location(), err)
	case !exists:
		return nil
	default:
		got, gerr := s.read(ctx, key)
		if gerr == nil && bytes.Equal(got, b) {
			return nil
		}
		return fmt.Errorf("write checkpoint %d: %s already exists and differs (never overwritten): %w", c.ID, s.url(key), fs.ErrExist)
	}
}

// putIfAbsent writes in (whose body is b) with If-None-Match: *, or, on a
// store without conditional writes, after a HEAD that finds no object.
// exists reports that the key already held an object, which was left as
// it was; a nil error with exists false means this call wrote it.
func (s *Store) putIfAbsent(ctx context.Context, in *s3api.PutObjectInput, b []byte) (exists bool, err error) {
	in.IfNoneMatch = aws.String("*")
	_, err = s.client.PutObject(ctx, in, s.call())
	if isNotImplemented(err) {
		// No conditional writes on this store: check, then write.
		_, herr := s.client.HeadObject(ctx, &s3api.HeadObjectInput{Bucket: in.Bucket, Key: in.Key}, s.call())
		switch {
		case herr == nil:
			return true, nil
		case !isNotFound(herr):
			return false, herr
		}
		in.IfNoneMatch = nil
		in.Body = bytes.NewReader(b)
		_, err = s.client.PutObject(ctx, in, s.call())
	}
	if isPreconditionFailed(err) {
		return true, nil
	}
	return false, err
}

func (s *Store) url(key string) string { return "s3://" + s.bucket + "/" + key }

// List implements recovery.Store: the ids in ascending order. An object
// named "ckpt-..." without a 20-digit id is a *recovery.CorruptError;
// objects beside the records with other names (LEASE, JOB) are not
// records and are not listed.
func (s *Store) List(ctx context.Context) ([]uint64, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var ids []uint64
	prefix := s.dir() + recordPrefix
	p := s3api.NewListObjectsV2Paginator(s.client, &s3api.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(prefix), Delimiter: aws.String("/")})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx, s.call())
		if err != nil {
			return nil, fmt.Errorf("checkpoint store %s: %w", s.Location(), err)
		}
		for _, o := range out.Contents {
			key := aws.ToString(o.Key)
			rest := strings.TrimPrefix(key, prefix)
			id, err := strconv.ParseUint(rest, 10, 64)
			if err != nil || len(rest) != 20 {
				return nil, &recovery.CorruptError{File: s.url(key), Reason: "unexpected object name in the checkpoint store", Err: recovery.ErrCorruptCheckpoint}
			}
			ids = append(ids, id)
		}
		for _, cp := range out.CommonPrefixes {
			return nil, &recovery.CorruptError{File: s.url(aws.ToString(cp.Prefix)), Reason: "unexpected directory in the checkpoint store", Err: recovery.ErrCorruptCheckpoint}
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Get implements recovery.Store; a defective record is a
// *recovery.CorruptError naming its object (s3://bucket/key).
func (s *Store) Get(ctx context.Context, id uint64) (*recovery.Checkpoint, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	key := s.key(id)
	b, err := s.read(ctx, key)
	if isNotFound(err) {
		return nil, fmt.Errorf("read checkpoint %d: %s: %w", id, s.url(key), fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %d: %s: %w", id, s.url(key), err)
	}
	c, err := recovery.Decode(s.url(key), b)
	if err != nil {
		return nil, err
	}
	if c.ID != id {
		return nil, &recovery.CorruptError{File: s.url(key), Reason: fmt.Sprintf("record says checkpoint %d", c.ID), Err: recovery.ErrCorruptCheckpoint}
	}
	return c, nil
}

func (s *Store) read(ctx context.Context, key string) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &s.bucket, Key: &key}, s.call())
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(io.LimitReader(out.Body, maxRecord))
}

// Delete implements recovery.Store; deleting a missing record is not an
// error. A store whose lease is lost or released deletes nothing (an error
// matching ErrLeaseLost).
func (s *Store) Delete(ctx context.Context, id uint64) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := s.leaseFenced(); err != nil {
		return fmt.Errorf("delete checkpoint %d: %w", id, err)
	}
	key := s.key(id)
	_, err := s.client.DeleteObject(ctx, &s3api.DeleteObjectInput{Bucket: &s.bucket, Key: &key}, s.call())
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("delete checkpoint %d: %s: %w", id, s.url(key), err)
	}
	return nil
}
