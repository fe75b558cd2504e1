package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
)

// metaKey is the object key of a metadata name.
func (b *Backend) metaKey(name string) (string, error) {
	if err := driver.CheckMetaName(name); err != nil {
		return "", fmt.Errorf("s3: %w", err)
	}
	return b.key(driver.MetaDir + "/" + name), nil
}

// MetaLocation implements driver.Output.
func (b *Backend) MetaLocation(name string) string { return b.url(driver.MetaDir + "/" + name) }

// PutMeta implements driver.Output: a PutObject with If-None-Match:
// * (a HEAD first on a store without conditional writes); an existing
// object is read back and compared.
func (b *Backend) PutMeta(ctx context.Context, name string, data []byte) error {
	key, err := b.metaKey(name)
	if err != nil {
		return err
	}
	return b.put(ctx, key, data)
}

// PutFile implements driver.Output, as PutMeta does.
func (b *Backend) PutFile(ctx context.Context, target string, data []byte) error {
	if err := driver.CheckHiddenName(target, checkTarget); err != nil {
		return fmt.Errorf("s3: %w", err)
	}
	return b.put(ctx, b.key(target), data)
}

func (b *Backend) put(ctx context.Context, key string, data []byte) error {
	var found error // the verdict on an existing object, returned as is
	err := b.putOnce(ctx, key, data, func() error {
		have, gerr := b.getSmall(ctx, key)
		switch {
		case gerr != nil:
			found = fmt.Errorf("s3: publish %s: it exists and cannot be read: %w", b.objURL(key), gerr)
		case !bytes.Equal(have, data):
			found = fmt.Errorf("s3: publish %s: it exists with other content: %w", b.objURL(key), committer.ErrAlreadyExists)
		}
		return found
	})
	if err != nil && err != found {
		return fmt.Errorf("s3: publish %s: %w", b.objURL(key), err)
	}
	return err
}

// GetMeta implements driver.Output.
func (b *Backend) GetMeta(ctx context.Context, name string) ([]byte, error) {
	key, err := b.metaKey(name)
	if err != nil {
		return nil, err
	}
	out, err := b.client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &b.bucket, Key: &key}, b.call())
	if isNotFound(err) {
		return nil, fmt.Errorf("s3: %s: %w", b.objURL(key), fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("s3: read %s: %w", b.objURL(key), err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("s3: read %s: %w", b.objURL(key), err)
	}
	return data, nil
}

// ListMeta implements driver.Output.
func (b *Backend) ListMeta(ctx context.Context, dir string) ([]string, error) {
	return b.listMeta(ctx, dir, "")
}

// ListMetaAfter implements driver.Output.
func (b *Backend) ListMetaAfter(ctx context.Context, dir, after string) ([]string, error) {
	return b.listMeta(ctx, dir, after)
}

// listMeta lists the objects directly in dir, from the first name greater
// than after on ("" for all).
func (b *Backend) listMeta(ctx context.Context, dir, after string) ([]string, error) {
	key, err := b.metaKey(dir)
	if err != nil {
		return nil, err
	}
	in := &s3api.ListObjectsV2Input{Bucket: &b.bucket, Prefix: aws.String(key + "/"), Delimiter: aws.String("/")}
	if rest, ok := strings.CutPrefix(after, dir+"/"); ok && rest != "" {
		in.StartAfter = aws.String(key + "/" + rest)
	}
	var names []string
	p := s3api.NewListObjectsV2Paginator(b.client, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx, b.call())
		if err != nil {
			return nil, fmt.Errorf("s3: list %s: %w", b.objURL(key+"/"), err)
		}
		for _, o := range out.Contents {
			names = append(names, dir+"/"+strings.TrimPrefix(aws.ToString(o.Key), key+"/"))
		}
	}
	slices.Sort(names)
	return names, nil
}

// ListFiles implements driver.Output: every object under the
// prefix whose path has no component starting with "_" or "." (staging,
// metadata and the checkpoint store live under such names).
func (b *Backend) ListFiles(ctx context.Context, fn func(target string, size int64) error) error {
	prefix := b.key("")
	if prefix != "" {
		prefix += "/"
	}
	return b.listObjects(ctx, prefix, func(o s3types.Object) error {
		rel := strings.TrimPrefix(aws.ToString(o.Key), prefix)
		for _, c := range strings.Split(rel, "/") {
			if c == "" || c[0] == '_' || c[0] == '.' {
				return nil
			}
		}
		return fn(rel, aws.ToInt64(o.Size))
	})
}

// OpenFile implements driver.Output.
func (b *Backend) OpenFile(ctx context.Context, target string) (io.ReadCloser, error) {
	key := b.key(target)
	out, err := b.client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &b.bucket, Key: &key}, b.call())
	if isNotFound(err) {
		return nil, fmt.Errorf("s3: %s: %w", b.objURL(key), fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("s3: read %s: %w", b.objURL(key), err)
	}
	return out.Body, nil
}

// FileLocation implements driver.Output.
func (b *Backend) FileLocation(target string) string { return b.url(target) }
