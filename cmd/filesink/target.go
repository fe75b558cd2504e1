package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"

	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/committer/localfs"
	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/vfs"
)

// s3Flags are the settings of S3 sinks and state, shared by every command.
type s3Flags struct {
	endpoint, region, profile, integrity, partSize string
	sse, kmsKeyID, storageClass, tags, spillDir    string
	pathStyle                                      bool
	concurrency                                    int
	// maxParts, if set, caps the part numbers of the writers (group mode:
	// the last one is a takeover's, s3.Backend.Finalize).
	maxParts int
}

func (f *s3Flags) register(fs *flag.FlagSet, write bool) {
	fs.StringVar(&f.endpoint, "s3-endpoint", "", "S3 endpoint `URL` (default: AWS_ENDPOINT_URL, else AWS)")
	fs.BoolVar(&f.pathStyle, "s3-path-style", false, "address buckets by path (ENDPOINT/BUCKET), as MinIO needs")
	fs.StringVar(&f.region, "s3-region", "", "S3 region (default: AWS_REGION or the profile's, else us-east-1)")
	fs.StringVar(&f.profile, "s3-profile", "", "AWS shared-config profile (default: AWS_PROFILE)")
	enumVar(fs, &f.integrity, "s3-integrity", "default", "request checksums (`MODE`): default (SDK: CRC32 and SHA-256 of bodies) or fast (only where required; unsigned payload over TLS; per-part CRC kept)",
		"default", "fast")
	if !write {
		return
	}
	fs.StringVar(&f.partSize, "s3-part-size", "16MiB", "multipart part size (at least 5MiB)")
	fs.IntVar(&f.concurrency, "s3-concurrency", s3sink.DefaultConcurrency, "concurrent part uploads per part file")
	enumVar(fs, &f.sse, "s3-sse", "", "server-side encryption (`KIND`): AES256 (SSE-S3) or aws:kms (SSE-KMS); default: the bucket's", "AES256", "aws:kms")
	fs.StringVar(&f.kmsKeyID, "s3-kms-key-id", "", "KMS key id for --s3-sse aws:kms")
	fs.StringVar(&f.storageClass, "s3-storage-class", "", "storage class of published objects (e.g. STANDARD_IA)")
	fs.StringVar(&f.tags, "s3-tags", "", "object tags KEY=VALUE[,KEY=VALUE]")
	fs.StringVar(&f.spillDir, "spill-dir", "", "local directory for bytes waiting to be uploaded (default: the system temp dir)")
}

// client makes the S3 client of the flags; the SDK's own messages go to
// log at debug level (nil: nowhere).
func (f *s3Flags) client(ctx context.Context, log *slog.Logger) (*s3api.Client, error) {
	integ, err := s3sink.ParseIntegrity(f.integrity)
	if err != nil {
		return nil, usageError("--s3-integrity: %v", err)
	}
	opts := []s3sink.Option{s3sink.WithEndpoint(f.endpoint), s3sink.WithRegion(f.region), s3sink.WithProfile(f.profile), s3sink.WithIntegrity(integ)}
	if log != nil {
		opts = append(opts, s3sink.WithLogger(log))
	}
	if f.pathStyle {
		opts = append(opts, s3sink.WithPathStyle())
	}
	return s3sink.NewClient(ctx, opts...)
}

func (f *s3Flags) options(log *slog.Logger) ([]s3sink.Option, error) {
	opts := []s3sink.Option{s3sink.WithLogger(log)}
	if integ, err := s3sink.ParseIntegrity(f.integrity); err == nil {
		opts = append(opts, s3sink.WithIntegrity(integ))
	}
	if f.partSize != "" {
		n, err := filesink.ParseSize(f.partSize)
		if err != nil {
			return nil, usageError("--s3-part-size: %v", err)
		}
		opts = append(opts, s3sink.WithPartSize(n))
	}
	if f.concurrency > 0 {
		opts = append(opts, s3sink.WithConcurrency(f.concurrency))
	}
	if f.maxParts > 0 {
		opts = append(opts, s3sink.WithMaxParts(f.maxParts))
	}
	switch f.sse {
	case "":
		if f.kmsKeyID != "" {
			return nil, usageError("--s3-kms-key-id needs --s3-sse aws:kms")
		}
	case "AES256":
		opts = append(opts, s3sink.WithSSES3())
	case "aws:kms":
		opts = append(opts, s3sink.WithSSEKMS(f.kmsKeyID))
	default:
		return nil, usageError("--s3-sse must be AES256 or aws:kms, not %q", f.sse)
	}
	if f.storageClass != "" {
		opts = append(opts, s3sink.WithStorageClass(f.storageClass))
	}
	if f.tags != "" {
		tags := map[string]string{}
		for _, kv := range strings.Split(f.tags, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, usageError("--s3-tags: %q is not KEY=VALUE", kv)
			}
			tags[k] = v
		}
		opts = append(opts, s3sink.WithTags(tags))
	}
	if f.spillDir != "" {
		opts = append(opts, s3sink.WithSpillDir(f.spillDir))
	}
	return opts, nil
}

