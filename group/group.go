package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source/kafka"
)

// Config is a job in group mode. Every process of the job runs with the
// same Config (but for Hooks and Events).
type Config struct {
	// Kafka is the consumer group and the topics its members share.
	Kafka kafka.GroupConfig
	// State is the job's checkpoint store on S3: its job records and, under
	// it, the lanes' state objects. It must support conditional writes.
	State *s3.Store
	// Backend is the S3 output the lanes' sinks write to; a takeover sweeps
	// the older owners' staging data in it. Its writers must stay below
	// the last part number (s3.WithMaxParts(s3.MaxParts-1) or lower),
	// which a new owner uses to finalize its predecessor's parts.
	Backend *s3.Backend
	// Prefix is the part name prefix of the sinks (filesink.WithPrefix):
	// a lane's parts are named Lane.PartPrefix().
	Prefix string
	// NewSinks builds the sinks of one lane run: file sinks
	// (filesink.Writer, subtask 0) over Backend with SinkOptions(l) (part
	// names that start with l.PartPrefix(), manifests named l.Name, and
	// the parts a takeover finds in progress closed where the decided
	// state records them), and any rolling policy: parts stay open across
	// the lane's checkpoints as in one process.
	NewSinks func(ctx context.Context, l Lane) ([]pipeline.Sink, error)
	// Pipeline is the template of every lane's pipeline: its checkpoint
	// interval, tick interval, batch size, logger, clock, committer options
	// and events. OpenSource, Store, Sinks, Stop and Committed are set per
	// lane; Identity, Output and ResumeFromOutput must be unset (the job's
	// identity is Identity below).
	Pipeline pipeline.Config
	// Output and DeadLetter, if set, are the lanes' output: a job whose
	// state holds no lane while its output holds published files is
	// refused (a *pipeline.LostStateError): its state was lost or is
	// elsewhere.
	Output, DeadLetter driver.Output
	// Identity, if set, is checked against the job record in State (with
	// AllowChange) before the process joins the group.
	Identity    *recovery.Identity
	AllowChange []string
	// Stop, when closed, makes Run take a final checkpoint of every lane,
	// leave the group and return.
	Stop <-chan struct{}
	// Logger receives the lanes' takeovers, handoffs and fences.
	Logger *slog.Logger
	// Events, if set, are told of lane changes (for metrics).
	Events *Events
	// LaneEvents, if set, returns a listener for the pipeline of one lane
	// run, beside Pipeline.Events (which all the lane runs share): one
	// that keeps state of its own per run, such as totals it adds up over
	// the runs. It is called on the lane's goroutine before its pipeline
	// starts.
	LaneEvents func(Lane) pipeline.EventListener
	// Progress, if set, receives the process's totals over its lane runs
	// after every change: every batch and checkpoint of a lane, and every
	// lane started or stopped. The calls are serialized (never two at a
	// time, never an older total after a newer one) and must not block.
	Progress func(Progress)
	// HealAfter is how long partitions with records to read may stay
	// assigned to no member of the stable group before this process asks
	// for a rebalance (logged at WARN, Events.Healed): 0 means three
	// session timeouts, a negative value never. Whatever its value, a
	// lane the group assigns to this process whose run stopped (a failed
	// takeover, a fence by an owner that lost it since) is taken again
	// within a sixth of the session timeout (at most 5 s).
	HealAfter time.Duration
	// Hook, if set, is called at named points of a takeover and a handoff
	// ("assign:acquired", "lane:swept", "revoke:stopped", and
	// "job:swept" after the end-of-job sweep of a finished lane):
	// an error returned stops the lane as a crash there would (tests).
	Hook func(point string, lane kafka.LaneID) error
}

