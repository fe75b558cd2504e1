package mysqlxa

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/filesink/filesink/source"
)

// The dead-letter table (WithDeadLetterTable): bad records are rows of it,
// written inside the checkpoint's XA branch, so that they commit (or roll
// back, and come again from the source) with the rows of their checkpoint.

// deadLetterBatch bounds the rows of one INSERT into the dead-letter table.
const deadLetterBatch = 100

// maxDeadError bounds the bytes of a dead letter's error text (its column
// is a TEXT).
const maxDeadError = 8 << 10

// deadLetters is the dead-letter table.
type deadLetters struct {
	display string
	head    string // INSERT INTO t (...) VALUES
	row     string // (?, ...)
}

// deadLetter is a bad record waiting for the branch.
type deadLetter struct {
	origin, err string
	record      []byte
}

// ensureDeadLetters creates the dead-letter table if absent (outside any
// branch: DDL would end an XA transaction) and checks its engine.
func ensureDeadLetters(ctx context.Context, db *sql.DB, name, defaultSchema string) (*deadLetters, error) {
	schema, tbl := splitName(name, defaultSchema)
	d := &deadLetters{display: schema + "." + tbl}
	q := quoteIdent(schema) + "." + quoteIdent(tbl)
	_, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+q+` (
		id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
		job VARCHAR(64) NOT NULL,
		sink VARCHAR(64) NOT NULL,
		subtask INT NOT NULL,
		checkpoint BIGINT UNSIGNED NOT NULL COMMENT 'committed with the XA branch of this checkpoint',
		target_table VARCHAR(200) NOT NULL,
		origin TEXT CHARACTER SET utf8mb4 NOT NULL COMMENT 'file:line, topic/partition@offset',
		error TEXT CHARACTER SET utf8mb4 NOT NULL,
		record LONGBLOB NOT NULL COMMENT 'the record as read',
		created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
		KEY (job, sink, subtask, checkpoint)
	) ENGINE=InnoDB COMMENT='filesink XA sink: records that could not be written to target_table'`)
	if err != nil {
		return nil, fmt.Errorf("mysqlxa: create dead-letter table %s: %w", d.display, err)
	}
	var engine sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, tbl).Scan(&engine); err != nil {
		return nil, fmt.Errorf("mysqlxa: dead-letter table %s: %w", d.display, err)
	}
	if !strings.EqualFold(engine.String, "InnoDB") {
		return nil, fmt.Errorf("mysqlxa: dead-letter table %s uses engine %q, not InnoDB: its rows must commit with the XA branch", d.display, engine.String)
	}
	d.head = "INSERT INTO " + q + " (job, sink, subtask, checkpoint, target_table, origin, error, record) VALUES "
	d.row = "(?, ?, ?, ?, ?, ?, ?, ?)"
	return d, nil
}

// deadLetter buffers a bad record for the dead-letter table (record is
// copied) and reports it.
func (s *Sink) deadLetter(record []byte, re *RecordError) {
	msg := strings.ToValidUTF8(re.problem(), "\uFFFD")
	if len(msg) > maxDeadError {
		msg = msg[:maxDeadError]
		for !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
	}
	origin := strings.ToValidUTF8(re.Origin.String(), "\uFFFD")
	s.dead = append(s.dead, deadLetter{origin: origin, err: msg, record: append([]byte(nil), record...)})
	s.bytes += len(record) + len(msg) + len(origin)
	s.stats.BadRecords.Add(1)
	s.log.Warn("bad record sent to the dead-letter table", "origin", re.Origin, "table", s.dl.display, "err", re.problem())
	if s.cfg.onBad != nil {
		s.cfg.onBad(&source.BadRecordError{Origin: re.Origin.String(), Err: fmt.Errorf("table %s: %s", s.tbl.display, re.problem())})
	}
}

// writeDead inserts the buffered dead letters into the active branch (the
// caller then resets the buffer).
func (s *Sink) writeDead(ctx context.Context) error {
	for from := 0; from < len(s.dead); from += deadLetterBatch {
		batch := s.dead[from:min(len(s.dead), from+deadLetterBatch)]
		var q strings.Builder
		q.WriteString(s.dl.head)
		args := make([]any, 0, 8*len(batch))
		for i, d := range batch {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(s.dl.row)
			args = append(args, s.cfg.job, s.cfg.sink, s.cfg.subtask, s.next, s.tbl.display, d.origin, d.err, d.record)
		}
		if _, err := s.br.pc.conn.ExecContext(ctx, q.String(), args...); err != nil {
			return s.fail(fmt.Errorf("mysqlxa: table %s: checkpoint %d: insert of %d dead letters (records %s to %s) into %s in branch %s: %w%s",
				s.tbl.display, s.next, len(batch), batch[0].origin, batch[len(batch)-1].origin, s.dl.display, s.br.xid, err, lockHint(err)))
		}
	}
	return nil
}
