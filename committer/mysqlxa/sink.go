package mysqlxa

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/internal/jsonscan"
	"github.com/filesink/filesink/source"
)

// maxIgnoredLogged bounds the set of ignored field names remembered for the
// log, so records with ever new field names cannot grow it.
const maxIgnoredLogged = 256

// deferFactor bounds the rows buffered while a prepared branch is held, in
// batches (see full).
const deferFactor = 64

// Stats are running totals of a Sink, safe to read concurrently.
type Stats struct {
	Records    atomic.Int64 // records Write accepted as rows (a row the server rejects later is also in BadRecords)
	Rows       atomic.Int64 // rows sent to the server in batches
	Prepared   atomic.Int64 // branches prepared
	Committed  atomic.Int64 // branches committed by this Sink (including re-commits that found them committed)
	RolledBack atomic.Int64 // branches rolled back by Restore, Sweep
	Killed     atomic.Int64 // stale sessions killed
	BadRecords atomic.Int64 // records sent to the dead-letter table (WithDeadLetterTable)
}

// Sink is one subtask of the MySQL XA sink: it writes records into an XA
// branch per checkpoint and takes part in the commit protocol as a
// committer.Participant; it has the method set of pipeline.Sink.
//
// Write, Tick, Prepare, Commit, Restore, Sweep and Close must be called
// from one goroutine at a time (the pipeline calls them from the subtask's
// goroutine); Stats may be read concurrently.
type Sink struct {
	committer.NopPostCommit
	db    *sql.DB
	ownDB bool
	cfg   config
	log   *slog.Logger
	tbl   *table
	mark  marker

	nonce     string
	restored  bool
	next      uint64            // checkpoint id the current (or next) branch belongs to
	br        *branch           // the active branch (XA START done), or nil
	free      *pconn            // a connection without XA state, kept for the next branch
	held      map[string]*pconn // bqual -> connection holding that prepared branch
	failed    error             // a branch failed: everything until Restore fails
	args      []any             // buffered rows, len(cfg cols) values each
	rowBytes  []int             // approximate bytes of each buffered row
	rows      int               // rows in args
	bytes     int               // approximate bytes in args
	batch     int               // rows per full batch
	markBelow uint64            // marker rows of checkpoints below this go with the next branch
	ignored   map[string]bool
	vals      [][]byte        // per column: the value's text in the record being written
	origins   []source.Origin // of each buffered row
	recs      []byte          // with a dead-letter table: the buffered rows' records, back to back
	recEnds   []int           // the end of each buffered row's record in recs
	dl        *deadLetters    // nil: bad records are errors
	dead      []deadLetter    // bad records waiting for the branch
	stats     Stats
	hook      func(point string) error // test seam, see at
	lockName  string                   // GET_LOCK name held by the session of the active branch
}

var _ committer.Participant = (*Sink)(nil)

// pconn is a pinned connection and its prepared full-batch statement.
type pconn struct {
	conn *sql.Conn
	id   uint64 // CONNECTION_ID()
	stmt *sql.Stmt
}

// branch is the XA branch being written.
type branch struct {
	pc   *pconn
	xid  Xid
	rows int64
}

// committable is the phase-2 work of one checkpoint: the prepared branch.
type committable struct {
	Xid        string `json:"xid"` // X'..',X'..',format as XA statements take it
	Gtrid      string `json:"gtrid"`
	Bqual      string `json:"bqual"`
	Format     int64  `json:"format"`
	Checkpoint uint64 `json:"checkpoint"`
	Table      string `json:"table"`
	Marker     string `json:"marker"` // marker table; the row is (gtrid, checkpoint, nonce)
	ConnID     uint64 `json:"conn_id"`
	Rows       int64  `json:"rows"`
}

// state is the sink's snapshot: the checkpoint it belongs to.
type state struct {
	Checkpoint uint64 `json:"checkpoint"`
	Nonce      string `json:"nonce"`
}

