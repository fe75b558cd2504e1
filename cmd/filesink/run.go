package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/filesink/filesink/bucketing"

	"github.com/filesink/filesink/cmd/filesink/internal/metrics"
	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/committer/mysqlxa"
	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/filesink/bulk"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/sinks/async"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/source/avro"
	"github.com/filesink/filesink/source/kafka"
	"github.com/filesink/filesink/vfs"
)

const runSynopsis = `--source URI --sink URI [flags]

Reads records from the source and writes them to the sink exactly once:
records become visible only when the checkpoint that covers them is
committed. Killed at any instant, the same command resumes from the last
checkpoint and publishes nothing twice. At the end of a bounded source
(and on SIGTERM/SIGINT) it takes a final checkpoint, commits it and exits 0.

With --group NAME (group mode), every process started with the same
command joins Kafka consumer group NAME and runs the partitions it is
assigned, each with its own part files and a state object whose
conditional writes fence a process that lost the partition: exactly once
through rebalances, crashes and paused processes (kafka:// source, s3://
sink and state; see docs/scale-out.md).

Sources:
  file://DIR or DIR      every regular file under DIR, in lexical order, one record per line
                         (LF or CRLF; empty lines skipped; longest --max-record-size); a file
                         added later that sorts before the checkpoint's file is an error
  gen://?count=N&seed=S  N generated JSON records with a unique "id" (also: size, keys, start, step)
  kafka://HOST:PORT[,HOST:PORT]/TOPIC[,TOPIC2][?partitions=0,1&start=earliest|latest|TIME&bounded=true&monitor_group=G]
                         Kafka topics, read_committed; offsets live in the checkpoints (not in a
                         consumer group: monitor_group=G only receives committed offsets, for
                         monitoring; to share partitions among processes use --group NAME);
                         --bounded stops at the end offsets seen at the first start; TLS: tls=true,
                         tls_ca=FILE...; SASL: sasl=plain|scram-sha-256|scram-sha-512 with
                         sasl_user=U&sasl_password_file=FILE (a password in the URI shows in ps)
                         --value-format avro --schema-registry URL: Avro values in the Confluent
                         wire format, decoded with the registry's schemas (the bulk formats and
                         Iceberg take their columns from the topic's TOPIC-value subject)
  -                      stdin; NOT replayable: after a crash, records read since the
                         last checkpoint are lost (the others are exactly once)
Sinks:
  file://OUT or OUT      part files under the directory OUT
  s3://BUCKET/PREFIX     objects under PREFIX, each part file a multipart upload
                         (credentials: the standard AWS chain; see --s3-* flags)
  'mysql://USER:PASS@tcp(HOST:PORT)/DB'
                         rows of --mysql-table, one XA transaction branch per subtask and
                         checkpoint (prepared in phase 1, XA COMMIT in phase 2); JSON fields
                         map to columns; --mysql-mode insert|upsert|increment; needs --state DIR
                         (the XA branches are named by --job, kept in DIR/JOB; see filesink xa);
                         with --parallelism N in upsert/increment mode, records go to the
                         subtask their --mysql-key hashes to; a record the server rejects is
                         named in the error, or with --on-bad-record skip written to
                         --mysql-dead-letter-table in the same XA branch; keep the password off
                         the command line: FILESINK_MYSQL_PASSWORD holds the password of a DSN
                         without one (or give the whole --sink in FILESINK_SINK or --config)
  iceberg://NAMESPACE.TABLE
                         an Apache Iceberg table: Parquet data files with the table's field ids
                         under its location, one append snapshot per checkpoint, exactly once
                         per job and lane; --warehouse DIR or s3://BUCKET/PREFIX (required),
                         --catalog URI (default: the embedded SQLite catalog WAREHOUSE/catalog.db;
                         also mysql://DSN, postgres://URL, sqlite:PATH), --schema FILE (a gen://
                         source implies one), --bucket none|field:COL|eventtime:COL[:day|:hour]
                         as the partitioning; the table is made on first use (docs/sink-iceberg.md)
  http://HOST:PORT/PATH or https://...
                         POST batches of records as JSON lines (application/x-ndjson) from
                         --http-workers goroutines per subtask, each with an Idempotency-Key
                         header deterministic for (job, subtask, batch sequence, records);
                         retries 5xx/408/429/timeouts/connection errors with backoff; a 4xx
                         fails the job with the response body; needs --state DIR. User info
                         is sent as basic auth and never logged

Delivery guarantees (--guarantee; asking for one a sink lacks is an error):
  exactly-once           file, S3, Iceberg and MySQL sinks (their default; Iceberg's and MySQL's only one): two-phase
                         commit, records visible only when their checkpoint is decided
  at-least-once          file and S3 sinks: each part file is published as soon as it rolls,
                         without waiting for its checkpoint (lower latency); after a crash the
                         records since the last checkpoint are written again, so those already
                         in a file published early appear twice
                         http(s) sinks (their default): a checkpoint completes only when the
                         receiver acknowledged every batch before it; after a crash the records
                         since the last checkpoint are sent again, with the same Idempotency-Key
                         (a receiver that applies each key once sees every record once; a batch
                         cut by --http-linger in the interrupted checkpoint may come back
                         under another key)
  at-most-once           http(s) sinks: fire and forget: the checkpoint records the source
                         position without waiting for the receiver, one attempt per batch; a
                         crash or a failed batch loses records, none is sent twice

Formats (file and S3 sinks):
  jsonl, csv, text       row formats; --compression none|gzip|zstd compresses them
  parquet, arrow         columnar part files (Parquet; Arrow IPC file format) of the records
                         (JSON objects) as --schema FILE describes them:
                           {"fields": [{"name": "id", "type": "int64", "nullable": false},
                                       {"name": "ts", "type": "timestamp_ms"}, ...]}
                         types: int32 int64 float32 float64 bool string binary timestamp_ms
                         timestamp_us date decimal(P,S) list<T> map<string,T>
                         struct (with "fields");
                         nullable defaults to true. A part file is written whole (row groups
                         and a footer), so it rolls at every checkpoint, whatever
                         --roll-on-checkpoint says, and also on --part-size, --rollover and
                         --inactivity; a crash discards the part being written and its records
                         come again from the source. A record that does not fit the schema, or
                         has a key that is not in it, is a bad record (--on-bad-record); with
                         --unknown-fields drop such keys are dropped and counted in the log
                         instead. The format compresses its own pages
                         (--parquet-compression, --arrow-compression): --compression is an
                         error with it`

