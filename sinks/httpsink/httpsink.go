package httpsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/filesink/filesink/sinks/async"
)

// ContentType is the body's media type: one JSON value (a record) per
// line, each line ending with '\n'.
const ContentType = "application/x-ndjson"

// Defaults.
const (
	DefaultAttempts   = 6
	DefaultBackoff    = 200 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
	DefaultTimeout    = 30 * time.Second
	// MaxErrorBody is how much of a response body an error quotes.
	MaxErrorBody = 512
)

// Client sends batches as HTTP POST requests to one URL: an async.Sender.
// It is safe for concurrent use.
type Client struct {
	target     string // the URL without user info
	display    string // the URL for messages: no user info, query values hidden
	user, pass string
	auth       bool
	config
}

var _ async.Sender = (*Client)(nil)

// Option configures a Client: a value of this sealed interface, made by
// the With functions of this package and validated, with the others, once
// by New.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is what the options set.
type config struct {
	hc         *http.Client
	attempts   int
	backoff    time.Duration
	maxBackoff time.Duration
	timeout    time.Duration
	header     http.Header
	log        *slog.Logger
}

func (c *config) validate() error {
	if c.attempts < 1 || c.backoff < 0 || c.maxBackoff < c.backoff || c.timeout <= 0 {
		return fmt.Errorf("httpsink: %d attempts, backoff %v up to %v, timeout %v: want at least 1 attempt, 0 <= base <= max and a positive timeout",
			c.attempts, c.backoff, c.maxBackoff, c.timeout)
	}
	if c.log == nil {
		return errors.New("httpsink: nil logger")
	}
	return nil
}

// WithHTTPClient sets the HTTP client (default: one with its own
// transport, keeping up to 256 idle connections to the host, and not
// following redirects). Its Timeout should be 0: WithTimeout bounds each
// attempt.
func WithHTTPClient(hc *http.Client) Option { return optionFunc(func(c *config) { c.hc = hc }) }

// WithRetry sets the number of attempts per batch (at least 1; 1: no
// retry) and the backoff: a random wait in [0, min(max, base x 2^(n-1))]
// after the n-th failed attempt (full jitter), or the server's
// Retry-After if it is longer, capped at max. Defaults 6, 200 ms, 10 s.
func WithRetry(attempts int, base, max time.Duration) Option {
	return optionFunc(func(c *config) { c.attempts, c.backoff, c.maxBackoff = attempts, base, max })
}

// WithTimeout bounds each attempt, from sending the request to reading the
// response (default 30 s).
func WithTimeout(d time.Duration) Option { return optionFunc(func(c *config) { c.timeout = d }) }

// WithHeader adds a header to every request.
func WithHeader(key, value string) Option {
	return optionFunc(func(c *config) { c.header.Add(key, value) })
}

// WithLogger sets the logger of retries (default: discard).
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.log = l }) }

// New returns a Client that posts to rawURL (http:// or https://). User
// info in the URL is sent as HTTP basic authentication and never appears
// in errors or logs (nor do query values).
func New(rawURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("httpsink: invalid URL %s", Redact(rawURL))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("httpsink: URL %s: scheme must be http or https", Redact(rawURL))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("httpsink: URL %s: no host", Redact(rawURL))
	}
	cfg := config{attempts: DefaultAttempts, backoff: DefaultBackoff, maxBackoff: DefaultMaxBackoff,
		timeout: DefaultTimeout, header: http.Header{}, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{config: cfg}
	if u.User != nil {
		c.user = u.User.Username()
		c.pass, _ = u.User.Password()
		c.auth = true
		u.User = nil
	}
	c.target = u.String()
	c.display = Redact(rawURL)
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 256
		c.hc = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return c, nil
}

// String returns the URL as errors show it.
func (c *Client) String() string { return c.display }

// Redact returns rawURL without its user info and with query values
// replaced by "xxxxx", for messages. A URL that does not parse is shown as
// its scheme only.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		if i := strings.Index(rawURL, "://"); i >= 0 {
			return rawURL[:i+3] + "(unparsable URL)"
		}
		return "(unparsable URL)"
	}
	u.User = nil
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"xxxxx"}
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment = ""
	return u.String()
}