// New returns the Sink of one subtask (WithSubtask) writing to table over
// db, after validating the options together, reading the table's schema
// and creating the marker table if absent (outside any XA branch). table
// is "name" (in the connection's default database) or "db.name"; it must
// exist and use a transactional storage engine with XA support (InnoDB).
// WithJob is required. The Sink does not close db. A nil error means the
// configuration fits the table. Restore must be called before Write or
// Prepare (the coordinator's Recover does).
func New(ctx context.Context, db *sql.DB, table string, opts ...Option) (*Sink, error) {
	if db == nil {
		return nil, errors.New("mysqlxa: nil *sql.DB")
	}
	cfg, err := newConfig(table, opts)
	if err != nil {
		return nil, err
	}
	t, err := loadTable(ctx, db, &cfg)
	if err != nil {
		return nil, err
	}
	mk, err := ensureMarker(ctx, db, cfg.markerTable, t.schema)
	if err != nil {
		return nil, err
	}
	s := &Sink{db: db, cfg: cfg, log: cfg.logger.With("sink", "mysqlxa", "table", t.display, "subtask", cfg.subtask),
		tbl: t, mark: mk, held: map[string]*pconn{}, ignored: map[string]bool{}}
	if cfg.deadLetter != "" {
		if s.dl, err = ensureDeadLetters(ctx, db, cfg.deadLetter, t.schema); err != nil {
			return nil, err
		}
	}
	s.batch = min(cfg.batchRows, maxPlaceholders/len(t.cols))
	s.vals = make([][]byte, len(t.cols))
	sum := sha256.Sum256([]byte(s.xid(0, 0).Gtrid()))
	s.lockName = "fsxa:" + hex.EncodeToString(sum[:20]) // at most 64 characters
	s.nonce = newNonce()
	return s, nil
}

// Open is New over a pool it opens from dsn (a go-sql-driver DSN, parsed
// with mysql.ParseDSN) and closes in Close. Errors never contain the
// password.
func Open(ctx context.Context, dsn, table string, opts ...Option) (*Sink, error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, errors.New("mysqlxa: invalid DSN (not shown: it may contain a password)")
	}
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("mysqlxa: DSN %s: %v", RedactDSN(dsn), err)
	}
	db := sql.OpenDB(conn)
	s, err := New(ctx, db, table, opts...)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.ownDB = true
	return s, nil
}

// RedactDSN returns dsn with its password replaced by "xxxxx", for logs
// and messages; a DSN that does not parse gives "(invalid DSN)".
func RedactDSN(dsn string) string {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "(invalid DSN)"
	}
	if mc.Passwd != "" {
		mc.Passwd = "xxxxx"
	}
	return mc.FormatDSN()
}

