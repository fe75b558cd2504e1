package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
)

// ErrLostState is matched by the error of a run whose checkpoint store
// holds no record while its output already holds what an earlier run
// published (a *LostStateError).
var ErrLostState = errors.New("the state holds no checkpoint but the output holds published data")

// LostStateError is a run that would start from the beginning of its
// source (its store holds no checkpoint record) into an output that
// already holds commit manifests or files: the state of the job that
// wrote them was lost or is elsewhere, and a run from the beginning would
// publish their records a second time.
type LostStateError struct {
	State     string // the store's location
	Output    string // the output's manifest directory
	Manifests int
	Files     int // files the manifests list
	Unlisted  int // visible files no manifest lists
	// Group: the job runs in group mode, which cannot rebuild a lost
	// state from the output.
	Group bool
}

func (e *LostStateError) Error() string {
	held := fmt.Sprintf("output %s already holds %d commit manifests listing %d files (and %d files no manifest lists)", e.Output, e.Manifests, e.Files, e.Unlisted)
	if e.Manifests == 0 {
		// rm -rf OUT/_filesink removes the manifests (and the default
		// state) together.
		held = fmt.Sprintf("the output holds %d files no manifest lists, and its commit manifests are gone (%s holds none: was the output's "+
			"_filesink directory removed? it holds the manifests, and by default the state too)", e.Unlisted, e.Output)
	}
	if e.Group {
		return fmt.Sprintf("state %s holds no lane, but %s: "+
			"a run from the beginning would publish their records again; if this job's state is elsewhere pass it with --state; "+
			"group mode cannot rebuild a lost state from the output: to start over, use an empty --sink",
			e.State, held)
	}
	way := "if it was lost run with --resume-from-output, if this is a new job use an empty --sink"
	if e.Manifests == 0 {
		way = "without manifests the output cannot tell which records it holds: move its files out (or restore its _filesink directory) " +
			"and run again, or, if this is a new job, use an empty --sink"
	}
	return fmt.Sprintf("state %s holds no checkpoint, but %s: "+
		"a run from the beginning would publish their records again; if this job's state is elsewhere pass it with --state, %s",
		e.State, held, way)
}

// Is makes a *LostStateError match ErrLostState.
func (e *LostStateError) Is(target error) bool { return target == ErrLostState }

// checkStart checks the run against its store and output before anything
// is written: the job's identity (Config.Identity) against the store's job
// record, that the output is not another job's (its claim,
// filesink.CheckClaim), and, when the store holds no checkpoint, that the
// output holds nothing published (Config.Output) or, with
// Config.ResumeFromOutput, what it holds, which the run then skips. What
// the run must still write to take the job on (the output's claim, the job
// record) is written by establish, once the source is open.
func (r *runner) checkStart(ctx context.Context) error {
	cfg := &r.cfg
	var uid string
	if cfg.Identity != nil {
		rec, write, err := recovery.PlanIdentity(ctx, cfg.Store, *cfg.Identity, cfg.AllowChange)
		if err != nil {
			return err
		}
		r.writeJob, uid = write, rec.UID
	}
	ids, err := cfg.Store.List(ctx)
	if err != nil {
		return err
	}
	r.fresh = len(ids) == 0
	var claimErr error
	if cfg.Output != nil {
		if uid == "" {
			recs, err := cfg.Store.JobRecords(ctx)
			if err != nil {
				return err
			}
			uid = recovery.JobUID(cfg.Store, recs)
		}
		r.jobUID = uid
		claimErr = filesink.CheckClaim(ctx, cfg.Output, filesink.OutputName(cfg.Output), uid, cfg.Store.Location(), cfg.ResumeFromOutput)
	}
	if err := r.checkLost(ctx, ids); err != nil {
		// Files but no manifest, in an output another job claims: that
		// job is publishing its first checkpoint, not gone.
		var ls *LostStateError
		if claimErr != nil && errors.As(err, &ls) && ls.Manifests == 0 {
			return claimErr
		}
		return err
	}
	return claimErr
}

// checkLost checks, when the store holds no checkpoint (ids), that the
// output holds nothing published, or with Config.ResumeFromOutput sets
// the run up to skip what it holds.
func (r *runner) checkLost(ctx context.Context, ids []uint64) error {
	cfg := &r.cfg
	if cfg.Output == nil && !cfg.ResumeFromOutput {
		return nil
	}
	if len(ids) > 0 {
		if cfg.ResumeFromOutput {
			return fmt.Errorf("resume from output: state %s holds checkpoints (the newest is %d): it is not lost; run without --resume-from-output", cfg.Store.Location(), ids[len(ids)-1])
		}
		return nil
	}
	if cfg.Output == nil {
		return errors.New("resume from output: the sink has no output to read (only file and S3 sinks do)")
	}
	pub, err := filesink.ReadPublished(ctx, cfg.Output, cfg.DeadLetter)
	if err != nil {
		return fmt.Errorf("read the output: %w", err)
	}
	if pub.Empty() || cfg.EarlyPublish && pub.Manifests == 0 {
		return nil
	}
	if !cfg.ResumeFromOutput {
		return &LostStateError{State: cfg.Store.Location(), Output: pub.Output, Manifests: pub.Manifests, Files: pub.Files, Unlisted: len(pub.Unlisted)}
	}
	return r.resumeFromOutput(pub)
}

