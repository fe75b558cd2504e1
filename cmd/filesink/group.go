package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/filesink/filesink/committer"
	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/group"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/sinks/icebergsink"
	"github.com/filesink/filesink/source/kafka"
)

// groupFlags are the flags of group mode.
type groupFlags struct {
	name           string
	session, rebal time.Duration
	instanceID     string
}

// register defines the group mode flags on fs.
func (g *groupFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&g.name, "group", "", "group mode: join Kafka consumer group `NAME` and run the partitions it assigns to this process; "+
		"every process started with the same command shares the topics' partitions (kafka:// source, s3:// sink and state; see docs/scale-out.md)")
	fs.DurationVar(&g.session, "session-timeout", 45*time.Second, "group mode: how long a process that stopped answering keeps its partitions (Kafka's session timeout)")
	fs.DurationVar(&g.rebal, "rebalance-timeout", group.DefaultRebalanceTimeout, "group mode: how long a process has to hand off revoked partitions (final checkpoint) before it is dropped from the group")
	fs.StringVar(&g.instanceID, "group-instance-id", "", "group mode: a stable `ID` per process (Kafka static membership): a restart within the session timeout keeps its partitions without a rebalance")
}

// runGroup runs the job in group mode (--group): pipeline.Job checked
// that its source is Kafka and its sink and state S3.
func (f *runFlags) runGroup(ctx context.Context, spec *pipeline.Job, set map[string]bool, log *slog.Logger, stderr io.Writer, sig <-chan os.Signal) error {
	cfg, err := f.groupConfig(ctx, spec, set, log)
	if ij := f.icebergJob; ij != nil {
		defer ij.close(log)
	}
	if err != nil {
		return err
	}
	if m := f.metrics; m != nil {
		srv, err := m.Serve(f.metricsAddr, log)
		if err != nil {
			return fmt.Errorf("run: --metrics-addr %s: %w", f.metricsAddr, err)
		}
		defer srv.Close()
		log.Info("serving metrics", "addr", srv.Addr().String(), "paths", "/metrics /healthz /readyz")
		f.groupMetrics(cfg)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg.Stop = stopOnSignal(ctx, cancel, sig, log)
	prog := newProgress(stderr, f.progress, f.source)
	cfg.Progress = prog.updateGroup
	res, err := group.Run(ctx, *cfg)
	prog.finish()
	if err != nil {
		return specError(err)
	}
	// records: what this process committed (its lanes' decided
	// checkpoints); records_read may be more, when a lane stopped without
	// a final checkpoint (its next owner reads the rest again).
	log.Info("done", "group", f.group.name, "lanes_run", res.Lanes, "records", res.Committed, "records_read", res.Records,
		"lane_checkpoints", res.Checkpoints, "lanes_released", res.Released, "lanes_fenced", res.Fenced,
		"lanes_retaken", res.Retaken, "rebalances_forced", res.Healed, "job_finished", res.Finished)
	return nil
}

// groupConfig builds the group.Config the flags describe: the consumer
// group, the S3 state and output, and a file sink per lane whose buffer
// budget is shared by all the lanes of the process.
func (f *runFlags) groupConfig(ctx context.Context, spec *pipeline.Job, set map[string]bool, log *slog.Logger) (*group.Config, error) {
	kcfg, err := kafkaConfig(f.source, set, f.bounded, f.start)
	if err != nil {
		return nil, err
	}
	if len(kcfg.Partitions) > 0 {
		return nil, usageError("run: --group: partitions= in --source does not apply: the consumer group assigns the partitions")
	}
	kcfg.Logger = log.With("source", "kafka")
	ij, l, err := f.groupLayout(ctx, spec)
	if err != nil {
		return nil, err
	}
	t, err := f.target(ctx, log)
	if err != nil {
		return nil, err
	}
	stateURI := f.state
	if stateURI == "" {
		stateURI = t.stateURI
	}
	bucket, prefix, err := parseS3(stateURI, "--state")
	if err != nil {
		return nil, err
	}
	if err := f.groupIcebergJob(ij, stateURI); err != nil {
		return nil, err
	}
	st, err := s3sink.NewStore(t.client, bucket, prefix, s3sink.WithLogger(log))
	if err != nil {
		return nil, usageError("run: --state: %v", err)
	}
	backend, ok := t.backend.(*s3sink.Backend)
	if !ok {
		return nil, usageError("run: --group writes to S3 only")
	}
	id, err := f.identity(spec)
	if err != nil {
		return nil, err
	}
	j := &job{target: t, stateURI: stateURI}
	if j.replayer, err = kafka.NewReplayer(kcfg); err != nil {
		return nil, err
	}
	if m := f.metrics; m != nil {
		// The lanes' sinks report their bad records here (newWriter).
		j.cfg.Events.BadRecord = m.BadRecord
	}
	pool := filesink.NewBudgetPool(l.budget)
	cfg := &group.Config{
		Kafka: kafka.GroupConfig{Config: kcfg, Name: f.group.name, SessionTimeout: f.group.session,
			RebalanceTimeout: f.group.rebal, InstanceID: f.group.instanceID, Logger: log}, // its lines name the group
		State: st, Backend: backend, Prefix: f.prefix, Identity: id, Logger: log,
		Output: t.backend, DeadLetter: t.dead,
		NewSinks: func(_ context.Context, lane group.Lane) ([]pipeline.Sink, error) {
			w, err := f.newWriter(j, l, 0, lane.PartPrefix(), l.policy, l.budget, // the pool's share applies
				pipeline.OpenPartsPerSubtask(f.maxOpenFiles, 1), log.With("lane", lane.ID.String()),
				append(group.SinkOptions(lane), filesink.WithBudgetPool(pool))...)
			if err != nil {
				return nil, err
			}
			if ij != nil {
				return []pipeline.Sink{icebergsink.NewParticipant(w, lane.ID.String(), ij.committer)}, nil
			}
			return []pipeline.Sink{w}, nil
		},
		Pipeline: pipeline.Config{CheckpointInterval: f.interval, CheckpointEvery: f.checkpointEvery,
			TickInterval: time.Second, CommitterOptions: []committer.Option{committer.WithRetain(1)}},
	}
	if f.allowChange != "" {
		cfg.AllowChange = strings.Split(f.allowChange, ",")
	}
	if ij != nil {
		// The output of an Iceberg sink is its table (metadata files
		// included), not a folder of listed part files.
		cfg.Output, cfg.DeadLetter = nil, nil
	}
	return cfg, nil
}

// groupLayout is the layout of the lanes' part files: an Iceberg table's
// data files (its open catalog in ij, which runGroup closes), or the
// file sink's.
func (f *runFlags) groupLayout(ctx context.Context, spec *pipeline.Job) (*icebergJob, *layout, error) {
	if spec.Kind() != pipeline.IcebergSink {
		l, err := f.layout()
		return nil, l, err
	}
	// The lanes write the table's data files under its location.
	ij, l, err := f.setupIceberg(ctx)
	if err != nil {
		return nil, nil, err
	}
	f.icebergJob = ij // runGroup closes it
	if !isS3(f.sink) {
		return nil, nil, usageError("run: --group writes Iceberg tables on S3 only (--warehouse s3://BUCKET/PREFIX): a local disk offers no conditional write to fence a process that lost its partitions")
	}
	return ij, l, nil
}

// groupIcebergJob names the job of an Iceberg sink's committer (ij nil:
// none): --job, else the one the state location implies, alike in every
// process of the group.
func (f *runFlags) groupIcebergJob(ij *icebergJob, stateURI string) error {
	if ij == nil {
		return nil
	}
	id := f.mysql.job
	if id == "" {
		var err error
		if id, err = deriveStateJob(stateURI); err != nil {
			return err
		}
	}
	ij.committer.SetJob(id)
	ij.observe(f)
	return nil
}

// groupMetrics feeds the metrics from the lanes: their events, their
// pipelines' events (a listener per lane run, whose totals add up) and
// their sinks.
func (f *runFlags) groupMetrics(cfg *group.Config) {
	m := f.metrics
	lanes := m.Lanes()
	cfg.Events = &group.Events{Assigned: lanes.Assigned, Released: lanes.Released, Fenced: lanes.Fenced,
		Stopped: lanes.Stopped, Committed: lanes.Committed, Healed: lanes.Healed}
	cfg.LaneEvents = func(group.Lane) pipeline.EventListener { return m.Events() }
	newSinks := cfg.NewSinks
	cfg.NewSinks = func(ctx context.Context, lane group.Lane) ([]pipeline.Sink, error) {
		sinks, err := newSinks(ctx, lane)
		for i := range sinks {
			sinks[i] = m.WrapSink(sinks[i])
		}
		return sinks, err
	}
}
