package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/filesink/filesink/cmd/filesink/internal/metrics"
	icecommit "github.com/filesink/filesink/committer/iceberg"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/filesink/bulk"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/sinks/icebergsink"
)

// icebergFlags are the settings of an iceberg:// sink.
type icebergFlags struct {
	warehouse, catalog string
}

func (f *icebergFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.warehouse, "warehouse", "", "iceberg: the warehouse `LOCATION`, a local directory or s3://BUCKET/PREFIX, under which new tables are made (required)")
	fs.StringVar(&f.catalog, "catalog", "", "iceberg: the catalog `URI`: mysql://USER:PASS@tcp(HOST:PORT)/DB, postgres://..., sqlite:PATH, "+
		"or an Iceberg REST catalog http(s)://[CLIENT_ID:SECRET@]HOST:PORT/PATH[?token=TOKEN]; "+
		"default: the embedded SQLite catalog WAREHOUSE/catalog.db (a local warehouse only)")
}

// genIcebergSchema is the schema of the generator's records for an
// Iceberg table when --schema is not given.
const genIcebergSchema = `{"fields": [
	{"name": "id", "type": "int64", "nullable": false},
	{"name": "key", "type": "string"},
	{"name": "ts", "type": "timestamp_us"},
	{"name": "payload", "type": "string"}]}`

// icebergJob is the open catalog and committer of an iceberg:// sink.
type icebergJob struct {
	cat       *icecommit.Catalog
	committer *icebergsink.Committer
	table     *table.Table
}

// icebergIdent reads NAMESPACE.TABLE of an iceberg:// sink URI.
func icebergIdent(uri string) (table.Identifier, error) {
	name := strings.TrimPrefix(uri, "iceberg://")
	parts := strings.Split(name, ".")
	if len(parts) < 2 || strings.ContainsAny(name, "/?#") {
		return nil, usageError("run: --sink %s: want iceberg://NAMESPACE.TABLE", uri)
	}
	for _, p := range parts {
		if p == "" {
			return nil, usageError("run: --sink %s: want iceberg://NAMESPACE.TABLE (an empty name)", uri)
		}
	}
	return parts, nil
}

// icebergSchema reads --schema, or the generator's schema for a gen://
// source without one.
func (f *runFlags) icebergSchema() (*bulk.Schema, error) {
	doc := []byte(genIcebergSchema)
	if f.bulk.doc != nil {
		doc = f.bulk.doc
	} else if f.bulk.schema != "" {
		var err error
		if doc, err = os.ReadFile(f.bulk.schema); err != nil {
			return nil, usageError("run: --schema: %v", err)
		}
	} else if !strings.HasPrefix(f.source, "gen://") {
		return nil, usageError("run: an iceberg:// sink needs --schema FILE (a JSON document {\"fields\": [{\"name\": \"id\", \"type\": \"int64\"}, ...]})")
	}
	schema, err := bulk.ParseSchema(doc)
	if err != nil {
		return nil, usageError("run: --schema %s: %v", f.bulk.schema, err)
	}
	return schema, nil
}

// buildIceberg makes the job of an iceberg:// sink: it opens the catalog,
// makes or checks the table, and makes one file sink writer per subtask
// writing the table's Parquet data files under its location.
func (f *runFlags) buildIceberg(ctx context.Context, log *slog.Logger, stdin io.Reader, set map[string]bool) (*job, error) {
	ij, l, err := f.setupIceberg(ctx)
	if err != nil {
		return nil, err
	}
	j, err := f.icebergWriters(ctx, ij, l, log, stdin, set)
	if err != nil {
		ij.cat.Close()
		return nil, err
	}
	return j, nil
}

