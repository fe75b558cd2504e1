package avro

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// ErrNotAvro is wrapped by the error of a schema of another type (JSON
// Schema, Protobuf) in the same wire format.
var ErrNotAvro = errors.New("not an Avro schema")

// ErrUnknownSchema is wrapped by the error of a value whose schema id the
// registry does not have.
var ErrUnknownSchema = errors.New("schema id unknown to the registry")

// The backoff between the attempts of a request the registry did not
// answer: it doubles from firstBackoff up to maxBackoff, with jitter.
const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 10 * time.Second
)

// Registry reads Avro schemas from a Schema Registry by id, each once:
// a schema id names one schema forever, so a parsed schema is kept for
// the process's life. It is safe for concurrent use.
//
// A request the registry does not answer (connection refused or reset, a
// timeout) or answers with 5xx, 408 or 429 is retried with capped
// exponential backoff and jitter until it succeeds or its context is
// done; the first such failure is logged as a warning, and the next
// answer once (WithLogger). Any other answer (404, 401, 403, ...) is
// final. franz-go's sr client does not retry by itself (it only moves on
// to the next URL when one cannot be reached), so nothing is retried
// twice; each attempt is bounded by its HTTP client's timeout (the sr
// client's default: 5 s).
type Registry struct {
	cl      *sr.Client
	url     string // the first URL, without user info: for errors and logs
	log     *slog.Logger
	hook    func(error)
	retries atomic.Int64

	mu        sync.Mutex
	byID      map[int]avro.Schema
	down      bool      // a request failed transiently and none succeeded since
	failures  int       // transient failures since down
	downSince time.Time // the first of them
}

// Option configures a Registry.
type Option func(*options)

type options struct {
	client []sr.ClientOpt
	log    *slog.Logger
	hook   func(error)
}

// ClientOpts passes options to the sr client (sr.BasicAuth,
// sr.DialTLSConfig, sr.HTTPClient, ...). An HTTP client given with
// sr.HTTPClient should have a Timeout: a request that never gets an
// answer is otherwise only ended by its context.
func ClientOpts(opts ...sr.ClientOpt) Option {
	return func(o *options) { o.client = append(o.client, opts...) }
}

// WithLogger makes the registry log to l: a warning when it becomes
// unreachable ("schema registry unreachable, retrying", with the error
// and the attempt), each further failed attempt at Debug level, and one
// Info line when it answers again. No line holds a credential.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRetryHook calls f with the error of every attempt that is retried
// (for a metric). f may be called concurrently and must not block.
func WithRetryHook(f func(err error)) Option { return func(o *options) { o.hook = f } }

// NewRegistry returns the registry at urls, with opts. The user info of a
// URL is taken as basic auth (unless ClientOpts gives sr.BasicAuth) and
// removed from the URL, so that no error or log line shows a password.
// It does not contact the registry.
func NewRegistry(urls []string, opts ...Option) (*Registry, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	clean := make([]string, len(urls))
	var auth []sr.ClientOpt
	for i, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // url.Error quotes the URL, password included
			}
			return nil, fmt.Errorf("schema registry: URL %d: %v", i+1, err)
		}
		if u.User != nil {
			if auth == nil {
				pass, _ := u.User.Password()
				auth = []sr.ClientOpt{sr.BasicAuth(u.User.Username(), pass)}
			}
			u.User = nil
		}
		clean[i] = u.String()
	}
	cl, err := sr.NewClient(append(append([]sr.ClientOpt{sr.URLs(clean...)}, auth...), o.client...)...)
	if err != nil {
		return nil, fmt.Errorf("schema registry: %w", err)
	}
	r := &Registry{cl: cl, log: o.log, hook: o.hook, byID: map[int]avro.Schema{}}
	if len(clean) > 0 {
		r.url = clean[0]
	}
	return r, nil
}

// Retries returns how many attempts of requests to the registry failed
// and were retried so far.
func (r *Registry) Retries() int64 { return r.retries.Load() }

// Schema returns the Avro schema of id. A nil error means the registry
// had it and it parsed (with its references); an id the registry does not
// have wraps ErrUnknownSchema; a schema that is not Avro is an error
// naming its type. While the registry is unreachable Schema retries (see
// Registry); when ctx is done first, the error wraps ctx's error.
func (r *Registry) Schema(ctx context.Context, id int) (avro.Schema, error) {
	r.mu.Lock()
	s, ok := r.byID[id]
	r.mu.Unlock()
	if ok {
		return s, nil
	}
	var got sr.Schema
	err := r.call(ctx, fmt.Sprintf("schema %d", id), func(ctx context.Context) (err error) {
		got, err = r.cl.SchemaByID(ctx, id)
		return err
	})
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && (re.ErrorCode == 40403 || re.StatusCode == http.StatusNotFound) {
			return nil, fmt.Errorf("%w: %d", ErrUnknownSchema, id)
		}
		return nil, err
	}
	if got.Type != sr.TypeAvro {
		return nil, fmt.Errorf("%w: schema %d is %s, not Avro: only Avro values are decoded", ErrNotAvro, id, got.Type)
	}
	if len(got.References) > 0 {
		return nil, fmt.Errorf("schema %d references other schemas, which is not supported", id)
	}
	s, err = avro.Parse(got.Schema)
	if err != nil {
		return nil, fmt.Errorf("schema %d: %w", id, err)
	}
	r.mu.Lock()
	r.byID[id] = s
	r.mu.Unlock()
	return s, nil
}

