package main

import (
	"context"
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

func (f *httpFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.workers, "http-workers", runtime.NumCPU(), "HTTP sink: concurrent requests per subtask")
	fs.IntVar(&f.queue, "http-queue", 0, "HTTP sink: closed batches queued per subtask before the source waits (default 2 x --http-workers)")
	fs.IntVar(&f.batchRecords, "http-batch-records", async.DefaultMaxRecords, "HTTP sink: records per request (at most)")
	fs.StringVar(&f.batchBytes, "http-batch-bytes", "1MiB", "HTTP sink: record bytes per request (at most, unless one record is larger)")
	fs.DurationVar(&f.linger, "http-linger", async.DefaultLinger, "HTTP sink: send a batch this long after its first record even if it is not full (0: never)")
	fs.DurationVar(&f.timeout, "http-timeout", httpsink.DefaultTimeout, "HTTP sink: timeout of one request")
	fs.IntVar(&f.retries, "http-retries", httpsink.DefaultAttempts, "HTTP sink: attempts per batch on 5xx, 408, 429, timeouts and connection errors, with exponential backoff and jitter (at-most-once: 1)")
}

// buildHTTP checks the flags of a job with an HTTP sink; openHTTP then
// makes the subtasks.
func (f *runFlags) buildHTTP(log *slog.Logger, stdin io.Reader, set map[string]bool) (*job, error) {
	h := &f.http
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

// openHTTP makes the HTTP subtasks; the caller opened the checkpoint store
// (it keeps the job id, which starts every idempotency key).
func (j *job) openHTTP(ctx context.Context, f *runFlags, spec *pipeline.Job, log *slog.Logger) error {
	id, err := jobID(ctx, j.cfg.Store, j.stateURI, f.mysql.job)
	if err != nil {
		return err
	}
	g, _ := spec.DeliveryGuarantee()
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