func newNonce() string {
	var b [nonceLen / 2]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Name implements committer.Participant: "mysqlxa/<subtask>".
func (s *Sink) Name() string { return ParticipantName(s.cfg.subtask) }

// ParticipantName is the name (committer.Participant.Name) of the Sink of
// subtask: "mysqlxa/" and the subtask number.
func ParticipantName(subtask int) string { return "mysqlxa/" + strconv.Itoa(subtask) }

// Stats returns the sink's running totals.
func (s *Sink) Stats() *Stats { return &s.stats }

// Counters implements pipeline.Sink: the branches rolled back (Stats
// RolledBack). Safe for concurrent use.
func (s *Sink) Counters() committer.Counters {
	return committer.Counters{BranchesRolledBack: s.stats.RolledBack.Load}
}

// BeginBatch implements pipeline.Sink; the sink has no use for batches:
// it does nothing.
func (s *Sink) BeginBatch() {}

// EndBatch implements pipeline.Sink; it does nothing.
func (s *Sink) EndBatch() {}

// Table returns the target table as "db.name".
func (s *Sink) Table() string { return s.tbl.display }

func (s *Sink) xid(checkpoint, connID uint64) Xid {
	return Xid{Job: s.cfg.job, Sink: s.cfg.sink, Subtask: s.cfg.subtask, Checkpoint: checkpoint, Nonce: s.nonce, ConnID: connID}
}

// Write buffers record, a JSON object whose fields name columns, and sends
// a multi-row INSERT inside the checkpoint's XA branch (starting it) when
// the batch is full (see the package documentation, Locks, for the rows
// buffered while the previous checkpoint awaits its commit). A nil error means the record is accepted: it will be in the branch
// that the next Prepare prepares (it is not visible before that checkpoint
// is committed), as a row or, with WithDeadLetterTable, as a dead letter.
// A bad record gives a *RecordError naming origin, and the sink stays
// usable (with WithDeadLetterTable it goes to the dead-letter table and
// Write returns nil). A row of a batch that the server rejects for its
// values gives a *RecordError naming that row's origin and fails the
// branch (with WithDeadLetterTable it goes to the dead letters and the
// rest of the batch is written). Any other error from the server fails
// the branch, and every later call fails until Restore (the job recovers
// from its last checkpoint).
func (s *Sink) Write(ctx context.Context, record []byte, origin source.Origin) error {
	if s.failed != nil {
		return s.failed
	}
	if !s.restored {
		return errors.New("mysqlxa: Write before Restore")
	}
	size, re := s.addRow(record, origin)
	if re != nil {
		if s.dl == nil {
			return re
		}
		s.deadLetter(record, re)
	} else {
		s.rows++
		s.bytes += size
		s.rowBytes = append(s.rowBytes, size)
		s.origins = append(s.origins, origin)
		if s.dl != nil {
			s.recs = append(s.recs, record...)
			s.recEnds = append(s.recEnds, len(s.recs))
			s.bytes += len(record)
		}
		s.stats.Records.Add(1)
	}
	if s.full() {
		return s.flush(ctx)
	}
	return nil
}

// addRow converts record into a row of arguments appended to s.args and
// returns its approximate size, or, leaving s.args as it was, the
// *RecordError that says why it cannot be a row.
func (s *Sink) addRow(record []byte, origin source.Origin) (int, *RecordError) {
	bad := func(column, reason string) *RecordError {
		return &RecordError{Origin: origin, Table: s.tbl.display, Column: column, Reason: reason}
	}
	if err := jsonscan.ObjectCheck(record); err != nil {
		reason := "not JSON (" + err.Error() + ")"
		if se, ok := err.(*jsonscan.SyntaxError); ok && se.Msg == "not a JSON object" {
			reason = "not a JSON object"
		}
		return 0, bad("", reason)
	}
	vals := s.vals
	clear(vals)
	objectFields(record, func(key, val []byte) {
		k := keyBytes(key)
		if i, ok := s.tbl.index[string(k)]; ok {
			vals[i] = val // the last of duplicate keys wins, as in encoding/json
		} else if len(s.ignored) < maxIgnoredLogged && !s.ignored[string(k)] {
			s.ignored[string(k)] = true
			s.log.Warn("field is not a written column of the table: ignored (logged once)", "field", string(k), "origin", origin)
		}
	})
	n0 := len(s.args)
	size := 0
	for i := range s.tbl.cols {
		c := &s.tbl.cols[i]
		raw := vals[i]
		var v any
		var why string
		switch {
		case raw != nil:
			v, why = convert(c, raw)
		case c.key:
			why = "missing key column"
		case s.cfg.mode == Increment:
			v = int64(0)
		case c.nullable:
			v = nil
		default:
			why = "missing, and the column is NOT NULL (list the columns to write in WithColumns to let the others take their defaults)"
		}
		if why != "" {
			clear(s.args[n0:])
			s.args = s.args[:n0]
			return 0, bad(c.name, why)
		}
		size += len(raw) + 2
		s.args = append(s.args, v)
	}
	return size, nil
}

// Tick implements pipeline.Sink. The sink has no time-based rules: Tick
// only reports a failed branch (nil otherwise).
func (s *Sink) Tick(context.Context, time.Time) error { return s.failed }

// fail discards the active branch (the server rolls it back when its
// session ends) and makes the sink unusable until Restore.
func (s *Sink) fail(err error) error {
	if s.br != nil {
		discard(s.br.pc)
		s.br = nil
	}
	s.reset()
	if s.failed == nil {
		s.failed = fmt.Errorf("%w (the branch was abandoned; the job must recover from its last checkpoint)", err)
	}
	return err
}

// discard closes a connection that may hold XA state so that the pool
// never hands it out again: database/sql drops a connection whose Raw
// callback returns driver.ErrBadConn. Ending the session makes the server
// roll back an active branch and keep a prepared one (unattached).
func discard(pc *pconn) {
	if pc == nil {
		return
	}
	if pc.stmt != nil {
		_ = pc.stmt.Close()
	}
	_ = pc.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = pc.conn.Close()
}

// release returns a connection without XA state to the pool.
func release(pc *pconn) {
	if pc.stmt != nil {
		_ = pc.stmt.Close()
	}
	_ = pc.conn.Close()
}

// pin takes a connection from the pool and reads its session id.
func (s *Sink) pin(ctx context.Context) (*pconn, error) {
	if pc := s.free; pc != nil {
		s.free = nil
		return pc, nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	pc := &pconn{conn: conn}
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&pc.id); err != nil {
		discard(pc)
		return nil, err
	}
	return pc, nil
}

// begin starts the branch of checkpoint s.next if none is active.
func (s *Sink) begin(ctx context.Context) error {
	if s.br != nil {
		return nil
	}
	pc, err := s.pin(ctx)
	if err != nil {
		return s.fail(fmt.Errorf("mysqlxa: table %s: checkpoint %d: connect: %w", s.tbl.display, s.next, err))
	}
	x := s.xid(s.next, pc.id)
	if _, err := pc.conn.ExecContext(ctx, "XA START "+x.SQL()); err != nil {
		discard(pc)
		return s.fail(fmt.Errorf("mysqlxa: table %s: XA START %s: %w", s.tbl.display, x, err))
	}
	// The branch lock marks the session with an active branch of this
	// subtask, so that a later Restore can find it if it outlives us.
	var got sql.NullInt64
	if err := pc.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", s.lockName).Scan(&got); err != nil || got.Int64 != 1 {
		discard(pc)
		if err == nil {
			err = fmt.Errorf("another session holds the branch lock %s of job %s, sink %s, subtask %d: does the job run twice?", s.lockName, s.cfg.job, s.cfg.sink, s.cfg.subtask)
		}
		return s.fail(fmt.Errorf("mysqlxa: table %s: branch %s: %w", s.tbl.display, x, err))
	}
	s.br = &branch{pc: pc, xid: x}
	return nil
}

