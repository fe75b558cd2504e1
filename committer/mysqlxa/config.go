package mysqlxa

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
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
	DefaultZombieGrace = 2 * time.Second
	// maxPlaceholders is the server's limit on placeholders per statement.
	maxPlaceholders = 65535
)

// Config describes one sink subtask. Job and Table are required.
type Config struct {
	// Table is the target table, "name" (in the connection's default
	// database) or "db.name". It must exist and use a transactional
	// storage engine with XA support (InnoDB).
	Table string
	// Mode is Insert (default), Upsert or Increment.
	Mode Mode
	// Key lists the key columns: a record without one of them is an error,
	// and Upsert and Increment never update them. Default: the table's
	// primary key. Upsert and Increment need a non-empty key, which should
	// be a primary or unique key of the table (ON DUPLICATE KEY UPDATE
	// fires on any unique key).
	Key []string
	// Columns lists the columns written (with the key columns). Default:
	// every column that is neither generated nor AUTO_INCREMENT (unless a
	// key column). Columns not listed take their default values.
	Columns []string
	// Job identifies the job across restarts; with Sink and Subtask it
	// names every XA branch, so two jobs writing to one server must have
	// different ids. ASCII letters, digits and ._-/, with Sink at most 50
	// bytes together.
	Job string
	// Sink identifies this sink within the job (default: Table).
	Sink string
	// Subtask is this instance's subtask number (>= 0).
	Subtask int
	// BatchRows is the number of records per multi-row INSERT (default
	// 500; lowered so that a statement has at most 65535 placeholders).
	BatchRows int
	// BatchBytes flushes a batch earlier when its values exceed this many
	// bytes (default 4 MiB); keep it well below max_allowed_packet.
	BatchBytes int
	// MarkerTable is the table of marker rows, "name" (in Table's
	// database) or "db.name" (default "filesink_xa_marker"). It is created
	// if absent.
	MarkerTable string
	// ZombieGrace is how long a prepared branch may stay held by another
	// live session (a previous run's connection that the server has not
	// dropped yet) before that session is killed (default 2 s).
	ZombieGrace time.Duration
	// Logger receives warnings (ignored fields, killed sessions) and
	// progress (default: discard). Passwords are never logged.
	Logger *slog.Logger
}

// normalize applies defaults and checks the configuration alone (the
// table's schema is checked by New).
func (c *Config) normalize() error {
	if c.Table == "" {
		return errors.New("mysqlxa: Config.Table is required")
	}
	if c.Job == "" {
		return errors.New("mysqlxa: Config.Job is required")
	}
	if c.Mode == "" {
		c.Mode = Insert
	}
	switch c.Mode {
	case Insert, Upsert, Increment:
	default:
		return fmt.Errorf("mysqlxa: unknown mode %q (want insert, upsert or increment)", c.Mode)
	}
	if c.Sink == "" {
		c.Sink = c.Table
	}
	if c.BatchRows <= 0 {
		c.BatchRows = DefaultBatchRows
	}
	if c.BatchBytes <= 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.MarkerTable == "" {
		c.MarkerTable = DefaultMarkerTable
	}
	if c.ZombieGrace <= 0 {
		c.ZombieGrace = DefaultZombieGrace
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	x := Xid{Job: c.Job, Sink: c.Sink, Subtask: c.Subtask, Checkpoint: ^uint64(0), Nonce: "000000000000", ConnID: ^uint64(0)}
	if err := x.check(); err != nil {
		return fmt.Errorf("mysqlxa: %w", err)
	}
	return nil
}