// Events receives what happens to this process's lanes. Each func may be
// nil; they are called from several goroutines.
type Events struct {
	// Assigned: the lane was taken over with epoch, in took.
	Assigned func(lane kafka.LaneID, epoch uint64, took time.Duration)
	// Released: the lane was handed off cleanly, its final checkpoint took
	// took from the revocation.
	Released func(lane kafka.LaneID, took time.Duration)
	// Fenced: a write of the lane's state found another owner.
	Fenced func(lane kafka.LaneID)
	// Stopped: the lane's run ended (released, fenced, lost or finished).
	Stopped func(lane kafka.LaneID)
	// Healed: partitions with records to read were assigned to no member
	// of the group for Config.HealAfter; this process asked for a
	// rebalance.
	Healed func(lanes []kafka.LaneID)
	// Committed: the lane's checkpoint is committed up to offset next;
	// hwm is the partition's high watermark in the newest fetch (0 if
	// unknown): hwm - next is the lane's lag.
	Committed func(lane kafka.LaneID, next, hwm int64)
}

// Lane is one partition as one process runs it.
type Lane struct {
	ID    kafka.LaneID
	Epoch uint64 // the owner epoch this process holds
	Name  string // PREFIX-TOPIC.PARTITION: the part name prefix of every epoch
}

// PartPrefix is the part name prefix of this owner epoch's parts:
// "PREFIX-TOPIC.PARTITION-eEPOCH".
func (l Lane) PartPrefix() string { return fmt.Sprintf("%s-e%d", l.Name, l.Epoch) }

// SinkOptions are the file sink options of lane l's sinks: part names
// that start with l.PartPrefix(), manifests named l.Name, and in-progress
// parts of the state a takeover restores closed at their recorded length
// (filesink.WithFinalizeOnRestore), never resumed: the process that wrote
// them may still be writing.
func SinkOptions(l Lane) []filesink.Option {
	return []filesink.Option{filesink.WithPrefix(l.PartPrefix()), filesink.WithManifestWriter(l.Name), filesink.WithFinalizeOnRestore()}
}

// LaneName is the part name prefix of every epoch of lane id.
func LaneName(prefix string, id kafka.LaneID) string {
	return fmt.Sprintf("%s-%s.%d", prefix, id.Topic, id.Partition)
}

// Result sums what one process did.
type Result struct {
	Lanes int64 // lane runs (takeovers) of this process
	// Records is the number of records its lanes read, and Committed the
	// number of records of the lane checkpoints it decided (see Progress).
	Records, Committed int64
	Checkpoints        uint64 // lane checkpoints completed
	Fenced             int64  // lanes stopped because another owner took them
	Released           int64  // lanes handed off cleanly
	Retaken            int64  // lanes taken again while the group assigned them (see Config.HealAfter)
	Healed             int64  // rebalances asked for: partitions assigned to no member
	Finished           bool   // bounded: every lane of the job is done
}

// DefaultRebalanceTimeout bounds a handoff when Kafka.RebalanceTimeout is 0.
const DefaultRebalanceTimeout = kafka.DefaultRebalanceTimeout

// ErrNotGroupMode is what Run returns for a configuration group mode
// cannot run.
var ErrNotGroupMode = errors.New("group mode")

// Run joins the consumer group and runs a lane for each partition the
// group assigns to this process, until Stop (a final checkpoint of every
// lane, then it leaves the group), the end of a bounded job (every lane of
// the job finished, by any process), or an error. A nil error means every
// lane this process still owned took its final checkpoint and released
// it. A lane fenced by another owner is not an error: it stops and is
// counted. Run is safe to call from one goroutine per Config.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Events == nil {
		cfg.Events = &Events{}
	}
	// The fence rests on the store applying conditions: an S3-compatible
	// store that ignores them is refused before anything is written.
	if err := cfg.State.CheckConditionalWrites(ctx); err != nil {
		return Result{}, err
	}
	uid, writeJob, err := cfg.checkStart(ctx)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &runner{cfg: cfg, lanes: map[kafka.LaneID]*lane{}, retake: map[kafka.LaneID]bool{}, fatal: make(chan error, 1), laneDone: make(chan struct{}, 1),
		joined: make(chan struct{}), runID: newRunID(), progress: &progress{report: cfg.Progress}}
	r.host, _ = os.Hostname()
	g, err := kafka.JoinGroup(ctx, cfg.Kafka, r)
	if err == nil {
		// Joined (the topics exist): the output's claim and the job
		// record, before any lane runs.
		if err = cfg.establish(ctx, uid, writeJob); err != nil {
			lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), r.rebalanceTimeout())
			_ = g.Leave(lctx)
			lcancel()
			g = nil
		}
	}
	// The group may call Assigned before JoinGroup returns: Assigned waits
	// for r.g.
	r.g = g
	close(r.joined)
	if err != nil {
		return Result{}, err
	}
	polled := make(chan error, 1)
	go func() { polled <- g.Run(ctx) }()
	hctx, hcancel := context.WithCancel(ctx)
	healed := make(chan struct{})
	go func() { defer close(healed); r.heal(hctx) }()
	err = r.wait(ctx, polled)
	hcancel()
	<-healed
	// A clean end hands every lane off; an error stops them where they
	// are, as a crash would (their next owners take them over).
	r.stopAll(err == nil)
	leaveCtx, leaveCancel := context.WithTimeout(context.WithoutCancel(ctx), r.rebalanceTimeout())
	if lerr := g.Leave(leaveCtx); lerr != nil && err == nil {
		cfg.Logger.Warn("leaving the consumer group", "group", cfg.Kafka.Name, "err", lerr)
	}
	leaveCancel()
	cancel()
	if perr := <-polled; perr != nil && err == nil && !errors.Is(perr, context.Canceled) {
		err = perr
	}
	r.stopAll(false)
	return r.result(), err
}