// setupIceberg opens the catalog, makes or checks the table and returns
// the layout of its data files; it points f.sink at the table location
// (the output of the file sink writers). The caller closes ij.
func (f *runFlags) setupIceberg(ctx context.Context) (ij *icebergJob, l *layout, err error) {
	ident, err := icebergIdent(f.sink)
	if err != nil {
		return nil, nil, err
	}
	if f.avro != nil && f.avro.pending {
		if err := f.icebergFollow(ctx, ident); err != nil {
			return nil, nil, err
		}
	}
	doc, err := f.icebergSchema()
	if err != nil {
		return nil, nil, err
	}
	want, err := icebergsink.TableSchema(doc)
	if err != nil {
		return nil, nil, usageError("run: --schema: %v", err)
	}
	part, err := icebergsink.ParsePartitioning(f.bucket)
	if err != nil {
		return nil, nil, usageError("run: --bucket %v", err)
	}
	spec, err := part.Spec(want)
	if err != nil {
		return nil, nil, usageError("run: --bucket: %v", err)
	}
	if ij, err = f.openIceberg(ctx, ident, want, part, spec); err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			ij.cat.Close()
		}
	}()
	if l, err = f.icebergLayout(ij, doc, part); err != nil {
		return nil, nil, err
	}
	if f.sink, err = tableSink(ij.table); err != nil {
		return nil, nil, inCommand("run", err)
	}
	return ij, l, nil
}

// openIceberg opens the catalog and makes or checks the table.
func (f *runFlags) openIceberg(ctx context.Context, ident table.Identifier, want *iceberg.Schema, part icebergsink.Partitioning, spec iceberg.PartitionSpec) (*icebergJob, error) {
	cat, err := openIcebergCatalog(ctx, "run", &f.iceberg, &f.s3)
	if err != nil {
		return nil, err
	}
	err = f.evolveIceberg(ctx, cat, ident, want)
	var tbl *table.Table
	if err == nil {
		tbl, err = icecommit.EnsureTable(ctx, cat, ident, want, catalog.WithPartitionSpec(&spec))
	}
	if err == nil {
		if err = part.Check(tbl.Spec(), tbl.Schema()); err != nil {
			err = fmt.Errorf("iceberg: table %s: %w", strings.Join(ident, "."), err)
		}
	}
	if err != nil {
		cat.Close()
		return nil, inCommand("run", err)
	}
	return &icebergJob{cat: cat, table: tbl, committer: icebergsink.NewCommitter(cat, ident, tbl, part)}, nil
}

// evolveIceberg adds to an existing table the optional columns --schema
// adds (with --allow-change schema, which keeps the change in the job's
// state), before any data file has them; it refuses a --schema that lacks
// a column of the table.
func (f *runFlags) evolveIceberg(ctx context.Context, cat *icecommit.Catalog, ident table.Identifier, want *iceberg.Schema) error {
	tbl, err := cat.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
		return nil // EnsureTable makes it
	}
	if err != nil {
		return fmt.Errorf("iceberg: table %s in %s: %w", strings.Join(ident, "."), cat.Desc, err)
	}
	name := strings.Join(ident, ".")
	if gone := icecommit.DroppedColumns(tbl.Schema(), want); len(gone) > 0 {
		return fmt.Errorf("iceberg: table %s has column(s) %s that --schema lacks: a job never drops a table's columns; keep them in --schema (optional ones may be absent from the records)", name, strings.Join(gone, ", "))
	}
	cols := icecommit.NewColumns(tbl.Schema(), want)
	if len(cols) == 0 {
		return nil
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	if f.avro == nil && !slices.Contains(strings.Split(f.allowChange, ","), "schema") {
		return usageError("run: --schema adds column(s) %s to table %s: pass --allow-change schema to add them (the change is kept in the job's state)", strings.Join(names, ", "), name)
	}
	_, _, err = icecommit.AddColumns(ctx, cat, ident, want)
	return err
}

// icebergFollow starts the columns that follow the registry from the
// table's columns, when the table exists, merged with the subject's
// newest schema: the table may hold columns of earlier schemas.
func (f *runFlags) icebergFollow(ctx context.Context, ident table.Identifier) error {
	cat, err := openIcebergCatalog(ctx, "run", &f.iceberg, &f.s3)
	if err != nil {
		return err
	}
	defer cat.Close()
	var doc []byte
	tbl, err := cat.LoadTable(ctx, ident)
	switch {
	case err == nil:
		if doc, err = icebergsink.ColumnsDoc(tbl.Schema()); err != nil {
			return inCommand("run", fmt.Errorf("table %s: %w", strings.Join(ident, "."), err))
		}
	case !errors.Is(err, catalog.ErrNoSuchTable) && !errors.Is(err, catalog.ErrNoSuchNamespace):
		return inCommand("run", fmt.Errorf("iceberg: table %s in %s: %w", strings.Join(ident, "."), cat.Desc, err))
	}
	return f.followRegistry(ctx, doc, "us")
}