// Latest returns the newest schema of subject (for a topic's values,
// TOPIC-value) and its id. It retries as Schema does; a subject the
// registry does not have is an error.
func (r *Registry) Latest(ctx context.Context, subject string) (avro.Schema, int, error) {
	var ss sr.SubjectSchema
	err := r.call(ctx, "subject "+subject, func(ctx context.Context) (err error) {
		ss, err = r.cl.SchemaByVersion(ctx, subject, -1)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	s, err := r.Schema(ctx, ss.ID)
	return s, ss.ID, err
}

// call runs req until it succeeds, fails for good or ctx is done,
// retrying transient failures with backoff. Its errors name the
// registry's URL (never credentials) and what was asked.
func (r *Registry) call(ctx context.Context, what string, req func(context.Context) error) error {
	delay := firstBackoff
	for attempt := 1; ; attempt++ {
		err := req(ctx)
		if err == nil {
			r.answered()
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("schema registry %s: %s: %w (last attempt: %v)", r.url, what, ctx.Err(), err)
		}
		if !transient(err) {
			if re := (*sr.ResponseError)(nil); errors.As(err, &re) {
				r.answered()
			}
			return permanent(r.url, what, err)
		}
		r.failed(err, attempt)
		// Jitter: a random time between half the delay and the delay.
		wait := delay/2 + rand.N(delay/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("schema registry %s: %s: %w (last attempt: %v)", r.url, what, ctx.Err(), err)
		case <-t.C:
		}
		delay = min(2*delay, maxBackoff)
	}
}

// permanent is the error of a request that is not retried.
func permanent(regURL, what string, err error) error {
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		return fmt.Errorf("schema registry %s: %s: %w", regURL, what, err)
	}
	hint := ""
	switch re.StatusCode {
	case http.StatusUnauthorized:
		hint = " (check the registry's user and password)"
	case http.StatusForbidden:
		hint = " (check the registry's user and password, and what it may read)"
	}
	return fmt.Errorf("schema registry %s: %s: %d %s%s: %w", regURL, what, re.StatusCode, http.StatusText(re.StatusCode), hint, err)
}

// failed records a transient failure of attempt: a warning when the
// registry was not known to be down, a debug line otherwise.
func (r *Registry) failed(err error, attempt int) {
	r.retries.Add(1)
	if r.hook != nil {
		r.hook(err)
	}
	r.mu.Lock()
	first := !r.down
	if first {
		r.down, r.downSince = true, time.Now()
	}
	r.failures++
	n := r.failures
	r.mu.Unlock()
	if first {
		r.log.Warn("schema registry unreachable, retrying", "registry", r.url, "attempt", attempt, "error", err)
		return
	}
	r.log.Debug("schema registry still unreachable", "registry", r.url, "attempt", attempt, "failures", n, "error", err)
}

// answered records an answer of the registry: an Info line when it was
// down.
func (r *Registry) answered() {
	r.mu.Lock()
	was, n, since := r.down, r.failures, r.downSince
	r.down, r.failures = false, 0
	r.mu.Unlock()
	if was {
		r.log.Info("schema registry answers again", "registry", r.url, "failed_attempts", n, "down_for", time.Since(since).Round(time.Millisecond))
	}
}

// transient tells whether err is a failure worth retrying: no answer (the
// connection refused, reset or timed out) or an answer saying to try again
// (5xx, 408, 429). A certificate that does not verify, a TLS alert, or
// TLS spoken to a plain server is configuration, and final.
func transient(err error) bool {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode >= 500 || re.StatusCode == http.StatusTooManyRequests || re.StatusCode == http.StatusRequestTimeout
	}
	var (
		cv *tls.CertificateVerificationError
		ua x509.UnknownAuthorityError
		he x509.HostnameError
		ci x509.CertificateInvalidError
		rh tls.RecordHeaderError
		oe *net.OpError
	)
	if errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci) || errors.As(err, &rh) ||
		(errors.As(err, &oe) && oe.Op == "remote error") { // a TLS alert from the server (a client certificate refused)
		return false
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}
