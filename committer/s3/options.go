package s3

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Limits of S3 multipart uploads.
const (
	// MinPartSize is the smallest part S3 (and MinIO) accept for any part
	// but the last of an upload.
	MinPartSize = 5 << 20
	// MaxPartSize is the largest part S3 accepts.
	MaxPartSize = 5 << 30
	// MaxParts is the largest part number S3 accepts.
	MaxParts = 10000
	// DefaultPartSize is the part size used without WithPartSize.
	DefaultPartSize = 16 << 20
	// DefaultConcurrency is the number of part uploads a writer runs at once
	// without WithConcurrency.
	DefaultConcurrency = 4
)

// Option configures a client (NewClient), a Backend (New) or a Store
// (NewStore): one set of values, so that a program can pass the same list
// to each. Every constructor validates all the options it is given, once,
// and returns the error; an option that does not apply to what it builds
// (WithPartSize to NewStore, WithEndpoint to New) is ignored there. Each
// option's comment names what it applies to when that is not a Backend.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// Encryption selects server-side encryption of the objects this package
// writes.
type Encryption int

const (
	// EncryptionDefault sends no encryption header: the bucket's default
	// encryption applies.
	EncryptionDefault Encryption = iota
	// EncryptionS3 is SSE-S3 ("AES256"): keys managed by the store.
	EncryptionS3
	// EncryptionKMS is SSE-KMS ("aws:kms") with the key id given to
	// WithSSEKMS (empty: the account's default key). With SSE-KMS the ETag
	// of an object is not an MD5 of its content, so a verified re-commit
	// compares the length, the per-upload id stored in the object's metadata
	// and the composite CRC-32 (when part checksums are on), not the ETag.
	EncryptionKMS
)

type options struct {
	partSize    int64
	concurrency int
	maxParts    int
	spillDir    string
	integrity   Integrity
	checksums   bool
	sse         Encryption
	kmsKeyID    string
	storage     s3types.StorageClass
	contentType *string
	contentEnc  *string
	tags        map[string]string
	log         *slog.Logger
	retryer     aws.Retryer
	keepRetryer bool

	// NewStore only.
	leaseTTL  time.Duration
	leaseHost string // the lease holder's host name ("": os.Hostname), for tests
	leasePID  int    // the lease holder's pid (0: os.Getpid), for tests
	// leaseCommand is what holds the lease when it is not a run
	// (WithLeaseHolder).
	leaseCommand string

	// NewClient only.
	endpoint    string
	pathStyle   bool
	region      string
	profile     string
	maxAttempts int
	maxBackoff  time.Duration
}

func defaultOptions() options {
	return options{
		partSize: DefaultPartSize, concurrency: DefaultConcurrency, maxParts: MaxParts,
		spillDir: os.TempDir(), checksums: true, log: slog.New(slog.DiscardHandler),
		maxAttempts: DefaultMaxAttempts, maxBackoff: DefaultMaxBackoff, leaseTTL: DefaultLeaseTTL,
	}
}

// WithPartSize sets the size of every part but the last (default
// DefaultPartSize, at least MinPartSize, at most MaxPartSize). A part file
// grows to at most MaxParts parts: with 16 MiB parts, 156 GiB.
func WithPartSize(n int64) Option { return optionFunc(func(o *options) { o.partSize = n }) }

// WithConcurrency sets how many part uploads one writer runs at once
// (default DefaultConcurrency). Write blocks while that many are in flight,
// so a writer holds at most n+1 parts in its spill files.
func WithConcurrency(n int) Option { return optionFunc(func(o *options) { o.concurrency = n }) }

// WithMaxParts lowers the number of parts after which a writer asks the file
// sink to roll the part file (driver.PartWriter.MustRoll; default and maximum
// MaxParts). Tests use it to reach the limit with little data.
func WithMaxParts(n int) Option { return optionFunc(func(o *options) { o.maxParts = n }) }

// MaxParts returns the highest part number the backend's writers use
// (WithMaxParts).
func (b *Backend) MaxParts() int { return b.o.maxParts }

// WithSpillDir sets the directory of the writers' local spill files
// (default os.TempDir()). Each writer keeps there the bytes of the part it
// is filling and of the parts being uploaded; the files are unlinked as soon
// as they are created where the OS allows it, so they never outlive the
// process.
func WithSpillDir(dir string) Option { return optionFunc(func(o *options) { o.spillDir = dir }) }

// WithIntegrity sets the checksum and signing mode of every request (default
// IntegrityDefault); see Integrity. It applies to NewClient, New and
// NewStore.
func WithIntegrity(m Integrity) Option { return optionFunc(func(o *options) { o.integrity = m }) }

// WithPartChecksums turns the per-part CRC-32 off or on (default on). With it
// on, every part, tail object and checkpoint record is sent with an
// x-amz-checksum-crc32 header that the writer computes while the bytes are
// spilled (no extra pass over the data) and that the store verifies before
// it accepts the part, and uploads are created with the CRC32 checksum
// algorithm. Turn it off only for an S3-compatible store that rejects
// flexible checksums.
func WithPartChecksums(on bool) Option { return optionFunc(func(o *options) { o.checksums = on }) }

