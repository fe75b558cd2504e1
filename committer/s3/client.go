package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
)

// Integrity selects how much checksumming the SDK does on every request.
//
// By default aws-sdk-go-v2 computes a CRC-32 of every request body (sent in a
// header over plain HTTP, in a trailer over TLS), validates the checksum of
// every response that has one, and signs the SHA-256 of the body over plain
// HTTP. The CRC-32 and the SHA-256 are passes over every byte: measured
// against MinIO they cost 12-20% of the throughput.
//
// This package removes the SDK's CRC-32 pass in both modes where it matters:
// with part checksums on (WithPartChecksums, the default), a writer computes
// the CRC-32 of each part as the bytes are spilled, while they are in the
// CPU cache, and sends it with the part; the store verifies it before it
// accepts the part, so a corrupted part is never part of an upload.
type Integrity int

const (
	// IntegrityDefault keeps the SDK's defaults: request checksums where the
	// API supports them (RequestChecksumCalculation WhenSupported), response
	// checksum validation (tail objects and checkpoint records read back are
	// verified), and SHA-256 payload signing over plain HTTP. Part uploads
	// over TLS are UNSIGNED-PAYLOAD, as the SDK does by default for them.
	IntegrityDefault Integrity = iota
	// IntegrityFast sets RequestChecksumCalculation and
	// ResponseChecksumValidation to WhenRequired (checksums only where the
	// API demands one, such as DeleteObjects) and uses UNSIGNED-PAYLOAD for
	// every request over TLS, where TLS already protects the bytes in
	// transit. Over plain HTTP the payload is still SHA-256 signed: an
	// unsigned payload there could be altered on the way undetected. The
	// per-part CRC-32 (WithPartChecksums) stays, so the store still verifies
	// every part; what is lost is the verification of bodies read back
	// (tails on resume, checkpoint records, which carry their own CRC-32C).
	IntegrityFast
)

func (m Integrity) String() string {
	switch m {
	case IntegrityDefault:
		return "default"
	case IntegrityFast:
		return "fast"
	}
	return fmt.Sprintf("Integrity(%d)", int(m))
}

// ParseIntegrity parses "default" or "fast".
func ParseIntegrity(s string) (Integrity, error) {
	switch s {
	case "", "default":
		return IntegrityDefault, nil
	case "fast":
		return IntegrityFast, nil
	}
	return 0, fmt.Errorf("s3: unknown integrity mode %q (want default or fast)", s)
}

// Retry defaults of NewRetryer.
const (
	DefaultMaxAttempts = 10
	DefaultMaxBackoff  = 20 * time.Second
)

// NewRetryer returns the retryer this package uses by default: the SDK's
// standard retryer with at most DefaultMaxAttempts attempts per request,
// exponential backoff with full jitter capped at DefaultMaxBackoff, and no
// client-wide retry quota (a quota shared by all writers would turn a burst
// of 503 SlowDown into failures of unrelated requests). It retries what the
// SDK classifies as transient: HTTP 500, 502, 503, 504, throttling codes
// (SlowDown, ...), RequestTimeout, timeouts, connection resets and other
// connection errors. Non-idempotent requests are retried too; the in-doubt
// case this creates (CompleteMultipartUpload executed, reply lost, retried)
// is resolved by the verified re-commit (see the package documentation).
func NewRetryer() aws.Retryer { return newRetryer(DefaultMaxAttempts, DefaultMaxBackoff) }

func newRetryer(attempts int, backoff time.Duration) aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = attempts
		o.MaxBackoff = backoff
		o.RateLimiter = ratelimit.None
		o.Retryables = append(o.Retryables, retry.IsErrorRetryableFunc(brokenConnection))
	})
}

// brokenConnection classifies the connection failures the SDK leaves
// undecided: a connection closed (EOF) or reset while the request body was
// still being written (broken pipe). Every request this package sends may be
// repeated safely (see the package documentation).
func brokenConnection(err error) aws.Ternary {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) {
		return aws.TrueTernary
	}
	return aws.UnknownTernary
}