type runFlags struct {
	source, sink, state, format, compression, bucket, tz, prefix string
	partSize, budget, csvColumns, onBad, logLevel, progress      string
	memLimit, maxRecord, invalidUTF8                             string
	interval, rollover, inactivity                               time.Duration
	parallelism, retain, maxOpenFiles                            int
	csvHeader, rollOnCheckpoint, bounded, successFile, directIO  bool
	lateness                                                     time.Duration
	checkpointEvery                                              int64
	start                                                        string
	s3                                                           s3Flags
	bulk                                                         bulkFlags
	mysql                                                        mysqlFlags
	http                                                         httpFlags
	iceberg                                                      icebergFlags
	value                                                        valueFlags
	guarantee                                                    string
	group                                                        groupFlags
	allowChange                                                  string
	resumeFromOutput                                             bool
	config, metricsAddr                                          string

	cmdline     map[string]bool       // the flags given on the command line
	icebergJob  *icebergJob           // group mode: the open catalog of an iceberg:// sink
	valueDec    source.ValueDecoder   // --value-format avro: the records' decoder (nil: raw values)
	avro        *avroColumns          // columns that follow the registry (nil: --schema or raw values)
	valueCounts *metrics.ValueCounts  // with --metrics-addr and decoded values
	decodeOpts  []source.DecodeOption // --key-format avro: the keys into the records
	metrics     *metrics.Metrics      // nil without --metrics-addr
}

