package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
)

// identity is what defines the job described by the flags (the job
// record kept in its state): the source and sink without credentials,
// the format with the options that change its bytes, the schema's
// fingerprint and the bucketing.
func (f *runFlags) identity(spec *pipeline.Job) (*recovery.Identity, error) {
	id := &recovery.Identity{Source: sourceIdentity(f.source)}
	if f.value.format == "avro" {
		id.Source += " values=avro"
	}
	if spec.Group != "" {
		// A job in group mode and one process on the same topics are two
		// jobs: their states must never mix.
		id.Source += " group=" + spec.Group
	}
	switch spec.Kind() {
	case pipeline.MySQLSink:
		id.Sink = mysqlIdentity(f.sink, f.mysql.table)
		id.Format = "mysql " + strings.ToLower(f.mysql.mode)
		return id, nil
	case pipeline.HTTPSink:
		id.Sink, id.Format = urlIdentity(f.sink), "jsonl"
		return id, nil
	case pipeline.IcebergSink:
		id.Sink = spec.Sink
		id.Format = "iceberg parquet compression=" + f.bulk.parquetCompression
		id.Bucketing = f.bucket
		if f.bulk.schema != "" {
			fp, err := schemaFingerprint(f.bulk.schema)
			if err != nil {
				return nil, err
			}
			id.Schema = fp
		}
		return id, nil
	}
	id.Sink = localIdentity(f.sink)
	if isS3(f.sink) {
		id.Sink = strings.TrimSuffix(f.sink, "/")
	}
	id.Format = f.format
	switch {
	case f.format == "parquet":
		id.Format += " compression=" + f.bulk.parquetCompression
	case f.format == "arrow":
		id.Format += " compression=" + f.bulk.arrowCompression
	case f.compression != "" && f.compression != "none":
		id.Format += " compression=" + f.compression
	}
	if f.format == "csv" && f.csvColumns != "" {
		id.Format += fmt.Sprintf(" columns=%s header=%t", f.csvColumns, f.csvHeader)
	}
	if f.bulk.schema != "" {
		fp, err := schemaFingerprint(f.bulk.schema)
		if err != nil {
			return nil, err
		}
		id.Schema = fp
	}
	id.Bucketing = f.bucket
	if f.bucket != "none" && f.tz != "UTC" {
		id.Bucketing += " tz=" + f.tz
	}
	return id, nil
}

// sourceIdentity is the source URI as the job record keeps it: a file
// source's absolute path, a Kafka source's topics (and partitions) without
// its brokers or credentials, a generator's URI as given.
func sourceIdentity(uri string) string {
	switch {
	case uri == "-":
		return "stdin"
	case isKafka(uri):
		rest := uri[strings.Index(uri, "://")+3:]
		_, topics, _ := strings.Cut(rest, "/")
		topics, query, _ := strings.Cut(topics, "?")
		id := "kafka://" + sortedList(topics)
		if q, err := url.ParseQuery(query); err == nil && q.Get("partitions") != "" {
			id += "?partitions=" + sortedList(q.Get("partitions"))
		}
		return id
	case strings.Contains(uri, "://") && !strings.HasPrefix(strings.ToLower(uri), "file://"):
		return urlIdentity(uri)
	}
	return localIdentity(uri)
}

func sortedList(s string) string {
	l := strings.Split(s, ",")
	sort.Strings(l)
	return strings.Join(l, ",")
}

// localIdentity is "file://" and the absolute, cleaned path of a local
// directory URI.
func localIdentity(uri string) string {
	p := uri
	if len(p) >= 7 && strings.EqualFold(p[:7], "file://") {
		p = p[7:]
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return "file://" + filepath.ToSlash(filepath.Clean(p))
}

// urlIdentity is a URL without user info, query or fragment.
func urlIdentity(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return "(unparsable URI)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// mysqlIdentity is "mysql://ADDRESS/DB/TABLE" of a MySQL sink, without
// its user and password.
func mysqlIdentity(uri, table string) string {
	rest := strings.TrimPrefix(uri, "mysql://")
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	rest, _, _ = strings.Cut(rest, "?")
	return "mysql://" + rest + "/" + table
}

// schemaFingerprint is "sha256:" and the hash of the schema file's JSON
// in canonical form (keys sorted, no spaces): reformatting the file does
// not change it.
func schemaFingerprint(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--schema: %w", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "", fmt.Errorf("--schema %s: %w", file, err)
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// startChecks sets what the run checks before it writes anything: the
// job's identity against its state's job record, and, for a file or S3
// sink, that an empty state does not meet an output that already holds
// published files (or, with --resume-from-output, what they hold).
func (f *runFlags) startChecks(j *job, spec *pipeline.Job) error {
	id, err := f.identity(spec)
	if err != nil {
		return err
	}
	j.cfg.Identity = id
	if f.allowChange != "" {
		j.cfg.AllowChange = strings.Split(f.allowChange, ",")
	}
	if j.target != nil && j.iceberg == nil {
		// An Iceberg sink's output is its table: start checks that.
		j.cfg.EarlyPublish = spec.PublishOnRoll()
		j.cfg.Output = j.target.backend
		if j.target.dead != nil {
			j.cfg.DeadLetter = j.target.dead
		}
	}
	if f.resumeFromOutput {
		if f.source == "-" {
			return usageError("run: --resume-from-output needs a replayable source; stdin is not one")
		}
		if isKafka(f.source) && kafkaStart(f.source, f.start) != "earliest" {
			return usageError("run: --resume-from-output reads the topics from their earliest offsets (the output does not record where the job started); drop --start %s", kafkaStart(f.source, f.start))
		}
		j.cfg.ResumeFromOutput = true
	}
	return nil
}

// kafkaStart is the start position a Kafka source URI and --start ask for
// ("earliest" when neither does).
func kafkaStart(uri, flagStart string) string {
	if flagStart != "" {
		return flagStart
	}
	if _, query, ok := strings.Cut(uri, "?"); ok {
		if q, err := url.ParseQuery(query); err == nil && q.Get("start") != "" {
			return q.Get("start")
		}
	}
	return "earliest"
}
