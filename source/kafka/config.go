package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Defaults.
const (
	// DefaultConnectTimeout bounds Open's first contact with the brokers.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultFetchMaxBytes is the most data one fetch asks a broker for.
	DefaultFetchMaxBytes = 16 << 20
	// DefaultFetchMaxPartitionBytes is the most data one fetch asks for
	// from one partition (Kafka's own default): fetches stay small enough
	// that records flow to the sink while the next fetch is on its way.
	DefaultFetchMaxPartitionBytes = 1 << 20
	// DefaultClientID is the client id the brokers see.
	DefaultClientID = "filesink"
	// defaultProbeInterval: in bounded mode, after this long with nothing
	// fetched, Next checks directly whether the partitions it waits for
	// hold only aborted records below their end offsets.
	defaultProbeInterval = 500 * time.Millisecond
)

// Start modes (Config.Start).
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

// SASL mechanisms (SASLConfig.Mechanism).
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Config configures a Kafka source. Brokers and Topics are required; the
// zero value of every other field selects its default.
type Config struct {
	// Brokers are the bootstrap brokers, "host:port".
	Brokers []string
	// Topics are the topics to read, each at least once; their order does
	// not matter.
	Topics []string
	// Partitions, if not empty, selects these partitions of every topic;
	// each must exist in every topic. Empty means every partition.
	Partitions []int32
	// Start is where a first run (one with no position) starts: "earliest"
	// (the default: the log start), "latest" (the last stable offset: only
	// records committed after the start), or a time, RFC 3339 or Unix
	// milliseconds (the first record whose timestamp is at or after it).
	// It is resolved to offsets once, at the first start, and the offsets
	// are kept in the position; a resumed run ignores Start.
	Start string
	// Bounded makes the source stop at the last stable offset of each
	// partition as of the first start, recorded in the position: Next
	// returns io.EOF once every partition reached it, on every restart
	// alike. Unbounded (the default), Next waits for new records.
	Bounded bool
	// Group, if set, is a consumer group that CommitToGroup commits
	// checkpointed offsets to, for monitoring (lag) only (the URI
	// parameter monitor_group=). The source never joins it nor reads
	// offsets from it. It has nothing to do with JoinGroup's group, which
	// shares partitions among processes.
	Group string
	// ClientID is the client id the brokers see (DefaultClientID if empty).
	ClientID string
	// ConnectTimeout bounds Open's first contact with the brokers
	// (DefaultConnectTimeout if 0).
	ConnectTimeout time.Duration
	// FetchMaxBytes is the most data one fetch asks a broker for
	// (DefaultFetchMaxBytes if 0).
	FetchMaxBytes int32
	// FetchMaxPartitionBytes is the most data one fetch asks for from one
	// partition (Kafka's max.partition.fetch.bytes; if 0, the smaller of
	// DefaultFetchMaxPartitionBytes and FetchMaxBytes). A broker returns
	// at least one record batch however large.
	FetchMaxPartitionBytes int32
	// TLS, if not nil, connects with TLS.
	TLS *TLSConfig
	// SASL, if not nil, authenticates with SASL.
	SASL *SASLConfig
	// Logger, if not nil, receives the Kafka client's log: its internals
	// (connections, group joins, heartbeats, rebalances) at Debug level,
	// its warnings and errors at Warn and Error, but for those about a
	// group session it rejoins by itself (Debug).
	Logger *slog.Logger

	// probeInterval overrides defaultProbeInterval (tests).
	probeInterval time.Duration
}

// TLSConfig configures TLS. The zero value verifies the brokers with the
// system roots.
type TLSConfig struct {
	// CAFile is a PEM file of the certificate authorities that sign the
	// brokers' certificates (system roots if empty).
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// brokers that require one. Both or neither.
	CertFile, KeyFile string
	// ServerName overrides the name verified in the brokers' certificates
	// (by default the host of the address dialed).
	ServerName string
	// InsecureSkipVerify accepts any broker certificate. For tests only.
	InsecureSkipVerify bool
}

// SASLConfig configures SASL authentication.
type SASLConfig struct {
	// Mechanism is SASLPlain, SASLScramSHA256 or SASLScramSHA512
	// (case-insensitive).
	Mechanism string
	// User and Password are the credentials. Password is a Secret: it
	// formats as "REDACTED", so it does not leak through %v of a Config.
	User     string
	Password Secret
}

// Secret is a string that does not print: String, GoString, LogValue and
// MarshalText all return "REDACTED" (or "" when empty).
type Secret string

func (s Secret) redacted() string {
	if s == "" {
		return ""
	}
	return "REDACTED"
}

// String returns "REDACTED".
func (s Secret) String() string { return s.redacted() }

