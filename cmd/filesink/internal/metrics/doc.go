// Package metrics instruments a filesink job run for Prometheus and
// serves /metrics, /healthz and /readyz (filesink run --metrics-addr).
//
// A [Metrics] owns a registry made for the run (prometheus.NewRegistry,
// never the global default registry) and is fed through the run's
// extension points: the run's event stream, pipeline.Config.Events
// (records and bytes read, completed checkpoints, checkpoint and phase
// durations, end of recovery, orphans swept by kind, failed commit
// attempts), and wrappers around the sinks (records and bytes accepted,
// open part files, pending committables) and the Kafka source (offsets
// per partition). Nothing here changes what the job does: wrappers
// forward every call and its result unchanged.
//
// In group mode a process runs one pipeline per lane, and a lane runs
// again after every takeover: each lane run gets a listener of its own
// (Metrics.Events), the counters are the sums over every lane run of the
// process and never go back, the sinks of a lane run that ended keep
// their totals and leave the gauges, and [Lanes] adds the lane metrics.
//
// # Concurrency
//
// Every method of Metrics is safe for concurrent use; the feeding methods
// never block (a mutex held for a few field updates at most). Values are
// read at scrape time from atomics where the job keeps them.
//
// # Metrics
//
// See the Help texts in [New], and the README's "Metrics and health".
package metrics
