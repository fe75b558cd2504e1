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
// column (found by the sink), or a row the server rejects (Err: data too
// long, a value out of range or wrong for its column, a NULL for a NOT NULL
// column, a duplicate key in Insert mode, a failed CHECK or foreign key
// constraint). Nothing of the record was written. It matches
// source.ErrBadRecord, and Err when set.
type RecordError struct {
	Origin source.Origin // where the record came from
	Table  string
	Column string // "" when the record as a whole is wrong, or the server names the column
	Reason string
	Err    error // the server's error, for a row it rejected; else nil
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("mysqlxa: record %s for table %s: %s", e.Origin, e.Table, e.problem())
}

// problem is the message without the record and the table.
func (e *RecordError) problem() string {
	if e.Column == "" {
		return e.Reason
	}
	return "column " + e.Column + ": " + e.Reason
}

// Unwrap returns source.ErrBadRecord, and the server's error if any.
func (e *RecordError) Unwrap() []error {
	if e.Err == nil {
		return []error{source.ErrBadRecord}
	}
	return []error{source.ErrBadRecord, e.Err}
}

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

// rowErrors are the server's errors that reject one row for its values,
// in strict mode: the statement that met one is rolled back alone (InnoDB
// rolls back a failed statement, not the transaction, and an XA branch goes
// on after it), so the rows of a batch can be sent again one at a time to
// find the rejected ones. Lock wait timeouts and deadlocks are not among
// them: those fail the branch.
var rowErrors = map[uint16]bool{
	1048: true, // ER_BAD_NULL_ERROR: column cannot be null
	1062: true, // ER_DUP_ENTRY (Insert mode)
	1216: true, // ER_NO_REFERENCED_ROW: foreign key
	1264: true, // ER_WARN_DATA_OUT_OF_RANGE
	1265: true, // WARN_DATA_TRUNCATED
	1292: true, // ER_TRUNCATED_WRONG_VALUE: incorrect date or time value
	1366: true, // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: incorrect integer or string value
	1367: true, // ER_ILLEGAL_VALUE_FOR_TYPE
	1406: true, // ER_DATA_TOO_LONG
	1411: true, // ER_WRONG_VALUE_FOR_TYPE
	1452: true, // ER_NO_REFERENCED_ROW_2: foreign key
	1586: true, // ER_DUP_ENTRY_WITH_KEY_NAME
	1690: true, // ER_DATA_OUT_OF_RANGE: e.g. an increment overflows
	3140: true, // ER_INVALID_JSON_TEXT (MySQL)
	3819: true, // ER_CHECK_CONSTRAINT_VIOLATED (MySQL)
	4025: true, // ER_CONSTRAINT_FAILED: CHECK constraint (MariaDB)
}

// rowRejected reports whether err is the server's rejection of a row's
// values (rowErrors).
func rowRejected(err error) bool { return rowErrors[code(err)] }

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