// GoString returns "REDACTED", for %#v.
func (s Secret) GoString() string { return strconv.Quote(s.redacted()) }

// LogValue returns "REDACTED" for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.redacted()) }

// MarshalText returns "REDACTED", so that JSON or YAML dumps of a Config
// do not carry the password.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.redacted()), nil }

// Format makes every verb (%s, %v, %q, %x...) print "REDACTED".
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = f.Write([]byte(s.GoString()))
		return
	}
	_, _ = f.Write([]byte(s.redacted()))
}

// startSpec is a parsed Config.Start.
type startSpec struct {
	mode  string // StartEarliest, StartLatest or "time"
	milli int64  // for "time"
}

func (s startSpec) String() string {
	if s.mode == "time" {
		return time.UnixMilli(s.milli).UTC().Format(time.RFC3339Nano)
	}
	return s.mode
}

// parseStart parses Config.Start.
func parseStart(v string) (startSpec, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", StartEarliest:
		return startSpec{mode: StartEarliest}, nil
	case StartLatest:
		return startSpec{mode: StartLatest}, nil
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms < 0 {
			return startSpec{}, fmt.Errorf("start %q: negative Unix milliseconds", v)
		}
		return startSpec{mode: "time", milli: ms}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return startSpec{}, fmt.Errorf("start %q: want earliest, latest, an RFC 3339 time such as 2026-01-02T15:04:05Z, or Unix milliseconds", v)
	}
	if t.UnixMilli() < 0 {
		return startSpec{}, fmt.Errorf("start %q: before 1970", v)
	}
	return startSpec{mode: "time", milli: t.UnixMilli()}, nil
}

// topicRE matches legal Kafka topic names.
var topicRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// validated is a Config that passed validate, with defaults filled in.
type validated struct {
	Config
	start startSpec
}

// validate checks c as a whole and fills in defaults. Every problem is
// reported, not only the first.
func (c Config) validate() (validated, error) {
	v := validated{Config: c}
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no brokers"))
	}
	for _, b := range c.Brokers {
		if b == "" || strings.ContainsAny(b, " /?#@,") {
			errs = append(errs, fmt.Errorf("broker %q: want host:port", b))
		}
	}
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("no topics"))
	}
	v.Topics = slices.Clone(c.Topics)
	slices.Sort(v.Topics)
	for i, t := range v.Topics {
		if !topicRE.MatchString(t) || t == "." || t == ".." {
			errs = append(errs, fmt.Errorf("topic %q: not a valid Kafka topic name (letters, digits, '.', '_', '-', at most 249)", t))
		} else if i > 0 && v.Topics[i-1] == t {
			errs = append(errs, fmt.Errorf("topic %q given twice", t))
		}
	}
	v.Partitions = slices.Clone(c.Partitions)
	slices.Sort(v.Partitions)
	for i, p := range v.Partitions {
		if p < 0 {
			errs = append(errs, fmt.Errorf("partition %d: negative", p))
		} else if i > 0 && v.Partitions[i-1] == p {
			errs = append(errs, fmt.Errorf("partition %d given twice", p))
		}
	}
	var err error
	if v.start, err = parseStart(c.Start); err != nil {
		errs = append(errs, err)
	}
	if c.Group != "" && len(c.Group) > 249 {
		errs = append(errs, fmt.Errorf("group %q: longer than 249 bytes", c.Group))
	}
	if v.ClientID == "" {
		v.ClientID = DefaultClientID
	}
	if c.ConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("connect timeout %v: negative", c.ConnectTimeout))
	} else if c.ConnectTimeout == 0 {
		v.ConnectTimeout = DefaultConnectTimeout
	}
	if c.FetchMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("fetch max bytes %d: negative", c.FetchMaxBytes))
	} else if c.FetchMaxBytes == 0 {
		v.FetchMaxBytes = DefaultFetchMaxBytes
	}
	switch {
	case c.FetchMaxPartitionBytes < 0:
		errs = append(errs, fmt.Errorf("fetch max partition bytes %d: negative", c.FetchMaxPartitionBytes))
	case c.FetchMaxPartitionBytes == 0:
		v.FetchMaxPartitionBytes = min(v.FetchMaxBytes, DefaultFetchMaxPartitionBytes)
	case c.FetchMaxPartitionBytes > v.FetchMaxBytes:
		errs = append(errs, fmt.Errorf("fetch max partition bytes %d: more than the fetch max bytes %d", c.FetchMaxPartitionBytes, v.FetchMaxBytes))
	}
	if v.probeInterval <= 0 {
		v.probeInterval = defaultProbeInterval
	}
	if t := c.TLS; t != nil {
		if (t.CertFile == "") != (t.KeyFile == "") {
			errs = append(errs, errors.New("tls: give both a certificate file and a key file, or neither"))
		}
	}
	if s := c.SASL; s != nil {
		switch strings.ToUpper(s.Mechanism) {
		case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		default:
			errs = append(errs, fmt.Errorf("sasl mechanism %q: want %s, %s or %s", s.Mechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512))
		}
		if s.User == "" {
			errs = append(errs, errors.New("sasl: no user"))
		}
	}
	if len(errs) > 0 {
		return v, fmt.Errorf("kafka: bad configuration: %w", errors.Join(errs...))
	}
	return v, nil
}

