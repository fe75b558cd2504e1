package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
)

const runSynopsis = `--source URI --sink URI [flags]

Reads records from the source and writes them to part files under the sink,
exactly once: records become visible only when the checkpoint that covers
them is committed. Killed at any instant, the same command resumes from the
last checkpoint and publishes nothing twice. At the end of a bounded source
(and on SIGTERM/SIGINT) it takes a final checkpoint, commits it and exits 0.

Sources:
  file://DIR or DIR      every regular file under DIR, in lexical order, one record per line
  gen://?count=N&seed=S  N generated JSON records with a unique "id" (also: size, keys, start, step)
  -                      stdin; NOT replayable: after a crash, records read since the
                         last checkpoint are lost (the others are exactly once)
Sinks:
  file://OUT or OUT      part files under the directory OUT
  s3://BUCKET/PREFIX     objects under PREFIX, each part file a multipart upload
                         (credentials: the standard AWS chain; see --s3-* flags)`

type runFlags struct {
	source, sink, state, format, compression, bucket, tz, prefix string
	partSize, budget, csvColumns, onBad, logLevel, progress      string
	interval, rollover, inactivity                               time.Duration
	parallelism, retain                                          int
	csvHeader, rollOnCheckpoint                                  bool
	checkpointEvery                                              int64
	s3                                                           s3Flags
}

func cmdRun(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer, sig <-chan os.Signal) error {
	var f runFlags
	fs := newFlagSet("run", runSynopsis, stderr)
	fs.StringVar(&f.source, "source", "", "source `URI` (required): file://DIR, DIR, gen://?count=N, -")
	fs.StringVar(&f.sink, "sink", "", "sink `URI` (required): file://OUT, OUT or s3://BUCKET/PREFIX")
	fs.StringVar(&f.state, "state", "", "checkpoint store: DIR or s3://BUCKET/PREFIX (default OUT/_filesink, s3://BUCKET/PREFIX/_filesink)")
	fs.StringVar(&f.format, "format", "jsonl", "row format: jsonl, csv or text")
	fs.StringVar(&f.compression, "compression", "none", "compression: none, gzip or zstd")
	fs.DurationVar(&f.interval, "checkpoint-interval", pipeline.DefaultCheckpointInterval, "time between checkpoints")
	fs.Int64Var(&f.checkpointEvery, "checkpoint-records", 0, "also checkpoint after this many records (0: off)")
	fs.StringVar(&f.bucket, "bucket", "none", "bucketing: none, datetime[:LAYOUT], eventtime:FIELD[:LAYOUT], field:NAME, hive:NAME[,NAME]")
	fs.StringVar(&f.tz, "bucket-tz", "UTC", "time zone of date-time buckets (IANA name or Local)")
	fs.StringVar(&f.partSize, "part-size", "128MiB", "roll a part file at this size")
	fs.DurationVar(&f.rollover, "rollover", filesink.DefaultRollover, "roll a part file this long after it was opened (0: never)")
	fs.DurationVar(&f.inactivity, "inactivity", filesink.DefaultInactivity, "roll a part file after this long without records (0: never)")
	fs.BoolVar(&f.rollOnCheckpoint, "roll-on-checkpoint", false, "roll every part file at every checkpoint")
	fs.IntVar(&f.parallelism, "parallelism", 1, "number of sink subtasks (keep it the same across restarts)")
	fs.StringVar(&f.prefix, "prefix", "part", "part file name prefix")
	fs.StringVar(&f.budget, "buffer-budget", "64MiB", "memory for buffered records across all open buckets")
	fs.StringVar(&f.csvColumns, "csv-columns", "", "CSV: comma-separated column order (default: each record's sorted keys)")
	fs.BoolVar(&f.csvHeader, "csv-header", false, "CSV: write a header row in every part file (needs --csv-columns)")
	fs.StringVar(&f.onBad, "on-bad-record", "fail", "fail: stop with an error naming the record; skip: write it to OUT/_dead-letter and go on")
	fs.IntVar(&f.retain, "retain", recovery.DefaultRetain, "checkpoint records to keep")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.progress, "progress", "auto", "progress line on stderr: auto (when stderr is a terminal), on, off")
	f.s3.register(fs, true)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.source == "" || f.sink == "" {
		return usageError("run: --source and --sink are required (see filesink run --help)")
	}
	log, err := newLogger(f.logLevel, stderr)
	if err != nil {
		return err
	}
	job, err := f.build(ctx, log, stdin)
	if err != nil {
		return err
	}
	if !isS3(job.stateURI) {
		// Lock before opening the store: opening removes temp files that a
		// running process could be writing. (On S3, each record is written
		// with a conditional put: a second process cannot decide the same
		// checkpoint.)
		unlock, err := lockState(job.stateURI)
		if err != nil {
			return err
		}
		defer unlock()
	}
	if job.cfg.Store, err = openStore(ctx, job.stateURI, &f.s3, job.target.client, true); err != nil {
		return err
	}

	stopc := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
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
	job.cfg.Stop = stopc
	prog := newProgress(stderr, f.progress, f.source)
	job.cfg.Progress = prog.update
	res, err := pipeline.Run(ctx, job.cfg)
	prog.finish()
	if err != nil {
		return err
	}
	var recs, bad, files int64
	for _, w := range job.writers {
		recs += w.Stats().Records.Load()
		bad += w.Stats().BadRecords.Load()
		files += w.Stats().Committed.Load()
	}
	log.Info("done", "checkpoint", res.Checkpoint, "records", res.Records, "written", recs,
		"bad_records", bad, "files_published", files, "end_of_input", res.EndOfInput)
	return nil
}