// register defines the run flags on fs.
func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.source, "source", "", "source `URI` (required): file://DIR, DIR, gen://?count=N, kafka://HOST:PORT/TOPIC, -")
	fs.StringVar(&f.sink, "sink", "", "sink `URI` (required): file://OUT, OUT, s3://BUCKET/PREFIX, iceberg://NAMESPACE.TABLE, mysql://USER:PASS@tcp(HOST:PORT)/DB or http(s)://HOST:PORT/PATH")
	fs.StringVar(&f.state, "state", "", "checkpoint store: DIR or s3://BUCKET/PREFIX (default OUT/_filesink, s3://BUCKET/PREFIX/_filesink; required with a mysql:// sink)")
	fs.BoolVar(&f.bounded, "bounded", false, "Kafka: stop at the end offsets seen at the first start, then exit 0 (same as bounded=true in the URI)")
	fs.StringVar(&f.start, "start", "", "Kafka: first-run start `POS`: earliest (default), latest, or a time (RFC 3339 or Unix ms); same as start= in the URI")
	enumVar(fs, &f.format, "format", "jsonl", "part file `FORMAT`: jsonl, csv, text, parquet or arrow (the last two need --schema)",
		"jsonl", "csv", "text", "parquet", "arrow")
	enumVar(fs, &f.compression, "compression", "none", "row format `COMPRESSION`: none, gzip or zstd", "none", "gzip", "zstd")
	fs.DurationVar(&f.interval, "checkpoint-interval", pipeline.DefaultCheckpointInterval, "time between checkpoints (one due while the previous one runs is taken when it completes; records go on meanwhile)")
	fs.Int64Var(&f.checkpointEvery, "checkpoint-records", 0, "also checkpoint after this many records, waiting for a running checkpoint (0: off)")
	fs.StringVar(&f.bucket, "bucket", "none", "bucketing: none, datetime[:LAYOUT], eventtime:FIELD[:LAYOUT], field:NAME, hive:NAME[,NAME]")
	fs.StringVar(&f.tz, "bucket-tz", "UTC", "time zone of date-time buckets (IANA name or Local)")
	fs.StringVar(&f.partSize, "part-size", "128MiB", "roll a part file at this size")
	fs.DurationVar(&f.rollover, "rollover", filesink.DefaultRollover, "roll a part file this long after it was opened (0: never)")
	fs.DurationVar(&f.inactivity, "inactivity", filesink.DefaultInactivity, "roll a part file after this long without records (0: never)")
	fs.BoolVar(&f.rollOnCheckpoint, "roll-on-checkpoint", false, "roll every part file at every checkpoint")
	fs.IntVar(&f.parallelism, "parallelism", 1, "number of sink subtasks (keep it the same across restarts)")
	fs.StringVar(&f.prefix, "prefix", "part", "part file name prefix")
	fs.IntVar(&f.maxOpenFiles, "max-open-files", 0, "file and S3 sinks: part files open at once in the process, across subtasks (at least 16); at the limit the least "+
		"recently written part is fsynced, closed and reopened on its next record (parquet/arrow parts roll instead); default: "+
		"ulimit -n less 64 and an eighth (832 under 1024)")
	fs.BoolVar(&f.directIO, "direct-io", false, "local sinks: write large part-file writes with O_DIRECT (Linux), bypassing the page cache, instead of through it "+
		"(a filesystem without direct I/O falls back by itself; fsync makes parts durable either way)")
	fs.StringVar(&f.budget, "buffer-budget", "64MiB", "memory for buffered records across all open buckets (with parquet/arrow: the encoders' row groups)")
	fs.StringVar(&f.memLimit, "memory-limit", "auto", "soft limit of the Go heap (GC target): auto (6 x --buffer-budget with parquet/arrow, whose encoders hold "+
		"more than they report; none for row formats), none, or a SIZE; the GOMEMLIMIT environment variable overrides it")
	fs.StringVar(&f.csvColumns, "csv-columns", "", "CSV: comma-separated column order (default: each record's sorted keys)")
	fs.BoolVar(&f.csvHeader, "csv-header", false, "CSV: write a header row in every part file (needs --csv-columns)")
	fs.BoolVar(&f.successFile, "success-file", false, "write BUCKET/_SUCCESS, listing the bucket's files, once a time bucket's range plus --allowed-lateness is over (event-time watermark with eventtime buckets, processing time with datetime) and all its files are committed")
	fs.DurationVar(&f.lateness, "allowed-lateness", 0, "with --success-file: how long after a bucket's end records may still arrive")
	enumVar(fs, &f.onBad, "on-bad-record", "fail", "`ACTION` on a record that cannot be written: fail: stop with an error naming the record; skip: write it to OUT/_dead-letter "+
		"(MySQL sink: to --mysql-dead-letter-table, in the checkpoint's XA branch), exactly once, and go on (a line over --max-record-size too, truncated to its first 64KiB)", "fail", "skip")
	fs.StringVar(&f.maxRecord, "max-record-size", "16MiB", "file and stdin sources: the longest line (record) accepted, up to 1GiB; a longer one is a bad record (--on-bad-record)")
	enumVar(fs, &f.invalidUTF8, "invalid-utf8", "reject", "jsonl: a record whose strings hold bytes that are not UTF-8: reject (a bad record, --on-bad-record) "+
		"or replace (write each such byte as U+FFFD)", "reject", "replace")
	fs.IntVar(&f.retain, "retain", recovery.DefaultRetain, "checkpoint records to keep")
	enumVar(fs, &f.logLevel, "log-level", "info", "log `LEVEL`: debug, info, warn or error", "debug", "info", "warn", "error")
	enumVar(fs, &f.progress, "progress", "auto", "progress line on stderr (`WHEN`): auto (when stderr is a terminal), on or off", "auto", "on", "off")
	f.bulk.register(fs)
	f.s3.register(fs, true)
	f.group.register(fs)
	f.mysql.register(fs)
	f.http.register(fs)
	f.iceberg.register(fs)
	f.value.register(fs)
	enumVar(fs, &f.guarantee, "guarantee", "", "delivery `GUARANTEE`: exactly-once (file, s3, mysql sinks: the default), at-least-once (file and s3 sinks: parts published as they roll; http sinks: the default) or at-most-once (http sinks)",
		pipeline.ExactlyOnce, pipeline.AtLeastOnce, pipeline.AtMostOnce)
	enumListVar(fs, &f.allowChange, "allow-change", "go on although the job differs from the one its state records in these `FIELDS` "+
		"(comma-separated: source, sink, format, schema, bucketing); the change is kept in the state's job record",
		recovery.IdentityFields()...)
	fs.BoolVar(&f.resumeFromOutput, "resume-from-output", false, "file and S3 sinks, when the state was lost: rebuild what the output holds from its "+
		"commit manifests, read the source from the beginning and skip those records (the way out of a lost state)")
	fs.StringVar(&f.config, "config", "", "read settings from the YAML `FILE` (keys: flag names; see Settings above); default: FILESINK_CONFIG")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on http://`HOST:PORT`/metrics, and /healthz and /readyz "+
		"(ready: recovered, and a checkpoint completed within 3 x --checkpoint-interval); default: off")
}

// parseRunFlags reads the run flags from args, the environment and the
// config file, and returns them with the set of flags given (from any of
// the three).
func parseRunFlags(args []string, stdout io.Writer) (*runFlags, map[string]bool, error) {
	f := &runFlags{}
	fs := newFlagSet("run", runSynopsis+"\n\n"+configHelp, stdout)
	f.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, nil, err
	}
	f.cmdline = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.cmdline[fl.Name] = true })
	if err := applySettings(fs, f.cmdline, f.config); err != nil {
		return nil, nil, err
	}
	if f.source == "" || f.sink == "" {
		return nil, nil, usageError("run: --source and --sink are required (see filesink run --help)")
	}
	if _, err := filesink.ParseSize(f.maxRecord); err != nil {
		return nil, nil, usageError("run: --max-record-size: %v", err)
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return f, set, nil
}

