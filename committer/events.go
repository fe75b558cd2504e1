package committer

import (
	"log/slog"
	"time"
)

// Swept counts the orphaned staging data a sweep deleted, by kind (for
// example driver.SweptStagingFile); kinds with nothing deleted may be
// absent. A nil Swept counts nothing.
type Swept map[string]int64

// Add adds o's counts to s and returns s (allocated if s is nil and o is
// not empty).
func (s Swept) Add(o Swept) Swept {
	for k, n := range o {
		if s == nil {
			s = Swept{}
		}
		s[k] += n
	}
	return s
}

// EventListener receives the events of the protocol (WithEventListener).
// Every field is optional. The callbacks are called synchronously on the
// goroutine running the protocol step (for a checkpoint completed by
// Phase1.Complete, the goroutine that calls it); they must not block and
// must not call the Coordinator. Durations are measured with the
// coordinator's clock (WithClock).
type EventListener struct {
	// CheckpointBegun: Begin is taking the barrier of a checkpoint.
	CheckpointBegun func(CheckpointBegunInfo)
	// Phase1Done: every participant's phase 1 completed (its records are
	// durable); the decide step follows.
	Phase1Done func(Phase1Info)
	// Decided: the checkpoint record is written, the commit point.
	Decided func(DecidedInfo)
	// Committed: phase 2 of a checkpoint completed: everything decided up
	// to it is published and old records are pruned (the sweep of
	// WithSweepEvery and the post-commit function follow).
	Committed func(CommittedInfo)
	// CommitFailed: a phase-2 attempt (a Commit or a CommittedCheckpoint
	// of a participant) failed with an error that is not permanent while
	// the context was live, in a checkpoint or in recovery.
	CommitFailed func(CommitFailedInfo)
	// Swept: a participant's sweep of orphaned staging data completed.
	Swept func(SweptInfo)
	// Recovered: Recover completed (re-commit, restore, sweep).
	Recovered func(RecoveredInfo)
}

// CheckpointBegunInfo describes a checkpoint whose barrier is being taken.
type CheckpointBegunInfo struct {
	ID    uint64
	Final bool
}

// Phase1Info describes a completed phase 1.
type Phase1Info struct {
	ID       uint64
	Duration time.Duration // from the start of Begin
}

// DecidedInfo describes a decided checkpoint.
type DecidedInfo struct {
	ID           uint64
	Committables int           // committables of this checkpoint
	Duration     time.Duration // of the decide step (from the end of phase 1)
}

// CommittedInfo describes a checkpoint whose phase 2 completed.
type CommittedInfo struct {
	ID     uint64
	Final  bool
	Phase2 time.Duration // from the decide step's end
	// Total is from the start of its Begin; 0 when the checkpoint was
	// begun by another Coordinator (a commit after Prepare alone).
	Total time.Duration
}

// CommitFailedInfo describes a failed phase-2 attempt.
type CommitFailedInfo struct {
	Checkpoint  uint64
	Participant string
	Attempt     int           // 1 for the first
	Retry       bool          // the coordinator tries again after Wait
	Wait        time.Duration // backoff before the next attempt
	Recovery    bool          // during Recover
	Err         error
}

// SweptInfo describes a participant's completed sweep.
type SweptInfo struct {
	Participant string
	Swept       Swept // what it deleted, by kind
	Recovery    bool  // during Recover (else: cleanup after a checkpoint)
}

// RecoveredInfo describes a completed recovery.
type RecoveredInfo struct {
	Checkpoint  uint64 // restored checkpoint (0: a fresh start)
	Recommitted int    // committables it published again
	Duration    time.Duration
}

// TeeEventListener returns a listener that calls a's callback, then b's,
// for every event either has.
func TeeEventListener(a, b EventListener) EventListener {
	return EventListener{
		CheckpointBegun: tee(a.CheckpointBegun, b.CheckpointBegun),
		Phase1Done:      tee(a.Phase1Done, b.Phase1Done),
		Decided:         tee(a.Decided, b.Decided),
		Committed:       tee(a.Committed, b.Committed),
		CommitFailed:    tee(a.CommitFailed, b.CommitFailed),
		Swept:           tee(a.Swept, b.Swept),
		Recovered:       tee(a.Recovered, b.Recovered),
	}
}

func tee[T any](a, b func(T)) func(T) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(v T) { a(v); b(v) }
}

// LogEvents returns a listener that logs the events to l: recoveries and
// retried commits at info and warning level, the steps of checkpoints
// at debug level.
func LogEvents(l *slog.Logger) EventListener {
	return EventListener{
		Decided: func(i DecidedInfo) {
			l.Debug("checkpoint decided", "checkpoint", i.ID, "committables", i.Committables, "decide", i.Duration)
		},
		Committed: func(i CommittedInfo) {
			l.Debug("checkpoint committed", "checkpoint", i.ID, "final", i.Final, "phase2", i.Phase2, "total", i.Total)
		},
		CommitFailed: func(i CommitFailedInfo) {
			if i.Retry {
				l.Warn("commit failed, retrying", "checkpoint", i.Checkpoint, "participant", i.Participant,
					"attempt", i.Attempt, "wait", i.Wait, "err", i.Err)
			}
		},
		Swept: func(i SweptInfo) {
			if len(i.Swept) > 0 {
				l.Debug("swept", "participant", i.Participant, "recovery", i.Recovery, "deleted", map[string]int64(i.Swept))
			}
		},
		Recovered: func(i RecoveredInfo) {
			if i.Checkpoint != 0 {
				l.Info("recovered", "checkpoint", i.Checkpoint, "recommitted", i.Recommitted, "duration", i.Duration)
			}
		},
	}
}
