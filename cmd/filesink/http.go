package main

import (
	"flag"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/sinks/async"
	"github.com/filesink/filesink/sinks/httpsink"
)

// HTTP sinks: http://HOST:PORT/PATH or https://..., batches of NDJSON
// POSTed by N workers per subtask (sinks/async, sinks/httpsink).

func isHTTP(uri string) bool {
	return strings.HasPrefix(uri, "http://") || strings.HasPrefix(uri, "https://")
}

// httpFlags are the settings of an HTTP sink.
type httpFlags struct {
	workers, queue, batchRecords, retries int
	batchBytes                            string
	linger, timeout                       time.Duration
}

// httpOnlyFlags are the run flags that apply to an HTTP sink only.
const httpOnlyFlags = "http-workers http-queue http-batch-records http-batch-bytes http-linger http-timeout http-retries"

func (f *httpFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.workers, "http-workers", runtime.NumCPU(), "HTTP sink: concurrent requests per subtask")
	fs.IntVar(&f.queue, "http-queue", 0, "HTTP sink: closed batches queued per subtask before the source waits (default 2 x --http-workers)")
	fs.IntVar(&f.batchRecords, "http-batch-records", async.DefaultMaxRecords, "HTTP sink: records per request (at most)")
	fs.StringVar(&f.batchBytes, "http-batch-bytes", "1MiB", "HTTP sink: record bytes per request (at most, unless one record is larger)")
	fs.DurationVar(&f.linger, "http-linger", async.DefaultLinger, "HTTP sink: send a batch this long after its first record even if it is not full (0: never)")
	fs.DurationVar(&f.timeout, "http-timeout", httpsink.DefaultTimeout, "HTTP sink: timeout of one request")
	fs.IntVar(&f.retries, "http-retries", httpsink.DefaultAttempts, "HTTP sink: attempts per batch on 5xx, 408, 429, timeouts and connection errors, with exponential backoff and jitter (at-most-once: 1)")
}

// refuseHTTPFlags fails if an --http-* flag is set for another sink.
func refuseHTTPFlags(set map[string]bool) error {
	for _, name := range strings.Fields(httpOnlyFlags) {
		if set[name] {
			return usageError("run: --%s applies to an http(s):// sink only", name)
		}
	}
	return nil
}

// guaranteeOf checks --guarantee against the sink: file and S3 sinks are
// exactly-once (default) or at-least-once (parts published as they roll),
// MySQL sinks exactly-once only, an HTTP sink at-least-once (default) or
// at-most-once. Asking for what a sink cannot give is a usage error.
func guaranteeOf(sink, g string) (async.Guarantee, error) {
	http := isHTTP(sink)
	kind := "a file or S3 sink"
	if isMySQL(sink) {
		kind = "a mysql:// sink"
	}
	switch g {
	case "":
		return async.AtLeastOnce, nil
	case "exactly-once":
		if http {
			return 0, usageError("run: --guarantee exactly-once: an HTTP endpoint has no transaction to prepare, so an http(s):// sink gives at-least-once " +
				"(each batch carries a deterministic Idempotency-Key: a receiver that applies each key once sees every record once) or at-most-once")
		}
		return 0, nil
	case "at-least-once", "at-most-once":
		if g == "at-least-once" && !http && !isMySQL(sink) {
			return async.AtLeastOnce, nil // files published as they roll (filesink.WithPublishOnRoll)
		}
		if !http {
			return 0, usageError("run: --guarantee %s: %s supports exactly-once (two-phase commit)%s; at-most-once is for http(s):// sinks", g, kind,
				map[bool]string{true: " only", false: " and at-least-once (files published as they roll)"}[isMySQL(sink)])
		}
		if g == "at-most-once" {
			return async.AtMostOnce, nil
		}
		return async.AtLeastOnce, nil
	default:
		return 0, usageError("run: --guarantee must be exactly-once, at-least-once or at-most-once, not %q", g)
	}
}

