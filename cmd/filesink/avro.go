package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/source"
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

// decoder returns the value decoder the flags ask for (nil: raw values)
// and its registry, after checking that the source is Kafka.
func (v *valueFlags) decoder(srcURI string) (source.ValueDecoder, *avro.Registry, error) {
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
	reg, err := avro.NewRegistry([]string{u.String()}) // user info: basic auth
	if err != nil {
		return nil, nil, usageError("run: --schema-registry %s: %v", u.Redacted(), err)
	}
	return avro.NewDecoder(reg).Values(), reg, nil
}

// registrySchema makes the bulk formats' schema document of the records
// from the newest schema of the topic's value subject (TOPIC-value) when
// --value-format avro has no --schema; timestampUnit "us" for an Iceberg
// table. It returns nil when there is nothing to do.
func (f *runFlags) registrySchema(ctx context.Context, reg *avro.Registry, timestampUnit string) ([]byte, error) {
	if reg == nil || f.bulk.schema != "" {
		return nil, nil
	}
	rest := f.source[strings.Index(f.source, "://")+3:]
	_, topics, _ := strings.Cut(rest, "/")
	topics, _, _ = strings.Cut(topics, "?")
	if topics == "" || strings.Contains(topics, ",") {
		return nil, usageError("run: --value-format avro without --schema takes the schema of one topic's values from the registry; give --schema FILE for %q", topics)
	}
	s, id, err := reg.Latest(ctx, topics+"-value")
	if err != nil {
		return nil, fmt.Errorf("run: the records' schema: %w", err)
	}
	doc, err := avro.SchemaDoc(s, timestampUnit)
	if err != nil {
		return nil, usageError("run: schema %d of subject %s-value: %v", id, topics, err)
	}
	return doc, nil
}

// values sets up --value-format: the decoder, and with a bulk or Iceberg
// sink and no --schema, the schema document from the registry.
func (f *runFlags) values(ctx context.Context, spec *pipeline.Job) error {
	dec, reg, err := f.value.decoder(f.source)
	if err != nil || dec == nil {
		return err
	}
	if spec.Group != "" {
		return usageError("run: --value-format avro does not apply in group mode yet")
	}
	f.valueDec = dec
	unit := ""
	switch {
	case spec.Kind() == pipeline.IcebergSink:
		unit = "us"
	case !spec.IsBulkFormat():
		return nil
	}
	f.bulk.doc, err = f.registrySchema(ctx, reg, unit)
	return err
}