// spec is the job the flags describe, for pipeline.Job's rules.
func (f *runFlags) spec(set map[string]bool) *pipeline.Job {
	budget, _ := filesink.ParseSize(f.budget)       // an invalid one is reported by build
	maxRecord, _ := filesink.ParseSize(f.maxRecord) // checked by parseRunFlags
	return &pipeline.Job{
		Source: f.source, Sink: f.sink, State: f.state, Guarantee: f.guarantee, Format: f.format,
		MaxRecordSize: maxRecord, InvalidUTF8: f.invalidUTF8,
		Parallelism: f.parallelism, Retain: f.retain, OnBadRecord: f.onBad, BufferBudget: budget, MemoryLimit: f.memLimit, Given: set,
		MaxOpenFiles: f.maxOpenFiles, Group: f.group.name,
		MySQL: pipeline.MySQLSpec{Table: f.mysql.table, Mode: f.mysql.mode, Key: f.mysql.key, BatchRows: f.mysql.batchRows},
		HTTP: pipeline.HTTPSpec{Workers: f.http.workers, Queue: f.http.queue, BatchRecords: f.http.batchRecords,
			Linger: f.http.linger, Timeout: f.http.timeout, Retries: f.http.retries},
	}
}

// specError turns a pipeline.Job rule's error into the CLI's usage error.
func specError(err error) error {
	var se *pipeline.SpecError
	if errors.As(err, &se) {
		return usageError("run: %s", se.Msg)
	}
	return err
}

func cmdRun(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, sig <-chan os.Signal) error {
	f, set, err := parseRunFlags(args, stdout)
	if err != nil {
		return err
	}
	log, err := newLogger(f.logLevel, stderr)
	if err != nil {
		return err
	}
	if f.metricsAddr != "" {
		interval := f.interval
		if interval == 0 {
			interval = pipeline.DefaultCheckpointInterval // as pipeline.Run reads 0
		}
		f.metrics = metrics.New(metrics.Options{CheckpointInterval: interval})
	}
	spec := f.spec(set)
	if err := spec.Validate(); err != nil {
		return specError(err)
	}
	// The registry's schema may be waited for (it retries while the
	// registry is unreachable): a signal ends the wait.
	sctx, stopWatching := untilSignal(ctx, sig)
	err = f.values(sctx, spec, log)
	stopWatching()
	if err != nil {
		return err
	}
	if spec.Group != "" {
		warnPasswords(stderr, "run", f.cmdline, map[string]string{"source": f.source, "sink": f.sink, "schema-registry": f.value.registry})
		return f.runGroup(ctx, spec, set, log, stderr, sig)
	}
	// After the job is built (a mistake in the flags comes first), once.
	warn := sync.OnceFunc(func() {
		warnPasswords(stderr, "run", f.cmdline, map[string]string{"source": f.source, "sink": f.sink, "schema-registry": f.value.registry})
	})
	base := *f
	for {
		err := f.buildAndRun(ctx, spec, log, stdin, stderr, sig, set, warn)
		var ch *avro.ChangeError
		if !errors.As(err, &ch) {
			return err
		}
		// The run ended at a checkpoint before the first value of the new
		// schema: open the job again with the new columns.
		log.Info("the records' schema changed: new columns, the files rolled", "subject", ch.Subject,
			"from", ch.From.String(), "to", ch.To.String(), "columns", strings.Join(ch.Added, ","))
		if f.valueCounts != nil {
			f.valueCounts.SchemaChanged()
		}
		next := base
		next.bulk.doc = ch.Doc
		f = &next
	}
}

// buildAndRun builds the job of the sink's kind and runs it.
func (f *runFlags) buildAndRun(ctx context.Context, spec *pipeline.Job, log *slog.Logger, stdin io.Reader, stderr io.Writer, sig <-chan os.Signal, set map[string]bool, built func()) error {
	var job *job
	var err error
	switch spec.Kind() {
	case pipeline.HTTPSink:
		job, err = f.buildHTTP(log, stdin, set)
	case pipeline.MySQLSink:
		job, err = f.buildMySQL(log, stdin, set)
	case pipeline.IcebergSink:
		job, err = f.buildIceberg(ctx, log, stdin, set)
	default:
		job, err = f.build(ctx, log, stdin, set)
	}
	if err != nil {
		return err
	}
	built()
	return f.run(ctx, job, spec, log, stderr, sig)
}