// flush sends the buffered rows into the branch, in statements of at most
// s.batch rows and about BatchBytes bytes, and then the dead letters. A
// statement the server rejects for a row's values (rowRejected) is rolled
// back alone: its rows are sent again one at a time (oneByOne).
func (s *Sink) flush(ctx context.Context) error {
	if s.rows == 0 && len(s.dead) == 0 {
		return nil
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	pc := s.br.pc
	ncol := len(s.tbl.cols)
	row := 0
	for row < s.rows {
		n, size := 0, 0
		for row+n < s.rows && n < s.batch && (n == 0 || size+s.rowBytes[row+n] <= s.cfg.batchBytes) {
			size += s.rowBytes[row+n]
			n++
		}
		args := s.args[row*ncol : (row+n)*ncol]
		var err error
		if n == s.batch {
			if pc.stmt == nil {
				pc.stmt, err = pc.conn.PrepareContext(ctx, s.tbl.statement(s.batch))
			}
			if err == nil {
				_, err = pc.stmt.ExecContext(ctx, args...)
			}
		} else {
			_, err = pc.conn.ExecContext(ctx, s.tbl.statement(n), args...)
		}
		switch {
		case err == nil:
			s.br.rows += int64(n)
			s.stats.Rows.Add(int64(n))
		case rowRejected(err):
			if err := s.oneByOne(ctx, row, n); err != nil {
				return err
			}
		default:
			return s.fail(fmt.Errorf("mysqlxa: table %s: checkpoint %d: insert of %d rows (records %s to %s) in branch %s: %w%s",
				s.tbl.display, s.next, n, s.origins[row], s.origins[row+n-1], s.br.xid, err, lockHint(err)))
		}
		row += n
	}
	if err := s.writeDead(ctx); err != nil {
		return err
	}
	s.reset()
	return nil
}

// oneByOne sends buffered rows [from, from+n) one INSERT each, after the
// server rejected their batch for a row's values: a rejected row is a
// *RecordError naming its origin, which fails the branch, or, with a
// dead-letter table, becomes a dead letter while the other rows are
// written.
func (s *Sink) oneByOne(ctx context.Context, from, n int) error {
	pc := s.br.pc
	ncol := len(s.tbl.cols)
	stmt, err := pc.conn.PrepareContext(ctx, s.tbl.statement(1))
	if err != nil {
		return s.fail(fmt.Errorf("mysqlxa: table %s: checkpoint %d: branch %s: %w", s.tbl.display, s.next, s.br.xid, err))
	}
	defer stmt.Close()
	for i := from; i < from+n; i++ {
		_, err := stmt.ExecContext(ctx, s.args[i*ncol:(i+1)*ncol]...)
		switch {
		case err == nil:
			s.br.rows++
			s.stats.Rows.Add(1)
		case rowRejected(err):
			re := &RecordError{Origin: s.origins[i], Table: s.tbl.display, Reason: "rejected by the server: " + err.Error(), Err: err}
			if s.dl == nil {
				return s.fail(re)
			}
			s.deadLetter(s.recs[s.recStart(i):s.recEnds[i]], re)
		default:
			return s.fail(fmt.Errorf("mysqlxa: table %s: checkpoint %d: insert of record %s in branch %s: %w%s",
				s.tbl.display, s.next, s.origins[i], s.br.xid, err, lockHint(err)))
		}
	}
	return nil
}

// recStart is where buffered row i's record starts in s.recs.
func (s *Sink) recStart(i int) int {
	if i == 0 {
		return 0
	}
	return s.recEnds[i-1]
}

// reset empties the buffer, dropping references to strings and slices.
func (s *Sink) reset() {
	clear(s.args)
	clear(s.origins)
	clear(s.dead)
	s.args, s.rowBytes, s.rows, s.bytes = s.args[:0], s.rowBytes[:0], 0, 0
	s.origins, s.recs, s.recEnds, s.dead = s.origins[:0], s.recs[:0], s.recEnds[:0], s.dead[:0]
}

// full reports whether the buffered rows must be sent now. While this Sink
// holds a prepared branch (checkpoint N is prepared, its commit not yet
// called), rows of N+1 stay buffered: in upsert and increment modes they
// may need row locks that N's branch holds until its XA COMMIT, and a
// driver that calls Commit(N) from the goroutine that calls Write would
// queue that commit behind the wait. (pipeline.Run commits this sink at
// the barrier, before the next records, since its OverlapsCheckpoints is
// false; this guards other drivers.) Up to deferFactor batches are
// buffered that way; beyond, they are sent anyway.
func (s *Sink) full() bool {
	rows := max(s.rows, len(s.dead))
	if len(s.held) > 0 {
		return rows >= deferFactor*s.batch || s.bytes >= deferFactor*s.cfg.batchBytes
	}
	return rows >= s.batch || s.bytes >= s.cfg.batchBytes
}

// Prepare implements committer.Participant: see prepare;
// all of phase 1 is done at the barrier (the Wait returns at once).
func (s *Sink) Prepare(ctx context.Context, id uint64, final bool) (committer.Wait, error) {
	snap, err := s.prepare(ctx, id, final)
	if err != nil {
		return nil, err
	}
	return committer.Ready(snap), nil
}

// OverlapsCheckpoints implements pipeline.Sink: false: the next records may need row locks
// the prepared branch holds until its phase 2, so the pipeline runs the whole
// checkpoint at the barrier.
func (s *Sink) OverlapsCheckpoints() bool { return false }

// prepare is phase 1 of checkpoint id: it
// sends the buffered rows, writes the marker row (sink, subtask,
// checkpoint, nonce) in the branch, and runs XA END and XA PREPARE. A
// checkpoint without records still prepares a branch with its marker row.
// A nil error means the branch is prepared, so durable on the server (it
// survives a crash of this process and of the server) and committable from
// any session; the one committable names it. On error the branch is
// abandoned (rolled back by the server, or left prepared and rolled back
// by the next Restore) and the sink fails until Restore. final changes
// nothing: a branch holds nothing in progress.
func (s *Sink) prepare(ctx context.Context, id uint64, final bool) (committer.Snapshot, error) {
	if s.failed != nil {
		return committer.Snapshot{}, s.failed
	}
	if !s.restored {
		return committer.Snapshot{}, errors.New("mysqlxa: Prepare before Restore")
	}
	if id != s.next {
		return committer.Snapshot{}, s.fail(fmt.Errorf("mysqlxa: table %s: prepare of checkpoint %d, but the branch being written is for checkpoint %d (checkpoint ids must follow the restored one by one)", s.tbl.display, id, s.next))
	}
	if err := s.flush(ctx); err != nil {
		return committer.Snapshot{}, err
	}
	if err := s.begin(ctx); err != nil {
		return committer.Snapshot{}, err
	}
	br := s.br
	x := br.xid
	step := func(what string, err error) error {
		return s.fail(fmt.Errorf("mysqlxa: table %s: checkpoint %d: %s of branch %s: %w%s", s.tbl.display, id, what, x, err, lockHint(err)))
	}
	if s.markBelow > 0 {
		if _, err := br.pc.conn.ExecContext(ctx, s.mark.deleteSQL, x.Gtrid(), s.markBelow); err != nil {
			return committer.Snapshot{}, step("deleting old marker rows", err)
		}
	}
	if _, err := br.pc.conn.ExecContext(ctx, s.mark.insertSQL, x.Gtrid(), id, s.nonce, s.cfg.job, s.cfg.sink, s.cfg.subtask, s.tbl.display, br.rows); err != nil {
		return committer.Snapshot{}, step("marker row", err)
	}
	if _, err := br.pc.conn.ExecContext(ctx, "XA END "+x.SQL()); err != nil {
		return committer.Snapshot{}, step("XA END", err)
	}
	if err := s.at("xa-ended"); err != nil {
		return committer.Snapshot{}, step("XA END (hook)", err)
	}
	if _, err := br.pc.conn.ExecContext(ctx, "XA PREPARE "+x.SQL()); err != nil {
		return committer.Snapshot{}, step("XA PREPARE", err)
	}
	s.br = nil
	if _, err := br.pc.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", s.lockName); err != nil {
		// The branch is prepared; the session is in doubt: drop it (the
		// branch detaches) and let Commit resolve from another session.
		discard(br.pc)
	} else {
		s.held[x.Bqual()] = br.pc
	}
	s.next = id + 1
	s.markBelow = 0
	s.stats.Prepared.Add(1)
	c, _ := json.Marshal(committable{Xid: x.SQL(), Gtrid: x.Gtrid(), Bqual: x.Bqual(), Format: FormatID, Checkpoint: id,
		Table: s.tbl.display, Marker: s.mark.display, ConnID: x.ConnID, Rows: br.rows})
	st, _ := json.Marshal(state{Checkpoint: id, Nonce: s.nonce})
	s.log.Debug("prepared", "checkpoint", id, "xid", x.String(), "rows", br.rows)
	return committer.Snapshot{State: st, Committables: []json.RawMessage{c}}, nil
}