// target is where a sink publishes: its backend, its dead-letter backend,
// and its default checkpoint store.
type target struct {
	uri      string
	local    string // output directory, for file://
	bucket   string // for s3://
	prefix   string
	client   *s3api.Client
	s3opts   []s3sink.Option
	backend  driver.Backend
	dead     driver.Backend
	stateURI string // default state location
}

func isS3(uri string) bool { return strings.HasPrefix(uri, "s3://") }

// parseS3 splits s3://BUCKET[/PREFIX].
func parseS3(uri, flagName string) (bucket, prefix string, err error) {
	rest := strings.TrimPrefix(uri, "s3://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", usageError("%s %q: missing bucket (s3://BUCKET/PREFIX)", flagName, uri)
	}
	return bucket, strings.Trim(prefix, "/"), nil
}

// openTarget resolves a --sink URI. With write set, S3 upload options apply.
func openTarget(ctx context.Context, uri string, s3f *s3Flags, log *slog.Logger, write bool) (*target, error) {
	t := &target{uri: uri}
	if !isS3(uri) {
		out, err := localPath(uri, "--sink")
		if err != nil {
			return nil, err
		}
		t.local = out
		t.backend = localfs.New(vfs.OS{}, out)
		t.dead = localfs.New(vfs.OS{}, filepath.Join(out, "_dead-letter"))
		t.stateURI = filepath.Join(out, "_filesink")
		return t, nil
	}
	bucket, prefix, err := parseS3(uri, "--sink")
	if err != nil {
		return nil, err
	}
	t.bucket, t.prefix = bucket, prefix
	if t.client, err = s3f.client(ctx, log); err != nil {
		return nil, err
	}
	if write {
		if t.s3opts, err = s3f.options(log); err != nil {
			return nil, err
		}
	} else {
		t.s3opts = []s3sink.Option{s3sink.WithLogger(log)}
	}
	if t.backend, err = s3sink.New(t.client, bucket, prefix, t.s3opts...); err != nil {
		return nil, usageError("--sink: %v", err)
	}
	if t.dead, err = s3sink.New(t.client, bucket, path.Join(prefix, "_dead-letter"), t.s3opts...); err != nil {
		return nil, usageError("--sink: %v", err)
	}
	t.stateURI = "s3://" + path.Join(bucket, prefix, "_filesink")
	return t, nil
}

// openStore opens the checkpoint store at uri (a directory or
// s3://BUCKET/PREFIX). With create set, it is opened for a run, which
// excludes every other run: a local directory is made if needed and locked
// until the store's Close; an S3 prefix's lease (PREFIX/LEASE) is taken
// and renewed until Close. A state that another process holds is an error
// naming it. Otherwise the store must exist and is opened read-only,
// without the lock or the lease. log gets the S3 lease's messages.
func openStore(ctx context.Context, uri string, s3f *s3Flags, client *s3api.Client, create bool, log *slog.Logger) (recovery.Store, error) {
	if !isS3(uri) {
		dir, err := localPath(uri, "--state")
		if err != nil {
			return nil, err
		}
		if !create {
			if err := checkPath("--state ", dir, true); err != nil {
				return nil, err
			}
			return recovery.OpenDir(ctx, vfs.OS{}, dir, recovery.ReadOnly())
		}
		s, err := recovery.OpenDir(ctx, vfs.OS{}, dir)
		if le := (*recovery.LockedError)(nil); errors.As(err, &le) {
			return nil, fmt.Errorf("state directory %s is in use by another filesink process (%s): stop it or wait for it to end (its lock goes with its process, even after kill -9)", dir, le.LockInfo)
		}
		return s, err
	}
	bucket, prefix, err := parseS3(uri, "--state")
	if err != nil {
		return nil, err
	}
	if client == nil {
		if client, err = s3f.client(ctx, nil); err != nil {
			return nil, err
		}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := s3sink.NewStore(client, bucket, prefix, s3sink.WithLogger(log))
	if err != nil {
		return nil, err
	}
	if !create {
		return s, nil
	}
	// Before recovery reads the records: a second run is refused here.
	if err := s.Acquire(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// checkPath returns nil if path exists (and is a directory, with dir set);
// otherwise a usage error of one line, what and the path, and why: "no
// such directory", "no such file or directory", "not a directory", or the
// system's reason. what says which command and flag named the path
// ("verify: ", "run: --source ").
func checkPath(what, path string, dir bool) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && dir:
		return usageError("%s%s: no such directory", what, path)
	case errors.Is(err, fs.ErrNotExist):
		return usageError("%s%s: no such file or directory", what, path)
	case err != nil:
		return usageError("%v", vfs.WrapPath(what+path, err))
	case dir && !fi.IsDir():
		return usageError("%s%s: not a directory", what, path)
	}
	return nil
}

// icebergProps are the properties of iceberg-go's IO for a warehouse:
// for s3://, the endpoint, region and addressing of the S3 flags (the
// credentials come from the standard AWS chain, as for every S3 client).
func (f *s3Flags) icebergProps(warehouse string) (map[string]string, error) {
	if !isS3(warehouse) {
		return nil, nil
	}
	props := map[string]string{}
	if f.endpoint != "" {
		props["s3.endpoint"] = f.endpoint
	}
	if f.region != "" {
		props["s3.region"] = f.region
	}
	if f.pathStyle {
		props["s3.force-virtual-addressing"] = "false"
	}
	return props, nil
}