func (cfg *Config) check() error {
	var errs []error
	if cfg.State == nil || cfg.Backend == nil || cfg.NewSinks == nil {
		errs = append(errs, errors.New("State, Backend and NewSinks are required"))
	} else if cfg.Backend.MaxParts() >= s3.MaxParts {
		errs = append(errs, fmt.Errorf("Backend writes up to part %d: create it with s3.WithMaxParts(s3.MaxParts-1), the last part number is a takeover's", cfg.Backend.MaxParts()))
	}
	if cfg.Kafka.Name == "" {
		errs = append(errs, errors.New("Kafka.Name (the consumer group) is required"))
	}
	p := cfg.Pipeline
	if p.OpenSource != nil || p.Store != nil || len(p.Sinks) > 0 || p.Stop != nil {
		errs = append(errs, errors.New("Pipeline.OpenSource, Store, Sinks and Stop are set per lane: leave them unset"))
	}
	if p.Identity != nil || p.Output != nil || p.ResumeFromOutput {
		errs = append(errs, errors.New("Pipeline.Identity, Output and ResumeFromOutput do not apply: set Config.Identity"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrNotGroupMode, errors.Join(errs...))
	}
	return nil
}

// checkLost refuses a state without lanes for an output that holds
// published files.
// checkStart checks the run before anything is written: the job's
// identity against the job record in State (writeJob: the record is not
// there yet), that the output holds nothing published when the state holds
// no lane, and that the output is not another job's (its claim). uid is
// the job's UID.
func (cfg *Config) checkStart(ctx context.Context) (uid string, writeJob bool, err error) {
	if cfg.Identity != nil {
		rec, write, err := recovery.PlanIdentity(ctx, cfg.State, *cfg.Identity, cfg.AllowChange)
		if err != nil {
			return "", false, err
		}
		uid, writeJob = rec.UID, write
	} else {
		recs, err := cfg.State.JobRecords(ctx)
		if err != nil {
			return "", false, err
		}
		uid = recovery.JobUID(cfg.State, recs)
	}
	if err := cfg.checkLost(ctx); err != nil {
		return "", false, err
	}
	return uid, writeJob, filesink.CheckClaim(ctx, cfg.Backend, filesink.OutputName(cfg.Backend), uid, cfg.State.Location(), false)
}

// establish claims the output for job uid and writes the job record if
// the state does not hold it yet; see checkStart.
func (cfg *Config) establish(ctx context.Context, uid string, writeJob bool) error {
	if _, err := filesink.ClaimOutput(ctx, cfg.Backend, filesink.OutputName(cfg.Backend), uid, cfg.State.Location(), false); err != nil {
		return err
	}
	if !writeJob {
		return nil
	}
	rec, err := recovery.CheckIdentity(ctx, cfg.State, *cfg.Identity, cfg.AllowChange)
	if err != nil {
		return err
	}
	if len(rec.Changed) > 0 {
		cfg.Logger.Info("job record", "version", rec.Version, "changed", rec.Changed, "state", cfg.State.Location())
	}
	return nil
}

func (cfg *Config) checkLost(ctx context.Context) error {
	if cfg.Output == nil {
		return nil
	}
	heads, err := s3.ListLanes(ctx, cfg.State)
	if err != nil || len(heads) > 0 {
		return err
	}
	pub, err := filesink.ReadPublished(ctx, cfg.Output, cfg.DeadLetter)
	if err != nil {
		return fmt.Errorf("read the output: %w", err)
	}
	if pub.Empty() {
		return nil
	}
	return &pipeline.LostStateError{State: cfg.State.Location(), Output: pub.Output, Manifests: pub.Manifests, Files: pub.Files, Unlisted: len(pub.Unlisted), Group: true}
}

// runner is one Run: the group membership and the lanes it runs.
type runner struct {
	cfg    Config
	g      *kafka.Group  // set before joined is closed; nil if joining failed
	joined chan struct{} // closed once JoinGroup returned
	host   string
	runID  string
	fatal  chan error // capacity 1: the first lane error that ends the run
	// laneDone (capacity 1) is signalled when a lane of this process
	// finished (bounded): wait checks at once whether the job is.
	laneDone chan struct{}

	mu    sync.Mutex
	lanes map[kafka.LaneID]*lane

	retake   map[kafka.LaneID]bool // lanes to take again (heal.go), under mu
	retakeMu sync.Mutex            // held from kafka.Group.Retake until the lane runs

	progress                                *progress // the totals of the lane runs
	runs, fenced, released, retaken, healed atomic.Int64
	finished                                atomic.Bool
}

func (r *runner) result() Result {
	p := r.progress.get()
	return Result{Lanes: r.runs.Load(), Records: p.Records, Committed: p.Committed, Checkpoints: uint64(p.Checkpoints),
		Fenced: r.fenced.Load(), Released: r.released.Load(), Retaken: r.retaken.Load(), Healed: r.healed.Load(), Finished: r.finished.Load()}
}

// fail ends the run with err (the first one wins).
func (r *runner) fail(err error) {
	select {
	case r.fatal <- err:
	default:
	}
}

func (r *runner) rebalanceTimeout() time.Duration {
	if d := r.cfg.Kafka.RebalanceTimeout; d > 0 {
		return d
	}
	return DefaultRebalanceTimeout
}

func (r *runner) hook(point string, id kafka.LaneID) error {
	if r.cfg.Hook == nil {
		return nil
	}
	return r.cfg.Hook(point, id)
}

// wait returns when the run must end: Stop, a fatal error, the poll loop's
// end, or (bounded) every lane of the job finished: checked when a lane of
// this process finishes, and every half checkpoint interval (at least 1 s)
// for the lanes of the others.
func (r *runner) wait(ctx context.Context, polled chan error) error {
	var tick <-chan time.Time
	var laneDone <-chan struct{}
	if r.cfg.Kafka.Bounded {
		t := time.NewTicker(max(time.Second, r.cfg.Pipeline.CheckpointInterval/2))
		defer t.Stop()
		tick = t.C
		laneDone = r.laneDone
	}
	for {
		select {
		case <-laneDone:
			if r.checkFinished(ctx) {
				return nil
			}
		case <-r.cfg.Stop:
			return nil
		case err := <-r.fatal:
			return err
		case err := <-polled:
			polled <- err // Run reads it again
			if err == nil {
				err = errors.New("group: the consumer stopped")
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			if r.checkFinished(ctx) {
				return nil
			}
		}
	}
}

// checkFinished reports whether every lane of the job is finished; if so,
// it sweeps the finished lanes first. A failed check is logged and is not
// finished.
func (r *runner) checkFinished(ctx context.Context) bool {
	done, err := r.jobFinished(ctx)
	if err != nil {
		r.cfg.Logger.Warn("checking whether every lane is finished", "err", err)
		return false
	}
	if done {
		r.finished.Store(true)
		r.sweepFinished(ctx)
	}
	return done
}