type job struct {
	cfg      pipeline.Config
	writers  []*filesink.Writer
	target   *target
	stateURI string
}

func (f *runFlags) build(ctx context.Context, log *slog.Logger, stdin io.Reader) (*job, error) {
	t, err := openTarget(ctx, f.sink, &f.s3, log, true)
	if err != nil {
		return nil, err
	}
	stateURI := f.state
	if stateURI == "" {
		stateURI = t.stateURI
	}
	if f.parallelism < 1 {
		return nil, usageError("run: --parallelism must be at least 1")
	}
	enc, err := filesink.ParseFormat(f.format)
	if err != nil {
		return nil, usageError("run: --format: %v", err)
	}
	if csv, ok := enc.(filesink.CSV); ok {
		if f.csvColumns != "" {
			csv.Columns = strings.Split(f.csvColumns, ",")
		}
		if f.csvHeader && csv.Columns == nil {
			return nil, usageError("run: --csv-header needs --csv-columns")
		}
		csv.HeaderRow = f.csvHeader
		enc = csv
	} else if f.csvColumns != "" || f.csvHeader {
		return nil, usageError("run: --csv-columns and --csv-header apply to --format csv only")
	}
	if _, err := filesink.NewCompression(f.compression); err != nil {
		return nil, usageError("run: --compression: %v", err)
	}
	loc, err := time.LoadLocation(f.tz)
	if err != nil {
		return nil, usageError("run: --bucket-tz %q: %v", f.tz, err)
	}
	assigner, err := bucketing.Parse(f.bucket, loc)
	if err != nil {
		return nil, usageError("run: --bucket: %v", err)
	}
	partSize, err := filesink.ParseSize(f.partSize)
	if err != nil {
		return nil, usageError("run: --part-size: %v", err)
	}
	budget, err := filesink.ParseSize(f.budget)
	if err != nil {
		return nil, usageError("run: --buffer-budget: %v", err)
	}
	var policy filesink.RollingPolicy = filesink.DefaultPolicy{PartSize: partSize, Rollover: f.rollover, Inactivity: f.inactivity}
	if f.rollOnCheckpoint {
		policy = filesink.OnCheckpointPolicy{PartSize: partSize}
	}
	var dl committer.Backend
	switch f.onBad {
	case "fail":
	case "skip":
		dl = t.dead
	default:
		return nil, usageError("run: --on-bad-record must be fail or skip, not %q", f.onBad)
	}
	if f.source != "-" && !strings.Contains(f.source, "://") {
		if _, err := os.Stat(f.source); err != nil {
			return nil, fmt.Errorf("run: --source %s: %w", f.source, err)
		}
	}
	if t.local != "" {
		if err := os.MkdirAll(t.local, 0o755); err != nil {
			return nil, fmt.Errorf("run: --sink: %w", err)
		}
	}
	be := t.backend
	j := &job{target: t, stateURI: stateURI}
	for i := range f.parallelism {
		comp, _ := filesink.NewCompression(f.compression)
		opts := []filesink.Option{
			filesink.WithEncoder(enc), filesink.WithAssigner(assigner), filesink.WithRollingPolicy(policy),
			filesink.WithPrefix(f.prefix), filesink.WithBufferBudget(max(budget/int64(f.parallelism), 1<<20)),
			filesink.WithLogger(log.With("subtask", i)),
		}
		if comp != nil {
			opts = append(opts, filesink.WithCompression(comp))
		}
		if dl != nil {
			opts = append(opts, filesink.WithDeadLetter(dl))
		}
		w, err := filesink.New(be, i, opts...)
		if err != nil {
			return nil, usageError("run: %v", err)
		}
		j.writers = append(j.writers, w)
		j.cfg.Sinks = append(j.cfg.Sinks, w)
	}
	srcURI := f.source
	j.cfg.OpenSource = func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
		if srcURI == "-" {
			return source.NewReader(stdin, "stdin")
		}
		return source.Open(ctx, srcURI, pos)
	}
	j.cfg.CheckpointInterval = f.interval
	j.cfg.CheckpointEvery = f.checkpointEvery
	j.cfg.TickInterval = min(max(time.Second, min(nonZero(f.rollover), nonZero(f.inactivity))/10), 10*time.Second)
	j.cfg.Logger = log
	j.cfg.CommitterOptions = []committer.Option{committer.WithRetain(f.retain)}
	if t.bucket != "" {
		// Tail objects of older checkpoints outlive their commit: clean up
		// as the job runs, not only at the next recovery.
		j.cfg.CommitterOptions = append(j.cfg.CommitterOptions, committer.WithSweepEvery(10))
	}
	return j, nil
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
		return "", usageError("%s %q: scheme %q is not supported here (use file://DIR or a plain path)", flagName, uri, uri[:i])
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
