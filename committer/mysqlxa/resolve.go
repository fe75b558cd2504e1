package mysqlxa

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/recovery"
)

// afterKill bounds the wait for a killed session to release its branch.
const afterKill = 10 * time.Second

// marker is the table of marker rows: one per prepared branch, written in
// the branch, so that it exists exactly when the branch was committed.
type marker struct {
	display   string
	insertSQL string
	deleteSQL string
	existsSQL string
}

// ensureMarker creates the marker table if absent (outside any branch:
// DDL would end an XA transaction) and checks its engine.
func ensureMarker(ctx context.Context, db *sql.DB, name, defaultSchema string) (marker, error) {
	schema, tbl := splitName(name, defaultSchema)
	m := marker{display: schema + "." + tbl}
	q := quoteIdent(schema) + "." + quoteIdent(tbl)
	_, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+q+` (
		gtrid VARBINARY(64) NOT NULL COMMENT 'fsxa1:JOB:SINK:SUBTASK',
		checkpoint BIGINT UNSIGNED NOT NULL,
		nonce VARBINARY(32) NOT NULL COMMENT 'per run of the sink',
		job VARCHAR(64) NOT NULL,
		sink VARCHAR(64) NOT NULL,
		subtask INT NOT NULL,
		target_table VARCHAR(200) NOT NULL,
		row_count BIGINT NOT NULL,
		created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
		PRIMARY KEY (gtrid, checkpoint, nonce)
	) ENGINE=InnoDB COMMENT='filesink XA sink: one row per committed branch; do not edit'`)
	if err != nil {
		return m, fmt.Errorf("mysqlxa: create marker table %s: %w", m.display, err)
	}
	var engine sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, tbl).Scan(&engine); err != nil {
		return m, fmt.Errorf("mysqlxa: marker table %s: %w", m.display, err)
	}
	if !strings.EqualFold(engine.String, "InnoDB") {
		return m, fmt.Errorf("mysqlxa: marker table %s uses engine %q, not InnoDB", m.display, engine.String)
	}
	m.insertSQL = "INSERT INTO " + q + " (gtrid, checkpoint, nonce, job, sink, subtask, target_table, row_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
	m.deleteSQL = "DELETE FROM " + q + " WHERE gtrid = ? AND checkpoint < ?"
	m.existsSQL = "SELECT COUNT(*) FROM " + q + " WHERE gtrid = ? AND checkpoint = ? AND nonce = ?"
	return m, nil
}

func (s *Sink) markerExists(ctx context.Context, x Xid) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, s.mark.existsSQL, x.Gtrid(), x.Checkpoint, x.Nonce).Scan(&n); err != nil {
		return false, fmt.Errorf("reading marker table %s: %w", s.mark.display, err)
	}
	return n > 0, nil
}