// buildHTTP checks the flags of a job with an HTTP sink; openHTTP then
// makes the subtasks.
func (f *runFlags) buildHTTP(log *slog.Logger, stdin io.Reader, set map[string]bool) (*job, error) {
	for _, name := range strings.Fields(fileOnlyFlags + " " + mysqlOnlyFlags) {
		if set[name] && name != "job" {
			return nil, usageError("run: --%s does not apply to an http(s):// sink", name)
		}
	}
	if f.state == "" {
		return nil, usageError("run: an http(s):// sink needs --state DIR (or s3://BUCKET/PREFIX): its checkpoint records have no default location")
	}
	g, err := guaranteeOf(f.sink, f.guarantee)
	if err != nil {
		return nil, err
	}
	if f.parallelism < 1 {
		return nil, usageError("run: --parallelism must be at least 1")
	}
	h := &f.http
	switch {
	case h.workers < 1:
		return nil, usageError("run: --http-workers must be at least 1")
	case h.queue < 0:
		return nil, usageError("run: --http-queue must not be negative")
	case h.batchRecords < 1:
		return nil, usageError("run: --http-batch-records must be at least 1")
	case h.linger < 0 || h.timeout <= 0:
		return nil, usageError("run: --http-linger must not be negative and --http-timeout must be positive")
	case h.retries < 1:
		return nil, usageError("run: --http-retries must be at least 1")
	case g == async.AtMostOnce && set["http-retries"] && h.retries != 1:
		return nil, usageError("run: --guarantee at-most-once sends each batch once: --http-retries must be 1 (a retry after a lost reply would deliver twice)")
	}
	if _, err := filesink.ParseSize(h.batchBytes); err != nil {
		return nil, usageError("run: --http-batch-bytes: %v", err)
	}
	if _, err := httpsink.New(f.sink); err != nil {
		return nil, usageError("run: --sink: %v", err)
	}
	j := &job{stateURI: f.state, httpSink: true}
	if err := f.common(j, log, stdin, set); err != nil {
		return nil, err
	}
	return j, nil
}

// openHTTP makes the HTTP subtasks; the caller holds the state lock (the
// job id, which starts every idempotency key, may be kept in DIR/JOB).
func (j *job) openHTTP(f *runFlags, log *slog.Logger) error {
	id, err := jobID(j.stateURI, f.mysql.job)
	if err != nil {
		return err
	}
	g, _ := guaranteeOf(f.sink, f.guarantee)
	h := &f.http
	attempts := h.retries
	if g == async.AtMostOnce {
		attempts = 1
	}
	maxBytes, _ := filesink.ParseSize(h.batchBytes)
	client, err := httpsink.New(f.sink, httpsink.WithTimeout(h.timeout),
		httpsink.WithRetry(attempts, httpsink.DefaultBackoff, httpsink.DefaultMaxBackoff), httpsink.WithLogger(log))
	if err != nil {
		return usageError("run: --sink: %v", err)
	}
	// Each Send gets the retries' whole budget before it counts as stuck.
	sendTimeout := time.Duration(attempts)*(h.timeout+httpsink.DefaultMaxBackoff) + time.Second
	for i := range f.parallelism {
		s, err := httpsink.NewSink(client, i, async.WithSinkID(id), async.WithWorkers(h.workers), async.WithQueue(h.queue),
			async.WithMaxRecords(h.batchRecords), async.WithMaxBytes(int(min(maxBytes, 1<<30))), async.WithLinger(h.linger),
			async.WithGuarantee(g), async.WithSendTimeout(sendTimeout, async.DefaultGrace), async.WithLogger(log.With("subtask", i)))
		if err != nil {
			for _, s := range j.http {
				s.Close()
			}
			return usageError("run: %v", err)
		}
		j.http = append(j.http, s)
		j.cfg.Sinks = append(j.cfg.Sinks, s)
	}
	if f.parallelism > 1 {
		// Route by the record's hash, not round robin over the pipeline's
		// batches: a replay must give each subtask the same records in the
		// same order for the idempotency keys to come out the same.
		j.cfg.Partition = async.HashPartition
	}
	log.Info("HTTP sink", "sink", client.String(), "guarantee", g, "job", id, "subtasks", f.parallelism,
		"workers", h.workers, "state", j.stateURI)
	return nil
}

// httpDone logs the totals of an HTTP job.
func (j *job) httpDone(log *slog.Logger, res pipeline.Result) {
	var recs, acked, batches, dropped, lingered int64
	for _, s := range j.http {
		st := s.Stats()
		recs += st.Records.Load()
		acked += st.Acked.Load()
		batches += st.Batches.Load()
		dropped += st.Dropped.Load()
		lingered += st.LingerCuts.Load()
	}
	log.Info("done", "checkpoint", res.Checkpoint, "records", res.Records, "written", recs, "acknowledged", acked,
		"batches", batches, "linger_cuts", lingered, "dropped", dropped, "end_of_input", res.EndOfInput)
}