// adminClient returns a client made with opts (not changed) for metadata
// and offset listings, and the hook that keeps why the brokers could not
// be reached (for listTopics).
func adminClient(opts []kgo.Opt) (*kgo.Client, *connHook, error) {
	hook := &connHook{}
	cl, err := kgo.NewClient(append(slices.Clone(opts), kgo.WithHooks(hook))...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: new client: %w", err)
	}
	return cl, hook, nil
}

// clientOpts returns the franz-go options common to every client of c.
func (c validated) clientOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.ClientID),
		kgo.DialTimeout(c.ConnectTimeout),
	}
	if c.TLS != nil {
		tc, err := c.TLS.build()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if s := c.SASL; s != nil {
		var m sasl.Mechanism
		switch strings.ToUpper(s.Mechanism) {
		case SASLPlain:
			m = plain.Auth{User: s.User, Pass: string(s.Password)}.AsMechanism()
		case SASLScramSHA256:
			m = scram.Auth{User: s.User, Pass: string(s.Password)}.AsSha256Mechanism()
		case SASLScramSHA512:
			m = scram.Auth{User: s.User, Pass: string(s.Password)}.AsSha512Mechanism()
		}
		opts = append(opts, kgo.SASL(m))
	}
	if c.Logger != nil {
		opts = append(opts, kgo.WithLogger(slogLogger{c.Logger}))
	}
	return opts, nil
}

// build makes the tls.Config. File errors name the file, never its
// contents.
func (t *TLSConfig) build() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // opt-in, documented as test only
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka: tls CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka: tls CA file %s: no PEM certificate in it", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			// The error of LoadX509KeyPair does not quote key material.
			return nil, fmt.Errorf("kafka: tls client certificate %s / key %s: %w", t.CertFile, t.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// slogLogger adapts a *slog.Logger to kgo.Logger. What the Kafka client
// logs at its Info level are its internals (connections, metadata, group
// joins, heartbeats, rebalances, partitions assigned): they go to Debug,
// where the group's own log (lanes assigned, revoked, lost) says once per
// rebalance what they meant for the job. The client's warnings and errors
// stay warnings and errors, but for those about a group session that ended
// and that it rejoins by itself (a rebalance, a member generation gone
// stale) and about its own shutdown: Debug too. The client's Debug level
// (every request) is never asked for.
type slogLogger struct{ l *slog.Logger }

// Level is the most detailed level the client is to log: Info when the
// logger takes Debug, else Warn (the client does not format what would be
// dropped).
func (s slogLogger) Level() kgo.LogLevel {
	if s.l.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

// Log logs one message of the client. Safe for concurrent use.
func (s slogLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l := slog.LevelDebug
	switch {
	case level != kgo.LogLevelError && level != kgo.LogLevelWarn:
	case routineClientErr(keyvals):
	case level == kgo.LogLevelError:
		l = slog.LevelError
	default:
		l = slog.LevelWarn
	}
	s.l.Log(context.Background(), l, "kafka: "+msg, keyvals...)
}

// routineClientErr reports whether the "err" of a client message is one
// the client recovers from by itself without any effect on the job beyond
// what the group logs: the end of a group session (a rebalance, a
// generation or member id gone stale, a coordinator that moved), or the
// client's own shutdown.
func routineClientErr(keyvals []any) bool {
	for i := 0; i+1 < len(keyvals); i += 2 {
		if k, ok := keyvals[i].(string); !ok || k != "err" {
			continue
		}
		err, ok := keyvals[i+1].(error)
		if !ok {
			return false
		}
		return rejoinErr(err) || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed)
	}
	return false
}

// rejoinErr reports whether err ended a group session in a way that a new
// join of the group settles: the member goes on with the partitions it is
// assigned then.
func rejoinErr(err error) bool {
	for _, ke := range []*kerr.Error{kerr.RebalanceInProgress, kerr.IllegalGeneration, kerr.UnknownMemberID, kerr.MemberIDRequired,
		kerr.FencedMemberEpoch, kerr.StaleMemberEpoch, kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress} {
		if errors.Is(err, ke) {
			return true
		}
	}
	return false
}
