// Package mysqlxa is filesink's MySQL/MariaDB sink: records become rows of a
// table exactly once, through one XA transaction branch per subtask and
// checkpoint that is prepared in phase 1 and committed in phase 2 of the
// commit protocol (package committer). It follows Flink's exactly-once JDBC
// sink and fixes the approach of the seed article (a transaction with
// autocommit off, nothing done in pre-commit, COMMIT in commit), which is
// not exactly-once: its transaction dies with its connection, cannot be
// named in a checkpoint, and a lost COMMIT reply leaves the outcome unknown.
//
// # Branches
//
// A [Sink] is one subtask. For checkpoint N it pins one connection
// (sql.Conn, autocommit on) and runs XA START with xid
//
//	format  FormatID (0x46535841, "FSXA")
//	gtrid   fsxa1:JOB:SINK:SUBTASK          (WithJob, WithSink, WithSubtask)
//	bqual   N:NONCE:CONNID                  (checkpoint, random per run, session id)
//
// each part at most 64 bytes, sent as hex literals (X'..',X'..',format).
// Records are buffered and sent as multi-row INSERTs with placeholders
// (500 rows by default, see WithBatchRows, reusing one prepared statement per
// connection). Prepare (phase 1) sends the rest, writes a marker row
// (gtrid, N, nonce, job, sink, subtask, table, rows) into the marker table
// (WithMarkerTable, created if absent) in the same branch, then XA END
// and XA PREPARE. Its state is {"checkpoint":N,"nonce":...}; its one
// committable names the xid, the marker row, the table and the session id.
// A checkpoint without records still prepares a branch holding its marker
// row. Commit (phase 2) is XA COMMIT.
//
// # Guarantees
//
// A record whose Write returned nil is in the table exactly once after the
// checkpoint covering it is decided (its record written to the checkpoint
// store), whatever crashes of this process or of the server happen before,
// during or after phase 2; it is never visible before. A prepared branch is
// durable on the server (MariaDB >= 10.5 and MySQL >= 5.7.7 keep prepared
// branches across a disconnect and a server restart, including kill -9).
//
// Commit is idempotent and verified. XAER_NOTA (1397) means committed only
// if the marker row exists (the marker commits with the branch); if XA
// RECOVER still lists the branch, a live session holds it: MariaDB keeps a
// prepared branch attached to the session that prepared it until that
// session ends, so a previous run's connection the server has not dropped
// yet makes XA COMMIT from any other session fail. The sink waits
// WithZombieGrace, then kills that session (its id is in the xid; only a
// session of the same user is killed; ids are not reused while the server
// runs) and commits. Neither listed nor marked means the branch was rolled
// back behind the sink's back: a *DataLossError matching
// committer.ErrDataLoss, never a silent success. A commit whose reply is
// lost is resolved the same way on retry or after a restart.
//
// While a branch is active its session holds a named lock of the subtask
// (GET_LOCK "fsxa:" + hash of the gtrid, released after XA PREPARE). A
// second live instance of the same job cannot start a branch of that
// subtask (an error asks whether the job runs twice), and Restore kills a
// stale session of a previous run that still holds it (a session the server
// keeps after a network partition until wait_timeout, whose active branch
// holds row locks).
//
// Restore rolls back every prepared branch of the same job, sink and
// subtask newer than the restored checkpoint (the coordinator has
// re-committed the restored checkpoint's branches before); Sweep rolls back
// the subtask's prepared branches that no retained checkpoint record
// references, and makes the next branch delete marker rows older than any
// retained record and any pending branch. Only branches of FormatID and this
// gtrid are touched: other jobs, sinks, subtasks and applications are not.
//
// A connection that holds XA state is never returned to the pool: on any
// error after XA START, and in Close, it is discarded (its session ends:
// the server rolls back an active branch and keeps a prepared one). A
// batch the server rejects for a row's values (data too long, out of
// range, a duplicate key in Insert mode...: see RecordError) is rolled
// back alone (InnoDB rolls back the failed statement, and the XA branch
// goes on), and its rows are sent again one INSERT each, in the same
// branch on the same connection, to find the rejected ones. Any other
// failed batch is never re-run: the branch fails, the sink fails until
// Restore, and the job recovers from its last checkpoint.
//
// # Records
//
// A record is a JSON object; a field names the column of the same name
// (read from information_schema when the Sink is made). Fields that are
// not written columns are ignored and named once in the log. Modes:
// [Insert], [Upsert] (ON DUPLICATE KEY UPDATE c = VALUES(c)) and
// [Increment] (c = c + VALUES(c) for every non-key column; the honest test
// of exactly-once: any duplicate or loss changes the totals). A record that
// is not a JSON object, has a value of the wrong type for its column or
// lacks a key column is a *RecordError naming its origin; nothing of it is
// written and the sink stays usable. A row the server rejects for its
// values (the session's sql_mode decides what is an error: MariaDB's and
// MySQL's default strict mode makes data too long or out of range one) is
// a *RecordError naming its origin and the server's error, and fails the
// branch.
//
// # Dead letters
//
// With [WithDeadLetterTable], both kinds of bad records become rows of a
// dead-letter table (created if absent: job, sink, subtask, checkpoint,
// target table, origin, error, the record's bytes) written inside the
// checkpoint's branch, and the rest of a rejected batch is written: the
// dead letters commit with the checkpoint's rows, or are rolled back with
// them and written again when their records come again from the source,
// so each is there exactly once. [WithBadRecordFunc] hears of each.
//
// # Locks
//
// A branch holds its row locks from its writes until XA COMMIT. The
// pipeline overlaps checkpoint N's decide and commit with the records of
// N+1 and calls Commit from the goroutine that calls Write, so while a
// prepared branch is held (its Commit not yet called) the sink keeps the
// next checkpoint's rows in memory instead of sending them, up to 64
// batches (then it sends them and may wait for locks); otherwise a row of
// N+1 on a key that N wrote would wait for a commit queued behind it. In
// Upsert and Increment modes, two subtasks that write the same key wait
// for each other's branches, which end only after every subtask prepared:
// route each key to one subtask, or run one. A lock wait timeout fails the
// checkpoint with this explanation.
//
// # Server requirements
//
// MariaDB >= 10.5 or MySQL >= 5.7.7 with InnoDB tables. XA RECOVER needs the
// XA_RECOVER_ADMIN privilege on MySQL 8; killing a stale session of the same
// user needs no extra privilege. The user needs INSERT and UPDATE (the
// modes), SELECT, DELETE and CREATE (marker table) privileges.
//
// # Operations
//
// [ListBranches], [CommitBranch] and [RollbackBranch] serve `filesink xa
// list|commit|rollback`. [Open] takes a DSN; passwords never appear in
// errors or logs ([RedactDSN]).
//
// # Concurrency
//
// A Sink is not safe for concurrent use: the pipeline calls it from its
// subtask's goroutine. Different Sinks (subtasks) may run concurrently on
// one *sql.DB. Package functions are safe for concurrent use.
package mysqlxa