// run opens the job's store and sinks, runs it, and logs its totals.
func (f *runFlags) run(ctx context.Context, job *job, spec *pipeline.Job, log *slog.Logger, stderr io.Writer, sig <-chan os.Signal) error {
	// The open store excludes every other run on the state until its
	// Close: it holds the state directory's lock, or the S3 state's lease,
	// taken here, before recovery reads the records.
	var client *s3api.Client
	if job.target != nil {
		client = job.target.client
	}
	var err error
	if job.cfg.Store, err = openStore(ctx, job.stateURI, &f.s3, client, true, log); err != nil {
		return inCommand("run", err)
	}
	if c, ok := job.cfg.Store.(io.Closer); ok {
		defer func() {
			if err := c.Close(); err != nil {
				log.Warn("close the checkpoint store", "state", job.cfg.Store.Location(), "err", err)
			}
		}()
	}
	if f.metrics != nil {
		// Before recovery: /healthz answers and /readyz says "recovering"
		// while it runs.
		srv, err := f.metrics.Serve(f.metricsAddr, log)
		if err != nil {
			return fmt.Errorf("run: --metrics-addr %s: %w", f.metricsAddr, err)
		}
		defer srv.Close()
		log.Info("serving metrics", "addr", srv.Addr().String(), "paths", "/metrics /healthz /readyz")
	}
	if job.mysqlSink {
		// After the store: the job id may be kept in it.
		if err := job.openMySQL(ctx, f, spec, log); err != nil {
			return err
		}
		defer job.db.Close() // after the run closed the sinks
	}
	if job.httpSink {
		if err := job.openHTTP(ctx, f, spec, log); err != nil {
			return err
		}
	}
	if job.iceberg != nil {
		defer job.iceberg.close(log)
		if err := job.iceberg.start(ctx, f, job, log); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	job.cfg.Stop = stopOnSignal(ctx, cancel, sig, log)
	prog := newProgress(stderr, f.progress, f.source)
	job.cfg.Progress = prog.update
	if m := f.metrics; m != nil {
		for i, s := range job.cfg.Sinks {
			job.cfg.Sinks[i] = m.WrapSink(s)
		}
		job.cfg.Events = pipeline.TeeEventListener(job.cfg.Events, m.Events())
	}
	if err := f.startChecks(job, spec); err != nil {
		return err
	}
	res, err := spec.Run(ctx, job.cfg)
	prog.finish()
	if err != nil {
		return explainRunError(ctx, job, specError(err))
	}
	job.done(log, res)
	return nil
}

// explainRunError puts what the operator must know first in the error of
// a failed run: that the S3 state's lease was taken over (the failure
// itself, a request cut off while the process was paused, is only a
// consequence), or, for a data loss of a file or S3 sink, what a plain
// rerun does and the way on.
func explainRunError(ctx context.Context, job *job, err error) error {
	if st, ok := job.cfg.Store.(*s3sink.Store); ok {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		lerr := st.CheckLease(cctx)
		cancel()
		if errors.Is(lerr, s3sink.ErrLeaseLost) && !errors.Is(err, s3sink.ErrLeaseLost) {
			return fmt.Errorf("%w; this run stopped on: %s", lerr, oneLine(err.Error()))
		}
	}
	var gone *s3sink.UploadGoneError
	var rebuild *filesink.RebuildError
	if job.target == nil || !errors.Is(err, committer.ErrDataLoss) || errors.As(err, &gone) || errors.As(err, &rebuild) {
		return err // they say what to do
	}
	return fmt.Errorf("%w; the records of that part file as of the checkpoint that recorded it are not in the output, and running the job again stops here again: "+
		"if the source still holds them, run the job with a new, empty --state location (keep the old one) and --resume-from-output, which reads the source "+
		"from the beginning and writes again, once, every record the output's commit manifests do not list (runbook: ErrDataLoss)", err)
}

// untilSignal returns ctx, canceled at a signal on sig, for the start of a
// run (before stopOnSignal watches sig), and the function that stops
// watching sig and releases the context.
func untilSignal(ctx context.Context, sig <-chan os.Signal) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-sig:
			cancel()
		case <-done:
		}
	}()
	return ctx, func() { close(done); cancel() }
}

// stopOnSignal returns a channel closed at the first signal (a graceful
// stop: a final checkpoint); the second signal cancels the run.
func stopOnSignal(ctx context.Context, cancel context.CancelFunc, sig <-chan os.Signal, log *slog.Logger) <-chan struct{} {
	stopc := make(chan struct{})
	go func() {
		select {
		case <-sig:
		case <-ctx.Done():
			return
		}
		close(stopc)
		select {
		case <-sig:
			log.Warn("second signal: aborting without a final checkpoint")
			cancel()
		case <-ctx.Done():
		}
	}()
	return stopc
}

// done logs the totals of a finished job.
func (j *job) done(log *slog.Logger, res pipeline.Result) {
	switch {
	case j.httpSink:
		j.httpDone(log, res)
	case j.mysqlSink:
		var recs, rows, bad, branches int64
		for _, s := range j.mysql {
			recs += s.Stats().Records.Load()
			rows += s.Stats().Rows.Load()
			bad += s.Stats().BadRecords.Load()
			branches += s.Stats().Committed.Load()
		}
		log.Info("done", "checkpoint", res.Checkpoint, "records", res.Records, "written", recs,
			"rows_sent", rows, "bad_records", bad, "branches_committed", branches, "end_of_input", res.EndOfInput)
	default:
		var recs, bad, files, released, rebuilt int64
		for _, w := range j.writers {
			recs += w.Stats().Records.Load()
			bad += w.Stats().BadRecords.Load()
			files += w.Stats().Committed.Load()
			released += w.Stats().Released.Load()
			rebuilt += w.Stats().Rebuilt.Load()
		}
		args := []any{"checkpoint", res.Checkpoint, "records", res.Records, "written", recs,
			"bad_records", bad, "files_published", files, "parts_released", released, "parts_rebuilt", rebuilt, "end_of_input", res.EndOfInput}
		if d := j.dropped; d != nil {
			args = append(args, "records_with_unknown_fields", d.Records(), "unknown_fields_dropped", d.Fields())
		}
		log.Info("done", args...)
	}
}