// WithSSES3 encrypts every object with SSE-S3 ("AES256").
func WithSSES3() Option { return optionFunc(func(o *options) { o.sse, o.kmsKeyID = EncryptionS3, "" }) }

// WithSSEKMS encrypts every object with SSE-KMS under keyID (empty: the
// default KMS key of the account). See EncryptionKMS for what it changes in
// the verification of a re-commit.
func WithSSEKMS(keyID string) Option {
	return optionFunc(func(o *options) { o.sse, o.kmsKeyID = EncryptionKMS, keyID })
}

// WithStorageClass sets the storage class of published objects (default: the
// bucket's, usually STANDARD). Staging objects (tails, markers) and
// checkpoint records always use the default class: they are short-lived,
// and classes such as STANDARD_IA or GLACIER bill a minimum duration.
func WithStorageClass(c string) Option {
	return optionFunc(func(o *options) { o.storage = s3types.StorageClass(c) })
}

// WithContentType sets the Content-Type of every published object (default:
// ContentTypeFor(target)).
func WithContentType(ct string) Option { return optionFunc(func(o *options) { o.contentType = &ct }) }

// WithContentEncoding sets the Content-Encoding of every published object
// (default: none). Leave it unset for compressed part files: a ".jsonl.gz"
// object with "Content-Encoding: gzip" is decompressed on the fly by
// browsers, curl --compressed and several HTTP libraries, so its readers see
// other bytes (and another length) than the object holds. Like Kafka
// Connect's S3 sink, the default publishes the compressed file as what it
// is, with the compression's media type (application/gzip, application/zstd)
// as its Content-Type.
func WithContentEncoding(ce string) Option {
	return optionFunc(func(o *options) { o.contentEnc = &ce })
}

// WithTags sets object tags on every published object (at most 10).
// Staging objects are never tagged: a lifecycle rule keyed on a tag must not
// expire data a checkpoint references.
func WithTags(tags map[string]string) Option {
	return optionFunc(func(o *options) { o.tags = tags })
}

// WithLogger sets the logger (default: discard) of a Backend or a Store,
// and for NewClient the logger of the SDK's own messages (at debug level).
// Nothing this package logs contains credentials.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.log = l }) }

// WithRetryer sets the retryer used for every request, replacing the
// client's (default: NewRetryer(), a bounded standard retryer with
// exponential backoff and jitter). WithRetryer(nil) keeps the client's own
// retryer.
func WithRetryer(r aws.Retryer) Option {
	return optionFunc(func(o *options) { o.retryer, o.keepRetryer = r, r == nil })
}

// WithLeaseTTL sets the TTL of the store's lease (default
// DefaultLeaseTTL, from MinLeaseTTL to MaxLeaseTTL; see Store.Acquire): it
// is renewed every third of it, and a run that died on another host keeps
// other runs off the state for about that long. NewStore only.
func WithLeaseTTL(d time.Duration) Option { return optionFunc(func(o *options) { o.leaseTTL = d }) }

// WithLeaseHolder names what takes a Store's lease when it is not a run,
// such as "uploads abort": a run that the lease refuses names it in its
// *LeaseError. Store option only.
func WithLeaseHolder(command string) Option {
	return optionFunc(func(o *options) { o.leaseCommand = command })
}

// WithEndpoint sets the S3 endpoint URL of NewClient, such as
// "http://127.0.0.1:9000" for MinIO (default: AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL from the environment or the profile, read by the SDK,
// else AWS S3). NewClient only.
func WithEndpoint(url string) Option { return optionFunc(func(o *options) { o.endpoint = url }) }

// WithPathStyle makes NewClient address buckets as ENDPOINT/BUCKET/KEY
// instead of BUCKET.ENDPOINT/KEY; MinIO and most self-hosted stores need
// it. NewClient only.
func WithPathStyle() Option { return optionFunc(func(o *options) { o.pathStyle = true }) }

// WithRegion sets the region of NewClient (default: AWS_REGION or the
// profile's; "us-east-1" when neither sets one, which MinIO accepts).
// NewClient only.
func WithRegion(region string) Option { return optionFunc(func(o *options) { o.region = region }) }

// WithProfile selects the shared-config profile of NewClient (default:
// AWS_PROFILE or "default"). NewClient only.
func WithProfile(name string) Option { return optionFunc(func(o *options) { o.profile = name }) }

// WithMaxAttempts bounds the attempts per request of NewClient's retryer
// (default DefaultMaxAttempts, at least 1). NewClient only.
func WithMaxAttempts(n int) Option { return optionFunc(func(o *options) { o.maxAttempts = n }) }

// WithMaxBackoff caps the delay between attempts of NewClient's retryer
// (default DefaultMaxBackoff, positive). NewClient only.
func WithMaxBackoff(d time.Duration) Option { return optionFunc(func(o *options) { o.maxBackoff = d }) }

