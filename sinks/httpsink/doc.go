// Package httpsink sends record batches to an HTTP endpoint: a [Client]
// is an async.Sender, and [New] wrapped in [NewSink] is a pipeline sink
// subtask (an async.Sink) for it.
//
// # Requests
//
// Each batch is one POST to the URL, with the records as the body, one per
// line, each ending with '\n' (Content-Type: application/x-ndjson), and
// these headers:
//
//	Idempotency-Key      the batch's key (async.Batch.Key), the same on every retry
//	                     and, after a crash, on the replay of the same records
//	Filesink-Subtask     the sink subtask
//	Filesink-Batch-Seq   the batch's sequence number in the subtask's stream
//	Filesink-Checkpoint  the checkpoint being filled when the batch closed (informational)
//	Filesink-Records     the number of records
//
// A 2xx response acknowledges the batch. 5xx, 408, 429, timeouts and
// connection errors are retried with exponential backoff and full jitter
// (honouring Retry-After), a bounded number of times; any other status
// fails at once with the start of the response body in the error. Redirects
// are not followed (a 3xx is an error).
//
// # Guarantees
//
// An HTTP endpoint has no transaction to prepare, so this sink cannot be
// exactly-once by itself. It is at-least-once (async.AtLeastOnce: the
// checkpoint waits for every acknowledgement), and exactly-once at a
// receiver that applies each Idempotency-Key once, with the limits the
// async package documents; or at-most-once (async.AtMostOnce, with one
// attempt per batch).
//
// # Secrets
//
// User info in the URL is sent as basic authentication and never appears
// in errors or logs; query values are shown as "xxxxx" ([Redact]).
//
// # Concurrency
//
// A Client is safe for concurrent use: every worker of an async.Sink calls
// Send at the same time.
package httpsink