type job struct {
	cfg      pipeline.Config
	writers  []*filesink.Writer
	dropped  *bulk.Dropped // --unknown-fields drop
	target   *target       // nil for a MySQL sink
	stateURI string
	// replayer reads the source's records again, to rebuild a part whose
	// staged data the store lost; nil for stdin.
	replayer source.Replayer

	mysqlSink bool
	mysql     []*mysqlxa.Sink
	db        *sql.DB

	httpSink bool
	http     []*async.Sink

	iceberg *icebergJob // an iceberg:// sink
}

// buildMySQL makes the job of a MySQL sink (pipeline.Job checked its
// flags); openMySQL then connects and makes the subtasks.
func (f *runFlags) buildMySQL(log *slog.Logger, stdin io.Reader, set map[string]bool) (*job, error) {
	if _, err := mysqlDSN(f.sink); err != nil {
		return nil, err
	}
	j := &job{stateURI: f.state, mysqlSink: true}
	if err := f.common(j, log, stdin, set); err != nil {
		return nil, err
	}
	return j, nil
}

// openMySQL connects to the server and makes the MySQL subtasks; the
// caller holds the open store and closes j.db.
func (j *job) openMySQL(ctx context.Context, f *runFlags, spec *pipeline.Job, log *slog.Logger) error {
	id, err := jobID(ctx, j.cfg.Store, j.stateURI, f.mysql.job)
	if err != nil {
		return err
	}
	mode, err := spec.MySQL.ParsedMode()
	if err != nil {
		return specError(err)
	}
	db, err := openMySQL(ctx, f.sink, "--sink")
	if err != nil {
		return err
	}
	var onBad func(i int) func(*source.BadRecordError)
	if f.onBad == pipeline.SkipBadRecord {
		onBad = func(i int) func(*source.BadRecordError) {
			return pipeline.BadRecordFunc(&j.cfg.Events, mysqlxa.ParticipantName(i))
		}
	}
	sinks, err := f.mysql.sinks(ctx, db, mode, id, f.parallelism, onBad, log)
	if err != nil {
		db.Close()
		return err
	}
	j.db, j.mysql, j.cfg.Sinks = db, sinks, asPipelineSinks(sinks)
	log.Info("MySQL sink", "sink", redactURI(f.sink), "table", sinks[0].Table(), "mode", f.mysql.mode,
		"job", id, "subtasks", len(sinks), "state", j.stateURI, "on_bad_record", f.onBad)
	if f.parallelism > 1 && mode != mysqlxa.Insert {
		// Rows of one key written by two subtasks' branches of one
		// checkpoint would wait for each other's locks: route by key.
		j.cfg.Partition = mysqlxa.KeyPartitioner(splitList(f.mysql.key))
	}
	return nil
}

// denseOrigins reports whether the source numbers its records without
// gaps, and from which number: the generator's ids, from 0. Line numbers
// of files and stdin skip blank lines, and Kafka offsets skip transaction
// markers and aborted records.
func denseOrigins(src string) (int64, bool) {
	return 0, strings.HasPrefix(src, "gen://")
}

// common sets what every job has: the source and the checkpoint settings.
func (f *runFlags) common(j *job, log *slog.Logger, stdin io.Reader, set map[string]bool) error {
	srcURI := f.source
	if isKafka(srcURI) {
		kcfg, err := kafkaConfig(srcURI, set, f.bounded, f.start)
		if err != nil {
			return err
		}
		kcfg.Logger = log.With("source", "kafka")
		if j.replayer, err = kafka.NewReplayer(kcfg); err != nil {
			return err
		}
		j.cfg.OpenSource = func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
			pos, seen, err := source.SplitDecodedPosition(pos)
			if err != nil {
				return nil, err
			}
			s, err := kafka.Open(ctx, kcfg, pos)
			if err != nil {
				return nil, err
			}
			var src source.Source = s
			if f.metrics != nil {
				src = f.metrics.WrapKafka(s)
			}
			if f.valueDec != nil {
				// A record read waits for the registry until the run
				// ends, not only within the pipeline's wait for it.
				opts := append([]source.DecodeOption{source.DecodeWithin(ctx)}, f.decodeOpts...)
				src = source.Decoded(src, f.valueDec, seen, opts...)
			}
			return src, nil
		}
		if f.valueDec != nil {
			j.replayer = source.DecodedReplayer(j.replayer, f.valueDec, f.decodeOpts...)
		}
	} else {
		if p, ok := source.LocalPath(srcURI); ok {
			if err := checkPath("run: --source ", p, false); err != nil {
				return err
			}
		}
		opts := f.lineOptions(set)
		if srcURI != "-" {
			r, err := source.NewReplayer(srcURI, opts...)
			if err != nil {
				return err
			}
			j.replayer = r
		}
		j.cfg.OpenSource = func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
			if srcURI == "-" {
				return source.NewReader(stdin, "stdin", opts...)
			}
			return source.Open(ctx, srcURI, pos, opts...)
		}
	}
	j.cfg.CheckpointInterval = f.interval
	j.cfg.CheckpointEvery = f.checkpointEvery
	j.cfg.Logger = log
	j.cfg.CommitterOptions = []committer.Option{committer.WithRetain(f.retain)}
	return nil
}