// NewClient returns an S3 client built from the standard AWS configuration
// chain (environment, shared config and credentials files, profiles, SSO,
// web identity, container and instance roles), with the overrides of
// WithEndpoint, WithPathStyle, WithRegion and WithProfile, the bounded
// retryer of NewRetryer (WithMaxAttempts, WithMaxBackoff) and, for
// WithIntegrity(IntegrityFast), the checksum settings described there, and
// the SDK's own log messages sent to the WithLogger logger at debug level
// (never to stderr, the SDK's default). The
// options are validated as New validates them; those that configure a
// Backend or a Store are ignored. Credentials are resolved lazily by the
// SDK on the first request; they never appear in an error this function
// returns. A nil error means the options are valid and the configuration
// chain was read; no request has been made. The client is safe for
// concurrent use.
func NewClient(ctx context.Context, opts ...Option) (*s3api.Client, error) {
	cfg := defaultOptions()
	for _, opt := range opts {
		opt.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	attempts, backoff := cfg.maxAttempts, cfg.maxBackoff
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		// Many writers upload in parallel to one host: keep their
		// connections. A server that accepts a request and never answers
		// fails the attempt (retried) instead of hanging the writer.
		tr.MaxIdleConns = 512
		tr.MaxIdleConnsPerHost = 256
		tr.ResponseHeaderTimeout = 2 * time.Minute
	})
	load := []func(*config.LoadOptions) error{
		// The SDK's own messages ("Response has no supported checksum",
		// "Skipped validation of multipart checksum", retry notes) would
		// go to stderr by default: they go to the logger, at debug level.
		config.WithLogger(sdkLogger(cfg.log)),
		config.WithClientLogMode(0),
		config.WithHTTPClient(httpClient),
		config.WithRetryer(func() aws.Retryer { return newRetryer(attempts, backoff) }),
		config.WithDefaultRegion("us-east-1"),
	}
	if cfg.region != "" {
		load = append(load, config.WithRegion(cfg.region))
	}
	if cfg.profile != "" {
		load = append(load, config.WithSharedConfigProfile(cfg.profile))
	}
	if cfg.integrity == IntegrityFast {
		load = append(load,
			config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
			config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		// The SDK's message names files and profiles, never secrets; it is
		// not wrapped with %w so that no provider detail travels further.
		return nil, fmt.Errorf("s3: load AWS configuration: %v", err)
	}
	return s3api.NewFromConfig(awsCfg, func(o *s3api.Options) {
		if cfg.endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.endpoint)
		}
		if cfg.pathStyle {
			o.UsePathStyle = true
		}
		if cfg.integrity == IntegrityFast {
			o.APIOptions = append(o.APIOptions, unsignedPayloadOverTLS)
		}
	}), nil
}

// sdkLogger routes the SDK's log messages to log at debug level, never to
// the SDK's default (stderr). With no client log mode set, the SDK logs
// no requests, responses or credentials, only notes such as a skipped
// checksum validation.
func sdkLogger(log *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		log.Debug("aws sdk: "+fmt.Sprintf(format, v...), "sdk_level", string(c))
	})
}

// computePayloadHashID is the ID of the SigV4 middleware that computes (or
// skips) the payload's SHA-256.
const computePayloadHashID = "ComputePayloadHash"

// unsignedPayloadOverTLS makes every operation sign UNSIGNED-PAYLOAD over
// TLS and the SHA-256 of the payload over plain HTTP (the SDK does this by
// default only for PutObject and UploadPart).
func unsignedPayloadOverTLS(stack *middleware.Stack) error {
	if _, ok := stack.Finalize.Get(computePayloadHashID); !ok {
		return nil
	}
	return v4.UseDynamicPayloadSigningMiddleware(stack)
}

// withPayloadHash makes one call sign the hex SHA-256 hash instead of
// reading its body to compute it. The SigV4 middlewares keep a hash that
// is already set, over TLS too (where UploadPart would sign
// UNSIGNED-PAYLOAD), so hash must be that of the body as sent.
func withPayloadHash(hash string) func(*s3api.Options) {
	mw := middleware.FinalizeMiddlewareFunc("filesink.PayloadHash", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		return next.HandleFinalize(v4.SetPayloadHash(ctx, hash), in)
	})
	return func(o *s3api.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			if _, ok := stack.Finalize.Get(computePayloadHashID); !ok {
				return nil
			}
			return stack.Finalize.Insert(mw, computePayloadHashID, middleware.Before)
		})
	}
}

// apply sets the per-request options of o on an SDK call: the retryer and
// the integrity mode.
func (o *options) apply(so *s3api.Options) {
	if o.retryer != nil {
		so.Retryer = o.retryer
	}
	if o.integrity == IntegrityFast {
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		so.APIOptions = append(so.APIOptions, unsignedPayloadOverTLS)
	}
}
