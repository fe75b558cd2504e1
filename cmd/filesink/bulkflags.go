package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/filesink/bulk"
	"github.com/filesink/filesink/pipeline"
)

// bulkFlags are the settings of the bulk formats (--format parquet|arrow).
type bulkFlags struct {
	schema, parquetCompression, arrowCompression, rowGroupSize, dictionary, pageSize string
	unknownFields                                                                    string
	stats                                                                            bool
	// doc is the schema document when it comes from a schema registry
	// (--value-format avro without --schema).
	doc []byte
}

func (f *bulkFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.schema, "schema", "", "parquet, arrow: the records' schema, a JSON `FILE` {\"fields\": [{\"name\", \"type\", \"nullable\"}...]} (required for them)")
	fs.StringVar(&f.rowGroupSize, "row-group-size", strconv.Itoa(bulk.DefaultRowGroupBytes>>20)+"MiB", "parquet, arrow: end a row group (Arrow: record batch) when its buffered rows take this much memory (`SIZE`, e.g. 64MiB), "+
		"or after N rows with a rows suffix (e.g. 100000rows); the --buffer-budget may end row groups earlier. At the default, a Parquet part "+
		"encodes one row group on the second core while the next is built, both within the default budget")
	enumVar(fs, &f.parquetCompression, "parquet-compression", string(bulk.Snappy), "parquet: page `COMPRESSION`: snappy, zstd, gzip or none",
		string(bulk.Snappy), string(bulk.Zstd), string(bulk.Gzip), string(bulk.Uncompressed))
	enumVar(fs, &f.dictionary, "parquet-dictionary", string(bulk.DictAuto), "parquet: dictionary encoding (`WHEN`): auto (per column, from the first row group's values), on or off",
		string(bulk.DictAuto), string(bulk.DictOn), string(bulk.DictOff))
	fs.StringVar(&f.pageSize, "parquet-page-size", strconv.Itoa(bulk.DefaultPageBytes>>10)+"KiB", "parquet: cut a column's data page when its encoded values reach this `SIZE` (e.g. 1MiB, parquet-mr's default)")
	fs.BoolVar(&f.stats, "parquet-stats", true, "parquet: write column statistics (min, max, null count); --parquet-stats=false turns them off")
	enumVar(fs, &f.arrowCompression, "arrow-compression", string(bulk.Uncompressed), "arrow: record batch `COMPRESSION`: none, lz4 or zstd",
		string(bulk.Uncompressed), string(bulk.LZ4), string(bulk.Zstd))
	enumVar(fs, &f.unknownFields, "unknown-fields", string(bulk.RejectUnknown), "parquet, arrow: a record key that names no field of --schema: reject (a bad record, see --on-bad-record) "+
		"or drop (the record is written without it; the counts and names are logged)", string(bulk.RejectUnknown), string(bulk.DropUnknown))
}

// format reads the schema and checks the values of the bulk flags for the
// --format name (Job.Validate checked which of them apply); it returns the
// bulk format (nil for a row format).
func (f *bulkFlags) format(name string) (filesink.BulkFormat, error) {
	if !pipeline.IsBulkFormat(name) {
		return nil, nil
	}
	doc := f.doc
	if f.schema == "" && doc == nil {
		return nil, usageError("run: --format %s needs --schema FILE (a JSON document {\"fields\": [{\"name\": \"id\", \"type\": \"int64\"}, ...]})", name)
	}
	if f.schema != "" {
		var err error
		if doc, err = os.ReadFile(f.schema); err != nil {
			return nil, usageError("run: --schema: %v", err)
		}
	}
	schema, err := bulk.ParseSchema(doc)
	if err != nil {
		return nil, usageError("run: --schema %s: %v", f.schema, err)
	}
	return f.formatOf(name, schema)
}

// formatOf checks the values of the bulk flags for the --format name and
// returns the bulk format of schema.
func (f *bulkFlags) formatOf(name string, schema *bulk.Schema) (filesink.BulkFormat, error) {
	switch u := bulk.UnknownFields(f.unknownFields); u {
	case bulk.RejectUnknown, bulk.DropUnknown:
	default:
		return nil, usageError("run: --unknown-fields %q: want reject or drop", f.unknownFields)
	}
	opts := []bulk.Option{bulk.WithDictionary(bulk.Dictionary(f.dictionary)), bulk.WithUnknownFields(bulk.UnknownFields(f.unknownFields))}
	if !f.stats {
		opts = append(opts, bulk.WithoutStatistics())
	}
	if name == "parquet" {
		switch bulk.Compression(f.parquetCompression) {
		case bulk.Snappy, bulk.Zstd, bulk.Gzip, bulk.Uncompressed:
		default:
			return nil, usageError("run: --parquet-compression %q: want snappy, zstd, gzip or none", f.parquetCompression)
		}
		switch bulk.Dictionary(f.dictionary) {
		case bulk.DictAuto, bulk.DictOn, bulk.DictOff:
		default:
			return nil, usageError("run: --parquet-dictionary %q: want auto, on or off", f.dictionary)
		}
		n, err := filesink.ParseSize(f.pageSize)
		if err != nil || n == 0 {
			return nil, usageError("run: --parquet-page-size: %v", orPositive(err))
		}
		opts = append(opts, bulk.WithCompression(bulk.Compression(f.parquetCompression)), bulk.WithPageBytes(n))
	} else {
		switch bulk.Compression(f.arrowCompression) {
		case bulk.Uncompressed, bulk.LZ4, bulk.Zstd:
		default:
			return nil, usageError("run: --arrow-compression %q: want none, lz4 or zstd", f.arrowCompression)
		}
		opts = append(opts, bulk.WithCompression(bulk.Compression(f.arrowCompression)))
	}
	if rows, ok := strings.CutSuffix(strings.TrimSpace(f.rowGroupSize), "rows"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(rows))
		if err != nil || n <= 0 {
			return nil, usageError("run: --row-group-size %q: want a positive row count before \"rows\"", f.rowGroupSize)
		}
		opts = append(opts, bulk.WithRowGroupRows(n), bulk.WithRowGroupBytes(-1))
	} else {
		n, err := filesink.ParseSize(f.rowGroupSize)
		if err != nil || n == 0 {
			return nil, usageError("run: --row-group-size: %v", orPositive(err))
		}
		opts = append(opts, bulk.WithRowGroupBytes(n))
	}
	bf, err := bulk.NewFormat(name, schema, opts...)
	if err != nil {
		return nil, usageError("run: --format %s: %v", name, err)
	}
	return bf, nil
}

// reportDropped makes the job log, after each checkpoint that saw more,
// the records whose keys not in the schema the bulk format dropped so far
// (--unknown-fields drop), the keys and their first names: one line per
// checkpoint at most. The done line has the totals.
func (j *job) reportDropped(bf filesink.BulkFormat, log *slog.Logger) {
	f, ok := bf.(interface{ Dropped() *bulk.Dropped })
	if !ok {
		return
	}
	d := f.Dropped()
	j.dropped = d
	var logged atomic.Int64
	prev := j.cfg.Events.Committed
	j.cfg.Events.Committed = func(i committer.CommittedInfo) {
		if prev != nil {
			prev(i)
		}
		if n := d.Records(); n != logged.Swap(n) {
			log.Warn("keys not in --schema dropped from records (--unknown-fields drop), totals so far", "checkpoint", i.ID,
				"records", n, "fields", d.Fields(), "names", strings.Join(d.Names(), ","))
		}
	}
}

func orPositive(err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("must be positive")
}