// icebergLayout is the layout of the table's data files: Parquet of the
// table's columns and field ids, in the partition directories of part.
func (f *runFlags) icebergLayout(ij *icebergJob, doc *bulk.Schema, part icebergsink.Partitioning) (*layout, error) {
	ws, err := icebergsink.WriteSchema(ij.table.Schema(), doc)
	if err != nil {
		return nil, inCommand("run", err)
	}
	var l layout
	if l.bulk, err = f.bulk.formatOf("parquet", ws); err != nil {
		return nil, err
	}
	var colType iceberg.Type
	if part.Column != "" {
		col, _ := ij.table.Schema().FindFieldByName(part.Column)
		colType = col.Type
	}
	l.assigner = part.Assigner(colType)
	if err := f.parts(&l); err != nil {
		return nil, err
	}
	return &l, nil
}

// icebergWriters makes the writers of the table's data files, each the
// participant of one lane.
func (f *runFlags) icebergWriters(ctx context.Context, ij *icebergJob, l *layout, log *slog.Logger, stdin io.Reader, set map[string]bool) (*job, error) {
	j, err := f.buildWith(ctx, l, ij, log, stdin, set)
	if err != nil {
		return nil, err
	}
	for i, w := range j.writers {
		j.cfg.Sinks[i] = icebergsink.NewParticipant(w, filesink.ParticipantName(i), ij.committer)
	}
	return j, nil
}

// start names the job in the committer, once the store is open (the job
// id may be kept in it).
func (ij *icebergJob) start(ctx context.Context, f *runFlags, j *job, log *slog.Logger) error {
	id, err := jobID(ctx, j.cfg.Store, j.stateURI, f.mysql.job)
	if err != nil {
		return err
	}
	ij.committer.SetJob(id)
	ij.observe(f)
	if err := ij.checkState(ctx, j, id); err != nil {
		return err
	}
	log.Info("Iceberg sink", "table", ij.committer.Table(), "location", ij.table.Location(), "catalog", ij.cat.Desc,
		"job", id, "subtasks", len(j.writers), "state", j.stateURI)
	return nil
}

// close closes the catalog.
func (ij *icebergJob) close(log *slog.Logger) {
	if err := ij.cat.Close(); err != nil {
		log.Warn("close the Iceberg catalog", "catalog", ij.cat.Desc, "err", err)
	}
}

// checkState refuses a state with no checkpoint when the table holds
// checkpoints of the job: the state that recorded the source positions of
// those snapshots is gone, and a run from the beginning would append
// their records again.
func (ij *icebergJob) checkState(ctx context.Context, j *job, id string) error {
	last, err := recovery.Latest(ctx, j.cfg.Store)
	if err != nil || last != nil {
		return err
	}
	tbl, err := ij.cat.LoadTable(ctx, ij.table.Identifier())
	if err != nil {
		return inCommand("run", fmt.Errorf("iceberg: loading table %s: %w", ij.committer.Table(), err))
	}
	committed, err := icecommit.Committed(tbl, id)
	if err != nil {
		return inCommand("run", err)
	}
	if len(committed) > 0 {
		return inCommand("run", fmt.Errorf("state %s holds no checkpoint, but table %s holds %d lane(s) of job %s committed (%v): a run from the beginning would append their records again; "+
			"if the job's state is elsewhere pass it with --state, else start a new job with --job NAME on a source position after them", j.stateURI, ij.committer.Table(), len(committed), id, committed))
	}
	return nil
}

// observe feeds the Iceberg metrics from the committer, with
// --metrics-addr.
func (ij *icebergJob) observe(f *runFlags) {
	if f.metrics == nil {
		return
	}
	c := ij.committer
	c.SetObserver(f.metrics.Iceberg(func() metrics.IcebergCounts {
		s := c.Stats()
		return metrics.IcebergCounts{Commits: s.Commits, Appended: s.Appended, Skipped: s.Skipped, Attempts: s.Attempts, Snapshots: s.Snapshots}
	}))
}
