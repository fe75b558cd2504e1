package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/source/kafka"
	"github.com/filesink/filesink/vfs"
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

// mysqlDSN parses a mysql:// URI. Errors never contain the password.
func mysqlDSN(uri string) (*mysql.Config, error) {
	dsn, ok := strings.CutPrefix(uri, mysqlScheme)
	if !ok || dsn == "" {
		return nil, usageError("--sink %q: want mysql://USER:PASS@tcp(HOST:PORT)/DB", redactURI(uri))
	}
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, usageError("--sink: invalid MySQL DSN %s (want mysql://USER:PASS@tcp(HOST:PORT)/DB)", redactURI(uri))
	}
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
	table, mode, key, columns, marker, job string
	batchRows                              int
}

func (f *mysqlFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.table, "mysql-table", "", "MySQL sink: target `TABLE` or DB.TABLE (required with a mysql:// sink)")
	fs.StringVar(&f.mode, "mysql-mode", "insert", "MySQL sink: insert, upsert (set non-key columns) or increment (add to non-key columns)")
	fs.StringVar(&f.key, "mysql-key", "", "MySQL sink: key `COL[,COL]` (default: the table's primary key; upsert and increment need one)")
	fs.StringVar(&f.columns, "mysql-columns", "", "MySQL sink: columns written, `COL[,COL]` (default: every non-generated column; JSON fields map to columns of the same name)")
	fs.IntVar(&f.batchRows, "mysql-batch-rows", mysqlxa.DefaultBatchRows, "MySQL sink: records per multi-row INSERT")
	fs.StringVar(&f.marker, "mysql-marker-table", mysqlxa.DefaultMarkerTable, "MySQL sink: table of the XA branches' marker rows (created if absent)")
	fs.StringVar(&f.job, "job", "", "MySQL and HTTP sinks: job `ID` naming its XA branches (MySQL) or starting its idempotency keys (HTTP); keep it across restarts (default: kept in DIR/JOB of --state, first derived from the state location)")
}

// mysqlSinks makes the n subtasks of a MySQL sink on one pool. The caller
// closes the pool after the sinks.
func (f *mysqlFlags) sinks(ctx context.Context, db *sql.DB, mode mysqlxa.Mode, job string, n int, log *slog.Logger) ([]*mysqlxa.Sink, error) {
	var out []*mysqlxa.Sink
	for i := range n {
		s, err := mysqlxa.New(ctx, db, mysqlxa.Config{
			Table: f.table, Mode: mode, Key: splitList(f.key), Columns: splitList(f.columns),
			Job: job, Subtask: i, BatchRows: f.batchRows, MarkerTable: f.marker,
			Logger: log.With("subtask", i),
		})
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

// jobFile is the file in a local state directory that keeps a MySQL sink's
// job id.
const jobFile = "JOB"

// jobID returns the job id of a MySQL sink's XA branches for the state
// location stateURI: explicit (--job) if set, else the id kept in
// DIR/JOB, else one derived from the location ("fs-" and 8 hex digits of
// the SHA-256 of the absolute directory path or the s3:// URI). A local
// directory keeps the id in DIR/JOB on first use, so that it survives a
// move of the directory; an explicit id that differs from the kept one is
// an error (the branches of the old id would be left behind). The caller
// holds the state lock.
func jobID(stateURI, explicit string) (string, error) {
	if isS3(stateURI) {
		if explicit != "" {
			return explicit, nil
		}
		return deriveJob(strings.TrimRight(stateURI, "/")), nil
	}
	dir, err := localPath(stateURI, "--state")
	if err != nil {
		return "", err
	}
	kept, err := readJobFile(dir)
	if err != nil {
		return "", err
	}
	switch {
	case kept != "" && explicit != "" && kept != explicit:
		return "", usageError("run: --job %q differs from the job id %q kept in %s: the XA branches of a job are named by its id; "+
			"use --job %s, or a new --state directory for a new job", explicit, kept, filepath.Join(dir, jobFile), kept)
	case kept != "":
		return kept, nil
	}
	id := explicit
	if id == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		id = deriveJob(abs)
	}
	return id, writeJobFile(dir, id)
}

// deriveJob is the default job id of a state location.
func deriveJob(location string) string {
	sum := sha256.Sum256([]byte(location))
	return "fs-" + hex.EncodeToString(sum[:4])
}

// readJobFile returns the job id kept in dir ("" if none).
func readJobFile(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, jobFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("job id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("job id: %s is empty", filepath.Join(dir, jobFile))
	}
	return id, nil
}

// writeJobFile keeps id in dir/JOB durably: a synced temp file, a
// no-clobber rename, a directory fsync (vfs, as every other publish). A JOB
// written meanwhile by another run is never replaced: if it holds another
// id, that is an error.
func writeJobFile(dir, id string) error {
	fsys := vfs.OS{}
	name := filepath.Join(dir, jobFile)
	tmp := filepath.Join(dir, "."+jobFile+".tmp")
	fail := func(err error) error {
		os.Remove(tmp)
		return fmt.Errorf("job id: keep it in %s: %w", name, err)
	}
	if err := vfs.MkdirAllSync(fsys, dir); err != nil {
		return fail(err)
	}
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}
	if err := vfs.WriteFileSync(fsys, tmp, []byte(id+"\n")); err != nil {
		return fail(err)
	}
	if err := fsys.RenameNoReplace(tmp, name); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return fail(err)
		}
		os.Remove(tmp)
		kept, rerr := readJobFile(dir)
		if rerr != nil {
			return rerr
		}
		if kept != id {
			return fmt.Errorf("job id: %s was written meanwhile with job id %q, not %q", name, kept, id)
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fail(err)
	}
	return nil
}

// asPipelineSinks converts the MySQL subtasks for the pipeline.
func asPipelineSinks(ss []*mysqlxa.Sink) []pipeline.Sink {
	out := make([]pipeline.Sink, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
