package pipeline

import (
	"log/slog"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/source"
)

// EventListener receives the events of a run (Config.Events): those of
// the commit protocol (the embedded committer.EventListener) and the
// pipeline's own. Every field is optional. The callbacks must not block;
// Progress and SourceOpened are called on Run's goroutine, the protocol's
// events as committer.EventListener says (a checkpoint that completes
// beside the records reports its later steps from its own goroutine).
type EventListener struct {
	committer.EventListener
	// SourceOpened: the source is open, at the restored checkpoint's
	// position or at its start.
	SourceOpened func(SourceInfo)
	// Progress: the run's totals, after every batch and checkpoint (as
	// Config.Progress).
	Progress func(Progress)
	// BadRecord: a sink sent a record it could not write to its
	// dead-letter output (--on-bad-record skip). The sinks report it
	// themselves: the program that makes a file or MySQL sink passes this
	// function to it (filesink.WithBadRecordFunc,
	// mysqlxa.WithBadRecordFunc, through BadRecordFunc).
	BadRecord func(BadRecordInfo)
}

// BadRecordInfo describes a record sent to a dead-letter output.
type BadRecordInfo struct {
	Sink string                 // the sink's Name
	Err  *source.BadRecordError // the record's origin and what is wrong with it
}

// BadRecordFunc returns the function a sink named sink calls for each bad
// record: it reports it to (*l).BadRecord, read at the call, so that
// listeners added to *l after the sinks were made still hear it. The
// listener must not change while the run goes on.
func BadRecordFunc(l *EventListener, sink string) func(*source.BadRecordError) {
	return func(err *source.BadRecordError) {
		if f := l.BadRecord; f != nil {
			f(BadRecordInfo{Sink: sink, Err: err})
		}
	}
}

// SourceInfo describes the opened source.
type SourceInfo struct {
	Restored   uint64 // checkpoint restored (0: a fresh start)
	Source     string // source.Source.Describe
	Replayable bool   // source.Source.Replayable
}

// TeeEventListener returns a listener that calls a's callback, then b's,
// for every event either has.
func TeeEventListener(a, b EventListener) EventListener {
	return EventListener{
		EventListener: committer.TeeEventListener(a.EventListener, b.EventListener),
		SourceOpened:  tee(a.SourceOpened, b.SourceOpened),
		Progress:      tee(a.Progress, b.Progress),
		BadRecord:     tee(a.BadRecord, b.BadRecord),
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

// logEvents logs a run's events to l: the protocol's (committer.LogEvents)
// and the pipeline's.
func logEvents(l *slog.Logger) EventListener {
	return EventListener{
		EventListener: committer.LogEvents(l),
		SourceOpened: func(i SourceInfo) {
			switch {
			case i.Restored == 0:
			case i.Replayable:
				l.Info("restored", "checkpoint", i.Restored, "source", i.Source)
			default:
				l.Warn("the source is not replayable: records read after the last checkpoint of the previous run are lost", "checkpoint", i.Restored, "source", i.Source)
			}
		},
	}
}

// events is the listener of a run with cfg: the logs, cfg.Events, and the
// functions of cfg.Barrier and cfg.Progress.
func (cfg *Config) events() EventListener {
	ev := TeeEventListener(logEvents(cfg.Logger), cfg.Events)
	if f := cfg.Barrier; f != nil {
		ev.CheckpointBegun = tee(func(i committer.CheckpointBegunInfo) { f(i.ID, i.Final) }, ev.CheckpointBegun)
	}
	ev.Progress = tee(ev.Progress, cfg.Progress)
	return ev
}
