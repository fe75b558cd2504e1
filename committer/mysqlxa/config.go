package mysqlxa

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/filesink/filesink/source"
)

// Mode says how a record changes the table.
type Mode string

// Modes.
const (
	// Insert adds a row per record; a duplicate key fails the checkpoint.
	Insert Mode = "insert"
	// Upsert adds a row or, on a duplicate key, sets every non-key column
	// to the record's value (INSERT ... ON DUPLICATE KEY UPDATE c = VALUES(c)).
	Upsert Mode = "upsert"
	// Increment adds a row or, on a duplicate key, adds the record's value
	// to every non-key column (c = c + VALUES(c)); every non-key column
	// must be numeric. Any duplicate or lost record changes the totals.
	Increment Mode = "increment"
)

// Defaults.
const (
	DefaultBatchRows   = 500
	DefaultBatchBytes  = 4 << 20
	DefaultMarkerTable = "filesink_xa_marker"
	// DefaultDeadLetterTable is the CLI's dead-letter table
	// (--on-bad-record skip); the library has none unless
	// WithDeadLetterTable names one.
	DefaultDeadLetterTable = "filesink_dead_letter"
	DefaultZombieGrace     = 2 * time.Second
	// maxPlaceholders is the server's limit on placeholders per statement.
	maxPlaceholders = 65535
)

// Option configures a Sink: the With* functions of this package, passed
// to New or Open, which validate them together. An Option is a value that
// only this package can make. WithJob is required.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is what the table argument and the options set; newConfig
// validates it once.
type config struct {
	table       string
	mode        Mode
	key         []string
	columns     []string
	job         string
	sink        string
	subtask     int
	batchRows   int
	batchBytes  int
	markerTable string
	zombieGrace time.Duration
	logger      *slog.Logger
	deadLetter  string                       // "": bad records are errors
	onBad       func(*source.BadRecordError) // may be nil
}

// WithMode sets how a record changes the table: Insert (the default),
// Upsert or Increment.
func WithMode(m Mode) Option { return optionFunc(func(c *config) { c.mode = m }) }

// WithKey sets the key columns: a record without one of them is an error,
// and Upsert and Increment never update them. Default: the table's
// primary key. Upsert and Increment need a non-empty key, which should be
// a primary or unique key of the table (ON DUPLICATE KEY UPDATE fires on
// any unique key).
func WithKey(cols ...string) Option {
	cols = slices.Clone(cols)
	return optionFunc(func(c *config) { c.key = cols })
}

// WithColumns sets the columns written (with the key columns). Default:
// every column that is neither generated nor AUTO_INCREMENT (unless a key
// column). Columns not listed take their default values.
func WithColumns(cols ...string) Option {
	cols = slices.Clone(cols)
	return optionFunc(func(c *config) { c.columns = cols })
}

// WithJob sets the id of the job across restarts (required); with the
// sink name and the subtask it names every XA branch, so two jobs writing
// to one server must have different ids. ASCII letters, digits and ._-/,
// with the sink name at most 50 bytes together.
func WithJob(id string) Option { return optionFunc(func(c *config) { c.job = id }) }

// WithSink sets the name of this sink within the job (default: the table).
func WithSink(name string) Option { return optionFunc(func(c *config) { c.sink = name }) }

// WithSubtask sets this instance's subtask number (>= 0; default 0).
func WithSubtask(n int) Option { return optionFunc(func(c *config) { c.subtask = n }) }

// WithBatchRows sets the number of records per multi-row INSERT (default
// 500, also for n <= 0; lowered so that a statement has at most 65535
// placeholders).
func WithBatchRows(n int) Option { return optionFunc(func(c *config) { c.batchRows = n }) }

// WithBatchBytes flushes a batch earlier when its values exceed n bytes
// (default 4 MiB, also for n <= 0); keep it well below max_allowed_packet.
func WithBatchBytes(n int) Option { return optionFunc(func(c *config) { c.batchBytes = n }) }

// WithMarkerTable sets the table of marker rows, "name" (in the target
// table's database) or "db.name" (default "filesink_xa_marker"). It is
// created if absent.
func WithMarkerTable(name string) Option { return optionFunc(func(c *config) { c.markerTable = name }) }

// WithZombieGrace sets how long a prepared branch may stay held by another
// live session (a previous run's connection that the server has not
// dropped yet) before that session is killed (default 2 s, also for d <= 0).
func WithZombieGrace(d time.Duration) Option {
	return optionFunc(func(c *config) { c.zombieGrace = d })
}

// WithLogger sets the logger of warnings (ignored fields, killed sessions)
// and progress (default: discard). Passwords are never logged.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.logger = l }) }

// WithDeadLetterTable makes bad records go, as rows of table name ("name"
// in the target table's database, or "db.name"; created if absent), into
// the checkpoint's XA branch instead of failing the write: the records
// Write rejects (a *RecordError: not a JSON object, a wrong type, a
// missing key column) and the rows the server rejects for their values
// (see RecordError). They are committed with the branch, so exactly once
// with the checkpoint, like the rows. A row has the job, sink, subtask,
// checkpoint, target table, the record's origin, the error and the
// record's bytes.
func WithDeadLetterTable(name string) Option {
	return optionFunc(func(c *config) { c.deadLetter = name })
}

// WithBadRecordFunc sets a function called with every bad record sent to
// the dead-letter table (see WithDeadLetterTable), on the goroutine that
// calls Write or Prepare, before the call returns; it must not block. The
// CLI feeds it to the run's event stream (pipeline.BadRecordFunc).
func WithBadRecordFunc(f func(*source.BadRecordError)) Option {
	return optionFunc(func(c *config) { c.onBad = f })
}

// newConfig applies opts to the configuration of table, applies the
// defaults and checks the configuration alone (the table's schema is
// checked by New); the error joins every problem found.
func newConfig(table string, opts []Option) (config, error) {
	c := config{table: table}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	var errs []error
	if c.table == "" {
		errs = append(errs, errors.New("mysqlxa: the table is required"))
	}
	if c.job == "" {
		errs = append(errs, errors.New("mysqlxa: WithJob is required"))
	}
	if c.mode == "" {
		c.mode = Insert
	}
	switch c.mode {
	case Insert, Upsert, Increment:
	default:
		errs = append(errs, fmt.Errorf("mysqlxa: unknown mode %q (want insert, upsert or increment)", c.mode))
	}
	if c.sink == "" {
		c.sink = c.table
	}
	if c.batchRows <= 0 {
		c.batchRows = DefaultBatchRows
	}
	if c.batchBytes <= 0 {
		c.batchBytes = DefaultBatchBytes
	}
	if c.markerTable == "" {
		c.markerTable = DefaultMarkerTable
	}
	if c.zombieGrace <= 0 {
		c.zombieGrace = DefaultZombieGrace
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.table != "" && c.job != "" {
		x := Xid{Job: c.job, Sink: c.sink, Subtask: c.subtask, Checkpoint: ^uint64(0), Nonce: "000000000000", ConnID: ^uint64(0)}
		if err := x.check(); err != nil {
			errs = append(errs, fmt.Errorf("mysqlxa: %w", err))
		}
	}
	return c, errors.Join(errs...)
}
