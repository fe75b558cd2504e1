package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/source/kafka"
)

// MySQL sinks: mysql://DSN, where DSN is a go-sql-driver DSN such as
// USER:PASS@tcp(HOST:PORT)/DB.

const mysqlScheme = "mysql://"

func isMySQL(uri string) bool { return strings.HasPrefix(uri, mysqlScheme) }

// redactURI returns uri without its password, for messages: a mysql://
// DSN's password and the password of any other URI's user info.
func redactURI(uri string) string {
	if dsn, ok := strings.CutPrefix(uri, mysqlScheme); ok {
		return mysqlScheme + mysqlxa.RedactDSN(dsn)
	}
	return kafka.RedactURI(uri)
}

// mysqlDSN parses a mysql:// URI; a DSN without a password takes the one
// of FILESINK_MYSQL_PASSWORD, if set. Errors never contain the password.
func mysqlDSN(uri string) (*mysql.Config, error) {
	dsn, ok := strings.CutPrefix(uri, mysqlScheme)
	if !ok || dsn == "" {
		return nil, usageError("--sink %q: want mysql://USER:PASS@tcp(HOST:PORT)/DB", redactURI(uri))
	}
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, usageError("--sink: invalid MySQL DSN %s (want mysql://USER:PASS@tcp(HOST:PORT)/DB)", redactURI(uri))
	}
	mysqlPassword(mc)
	return mc, nil
}

// openMySQL opens a connection pool for a mysql:// sink URI and checks
// that the server answers. Errors never contain the password.
func openMySQL(ctx context.Context, uri, flagName string) (*sql.DB, error) {
	mc, err := mysqlDSN(uri)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, usageError("%s %s: %v", flagName, redactURI(uri), err)
	}
	db := sql.OpenDB(conn)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s %s: %w", flagName, redactURI(uri), scrub(err, mc.Passwd))
	}
	return db, nil
}

// scrub replaces any occurrence of the secret in err's message: a driver
// error should never carry the password, but a message is no place to find
// out that one does.
func scrub(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), secret, "xxxxx"))
}

// mysqlFlags are the settings of a MySQL sink.
type mysqlFlags struct {
	table, mode, key, columns, marker, deadLetter, job string
	batchRows                                          int
}

func (f *mysqlFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.table, "mysql-table", "", "MySQL sink: target `TABLE` or DB.TABLE (required with a mysql:// sink)")
	enumVar(fs, &f.mode, "mysql-mode", "insert", "MySQL sink: `MODE` insert, upsert (set non-key columns) or increment (add to non-key columns)",
		"insert", "upsert", "increment")
	fs.StringVar(&f.key, "mysql-key", "", "MySQL sink: key `COL[,COL]` (default: the table's primary key; upsert and increment need one)")
	fs.StringVar(&f.columns, "mysql-columns", "", "MySQL sink: columns written, `COL[,COL]` (default: every non-generated column; JSON fields map to columns of the same name)")
	fs.IntVar(&f.batchRows, "mysql-batch-rows", mysqlxa.DefaultBatchRows, "MySQL sink: records per multi-row INSERT")
	fs.StringVar(&f.marker, "mysql-marker-table", mysqlxa.DefaultMarkerTable, "MySQL sink: table of the XA branches' marker rows (created if absent)")
	fs.StringVar(&f.deadLetter, "mysql-dead-letter-table", mysqlxa.DefaultDeadLetterTable, "MySQL sink with --on-bad-record skip: `TABLE` of the records that cannot be written "+
		"(rejected by the sink or by the server), written in the checkpoint's XA branch (created if absent)")
	fs.StringVar(&f.job, "job", "", "MySQL and HTTP sinks: job `ID` naming its XA branches (MySQL) or starting its idempotency keys (HTTP); keep it across restarts (default: kept in DIR/JOB of --state, first derived from the state location)")
}

// mysqlSinks makes the n subtasks of a MySQL sink on one pool; with onBad
// (--on-bad-record skip), subtask i sends bad records to the dead-letter
// table and reports them to onBad(i). The caller closes the pool after the
// sinks.
func (f *mysqlFlags) sinks(ctx context.Context, db *sql.DB, mode mysqlxa.Mode, job string, n int,
	onBad func(i int) func(*source.BadRecordError), log *slog.Logger) ([]*mysqlxa.Sink, error) {
	var out []*mysqlxa.Sink
	for i := range n {
		opts := []mysqlxa.Option{mysqlxa.WithMode(mode), mysqlxa.WithKey(splitList(f.key)...), mysqlxa.WithColumns(splitList(f.columns)...),
			mysqlxa.WithJob(job), mysqlxa.WithSubtask(i), mysqlxa.WithBatchRows(f.batchRows), mysqlxa.WithMarkerTable(f.marker),
			mysqlxa.WithLogger(log.With("subtask", i))}
		if onBad != nil {
			opts = append(opts, mysqlxa.WithDeadLetterTable(f.deadLetter), mysqlxa.WithBadRecordFunc(onBad(i)))
		}
		s, err := mysqlxa.New(ctx, db, f.table, opts...)
		if err != nil {
			for _, s := range out {
				s.Close()
			}
			return nil, fmt.Errorf("run: MySQL sink: %w", err)
		}
		out = append(out, s)
	}
	return out, nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// jobID returns the job id of a MySQL or HTTP sink (its XA branches, its
// idempotency keys) kept in the open checkpoint store at stateURI:
// recovery.KeepJobID with --job as the explicit id and, by default, one
// derived from the location ("fs-" and 8 hex digits of the SHA-256 of the
// absolute directory path or the s3:// URI). The store keeps the id on
// first use (DIR/JOB, PREFIX/JOB), so that it survives a move of the
// directory; an explicit id that differs from the kept one is a usage
// error (the branches of the old id would be left behind).
func jobID(ctx context.Context, store recovery.Store, stateURI, explicit string) (string, error) {
	id, err := recovery.KeepJobID(ctx, store, explicit, func() (string, error) { return deriveStateJob(stateURI) })
	var je *recovery.JobIDError
	if errors.As(err, &je) && !je.Meanwhile {
		return "", usageError("run: --job %q differs from the job id %q kept in %s: the XA branches of a job are named by its id; "+
			"use --job %s, or a new --state directory for a new job", je.Given, je.Kept, je.Location, je.Kept)
	}
	return id, err
}

// deriveStateJob is the default job id of the state location stateURI.
func deriveStateJob(stateURI string) (string, error) {
	if isS3(stateURI) {
		return deriveJob(strings.TrimRight(stateURI, "/")), nil
	}
	dir, err := localPath(stateURI, "--state")
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return deriveJob(abs), nil
}

// deriveJob is the default job id of a state location.
func deriveJob(location string) string {
	sum := sha256.Sum256([]byte(location))
	return "fs-" + hex.EncodeToString(sum[:4])
}

// asPipelineSinks converts the MySQL subtasks for the pipeline.
func asPipelineSinks(ss []*mysqlxa.Sink) []pipeline.Sink {
	out := make([]pipeline.Sink, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
