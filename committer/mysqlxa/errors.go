package mysqlxa

import (
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/source"
)

// RecordError reports a record that cannot be written to the table: not a
// JSON object, a value of the wrong type for its column, a missing key
// column. Nothing of the record was written. It matches source.ErrBadRecord.
type RecordError struct {
	Origin source.Origin // where the record came from
	Table  string
	Column string // "" when the record as a whole is wrong
	Reason string
}

func (e *RecordError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("mysqlxa: record %s for table %s: %s", e.Origin, e.Table, e.Reason)
	}
	return fmt.Sprintf("mysqlxa: record %s for table %s: column %s: %s", e.Origin, e.Table, e.Column, e.Reason)
}

// Unwrap returns source.ErrBadRecord.
func (e *RecordError) Unwrap() error { return source.ErrBadRecord }

// DataLossError reports that a decided XA branch can no longer be committed:
// the server does not list it as prepared (XA RECOVER) and its marker row
// does not exist, so it was rolled back behind the sink's back (an operator's
// XA ROLLBACK, a restore of the database from a backup, a server whose
// redo log was lost). It matches committer.ErrDataLoss.
type DataLossError struct {
	Xid        Xid
	Checkpoint uint64
	Table      string
	Marker     string // marker table
}

func (e *DataLossError) Error() string {
	return fmt.Sprintf("mysqlxa: XA branch %s of checkpoint %d (table %s) was decided but is neither prepared (XA RECOVER does not list it) "+
		"nor committed (no marker row in %s): it was rolled back outside filesink (XA ROLLBACK by hand, a restored backup, a lost redo log) "+
		"and the records of that checkpoint are not in the table; replay them from the source position of checkpoint %d into the table, "+
		"or accept their loss: %v", e.Xid, e.Checkpoint, e.Table, e.Marker, e.Checkpoint-1, committer.ErrDataLoss)
}

// Unwrap returns committer.ErrDataLoss.
func (e *DataLossError) Unwrap() error { return committer.ErrDataLoss }

// MySQL and MariaDB error numbers this package acts on.
const (
	errXANotA       = 1397 // XAER_NOTA: unknown xid
	errXARBRollback = 1402 // XA_RBROLLBACK: branch rolled back
	errLockWait     = 1205 // lock wait timeout
	errDeadlock     = 1213 // deadlock
	errNoSuchThread = 1094 // KILL of an unknown session
	errXARBDeadlock = 1614 // XA_RBDEADLOCK
	errXARBTimeout  = 1613 // XA_RBTIMEOUT
)

// code returns the server's error number of err, or 0 when err did not come
// from the server (a broken connection, a cancelled context).
func code(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// lockHint explains a lock wait timeout or deadlock inside a branch.
func lockHint(err error) string {
	switch code(err) {
	case errLockWait, errDeadlock, errXARBDeadlock, errXARBTimeout:
		return " (another transaction holds locks on these rows: with modes upsert and increment, two subtasks " +
			"writing the same keys wait for each other's prepared branches until the lock wait timeout; route each key " +
			"to one subtask or run one subtask; a prepared branch held by a stale session also holds its locks until it is committed)"
	}
	return ""
}