// lineOptions returns the options of a source that splits lines (the
// directory source, stdin): the maximum record size, and skipping longer
// lines when they go to the dead letters (--on-bad-record skip, which
// applies to file and S3 sinks only). Other sources get none.
func (f *runFlags) lineOptions(set map[string]bool) []source.Option {
	if !(&pipeline.Job{Source: f.source}).IsLineSource() {
		return nil
	}
	var opts []source.Option
	if set["max-record-size"] {
		n, _ := filesink.ParseSize(f.maxRecord) // checked by parseRunFlags and Job.Validate
		opts = append(opts, source.WithMaxLineSize(int(n)))
	}
	if f.onBad == "skip" {
		opts = append(opts, source.WithSkipLongLines())
	}
	return opts
}

// build makes the job of a file or S3 sink (pipeline.Job checked which
// flags apply): its target, its part file layout and its writers.
func (f *runFlags) build(ctx context.Context, log *slog.Logger, stdin io.Reader, set map[string]bool) (*job, error) {
	l, err := f.layout()
	if err != nil {
		return nil, err
	}
	return f.buildWith(ctx, l, nil, log, stdin, set)
}

// buildWith makes the job of a file or S3 sink, or of an Iceberg sink's
// table location (ij set; f.sink is the location), with the layout l.
func (f *runFlags) buildWith(ctx context.Context, l *layout, ij *icebergJob, log *slog.Logger, stdin io.Reader, set map[string]bool) (*job, error) {
	t, err := f.target(ctx, log)
	if err != nil {
		return nil, err
	}
	stateURI := f.state
	if stateURI == "" {
		stateURI = t.stateURI
	}
	j := &job{target: t, stateURI: stateURI, iceberg: ij}
	if err := f.common(j, log, stdin, set); err != nil {
		return nil, err
	}
	if t.local != "" {
		if err := os.MkdirAll(t.local, 0o755); err != nil {
			return nil, usageError("%v", vfs.WrapPath("run: --sink "+t.local, err))
		}
	}
	if err := f.writers(j, l, log); err != nil {
		return nil, err
	}
	if f.bulk.unknownFields == string(bulk.DropUnknown) {
		j.reportDropped(l.bulk, log)
	}
	if err := f.markers(j, t.backend, l.assigner, log, set); err != nil {
		return nil, err
	}
	j.cfg.TickInterval = min(max(time.Second, min(nonZero(f.rollover), nonZero(f.inactivity))/10), 10*time.Second)
	return j, nil
}

// target opens the --sink of a file or S3 job.
func (f *runFlags) target(ctx context.Context, log *slog.Logger) (*target, error) {
	if f.group.name != "" {
		// A lane's next owner finalizes the parts it takes over with the
		// last part number (s3.Backend.Finalize): writers stay below it.
		f.s3.maxParts = s3sink.MaxParts - 1
	}
	t, err := openTarget(ctx, f.sink, &f.s3, log, true)
	if err != nil {
		return nil, inCommand("run", err)
	}
	if t.local != "" {
		var fsys vfs.FS = vfs.OS{}
		t.backend = localfs.New(fsys, t.local, localfs.WithDirectIO(f.directIO))
		t.dead = localfs.New(fsys, filepath.Join(t.local, "_dead-letter"), localfs.WithDirectIO(f.directIO))
	}
	return t, nil
}

// layout is how a file or S3 job writes its part files.
type layout struct {
	bulk     filesink.BulkFormat // nil: a row format, enc
	enc      filesink.Encoder
	assigner bucketing.Assigner
	policy   filesink.RollingPolicy
	budget   int64
	deadOK   bool // --on-bad-record skip
}

// layout checks the values of the part file flags.
func (f *runFlags) layout() (*layout, error) {
	var l layout
	var err error
	if l.bulk, err = f.bulk.format(f.format); err != nil {
		return nil, err
	}
	if l.enc, err = f.encoder(l.bulk != nil); err != nil {
		return nil, err
	}
	if _, err := filesink.NewCompression(f.compression); err != nil {
		return nil, usageError("run: --compression: %v", err)
	}
	loc, err := time.LoadLocation(f.tz)
	if err != nil {
		return nil, usageError("run: --bucket-tz %q: %v", f.tz, err)
	}
	if l.assigner, err = bucketing.Parse(f.bucket, loc); err != nil {
		return nil, usageError("run: --bucket: %v", err)
	}
	if err := f.parts(&l); err != nil {
		return nil, err
	}
	return &l, nil
}

// parts checks the rolling, buffer and bad-record flags into l.
func (f *runFlags) parts(l *layout) error {
	partSize, err := filesink.ParseSize(f.partSize)
	if err != nil {
		return usageError("run: --part-size: %v", err)
	}
	if l.budget, err = filesink.ParseSize(f.budget); err != nil {
		return usageError("run: --buffer-budget: %v", err)
	}
	l.policy = filesink.DefaultPolicy{PartSize: partSize, Rollover: f.rollover, Inactivity: f.inactivity}
	if f.rollOnCheckpoint && l.bulk == nil { // bulk parts roll at every checkpoint anyway
		l.policy = filesink.OnCheckpointPolicy{PartSize: partSize}
	}
	switch f.onBad {
	case "fail":
	case "skip":
		l.deadOK = true
	default:
		return usageError("run: --on-bad-record must be fail or skip, not %q", f.onBad)
	}
	return nil
}

