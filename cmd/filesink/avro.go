package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/filesink/filesink/cmd/filesink/internal/metrics"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/source/avro"
)

// valueFlags are the settings of how a source's record values are read.
type valueFlags struct {
	format, keyFormat, registry string
}

// keyColumn is the column --key-format avro writes each record's key in.
const keyColumn = "key"

func (v *valueFlags) register(fs *flag.FlagSet) {
	enumVar(fs, &v.format, "value-format", "raw", "kafka: how record values are read (`FORMAT`): raw (as they are: JSON for the bulk formats) or avro "+
		"(the Confluent wire format, schemas from --schema-registry, decoded into JSON; a value that does not decode is a bad record)", "raw", "avro")
	fs.StringVar(&v.registry, "schema-registry", "", "with --value-format avro: the Schema Registry `URL` (user info is basic auth; "+
		"keep the password off the command line: give the URL in FILESINK_SCHEMA_REGISTRY or --config, or password_file=FILE; "+
		"TLS as for kafka://: tls_ca=FILE&tls_cert=FILE&tls_key=FILE&tls_server_name=NAME&tls_insecure=true); "+
		"while it is unreachable, requests are retried with backoff")
	enumVar(fs, &v.keyFormat, "key-format", "raw", "kafka, with --value-format avro: how record keys are read (`FORMAT`): raw (not written) or avro "+
		"(the Confluent wire format, decoded into the first column, "+keyColumn+"; typed from the topic's TOPIC-key subject; a key that does not decode makes the record bad)", "raw", "avro")
}

// decoder returns the Avro decoder the flags ask for (nil: raw values)
// and its registry, after checking that the source is Kafka. The registry
// logs to log; retried attempts count in m (nil: none).
func (v *valueFlags) decoder(srcURI string, log *slog.Logger, m *metrics.Metrics) (*avro.Decoder, *avro.Registry, error) {
	if v.format != "avro" {
		if v.registry != "" {
			return nil, nil, usageError("run: --schema-registry applies with --value-format avro only")
		}
		return nil, nil, nil
	}
	if !isKafka(srcURI) {
		return nil, nil, usageError("run: --value-format avro reads kafka:// sources only (lines of a file cannot hold binary Avro values)")
	}
	if v.registry == "" {
		return nil, nil, usageError("run: --value-format avro needs --schema-registry URL")
	}
	regURL, clientOpts, err := registryClient(v.registry)
	if err != nil {
		return nil, nil, err
	}
	opts := []avro.Option{avro.ClientOpts(clientOpts...), avro.WithLogger(log)}
	if m != nil {
		opts = append(opts, avro.WithRetryHook(m.RegistryRetry))
	}
	reg, err := avro.NewRegistry([]string{regURL}, opts...)
	if err != nil {
		return nil, nil, usageError("run: --schema-registry %s: %v", redactURI(v.registry), err)
	}
	return avro.NewDecoder(reg), reg, nil
}

// registryParams are the query parameters of --schema-registry, named as
// those of a kafka:// source: TLS files and settings, and a file holding
// the basic auth password.
var registryParams = []string{"tls_ca", "tls_cert", "tls_key", "tls_server_name", "tls_insecure", "password_file"}