// at is a test seam: a crash point inside the sink's own steps.
func (s *Sink) at(point string) error {
	if s.hook == nil {
		return nil
	}
	return s.hook(point)
}

// decodeCommittable parses and checks a committable of this sink.
func (s *Sink) decodeCommittable(data json.RawMessage) (committable, Xid, error) {
	var c committable
	if err := json.Unmarshal(data, &c); err != nil {
		return c, Xid{}, committer.Permanent(fmt.Errorf("mysqlxa: malformed committable %s: %v", data, err))
	}
	x, ok := ParseXid(c.Format, []byte(c.Gtrid), []byte(c.Bqual))
	if !ok || x.Checkpoint != c.Checkpoint {
		return c, Xid{}, committer.Permanent(fmt.Errorf("mysqlxa: committable %s names no branch of a filesink MySQL sink", data))
	}
	if x.Job != s.cfg.job || x.Sink != s.cfg.sink || x.Subtask != s.cfg.subtask {
		return c, Xid{}, committer.Permanent(fmt.Errorf("mysqlxa: committable of branch %s does not belong to job %s, sink %s, subtask %d", x, s.cfg.job, s.cfg.sink, s.cfg.subtask))
	}
	return c, x, nil
}

// Commit implements committer.Participant (phase 2): XA COMMIT of the
// committable's branch, on the session that prepared it when this Sink
// still holds it, else from any session. It is idempotent and verified:
//
//   - XA COMMIT succeeds: committed now;
//   - the server does not know the xid (XAER_NOTA) and the branch's marker
//     row exists: committed earlier (a lost reply, a re-commit after a
//     restart), nil;
//   - XAER_NOTA while XA RECOVER lists the branch: a live session, left
//     from a previous run whose connection the server has not dropped
//     yet, still holds it (MariaDB keeps a prepared branch attached to its
//     session). Commit waits WithZombieGrace, then kills that session
//     (its id is in the xid; only a session of the same user is killed)
//     and commits;
//   - neither listed nor marked: a *DataLossError (matching
//     committer.ErrDataLoss).
//
// A nil error means the branch's rows are committed in the table. Other
// errors (a broken connection) may be retried.
func (s *Sink) Commit(ctx context.Context, data json.RawMessage) error {
	c, x, err := s.decodeCommittable(data)
	if err != nil {
		return err
	}
	if pc := s.held[x.Bqual()]; pc != nil {
		_, err := pc.conn.ExecContext(ctx, "XA COMMIT "+x.SQL())
		if err == nil {
			delete(s.held, x.Bqual())
			s.stats.Committed.Add(1)
			if s.free == nil {
				s.free = pc // no XA state any more: reuse it (and its statement)
			} else {
				release(pc)
			}
			return nil
		}
		// The session may still hold the branch (a lost reply, a server
		// error): drop it, so the branch is either committed or detached,
		// and resolve from another session.
		delete(s.held, x.Bqual())
		discard(pc)
		s.log.Warn("XA COMMIT on the preparing session failed; resolving from another session", "xid", x.String(), "checkpoint", c.Checkpoint, "err", err)
	}
	if err := s.resolve(ctx, x, true); err != nil {
		return fmt.Errorf("mysqlxa: table %s: commit of checkpoint %d: %w", s.tbl.display, c.Checkpoint, err)
	}
	s.stats.Committed.Add(1)
	return nil
}