// encoder returns the row format's encoder (JSON lines for a bulk format,
// which does not use it).
func (f *runFlags) encoder(bulkFormat bool) (filesink.Encoder, error) {
	var enc filesink.Encoder = filesink.JSONLines{}
	if !bulkFormat {
		var err error
		if enc, err = filesink.ParseFormat(f.format); err != nil {
			return nil, usageError("run: --format: %v (or parquet, arrow)", err)
		}
	}
	if _, ok := enc.(filesink.JSONLines); ok && !bulkFormat {
		policy, err := filesink.ParseInvalidUTF8(f.invalidUTF8)
		if err != nil {
			return nil, usageError("run: --invalid-utf8: %v", err)
		}
		enc = filesink.JSONLines{InvalidUTF8: policy}
	}
	if csv, ok := enc.(filesink.CSV); ok {
		if f.csvColumns != "" {
			csv.Columns = strings.Split(f.csvColumns, ",")
		}
		if f.csvHeader && csv.Columns == nil {
			return nil, usageError("run: --csv-header needs --csv-columns")
		}
		csv.HeaderRow = f.csvHeader
		return csv, nil
	} else if f.csvColumns != "" || f.csvHeader {
		return nil, usageError("run: --csv-columns and --csv-header apply to --format csv only")
	}
	return enc, nil
}

// writers makes the file sink's subtasks.
func (f *runFlags) writers(j *job, l *layout, log *slog.Logger) error {
	for i := range f.parallelism {
		w, err := f.newWriter(j, l, i, f.prefix, l.policy, max(l.budget/int64(f.parallelism), 1<<20),
			pipeline.OpenPartsPerSubtask(f.maxOpenFiles, f.parallelism), log.With("subtask", i))
		if err != nil {
			return err
		}
		j.writers = append(j.writers, w)
		j.cfg.Sinks = append(j.cfg.Sinks, w)
	}
	return nil
}

// newWriter makes subtask i of the file sink, naming its parts with prefix.
func (f *runFlags) newWriter(j *job, l *layout, i int, prefix string, policy filesink.RollingPolicy, budget int64, maxOpen int, log *slog.Logger, extra ...filesink.Option) (*filesink.Writer, error) {
	comp, _ := filesink.NewCompression(f.compression)
	opts := []filesink.Option{
		filesink.WithAssigner(l.assigner), filesink.WithRollingPolicy(policy),
		filesink.WithPrefix(prefix), filesink.WithBufferBudget(budget),
		filesink.WithLogger(log), filesink.WithMaxOpenParts(maxOpen),
	}
	if l.bulk != nil {
		opts = append(opts, filesink.WithBulkFormat(l.bulk))
	} else {
		opts = append(opts, filesink.WithEncoder(l.enc))
	}
	if comp != nil {
		opts = append(opts, filesink.WithCompression(comp))
	}
	if l.deadOK {
		opts = append(opts, filesink.WithDeadLetter(j.target.dead),
			filesink.WithBadRecordFunc(pipeline.BadRecordFunc(&j.cfg.Events, filesink.ParticipantName(i))))
	}
	if f.guarantee == pipeline.AtLeastOnce {
		opts = append(opts, filesink.WithPublishOnRoll())
	}
	if start, ok := denseOrigins(f.source); ok {
		opts = append(opts, filesink.WithDenseOrigins(start))
	}
	if j.replayer != nil {
		opts = append(opts, filesink.WithReplayer(j.replayer))
	}
	w, err := filesink.New(j.target.backend, i, append(opts, extra...)...)
	if err != nil {
		return nil, usageError("run: %v", err)
	}
	return w, nil
}

// markers sets up the partition-complete markers of --success-file.
func (f *runFlags) markers(j *job, be driver.Backend, assigner bucketing.Assigner, log *slog.Logger, set map[string]bool) error {
	if !f.successFile {
		if set["allowed-lateness"] {
			return usageError("run: --allowed-lateness applies with --success-file only")
		}
		return nil
	}
	win, ok := assigner.(bucketing.Windowed)
	if !ok {
		return usageError("run: --success-file needs time buckets (--bucket datetime:LAYOUT or eventtime:FIELD:LAYOUT), not --bucket %q", f.bucket)
	}
	if f.lateness < 0 {
		return usageError("run: --allowed-lateness %v is negative", f.lateness)
	}
	if !bucketing.HasWindows(assigner) {
		return usageError("run: --success-file: the layout of --bucket %q cannot be read back into a time range (it needs a year, as in 2006-01-02--15)", f.bucket)
	}
	_, eventTime := assigner.(bucketing.EventTimed)
	m := &filesink.Markers{Output: be, Assigner: win, Lateness: f.lateness, EventTime: eventTime, Prefix: f.prefix, Log: log}
	j.cfg.Committed = func(ctx context.Context, id uint64) error {
		rec, err := j.cfg.Store.Get(ctx, id)
		if err != nil {
			return err
		}
		return m.Checkpointed(ctx, rec)
	}
	return nil
}

func nonZero(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Hour
	}
	return d
}

// localPath accepts file://DIR or a plain path.
func localPath(uri, flagName string) (string, error) {
	if rest, ok := strings.CutPrefix(uri, "file://"); ok {
		if rest == "" {
			return "", usageError("%s %q: empty path", flagName, uri)
		}
		return rest, nil
	}
	if i := strings.Index(uri, "://"); i >= 0 {
		return "", usageError("%s %q: scheme %q is not supported here (use file://DIR or a plain path)", flagName, redactURI(uri), uri[:i])
	}
	if uri == "" {
		return "", usageError("%s: empty path", flagName)
	}
	return uri, nil
}

func newLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