// StatusError is a response with a status other than 2xx.
type StatusError struct {
	URL    string // redacted
	Status int
	Body   string // the start of the response body, at most MaxErrorBody bytes
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("POST %s: HTTP %d %s", e.URL, e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Retryable reports whether the status is worth another attempt: 5xx, 408
// Request Timeout and 429 Too Many Requests.
func (e *StatusError) Retryable() bool {
	return e.Status >= 500 || e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests
}

// Send posts b's records as newline-delimited JSON with the batch's
// Idempotency-Key, retrying 5xx, 408, 429, timeouts and connection errors
// with backoff until the attempts run out or ctx ends. A nil error means
// the server answered 2xx to one attempt. Any other status fails at once
// with a *StatusError quoting the response body. Every attempt sends the
// same key, so a receiver that deduplicates on it applies the batch once.
func (c *Client) Send(ctx context.Context, b *async.Batch) error {
	body := make([]byte, 0, b.Bytes+len(b.Records))
	for _, r := range b.Records {
		body = append(body, r...)
		body = append(body, '\n')
	}
	var err error
	for attempt := 1; ; attempt++ {
		var retryAfter time.Duration
		retryAfter, err = c.post(ctx, b, body)
		if err == nil {
			return nil
		}
		var se *StatusError
		if errors.As(err, &se) && !se.Retryable() {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (after %d attempts: %v)", ctx.Err(), attempt, err)
		}
		if attempt >= c.attempts {
			return fmt.Errorf("%d attempts: %w", attempt, err)
		}
		d := min(c.backoff<<(attempt-1), c.maxBackoff)
		d = time.Duration(rand.Int64N(int64(d) + 1))
		if retryAfter > d {
			d = min(retryAfter, c.maxBackoff)
		}
		c.log.Warn("HTTP sink: retrying batch", "url", c.display, "key", b.Key, "attempt", attempt, "wait", d, "err", err)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (after %d attempts: %v)", ctx.Err(), attempt, err)
		case <-t.C:
		}
	}
}

// post makes one attempt. It returns the server's Retry-After, if any.
func (c *Client) post(ctx context.Context, b *async.Batch, body []byte) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.target, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("POST %s: %w", c.display, scrub(err))
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", ContentType)
	req.Header.Set("Idempotency-Key", b.Key)
	req.Header.Set("Filesink-Subtask", strconv.Itoa(b.Subtask))
	req.Header.Set("Filesink-Checkpoint", strconv.FormatUint(b.Checkpoint, 10))
	req.Header.Set("Filesink-Batch-Seq", strconv.FormatUint(b.Seq, 10))
	req.Header.Set("Filesink-Records", strconv.Itoa(len(b.Records)))
	if c.auth {
		req.SetBasicAuth(c.user, c.pass)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("POST %s: %w", c.display, scrub(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// Read the body so the connection is reused; an error reading it
		// does not undo the acknowledgement.
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return 0, nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody+1))
	text := strings.TrimSpace(strings.ToValidUTF8(string(msg), "?"))
	if len(msg) > MaxErrorBody {
		text = strings.TrimSpace(strings.ToValidUTF8(string(msg[:MaxErrorBody]), "?")) + "... (truncated)"
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	var after time.Duration
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			after = time.Duration(n) * time.Second
		}
	}
	return after, &StatusError{URL: c.display, Status: resp.StatusCode, Body: text}
}

// scrub drops the request URL that net/http puts in its errors (it may
// carry query values): the message names the URL itself, redacted.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ne, ok := ue.Err.(net.Error); ok && ne.Timeout() {
			return fmt.Errorf("timeout: %w", ue.Err)
		}
		return ue.Err
	}
	return err
}

// NewSink returns subtask's async.Sink sending through c, named
// "http/SUBTASK" (opts may rename it and set the sink id of its keys,
// workers, batch limits and guarantee).
func NewSink(c *Client, subtask int, opts ...async.Option) (*async.Sink, error) {
	return async.New(c, subtask, append([]async.Option{async.WithName("http")}, opts...)...)
}