// establish writes what the run needs to take the job on, once its source
// is open (checkStart checked both): the output's claim, before anything
// is published or swept there, then the job record, if the store does not
// hold it yet. A first run that cannot open its source (a topic name
// mistyped, a broker down) thus leaves neither behind, and the corrected
// command is not refused as another job.
func (r *runner) establish(ctx context.Context) error {
	cfg := &r.cfg
	if cfg.Output != nil {
		c, err := filesink.ClaimOutput(ctx, cfg.Output, filesink.OutputName(cfg.Output), r.jobUID, cfg.Store.Location(), cfg.ResumeFromOutput)
		if err != nil {
			return err
		}
		if c.TakenFrom != "" && c.TakenFrom != r.jobUID {
			cfg.Logger.Warn("took the output over from the job whose state was lost", "output", filesink.OutputName(cfg.Output),
				"claim", cfg.Output.MetaLocation(filesink.ClaimName(c.Version)), "previous_job", c.TakenFrom)
		}
	}
	if !r.writeJob {
		return nil
	}
	rec, err := recovery.CheckIdentity(ctx, cfg.Store, *cfg.Identity, cfg.AllowChange)
	if err != nil {
		return err
	}
	if len(rec.Changed) > 0 {
		cfg.Logger.Info("job record", "version", rec.Version, "changed", rec.Changed, "state", cfg.Store.Location())
	}
	return nil
}

// resumeFromOutput sets the run up to skip what the output holds.
func (r *runner) resumeFromOutput(pub *filesink.Published) error {
	if len(pub.Unlisted) > 0 {
		return fmt.Errorf("resume from output: %s is not listed in any commit manifest (%d such files): it was published by a checkpoint whose commit was interrupted, "+
			"or is not this sink's; move it out of the output (its records are read again) and rerun", pub.Unlisted[0], len(pub.Unlisted))
	}
	set, err := pub.SkipSet()
	if err != nil {
		return fmt.Errorf("resume from output: %w", err)
	}
	r.skip = newSkipState(set)
	r.firstID = pub.Checkpoint + 1
	r.cfg.Logger.Info("resuming from the output's manifests", "manifests", pub.Manifests, "files", pub.Files, "records", pub.Records,
		"inputs", len(set), "first checkpoint", r.firstID)
	return nil
}

// skipState is the set of source records that the output already holds
// and that the reader drops: what a run that resumed from its output
// skips, input by input, as sorted, disjoint, inclusive ranges. The
// reader drops the ranges it has passed (the records of an input are read
// in ascending number). A skipState is never modified: a change makes a
// new one, so that a batch can carry the state at its end.
type skipState struct {
	ranges map[string][][2]int64
}

func newSkipState(m map[string][][2]int64) *skipState {
	if len(m) == 0 {
		return nil
	}
	return &skipState{ranges: m}
}

// skips reports whether o is to be dropped, and returns the state after
// it (s itself when unchanged; nil when nothing is left to skip).
func (s *skipState) skips(o source.Origin) (bool, *skipState) {
	rs, ok := s.ranges[o.Name]
	if !ok {
		return false, s
	}
	i := 0
	for i < len(rs) && rs[i][1] < o.Num {
		i++
	}
	next := s
	if i > 0 {
		m := maps.Clone(s.ranges)
		if i == len(rs) {
			delete(m, o.Name)
		} else {
			m[o.Name] = rs[i:]
		}
		next = newSkipState(m)
		rs = rs[i:]
	}
	return len(rs) > 0 && rs[0][0] <= o.Num, next
}

// skipKey starts the encoding of a checkpoint position that carries a
// skip set: {"filesink_skip":{...},"source":<the source's position>}.
const skipKey = `{"filesink_skip":`

type skipPosition struct {
	Skip   map[string][][2]int64 `json:"filesink_skip"`
	Source json.RawMessage       `json:"source,omitempty"`
}

// encodePosition is the position a checkpoint records: the source's, with
// the skip set around it while there is one.
func encodePosition(pos json.RawMessage, s *skipState) (json.RawMessage, error) {
	if s == nil {
		return pos, nil
	}
	return json.Marshal(skipPosition{Skip: s.ranges, Source: pos})
}

// decodePosition splits a checkpoint's position into the source's and the
// skip set.
func decodePosition(raw json.RawMessage) (json.RawMessage, *skipState, error) {
	if !bytes.HasPrefix(raw, []byte(skipKey)) {
		return raw, nil, nil
	}
	var p skipPosition
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, nil, fmt.Errorf("checkpoint position: %w", err)
	}
	return p.Source, newSkipState(p.Skip), nil
}

// SourcePosition returns the source's position in a checkpoint record's
// position (recovery.Checkpoint.Source), without what the pipeline keeps
// around it (the records to drop with ResumeFromOutput). A nil error
// means raw is a position Run wrote.
func SourcePosition(raw json.RawMessage) (json.RawMessage, error) {
	pos, _, err := decodePosition(raw)
	return pos, err
}