func (o *options) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.partSize < MinPartSize || o.partSize > MaxPartSize {
		bad("part size %d is outside [%d, %d] (S3 rejects smaller non-last parts at CompleteMultipartUpload)", o.partSize, MinPartSize, MaxPartSize)
	}
	if o.concurrency < 1 || o.concurrency > 256 {
		bad("concurrency %d is outside [1, 256]", o.concurrency)
	}
	if o.maxParts < 2 || o.maxParts > MaxParts {
		bad("max parts %d is outside [2, %d]", o.maxParts, MaxParts)
	}
	if o.spillDir == "" {
		bad("empty spill directory")
	} else if fi, err := os.Stat(o.spillDir); err != nil {
		bad("spill directory: %v", err)
	} else if !fi.IsDir() {
		bad("spill directory %s is not a directory", o.spillDir)
	}
	if o.integrity != IntegrityDefault && o.integrity != IntegrityFast {
		bad("unknown integrity mode %d", o.integrity)
	}
	if o.sse != EncryptionKMS && o.kmsKeyID != "" {
		bad("a KMS key id needs SSE-KMS")
	}
	if o.storage != "" && !slices.Contains(o.storage.Values(), o.storage) && !storageClassName(string(o.storage)) {
		// Classes newer than this SDK are accepted; typos are not.
		bad("storage class %q is not a storage class name", o.storage)
	}
	if o.contentType != nil && (*o.contentType == "" || !validHeader(*o.contentType)) {
		bad("invalid content type %q", *o.contentType)
	}
	if o.contentEnc != nil && !validHeader(*o.contentEnc) {
		bad("invalid content encoding %q", *o.contentEnc)
	}
	if len(o.tags) > 10 {
		bad("%d object tags, S3 allows 10", len(o.tags))
	}
	for k, v := range o.tags {
		if k == "" || utf8.RuneCountInString(k) > 128 || utf8.RuneCountInString(v) > 256 || strings.HasPrefix(k, "aws:") {
			bad("invalid object tag %q=%q (key 1-128 characters not starting with aws:, value up to 256)", k, v)
		}
	}
	if o.log == nil {
		bad("nil logger")
	}
	if o.endpoint != "" {
		u, err := url.Parse(o.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			// Never echo the URL: it could carry user info.
			bad("invalid endpoint: want http(s)://host[:port][/path] without user info")
		}
	}
	if o.maxAttempts < 1 {
		bad("max attempts %d is less than 1", o.maxAttempts)
	}
	if o.maxBackoff <= 0 {
		bad("max backoff %v is not positive", o.maxBackoff)
	}
	if o.leaseTTL < MinLeaseTTL || o.leaseTTL > MaxLeaseTTL {
		bad("lease TTL %v is outside [%v, %v]", o.leaseTTL, MinLeaseTTL, MaxLeaseTTL)
	}
	if len(errs) > 0 {
		return fmt.Errorf("s3: invalid options: %w", errors.Join(errs...))
	}
	if o.retryer == nil && !o.keepRetryer {
		o.retryer = NewRetryer()
	}
	return nil
}

func storageClassName(s string) bool {
	for _, r := range s {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

func validHeader(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r > 0x7e {
			return false
		}
	}
	return true
}

// tagging encodes the tags as the x-amz-tagging header wants them.
func (o *options) tagging() *string {
	if len(o.tags) == 0 {
		return nil
	}
	v := url.Values{}
	for k, val := range o.tags {
		v.Set(k, val)
	}
	return aws.String(v.Encode())
}

func (o *options) sseType() s3types.ServerSideEncryption {
	switch o.sse {
	case EncryptionS3:
		return s3types.ServerSideEncryptionAes256
	case EncryptionKMS:
		return s3types.ServerSideEncryptionAwsKms
	}
	return ""
}

func (o *options) kmsKey() *string {
	if o.sse == EncryptionKMS && o.kmsKeyID != "" {
		return aws.String(o.kmsKeyID)
	}
	return nil
}

// ContentTypeFor returns the Content-Type published for target by default:
// from its last extension, the compression's media type for compressed
// files (".gz" application/gzip, ".zst" application/zstd, ".bz2",
// ".snappy"), else the format's (".jsonl" and ".ndjson"
// application/x-ndjson, ".json", ".csv" text/csv, ".tsv", ".txt"
// text/plain, ".parquet", ".avro"), else application/octet-stream.
func ContentTypeFor(target string) string {
	base := target[strings.LastIndexByte(target, '/')+1:]
	ext := ""
	if i := strings.LastIndexByte(base, '.'); i > 0 {
		ext = strings.ToLower(base[i:])
	}
	switch ext {
	case ".gz", ".gzip":
		return "application/gzip"
	case ".zst", ".zstd":
		return "application/zstd"
	case ".bz2":
		return "application/x-bzip2"
	case ".snappy":
		return "application/x-snappy-framed"
	case ".jsonl", ".ndjson":
		return "application/x-ndjson"
	case ".json":
		return "application/json"
	case ".csv":
		return "text/csv; charset=utf-8"
	case ".tsv":
		return "text/tab-separated-values; charset=utf-8"
	case ".txt", ".log":
		return "text/plain; charset=utf-8"
	case ".parquet":
		return "application/vnd.apache.parquet"
	case ".avro":
		return "application/avro"
	}
	return "application/octet-stream"
}