// recoverXids lists the prepared branches of filesink MySQL sinks on the
// server (XA RECOVER; MySQL 8 needs XA_RECOVER_ADMIN).
func recoverXids(ctx context.Context, db *sql.DB) ([]Xid, error) {
	rows, err := db.QueryContext(ctx, "XA RECOVER")
	if err != nil {
		return nil, fmt.Errorf("XA RECOVER: %w", err)
	}
	defer rows.Close()
	var out []Xid
	for rows.Next() {
		var format, glen, blen int64
		var data []byte
		if err := rows.Scan(&format, &glen, &blen, &data); err != nil {
			return nil, fmt.Errorf("XA RECOVER: %w", err)
		}
		if glen < 0 || blen < 0 || glen+blen > int64(len(data)) {
			continue
		}
		if x, ok := ParseXid(format, data[:glen], data[glen:glen+blen]); ok {
			out = append(out, x)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("XA RECOVER: %w", err)
	}
	return out, nil
}

// own lists this sink's prepared branches (format, job, sink, subtask).
func (s *Sink) own(ctx context.Context) ([]Xid, error) {
	all, err := recoverXids(ctx, s.db)
	if err != nil {
		return nil, err
	}
	var out []Xid
	for _, x := range all {
		if x.Job == s.cfg.job && x.Sink == s.cfg.sink && x.Subtask == s.cfg.subtask {
			out = append(out, x)
		}
	}
	return out, nil
}

func (s *Sink) listed(ctx context.Context, x Xid) (bool, error) {
	all, err := recoverXids(ctx, s.db)
	if err != nil {
		return false, err
	}
	for _, y := range all {
		if y == x {
			return true, nil
		}
	}
	return false, nil
}

// resolve commits (or rolls back) branch x from a pooled session and
// settles the ambiguous answers; see Commit. Statements without XA state
// leave the session clean, so the pool may keep it.
func (s *Sink) resolve(ctx context.Context, x Xid, commit bool) error {
	verb := "ROLLBACK"
	if commit {
		verb = "COMMIT"
	}
	start := time.Now()
	var killedAt time.Time
	wait := 25 * time.Millisecond
	for {
		_, err := s.db.ExecContext(ctx, "XA "+verb+" "+x.SQL())
		if err == nil {
			return nil
		}
		if commit && code(err) == errXARBRollback {
			return &DataLossError{Xid: x, Checkpoint: x.Checkpoint, Table: s.tbl.display, Marker: s.mark.display}
		}
		if code(err) != errXANotA {
			return fmt.Errorf("XA %s %s: %w", verb, x, err)
		}
		done, err := s.settled(ctx, x, commit)
		if done || err != nil {
			return err
		}
		listed, err := s.listed(ctx, x)
		if err != nil {
			return err
		}
		if !listed {
			// Committed or rolled back between the statements?
			if done, err := s.settled(ctx, x, commit); done || err != nil {
				return err
			}
			if commit {
				return &DataLossError{Xid: x, Checkpoint: x.Checkpoint, Table: s.tbl.display, Marker: s.mark.display}
			}
			return nil // already rolled back
		}
		// Listed but unknown to XA COMMIT/ROLLBACK: a live session holds it.
		switch {
		case killedAt.IsZero() && time.Since(start) >= s.cfg.zombieGrace:
			if err := s.kill(ctx, x); err != nil {
				return fmt.Errorf("XA %s %s: the branch is held by live session %d: %w", verb, x, x.ConnID, err)
			}
			killedAt = time.Now()
			wait = 25 * time.Millisecond
		case !killedAt.IsZero() && time.Since(killedAt) > afterKill:
			return fmt.Errorf("XA %s %s: the branch is still held by a live session %v after session %d was killed", verb, x, afterKill, x.ConnID)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(wait*2, 400*time.Millisecond)
	}
}

// settled reports whether the marker row shows the outcome: for a commit,
// the branch is committed; for a rollback, committing it was wrong.
func (s *Sink) settled(ctx context.Context, x Xid, commit bool) (bool, error) {
	marked, err := s.markerExists(ctx, x)
	if err != nil || !marked {
		return false, err
	}
	if commit {
		return true, nil
	}
	return true, committer.Permanent(fmt.Errorf("branch %s of checkpoint %d was committed although no checkpoint record decided it "+
		"(committed by hand, or the checkpoint store was replaced): restoring would write its records again", x, x.Checkpoint))
}

// kill ends session x.ConnID, which holds prepared branch x. Session ids
// are not reused while the server runs, and a session that holds a branch
// has lived since the branch was prepared, so the id names it; to be safe
// only a session of the same user is killed.
func (s *Sink) kill(ctx context.Context, x Xid) error {
	return s.killSession(ctx, x.ConnID, "a prepared branch", "xid", x.String(), "checkpoint", x.Checkpoint)
}

// killSession ends session id (KILL CONNECTION) if it exists and belongs to
// the same user, and is not the session running the KILL.
func (s *Sink) killSession(ctx context.Context, id uint64, holds string, logArgs ...any) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var self uint64
	var me string
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID(), SUBSTRING_INDEX(USER(), '@', 1)").Scan(&self, &me); err != nil {
		return err
	}
	if self == id {
		return errors.New("the holding session is this one")
	}
	var user string
	err = conn.QueryRowContext(ctx, "SELECT USER FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&user)
	if err == sql.ErrNoRows {
		return nil // gone already
	}
	if err != nil {
		return err
	}
	if user != me {
		return fmt.Errorf("session %d belongs to user %q, not %q: not killing it", id, user, me)
	}
	s.log.Warn("killing a stale session that still holds "+holds, append([]any{"session", id}, logArgs...)...)
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil && code(err) != errNoSuchThread {
		return err
	}
	s.stats.Killed.Add(1)
	return nil
}

// killActive ends a stale session that holds an active (not prepared)
// branch of this subtask, found by the branch lock it holds (GET_LOCK in
// begin): the session of a previous run that the server has not dropped
// (after a network partition it keeps it until wait_timeout), whose branch
// holds row locks that this run's writes would wait for.
func (s *Sink) killActive(ctx context.Context) error {
	deadline := time.Now().Add(afterKill)
	killed := false
	for {
		var id sql.NullInt64
		if err := s.db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", s.lockName).Scan(&id); err != nil {
			return fmt.Errorf("branch lock %s: %w", s.lockName, err)
		}
		if !id.Valid {
			return nil
		}
		if !killed {
			if err := s.killSession(ctx, uint64(id.Int64), "an active branch", "lock", s.lockName); err != nil {
				return fmt.Errorf("session %d holds an active branch of this subtask (branch lock %s): %w", id.Int64, s.lockName, err)
			}
			killed = true
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("session %d still holds the branch lock %s of this subtask %v after it was killed", id.Int64, s.lockName, afterKill)
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Restore implements committer.Participant: it abandons whatever this Sink
// held (the active branch, prepared branches of its previous life: the
// server keeps those), then rolls back every prepared branch of this job,
// sink and subtask newer than the restored checkpoint (the coordinator has
// already committed the restored record's branches), killing a stale
// session that holds one (see Commit). Before that it kills a stale session
// of a previous run that still has an active branch of this subtask (one
// the server has not dropped, as after a network partition), which would
// hold row locks until wait_timeout. state nil means a fresh start: every
// prepared branch of this subtask is rolled back. A nil error means no
// branch of a checkpoint after the restored one is prepared, and the sink
// writes the next checkpoint's records with a new nonce.
func (s *Sink) Restore(ctx context.Context, st json.RawMessage) error {
	s.abandon()
	s.failed, s.restored = nil, false
	var last state
	if len(st) > 0 && string(st) != "null" {
		if err := json.Unmarshal(st, &last); err != nil {
			return committer.Permanent(fmt.Errorf("mysqlxa: table %s: malformed state %s: %v", s.tbl.display, st, err))
		}
	}
	s.nonce = newNonce()
	if err := s.killActive(ctx); err != nil {
		return fmt.Errorf("mysqlxa: table %s: restore checkpoint %d: %w", s.tbl.display, last.Checkpoint, err)
	}
	own, err := s.own(ctx)
	if err != nil {
		return fmt.Errorf("mysqlxa: table %s: restore checkpoint %d: %w", s.tbl.display, last.Checkpoint, err)
	}
	for _, x := range own {
		if x.Checkpoint <= last.Checkpoint {
			continue // the sweep decides
		}
		s.log.Info("rolling back a branch of a checkpoint that was never decided", "xid", x.String(), "checkpoint", x.Checkpoint, "restored", last.Checkpoint)
		if err := s.resolve(ctx, x, false); err != nil {
			return fmt.Errorf("mysqlxa: table %s: restore checkpoint %d: roll back branch of checkpoint %d: %w", s.tbl.display, last.Checkpoint, x.Checkpoint, err)
		}
		s.stats.RolledBack.Add(1)
	}
	s.next = last.Checkpoint + 1
	s.restored = true
	return nil
}

// abandon drops the active branch, the buffered rows and the sessions that
// hold prepared branches, without publishing anything.
func (s *Sink) abandon() {
	if s.br != nil {
		discard(s.br.pc)
		s.br = nil
	}
	for k, pc := range s.held {
		discard(pc)
		delete(s.held, k)
	}
	s.reset()
}

// Sweep implements committer.Participant: it rolls back every prepared
// branch of this job, sink and subtask that no retained record references
// and that this Sink is not holding, and schedules the deletion of marker
// rows older than anything the retained records reference (below the
// oldest retained checkpoint and the oldest pending branch); the deletion
// runs inside the next branch, so it commits with the next checkpoint. A
// nil error means no orphaned branch of this subtask remains. It counts the
// branches it rolls back (kind SweptXABranch).
func (s *Sink) Sweep(ctx context.Context, retained []*recovery.Checkpoint) (committer.Swept, error) {
	before := s.stats.RolledBack.Load()
	err := s.sweep(ctx, retained)
	return committer.Swept{SweptXABranch: s.stats.RolledBack.Load() - before}, err
}

// SweptXABranch is the kind of orphaned staging data Sweep deletes: an XA
// branch, rolled back.
const SweptXABranch = "xa_branch"

func (s *Sink) sweep(ctx context.Context, retained []*recovery.Checkpoint) error {
	keep := map[Xid]bool{}
	var below uint64
	for i, r := range retained {
		lo := r.ID
		for _, p := range r.Participants {
			if p.Name != s.Name() {
				continue
			}
			for _, pc := range p.Pending {
				_, x, err := s.decodeCommittable(pc.Data)
				if err != nil {
					return fmt.Errorf("mysqlxa: sweep: checkpoint record %d: %w", r.ID, err)
				}
				keep[x] = true
				lo = min(lo, pc.Checkpoint)
			}
		}
		if i == 0 || lo < below {
			below = lo
		}
	}
	own, err := s.own(ctx)
	if err != nil {
		return fmt.Errorf("mysqlxa: table %s: sweep: %w", s.tbl.display, err)
	}
	for _, x := range own {
		if keep[x] || s.held[x.Bqual()] != nil || s.br != nil && s.br.xid == x {
			continue
		}
		s.log.Info("rolling back an orphaned branch", "xid", x.String(), "checkpoint", x.Checkpoint)
		if err := s.resolve(ctx, x, false); err != nil {
			return fmt.Errorf("mysqlxa: table %s: sweep: roll back branch of checkpoint %d: %w", s.tbl.display, x.Checkpoint, err)
		}
		s.stats.RolledBack.Add(1)
	}
	if len(retained) > 0 {
		s.markBelow = below
	}
	return nil
}

// Close releases the sink's connections without publishing anything: an
// active branch is rolled back by the server, prepared branches stay
// prepared (a checkpoint record may reference them) and are committed or
// rolled back by the next Recover. It closes the pool only when Open made
// it. Not safe for concurrent use with the other methods.
func (s *Sink) Close() error {
	s.abandon()
	if s.free != nil {
		release(s.free)
		s.free = nil
	}
	s.failed = errors.New("mysqlxa: sink closed")
	if s.ownDB {
		return s.db.Close()
	}
	return nil
}