// registryClient parses a --schema-registry URL into the registry's URL,
// without user info or parameters, and the client's options: basic auth
// from the user info (the password from it or from password_file), TLS
// from the tls_* parameters. Errors never show a password.
func registryClient(raw string) (string, []sr.ClientOpt, error) {
	bad := func(format string, args ...any) error {
		return usageError("run: --schema-registry %s: %s", redactURI(raw), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", nil, bad("want http(s)://HOST:PORT[?%s=...]", strings.Join(registryParams, "=...&"))
	}
	q := u.Query()
	for name, vals := range q {
		if !slices.Contains(registryParams, name) {
			return "", nil, bad("unknown parameter %s (known: %s)", name, strings.Join(registryParams, ", "))
		}
		if len(vals) > 1 {
			return "", nil, bad("parameter %s given %d times", name, len(vals))
		}
	}
	var opts []sr.ClientOpt
	if u.User != nil || q.Has("password_file") {
		user, pass, err := registryAuth(u.User, q.Get("password_file"))
		if err != nil {
			return "", nil, bad("%v", err)
		}
		opts = append(opts, sr.BasicAuth(user, pass))
	}
	tc, err := registryTLS(q, u.Scheme)
	if err != nil {
		return "", nil, bad("%v", err)
	}
	if tc != nil {
		opts = append(opts, sr.DialTLSConfig(tc))
	}
	u.User, u.RawQuery = nil, ""
	return u.String(), opts, nil
}

// registryAuth returns the basic auth user and password of the user info
// ui and the password file passFile (a trailing newline removed).
func registryAuth(ui *url.Userinfo, passFile string) (user, pass string, err error) {
	if ui == nil || ui.Username() == "" {
		return "", "", errors.New("password_file needs a user: https://USER@HOST:PORT?password_file=FILE")
	}
	pass, hasPass := ui.Password()
	if passFile == "" {
		return ui.Username(), pass, nil
	}
	if hasPass {
		return "", "", errors.New("password given both in the user info and in password_file")
	}
	b, err := os.ReadFile(passFile)
	if err != nil {
		return "", "", fmt.Errorf("password_file: %v", err) // names the file, not its content
	}
	return ui.Username(), strings.TrimRight(string(b), "\r\n"), nil
}

// registryTLS returns the TLS configuration of the tls_* parameters of q,
// nil if there are none (an error for a scheme other than https). File errors name the file, never its content.
func registryTLS(q url.Values, scheme string) (*tls.Config, error) {
	if !q.Has("tls_ca") && !q.Has("tls_cert") && !q.Has("tls_key") && !q.Has("tls_server_name") && !q.Has("tls_insecure") {
		return nil, nil
	}
	if scheme != "https" {
		return nil, errors.New("the tls_* parameters need an https:// URL")
	}
	insecure := false
	if v := q.Get("tls_insecure"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("tls_insecure=%s: want true or false", v)
		}
		insecure = b
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: q.Get("tls_server_name"), InsecureSkipVerify: insecure} //nolint:gosec // opt-in, documented as test only
	if f := q.Get("tls_ca"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("tls_ca: %v", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls_ca %s: no PEM certificate in it", f)
		}
	}
	cert, key := q.Get("tls_cert"), q.Get("tls_key")
	if (cert == "") != (key == "") {
		return nil, errors.New("give both tls_cert and tls_key, or neither")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate %s / key %s: %v", cert, key, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// avroColumns is how the columns of a bulk or Iceberg sink follow the
// registry when --value-format avro has no --schema: the decoder checks
// every new schema against them (avro.Decoder.Follow).
type avroColumns struct {
	dec     *avro.Decoder
	reg     *avro.Registry
	subject string // TOPIC-value
	latest  int    // the subject's newest schema id at start
	pending bool   // Follow is still to be called (an Iceberg sink: after reading the table's columns)
}

// valueSubject is the registry subject of the source topic's values
// (TOPIC-value), for the one topic the source reads.
func (f *runFlags) valueSubject() (string, error) {
	rest := f.source[strings.Index(f.source, "://")+3:]
	_, topics, _ := strings.Cut(rest, "/")
	topics, _, _ = strings.Cut(topics, "?")
	if topics == "" || strings.Contains(topics, ",") {
		return "", usageError("run: --value-format avro without --schema takes the schema of one topic's values from the registry; give --schema FILE for %q", topics)
	}
	return topics + "-value", nil
}

// values sets up --value-format: the decoder, and with a bulk or Iceberg
// sink and no --schema, columns that follow the registry, from the
// newest schema of the topic's value subject (an Iceberg sink merges the
// table's columns in setupIceberg).
func (f *runFlags) values(ctx context.Context, spec *pipeline.Job, log *slog.Logger) error {
	dec, reg, err := f.value.decoder(f.source, log, f.metrics)
	if err == nil && dec == nil && f.value.keyFormat == "avro" {
		err = usageError("run: --key-format avro needs --value-format avro (and --schema-registry)")
	}
	if err != nil || dec == nil {
		return err
	}
	if spec.Group != "" {
		return usageError("run: --value-format avro does not apply in group mode yet")
	}
	f.valueDec = dec.Values()
	if f.metrics != nil {
		f.valueDec, f.valueCounts = f.metrics.Values(f.valueDec)
	}
	if f.value.keyFormat == "avro" {
		f.decodeOpts = []source.DecodeOption{source.WithKeys(avro.NewDecoder(reg).Values(), keyColumn)}
	}
	iceberg := spec.Kind() == pipeline.IcebergSink
	if f.bulk.schema != "" || !(iceberg || spec.IsBulkFormat()) {
		return nil
	}
	subject, err := f.valueSubject()
	if err != nil {
		return err
	}
	_, id, err := reg.Latest(ctx, subject)
	if err != nil {
		if errors.Is(err, avro.ErrNotAvro) {
			return usageError("run: the records' schema: %v", err)
		}
		return fmt.Errorf("run: the records' schema: %w", err)
	}
	f.avro = &avroColumns{dec: dec, reg: reg, subject: subject, latest: id, pending: true}
	if iceberg {
		return nil
	}
	return f.followRegistry(ctx, nil, "")
}

// followRegistry starts the columns from doc (nil: none) merged with the
// subject's newest schema, with timestampUnit as avro.SchemaDoc's, and
// makes them the bulk schema document.
func (f *runFlags) followRegistry(ctx context.Context, doc []byte, timestampUnit string) error {
	a := f.avro
	a.pending = false
	if f.value.keyFormat == "avro" {
		subject := strings.TrimSuffix(a.subject, "-value") + "-key"
		key, id, err := a.reg.Latest(ctx, subject)
		if err != nil {
			return fmt.Errorf("run: the records' key schema: %w", err)
		}
		if doc, err = avro.KeyColumn(doc, keyColumn, key, timestampUnit); err != nil {
			return usageError("run: schema %d of subject %s: %v", id, subject, err)
		}
	}
	if err := a.dec.Follow(a.subject, doc, timestampUnit); err != nil {
		return err
	}
	doc, err := a.dec.Accept(ctx, a.latest)
	var ie *avro.IncompatibleError
	if errors.As(err, &ie) {
		return usageError("run: the newest schema of subject %s (id %d) cannot be written as the table's columns: field %s %s", a.subject, a.latest, ie.Field, ie.Why)
	}
	if err != nil {
		return usageError("run: schema %d of subject %s: %v", a.latest, a.subject, err)
	}
	f.bulk.doc = doc
	return nil
}
