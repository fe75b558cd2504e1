package icebergtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// s3Source is a table in S3 that Read mirrors into a local directory.
type s3Source struct {
	client *s3.Client
	bucket string
	prefix string // "" or ending in "/"
}

// WithS3 reads a table kept in S3 (MinIO): Read copies every object under
// s3://bucket/prefix/ into a temporary directory, removed when Read
// returns, and maps the locations s3://, s3a:// and s3n://bucket/prefix
// onto it. The metadata path given to Read is then a location
// (s3://bucket/prefix/metadata/...) or a key of the bucket. Objects outside
// the prefix are not copied: a table that names one is read with an error.
func WithS3(client *s3.Client, bucket, prefix string) Option {
	return func(c *config) { c.s3 = &s3Source{client: client, bucket: bucket, prefix: keyPrefix(prefix)} }
}

// location returns the s3:// location of a metadata path given as a key.
func (s *s3Source) location(metadataPath string) string {
	if strings.Contains(metadataPath, "://") {
		return metadataPath
	}
	return "s3://" + s.bucket + "/" + strings.TrimPrefix(metadataPath, "/")
}

// mirror copies every object under the prefix into dir and returns the
// reader's --map arguments for it. A nil error means every object listed
// was copied whole.
func (s *s3Source) mirror(ctx context.Context, dir string) ([]string, error) {
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &s.prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing s3://%s/%s: %w", s.bucket, s.prefix, err)
		}
		for _, o := range page.Contents {
			if strings.HasSuffix(*o.Key, "/") {
				continue // a directory marker
			}
			if err := s.copy(ctx, *o.Key, dir); err != nil {
				return nil, err
			}
		}
	}
	var maps []string
	for _, scheme := range []string{"s3", "s3a", "s3n"} {
		maps = append(maps, fmt.Sprintf("%s://%s/%s=%s", scheme, s.bucket, s.prefix, dir))
	}
	return maps, nil
}

// copy copies the object key to its place under dir.
func (s *s3Source) copy(ctx context.Context, key, dir string) error {
	rel := filepath.FromSlash(strings.TrimPrefix(key, s.prefix))
	if !filepath.IsLocal(rel) {
		return fmt.Errorf("s3://%s/%s: a key that does not map into a directory", s.bucket, key)
	}
	dst := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return fmt.Errorf("getting s3://%s/%s: %w", s.bucket, key, err)
	}
	defer out.Body.Close()
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, out.Body); err != nil {
		f.Close()
		return fmt.Errorf("copying s3://%s/%s: %w", s.bucket, key, err)
	}
	return f.Close()
}
