package committer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/filesink/filesink/recovery"
)

// Option configures a Coordinator: the With* functions of this package,
// passed to New, which validates them together. An Option is a value that
// only this package can make.
type Option interface{ apply(*config) }

// config is what the options set; New validates it once.
type config struct {
	retain     int
	attempts   int
	backoff    time.Duration
	events     EventListener
	hook       func(string) error
	sweepEvery int
	now        func() time.Time
	postCommit func(ctx context.Context, id uint64) error
	firstID    uint64
	errs       []error // options whose argument is invalid on its own
}

func defaultConfig() config {
	return config{retain: recovery.DefaultRetain, attempts: 6, backoff: 100 * time.Millisecond, now: time.Now}
}

// validate returns the errors of the options, joined.
func (c *config) validate() error {
	errs := c.errs
	if c.retain < 1 {
		errs = append(errs, fmt.Errorf("committer: WithRetain(%d): at least one record must be kept", c.retain))
	}
	if c.attempts < 1 || c.backoff < 0 {
		errs = append(errs, fmt.Errorf("committer: WithRetry(%d, %v): want at least one attempt and a backoff >= 0", c.attempts, c.backoff))
	}
	if c.sweepEvery < 0 {
		errs = append(errs, fmt.Errorf("committer: WithSweepEvery(%d): want n >= 0", c.sweepEvery))
	}
	if c.now == nil {
		errs = append(errs, errors.New("committer: WithClock(nil)"))
	}
	return errors.Join(errs...)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithFirstID makes the first checkpoint of a fresh start (a store with
// no record) checkpoint id instead of 1: for a run that goes on with an
// output whose manifests already name checkpoints up to id-1 (a run that
// rebuilt its position from the output after its state was lost), so that
// no name is written twice. It has no effect when a record is restored.
func WithFirstID(id uint64) Option { return optionFunc(func(c *config) { c.firstID = id }) }

// WithRetain sets how many checkpoint records are kept (default
// recovery.DefaultRetain); New fails for n < 1.
func WithRetain(n int) Option { return optionFunc(func(c *config) { c.retain = n }) }

// WithLogger logs the protocol's events to l (LogEvents; default: no
// logs); New fails for a nil l.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l == nil {
			c.errs = append(c.errs, errors.New("committer: WithLogger(nil)"))
			return
		}
		c.events = TeeEventListener(c.events, LogEvents(l))
	})
}

// WithEventListener adds l to the listeners of the protocol's events;
// listeners added earlier are called first.
func WithEventListener(l EventListener) Option {
	return optionFunc(func(c *config) { c.events = TeeEventListener(c.events, l) })
}

// WithRetry sets the phase-2 retry policy: at most attempts tries per
// committable, waiting base, 2*base, 4*base ... (capped at 30 s) with full
// jitter between tries. Default 6 attempts from 100 ms. New fails for
// attempts < 1 or base < 0.
func WithRetry(attempts int, base time.Duration) Option {
	return optionFunc(func(c *config) { c.attempts, c.backoff = attempts, base })
}

// WithHook is for tests only: it installs a function called at each named
// point of the protocol ("prepared:NAME", "phase1", "decided",
// "committed:N" after the n-th commit of a phase 2,
// "checkpoint-committed:NAME" after a participant's CommittedCheckpoint,
// "phase2", "pruned", "swept", and the same with prefix "recover:" during
// recovery, with "recover:restored" and "recover:swept"). A non-nil error
// from the hook stops the coordinator there, as a crash at that instant
// would; tests use it to crash at every point. It is no event stream:
// observe the protocol with WithEventListener.
func WithHook(h func(point string) error) Option {
	return optionFunc(func(c *config) { c.hook = h })
}

// WithSweepEvery makes phase 2 also sweep orphaned staging data (protocol
// step 4, cleanup) after every n-th checkpoint and after a final one, with
// the retained records; 0 (the default) sweeps only at recovery, unless a
// participant asks for sweeps in its Snapshot (Snapshot.SweepEvery: the
// file sink on a backend whose staging outlives a commit, such as S3's
// tail objects of older checkpoints). A sweep that walks a whole local
// output tree may be costly.
// New fails for n < 0.
func WithSweepEvery(n int) Option { return optionFunc(func(c *config) { c.sweepEvery = n }) }

// WithPostCommit sets a function called after each checkpoint's phase 2
// (its committables and CommittedCheckpoint calls published, old records
// pruned, staging swept), with its id, on the goroutine that committed it:
// by Commit and Complete, not by Recover. An error fails the commit as a
// commit error does. For work that must follow a commit, such as
// partition-complete markers. nil: none (the default).
func WithPostCommit(f func(ctx context.Context, id uint64) error) Option {
	return optionFunc(func(c *config) { c.postCommit = f })
}

// WithClock sets the time source for record timestamps and the durations
// of the events (default time.Now); New fails for nil.
func WithClock(now func() time.Time) Option { return optionFunc(func(c *config) { c.now = now }) }
