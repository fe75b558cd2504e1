package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/source/avro"
)

// valueFlags are the settings of how a source's record values are read.
type valueFlags struct {
	format, registry string
}

func (v *valueFlags) register(fs *flag.FlagSet) {
	enumVar(fs, &v.format, "value-format", "raw", "kafka: how record values are read (`FORMAT`): raw (as they are: JSON for the bulk formats) or avro "+
		"(the Confluent wire format, schemas from --schema-registry, decoded into JSON; a value that does not decode is a bad record)", "raw", "avro")
	fs.StringVar(&v.registry, "schema-registry", "", "with --value-format avro: the Schema Registry `URL` (user info is basic auth; "+
		"keep the password off the command line: give the URL in FILESINK_SCHEMA_REGISTRY or --config)")
}

// decoder returns the Avro decoder the flags ask for (nil: raw values)
// and its registry, after checking that the source is Kafka.
func (v *valueFlags) decoder(srcURI string) (*avro.Decoder, *avro.Registry, error) {
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
	u, err := url.Parse(v.registry)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, usageError("run: --schema-registry %s: want http(s)://HOST:PORT", redactURI(v.registry))
	}
	var opts []sr.ClientOpt
	if u.User != nil {
		pass, _ := u.User.Password()
		opts = append(opts, sr.BasicAuth(u.User.Username(), pass))
		u.User = nil
	}
	reg, err := avro.NewRegistry([]string{u.String()}, opts...)
	if err != nil {
		return nil, nil, usageError("run: --schema-registry %s: %v", u.Redacted(), err)
	}
	return avro.NewDecoder(reg), reg, nil
}

// avroColumns is how the columns of a bulk or Iceberg sink follow the
// registry when --value-format avro has no --schema: the decoder checks
// every new schema against them (avro.Decoder.Follow).
type avroColumns struct {
	dec     *avro.Decoder
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
func (f *runFlags) values(ctx context.Context, spec *pipeline.Job) error {
	dec, reg, err := f.value.decoder(f.source)
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
		return fmt.Errorf("run: the records' schema: %w", err)
	}
	f.avro = &avroColumns{dec: dec, subject: subject, latest: id, pending: true}
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
