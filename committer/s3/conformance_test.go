package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/committer/drivertest"
	"github.com/filesink/filesink/internal/testutil/miniotest"
)

// TestConformance runs the backend conformance suite against MinIO. S3
// writes are durable when acknowledged, so the harness has no power-loss
// simulation (Crash cases skip); it has every Tamper hook.
func TestConformance(t *testing.T) {
	srv := requireMinio(t)
	bucket := srv.NewBucket(t)
	for _, mode := range []struct {
		name string
		opts []Option
	}{
		{"default", nil},
		{"fast-nochecksums", []Option{WithIntegrity(IntegrityFast), WithPartChecksums(false), WithConcurrency(1)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			drivertest.RunConformanceTests(t, func(t *testing.T) drivertest.Harness {
				return newHarness(t, srv, bucket, append([]Option{WithPartSize(MinPartSize), WithSpillDir(t.TempDir())}, mode.opts...)...)
			})
		})
	}
}

var prefixSeq atomic.Int64

// harness is a drivertest.Harness over a fresh prefix of a MinIO bucket.
type harness struct {
	drivertest.NoCrash
	t      testing.TB
	client *s3api.Client
	bucket string
	prefix string
	opts   []Option

	mu       sync.Mutex
	backends []*Backend
}

func newHarness(t testing.TB, srv *miniotest.Server, bucket string, opts ...Option) *harness {
	return &harness{
		t: t, client: srv.Client(t, withRetryer), bucket: bucket,
		prefix: fmt.Sprintf("out%d/x", prefixSeq.Add(1)), opts: opts,
	}
}

func (h *harness) Backend() driver.Backend { return h.backend() }

func (h *harness) backend(extra ...Option) *Backend {
	h.t.Helper()
	b, err := New(h.client, h.bucket, h.prefix, append(append([]Option(nil), h.opts...), extra...)...)
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.backends = append(h.backends, b)
	h.mu.Unlock()
	return b
}

func (h *harness) key(rel string) string { return h.prefix + "/" + rel }

func (h *harness) ReadTarget(ctx context.Context, target string) ([]byte, error) {
	return h.get(ctx, h.key(target))
}

func (h *harness) get(ctx context.Context, key string) ([]byte, error) {
	out, err := h.client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &h.bucket, Key: &key})
	if isNotFound(err) {
		return nil, fmt.Errorf("%s: %w", key, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// Visible lists the objects under the prefix with no path component
// starting with '.' or '_', as Hadoop, Spark and Hive readers see them.
func (h *harness) Visible(ctx context.Context) ([]string, error) {
	var out []string
	p := s3api.NewListObjectsV2Paginator(h.client, &s3api.ListObjectsV2Input{Bucket: &h.bucket, Prefix: aws.String(h.prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
	objects:
		for _, o := range page.Contents {
			rel := strings.TrimPrefix(aws.ToString(o.Key), h.prefix+"/")
			for _, c := range strings.Split(rel, "/") {
				if c == "" || c[0] == '.' || c[0] == '_' {
					continue objects
				}
			}
			out = append(out, rel)
		}
	}
	return out, nil
}

func (h *harness) Tamper() (drivertest.Tamperer, bool) { return h, true }

func (h *harness) record(data json.RawMessage) record {
	h.t.Helper()
	r, err := h.backend().parse(data, "")
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// DeleteStaging aborts the upload and deletes the tail object and the
// marker, as a lifecycle rule or an operator could.
func (h *harness) DeleteStaging(ctx context.Context, data json.RawMessage) error {
	r := h.record(data)
	if _, err := h.client.AbortMultipartUpload(ctx, &s3api.AbortMultipartUploadInput{Bucket: &h.bucket, Key: &r.Key, UploadId: &r.UploadID}); err != nil {
		return err
	}
	keys := []string{h.key(StagingName(r.Target)) + markerSuffix}
	for _, tr := range r.Tail {
		keys = append(keys, tr.Key)
	}
	for _, k := range keys {
		if _, err := h.client.DeleteObject(ctx, &s3api.DeleteObjectInput{Bucket: &h.bucket, Key: aws.String(k)}); err != nil {
			return err
		}
	}
	return nil
}

// TruncateStaging shortens the tail object holding offset size and deletes
// the ones after it when size falls in the tail, else re-uploads the part
// holding offset size with only the bytes before it (zeros: the content is
// lost anyway).
func (h *harness) TruncateStaging(ctx context.Context, data json.RawMessage, size int64) error {
	r := h.record(data)
	if len(r.Tail) > 0 && size >= r.BytesInParts {
		start := r.BytesInParts
		for _, tr := range r.Tail {
			switch {
			case size >= start+tr.Length:
			case size > start:
				tail, err := h.get(ctx, tr.Key)
				if err != nil {
					return err
				}
				if _, err := h.client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &h.bucket, Key: &tr.Key, Body: bytes.NewReader(tail[:size-start])}); err != nil {
					return err
				}
			default:
				if _, err := h.client.DeleteObject(ctx, &s3api.DeleteObjectInput{Bucket: &h.bucket, Key: &tr.Key}); err != nil {
					return err
				}
			}
			start += tr.Length
		}
		return nil
	}
	var start int64
	for _, p := range r.Parts {
		if size < start+p.Size {
			_, err := h.client.UploadPart(ctx, &s3api.UploadPartInput{
				Bucket: &h.bucket, Key: &r.Key, UploadId: &r.UploadID, PartNumber: aws.Int32(p.Number),
				Body: bytes.NewReader(make([]byte, size-start)), ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32,
			})
			return err
		}
		start += p.Size
	}
	return fmt.Errorf("TruncateStaging: size %d is not below the recorded %d", size, r.Length)
}

func (h *harness) DeleteTarget(ctx context.Context, target string) error {
	_, err := h.client.DeleteObject(ctx, &s3api.DeleteObjectInput{Bucket: &h.bucket, Key: aws.String(h.key(target))})
	return err
}

func (h *harness) PutTarget(ctx context.Context, target string, content []byte) error {
	_, err := h.client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &h.bucket, Key: aws.String(h.key(target)), Body: bytes.NewReader(content)})
	return err
}
