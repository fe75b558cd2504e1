package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/sinks/async"
	"github.com/filesink/filesink/source"
)

// SinkKind is the kind of sink a job writes to, told by its URI.
type SinkKind int

// Sink kinds.
const (
	FileSink    SinkKind = iota // file://OUT or a plain path: part files
	S3Sink                      // s3://BUCKET/PREFIX: objects
	MySQLSink                   // mysql://DSN: rows, in XA branches
	HTTPSink                    // http:// or https://: POSTed batches
	IcebergSink                 // iceberg://NAMESPACE.TABLE: an Apache Iceberg table
)

// KindOf returns the kind of the sink at uri.
func KindOf(uri string) SinkKind {
	switch {
	case strings.HasPrefix(uri, "s3://"):
		return S3Sink
	case strings.HasPrefix(uri, "mysql://"):
		return MySQLSink
	case strings.HasPrefix(uri, "http://"), strings.HasPrefix(uri, "https://"):
		return HTTPSink
	case strings.HasPrefix(uri, "iceberg://"):
		return IcebergSink
	}
	return FileSink
}

// Delivery guarantees a Job may ask for.
const (
	ExactlyOnce = "exactly-once"
	AtLeastOnce = "at-least-once"
	AtMostOnce  = "at-most-once"
)

// BulkHeapFactor is the Go heap of the bulk encoders (Parquet, Arrow) per
// byte of buffer budget, as measured with 1,000 open Parquet buckets: page
// buffers, column statistics and released builder memory the GC has not
// reclaimed yet make the live heap about 4-5 times the budget. The "auto"
// memory limit of a bulk format is this times the budget (at least
// MinAutoMemoryLimit).
const BulkHeapFactor = 6

// MinAutoMemoryLimit is the least "auto" memory limit of a bulk format.
const MinAutoMemoryLimit = 256 << 20

// Settings are named as the filesink CLI's flags (without the dashes). The
// lists say which apply to which sink; a setting given for a sink it does
// not apply to makes Validate fail.
const (
	// MySQLOnlySettings apply to a MySQL sink only ("job" also to HTTP).
	MySQLOnlySettings = "mysql-table mysql-mode mysql-key mysql-columns mysql-batch-rows mysql-marker-table mysql-dead-letter-table job"
	// BadRecordSettings apply to the sinks with a dead-letter output: file,
	// S3 (dead-letter files) and MySQL (a dead-letter table).
	BadRecordSettings = "on-bad-record"
	// BulkOnlySettings apply to the bulk formats (parquet, arrow) only.
	BulkOnlySettings = "schema row-group-size parquet-compression parquet-dictionary parquet-page-size parquet-stats arrow-compression unknown-fields"
	// FileOnlySettings apply to file and S3 sinks only.
	FileOnlySettings = "format compression bucket bucket-tz part-size rollover inactivity roll-on-checkpoint prefix direct-io max-open-files " +
		"buffer-budget memory-limit csv-columns csv-header invalid-utf8 " + BulkOnlySettings + " " +
		"s3-part-size s3-concurrency s3-sse s3-kms-key-id s3-storage-class s3-tags spill-dir resume-from-output"
	// IcebergOnlySettings apply to an Iceberg sink only.
	IcebergOnlySettings = "warehouse catalog"
	// IcebergRefusedSettings are file sink settings that do not apply to
	// an Iceberg sink: its files are Parquet, named and placed by the
	// table, published when their checkpoint is, and its state lives
	// under the table location.
	IcebergRefusedSettings = "compression bucket-tz prefix csv-columns csv-header invalid-utf8 arrow-compression success-file allowed-lateness resume-from-output"
	// HTTPOnlySettings apply to an HTTP sink only.
	HTTPOnlySettings = "http-workers http-queue http-batch-records http-batch-bytes http-linger http-timeout http-retries"
	// GroupOnlySettings apply in group mode (Job.Group) only.
	GroupOnlySettings = "session-timeout rebalance-timeout"
	// GroupRefusedSettings do not apply in group mode.
	GroupRefusedSettings = "parallelism resume-from-output success-file allowed-lateness"
	// KafkaOnlySettings apply to a kafka:// source only.
	KafkaOnlySettings = "bounded start"
	// LineSourceOnlySettings apply to the sources that split lines (a
	// directory or file, stdin) only.
	LineSourceOnlySettings = "max-record-size"
)

// MaxRecordSizeLimit is the largest MaxRecordSize: a line source holds a
// whole line in memory (and the pipeline a copy), so a larger one could
// exhaust memory on one line.
const MaxRecordSizeLimit = 1 << 30

// Job is the declarative description of a job, as a command line, the
// environment and a config file give it: where records come from and go,
// the delivery guarantee, and the policies (which settings apply to which
// sink, the Go memory limit) that hold whatever fills it in. Validate
// checks it in one place; Run runs it. A Job is a value: it is not safe for
// concurrent mutation, but Validate, MemoryLimitBytes and Guarantee only
// read it.
type Job struct {
	Source string // source URI: file://DIR, DIR, gen://..., kafka://..., "-" (stdin)
	Sink   string // sink URI: file://OUT, OUT, s3://..., mysql://..., http(s)://...
	// State is the checkpoint store (a directory or s3://BUCKET/PREFIX);
	// "" is the file and S3 sinks' default, OUT/_filesink. MySQL and HTTP
	// sinks need one.
	State string
	// Guarantee is "" (the sink's default), ExactlyOnce, AtLeastOnce or
	// AtMostOnce.
	Guarantee string
	// Format of part files: jsonl, csv, text, parquet or arrow ("" is
	// jsonl).
	Format string
	// Parallelism is the number of sink subtasks (at least 1).
	Parallelism int
	// Retain is how many checkpoint records are kept, at least 1; 0 (not
	// given) is recovery.DefaultRetain.
	Retain int
	// OnBadRecord is what a file, S3 or MySQL sink does with a record it
	// cannot write: "" or "fail" (stop with an error naming it), "skip"
	// (write it to the dead-letter output: files beside the output, a
	// table for MySQL, exactly once with its checkpoint, and go on).
	OnBadRecord string
	// Group, if set, runs the job in group mode: every process started
	// with the same job joins the Kafka consumer group Group and runs the
	// partitions the group assigns it (package group). It needs a
	// kafka:// source, an s3:// sink and an s3:// state (or the default).
	Group string
	// MySQL holds the settings of a MySQL sink that Validate checks.
	MySQL MySQLSpec
	// HTTP holds the settings of an HTTP sink that Validate checks.
	HTTP HTTPSpec
	// BufferBudget is the memory for buffered records, in bytes; with a
	// bulk format the "auto" memory limit follows from it.
	BufferBudget int64
	// MaxOpenFiles bounds the part files the job's file or S3 sink keeps
	// open at once, across its subtasks (OpenPartsPerSubtask); 0 (not
	// given) derives it from the process's limit of open descriptors
	// (filesink.DefaultMaxOpenParts). Given, it must be at least
	// MinMaxOpenFiles and one per subtask.
	MaxOpenFiles int
	// MemoryLimit is the Go soft memory limit: "auto" or "" (BulkHeapFactor
	// x BufferBudget with a bulk format, none for row formats), "none", or
	// a size ("2GiB"). The GOMEMLIMIT environment variable overrides it.
	MemoryLimit string
	// MaxRecordSize is the longest line, in bytes without its terminator,
	// that a line source (file://DIR or a plain path, stdin) accepts; 0 is
	// source.DefaultMaxLineSize (16 MiB). A longer line stops the job with
	// an error naming it, or, with a dead-letter output, goes there.
	MaxRecordSize int64
	// InvalidUTF8 is what the jsonl format does with a record whose strings
	// hold bytes that are not UTF-8: "reject" or "" (a bad record) or
	// "replace" (each such byte is written as U+FFFD); see
	// filesink.JSONLines.
	InvalidUTF8 string
	// Given names the settings given explicitly (by the CLI's flag names,
	// see the *Settings lists), whatever their origin: Validate refuses one
	// given for a sink, source or format it does not apply to.
	Given map[string]bool
}

// MySQLSpec is what Validate checks of a MySQL sink's settings.
type MySQLSpec struct {
	Table     string // required
	Mode      string // insert, upsert or increment (any case)
	Key       string // COL[,COL]: needed with more than one subtask in upsert or increment mode
	BatchRows int    // at least 1
}

// Dead-letter modes (Job.OnBadRecord).
const (
	FailOnBadRecord = "fail"
	SkipBadRecord   = "skip"
)

// HTTPSpec is what Validate checks of an HTTP sink's settings.
type HTTPSpec struct {
	Workers      int           // at least 1
	Queue        int           // not negative
	BatchRecords int           // at least 1
	Linger       time.Duration // not negative
	Timeout      time.Duration // positive
	Retries      int           // at least 1; 1 with at-most-once, when given
}

// SpecError is a Job that cannot run as described. Its message names the
// settings as the CLI's flags ("--mysql-table").
type SpecError struct {
	Msg string
}

func (e *SpecError) Error() string { return e.Msg }

func specErr(format string, args ...any) error {
	return &SpecError{Msg: fmt.Sprintf(format, args...)}
}

// Kind returns the kind of the job's sink.
func (j *Job) Kind() SinkKind { return KindOf(j.Sink) }

// IsBulkFormat reports whether the job's format is a bulk (columnar) one.
func (j *Job) IsBulkFormat() bool { return IsBulkFormat(j.Format) }

// IsBulkFormat reports whether format is a bulk format: parquet or arrow.
func IsBulkFormat(format string) bool { return format == "parquet" || format == "arrow" }

// Validate checks the description: the form of the source URI, settings
// that apply to the sink, source and format only, the guarantee against
// the sink, the settings a sink needs, and the memory limit. A nil error means every rule of this
// level holds; the values of the sinks' own settings are checked when
// they are made. Errors are *SpecError.
func (j *Job) Validate() error {
	if err := j.checkSource(); err != nil {
		return err
	}
	var err error
	switch j.Kind() {
	case HTTPSink:
		err = j.validateHTTP()
	case MySQLSink:
		err = j.validateMySQL()
	case IcebergSink:
		err = j.validateIceberg()
	default:
		err = j.validateFiles()
	}
	if err != nil {
		return err
	}
	if err := j.checkSelfFeeding(); err != nil {
		return err
	}
	if err := j.checkStateInSink(); err != nil {
		return err
	}
	if err := j.validateGroup(); err != nil {
		return err
	}
	switch j.OnBadRecord {
	case "", FailOnBadRecord, SkipBadRecord:
	default:
		return specErr("--on-bad-record must be fail or skip, not %q", j.OnBadRecord)
	}
	if j.Retain < 0 || (j.Retain == 0 && j.Given["retain"]) {
		return specErr("--retain %d: at least one checkpoint record must be kept", j.Retain)
	}
	if !strings.HasPrefix(j.Source, "kafka://") && j.anyGiven(KafkaOnlySettings, "") != "" {
		return specErr("--bounded and --start apply to kafka:// sources only")
	}
	if err := j.validateLineSource(); err != nil {
		return err
	}
	_, err = j.MemoryLimitBytes()
	return err
}

// validateGroup checks the rules of group mode: a kafka:// source, an S3
// sink and state (conditional writes fence the lanes), exactly once.
func (j *Job) validateGroup() error {
	if j.Group == "" {
		if name := j.anyGiven(GroupOnlySettings, ""); name != "" {
			return specErr("--%s applies in group mode (--group NAME) only", name)
		}
		return nil
	}
	switch {
	case !strings.HasPrefix(strings.ToLower(j.Source), "kafka://"):
		return specErr("--group needs a kafka:// source: group mode shares a topic's partitions among processes through a Kafka consumer group, not %s", sourceKind(j.Source))
	case j.Kind() == MySQLSink || j.Kind() == HTTPSink:
		return specErr("--group writes to S3 only: a MySQL or HTTP sink has no per-partition commit point that fences a process that lost its partitions")
	case j.Kind() != S3Sink && j.Kind() != IcebergSink:
		return specErr("--group writes to S3 only (--sink s3://BUCKET/PREFIX): a local or shared filesystem offers no conditional write to fence a process that lost its partitions")
	case j.State != "" && !strings.HasPrefix(j.State, "s3://"):
		return specErr("--group keeps its state on S3 (--state s3://BUCKET/PREFIX, or the default under the sink): a directory cannot fence a process that lost its partitions")
	case j.Guarantee != "" && j.Guarantee != ExactlyOnce:
		return specErr("--group runs exactly-once only, not --guarantee %s", j.Guarantee)
	}
	if name := j.anyGiven(GroupRefusedSettings, ""); name != "" {
		return specErr("--%s does not apply in group mode: each partition is one lane with one writer and a state of its own", name)
	}
	return nil
}

// sourceKind names the kind of a source URI for messages.
func sourceKind(uri string) string {
	if i := strings.Index(uri, "://"); i > 0 {
		return "a " + uri[:i+3] + " source"
	}
	if uri == "-" {
		return "stdin"
	}
	return "a directory"
}

// checkSource checks the form of the source URI (a kafka:// URI is
// checked when the source is configured).
func (j *Job) checkSource() error {
	if strings.HasPrefix(strings.ToLower(j.Source), "kafka://") {
		return nil
	}
	if err := source.CheckURI(j.Source); err != nil {
		return specErr("--source %s", strings.TrimPrefix(err.Error(), source.ErrBadURI.Error()+": "))
	}
	return nil
}

// IsLineSource reports whether the job's source splits its input into
// lines: a directory or file (file://DIR or a plain path) or stdin ("-",
// stdin://).
func (j *Job) IsLineSource() bool {
	if _, ok := source.LocalPath(j.Source); ok {
		return true
	}
	return j.Source == "-" || len(j.Source) >= 6 && strings.EqualFold(j.Source[:6], "stdin:")
}

// validateLineSource checks the settings of the sources that split lines.
func (j *Job) validateLineSource() error {
	if !j.Given["max-record-size"] {
		return nil
	}
	if !j.IsLineSource() {
		return specErr("--max-record-size applies to sources of lines (a directory or file, stdin), not to %s", j.Source)
	}
	if j.MaxRecordSize < 1 || j.MaxRecordSize > MaxRecordSizeLimit {
		return specErr("--max-record-size %d: want from 1 byte to 1GiB (a line is held in memory whole)", j.MaxRecordSize)
	}
	return nil
}

// anyGiven returns the first of the settings (space-separated) that is
// given, except except, or "".
func (j *Job) anyGiven(settings, except string) string {
	for _, name := range strings.Fields(settings) {
		if j.Given[name] && name != except {
			return name
		}
	}
	return ""
}

func (j *Job) validateHTTP() error {
	if name := j.anyGiven(FileOnlySettings+" "+MySQLOnlySettings+" "+BadRecordSettings+" "+IcebergOnlySettings, "job"); name != "" {
		return specErr("--%s does not apply to an http(s):// sink", name)
	}
	if j.State == "" {
		return specErr("an http(s):// sink needs --state DIR (or s3://BUCKET/PREFIX): its checkpoint records have no default location")
	}
	g, err := j.DeliveryGuarantee()
	if err != nil {
		return err
	}
	if j.Parallelism < 1 {
		return specErr("--parallelism must be at least 1")
	}
	h := &j.HTTP
	switch {
	case h.Workers < 1:
		return specErr("--http-workers must be at least 1")
	case h.Queue < 0:
		return specErr("--http-queue must not be negative")
	case h.BatchRecords < 1:
		return specErr("--http-batch-records must be at least 1")
	case h.Linger < 0 || h.Timeout <= 0:
		return specErr("--http-linger must not be negative and --http-timeout must be positive")
	case h.Retries < 1:
		return specErr("--http-retries must be at least 1")
	case g == async.AtMostOnce && j.Given["http-retries"] && h.Retries != 1:
		return specErr("--guarantee at-most-once sends each batch once: --http-retries must be 1 (a retry after a lost reply would deliver twice)")
	}
	return nil
}

func (j *Job) validateMySQL() error {
	if _, err := j.DeliveryGuarantee(); err != nil {
		return err
	}
	if name := j.anyGiven(IcebergOnlySettings, ""); name != "" {
		return specErr("--%s applies to an iceberg:// sink only", name)
	}
	if name := j.anyGiven(FileOnlySettings, ""); name != "" {
		return specErr("--%s applies to file and S3 sinks, not to a mysql:// sink", name)
	}
	if name := j.anyGiven(HTTPOnlySettings, ""); name != "" {
		return specErr("--%s applies to an http(s):// sink only", name)
	}
	if j.State == "" {
		return specErr("a mysql:// sink needs --state DIR (or s3://BUCKET/PREFIX): the checkpoint records that decide its XA branches have no default location")
	}
	if j.Given["mysql-dead-letter-table"] && j.OnBadRecord != SkipBadRecord {
		return specErr("--mysql-dead-letter-table applies with --on-bad-record skip only")
	}
	mode, err := j.MySQL.mode()
	if err != nil {
		return err
	}
	if j.Parallelism < 1 {
		return specErr("--parallelism must be at least 1")
	}
	if j.Parallelism > 1 && mode != mysqlxa.Insert && j.MySQL.Key == "" {
		return specErr("--parallelism %d in %s mode needs --mysql-key: every record of a key goes to the subtask its key hashes to "+
			"(two subtasks' branches writing one key would wait for each other's row locks)", j.Parallelism, mode)
	}
	return nil
}

// mode checks the settings that need no server and returns the mode.
func (m *MySQLSpec) mode() (mysqlxa.Mode, error) {
	if m.Table == "" {
		return "", specErr("--mysql-table is required with a mysql:// sink")
	}
	if m.BatchRows < 1 {
		return "", specErr("--mysql-batch-rows must be at least 1")
	}
	switch mode := mysqlxa.Mode(strings.ToLower(m.Mode)); mode {
	case mysqlxa.Insert, mysqlxa.Upsert, mysqlxa.Increment:
		return mode, nil
	default:
		return "", specErr("--mysql-mode must be insert, upsert or increment, not %q", m.Mode)
	}
}

// ParsedMode returns the MySQL sink's mode, checked as Validate does.
func (m *MySQLSpec) ParsedMode() (mysqlxa.Mode, error) { return m.mode() }

func (j *Job) validateIceberg() error {
	if j.Guarantee != "" && j.Guarantee != ExactlyOnce {
		return specErr("--guarantee %s: an iceberg:// sink is exactly-once only (a table snapshot per checkpoint)", j.Guarantee)
	}
	if name := j.anyGiven(MySQLOnlySettings+" "+HTTPOnlySettings+" "+IcebergRefusedSettings, "job"); name != "" {
		return specErr("--%s does not apply to an iceberg:// sink", name)
	}
	if j.Format != "" && j.Format != "parquet" && j.Given["format"] {
		return specErr("--format %s: an iceberg:// sink writes Parquet data files", j.Format)
	}
	if j.Parallelism < 1 {
		return specErr("--parallelism must be at least 1")
	}
	return j.validateMaxOpenFiles()
}

func (j *Job) validateFiles() error {
	if name := j.anyGiven(IcebergOnlySettings, ""); name != "" {
		return specErr("--%s applies to an iceberg:// sink only", name)
	}
	if _, err := j.DeliveryGuarantee(); err != nil {
		return err
	}
	if name := j.anyGiven(MySQLOnlySettings, ""); name != "" {
		return specErr("--%s applies to a mysql:// sink only", name)
	}
	if name := j.anyGiven(HTTPOnlySettings, ""); name != "" {
		return specErr("--%s applies to an http(s):// sink only", name)
	}
	if j.Given["direct-io"] && j.Kind() == S3Sink {
		return specErr("--direct-io applies to local sinks only, not to %s", j.Sink)
	}
	if j.Parallelism < 1 {
		return specErr("--parallelism must be at least 1")
	}
	if err := j.validateMaxOpenFiles(); err != nil {
		return err
	}
	return j.validateFormat()
}

// MinMaxOpenFiles is the least MaxOpenFiles (--max-open-files) a Job takes:
// below it a sink with more buckets than that releases and resumes part
// files all the time.
const MinMaxOpenFiles = 16

// validateMaxOpenFiles checks MaxOpenFiles when it is given.
func (j *Job) validateMaxOpenFiles() error {
	n := j.MaxOpenFiles
	if n == 0 && !j.Given["max-open-files"] {
		return nil
	}
	if n < MinMaxOpenFiles {
		return specErr("--max-open-files %d is below the minimum %d (open part files per process; the default follows ulimit -n)", n, MinMaxOpenFiles)
	}
	if n < j.Parallelism*filesink.MinOpenParts {
		return specErr("--max-open-files %d leaves less than %d open part file for each of the %d subtasks (--parallelism)", n, filesink.MinOpenParts, j.Parallelism)
	}
	return nil
}

// OpenPartsPerSubtask returns the open part files each subtask of the
// job's file or S3 sink may keep (filesink.WithMaxOpenParts): see the
// function OpenPartsPerSubtask.
func (j *Job) OpenPartsPerSubtask() int { return OpenPartsPerSubtask(j.MaxOpenFiles, j.Parallelism) }

// OpenPartsPerSubtask divides maxOpenFiles, the open part files of a
// process (0: filesink.DefaultMaxOpenParts, from its limit of open
// descriptors), among parallelism subtasks: the quotient, at least
// filesink.MinOpenParts.
func OpenPartsPerSubtask(maxOpenFiles, parallelism int) int {
	if maxOpenFiles <= 0 {
		maxOpenFiles = filesink.DefaultMaxOpenParts()
	}
	return max(maxOpenFiles/max(parallelism, 1), filesink.MinOpenParts)
}

// checkSelfFeeding refuses a job that would read its own output: a local
// sink (with its dead letters and default state) or state directory inside
// its file source, or the source inside the sink. Such a job reads, on its
// next run, what it published: duplicates with exit 0.
func (j *Job) checkSelfFeeding() error {
	src, ok := source.LocalPath(j.Source)
	if !ok {
		return nil
	}
	srcAbs := resolvedPath(src)
	if out, ok := localPath(j.Sink); ok && j.Kind() == FileSink {
		outAbs := resolvedPath(out)
		switch {
		case within(outAbs, srcAbs):
			return specErr("--sink %s is inside --source %s: the job would read its own output as input; write it elsewhere", out, src)
		case within(srcAbs, outAbs):
			return specErr("--source %s is inside --sink %s: the job would read its own output as input; write it elsewhere", src, out)
		}
	}
	if st, ok := localPath(j.State); ok && within(resolvedPath(st), srcAbs) {
		return specErr("--state %s is inside --source %s: the job would read its checkpoint records as input; keep them elsewhere", st, src)
	}
	return nil
}

// checkStateInSink refuses a state that is a file or S3 sink's output
// itself, or inside it but not in a hidden directory of it: its lock,
// lease, job record and checkpoint records would be listed as the
// output's files, and the run would then take the output for another
// job's. A state in a hidden directory of the output (a path component
// starting with '_' or '.', such as the default OUT/_filesink) is not.
func (j *Job) checkStateInSink() error {
	if k := j.Kind(); j.State == "" || (k != FileSink && k != S3Sink) {
		return nil
	}
	var rel string
	var inside bool
	if out, ok := localPath(j.Sink); ok {
		st, ok := localPath(j.State)
		if !ok {
			return nil
		}
		outAbs, stAbs := resolvedPath(out), resolvedPath(st)
		if !within(stAbs, outAbs) {
			return nil
		}
		rel, _ = filepath.Rel(outAbs, stAbs)
		rel, inside = filepath.ToSlash(rel), true
	} else if strings.HasPrefix(j.Sink, "s3://") && strings.HasPrefix(j.State, "s3://") {
		out := strings.Trim(strings.TrimPrefix(j.Sink, "s3://"), "/")
		st := strings.Trim(strings.TrimPrefix(j.State, "s3://"), "/")
		switch {
		case st == out:
			rel, inside = ".", true
		case strings.HasPrefix(st, out+"/"):
			rel, inside = strings.TrimPrefix(st, out+"/"), true
		}
	}
	if !inside {
		return nil
	}
	if rel == "." {
		return specErr("--state %s is the --sink itself: its lock and checkpoint records would be taken for output files; keep the state in a hidden directory of the output (the default, %s) or elsewhere",
			j.State, defaultStateOf(j.Sink))
	}
	for _, c := range strings.Split(rel, "/") {
		if c != "" && (c[0] == '_' || c[0] == '.') {
			return nil // hidden: never listed as output
		}
	}
	return specErr("--state %s is inside --sink %s: its lock and checkpoint records would be taken for output files; keep the state in a hidden directory of the output (the default, %s) or elsewhere",
		j.State, j.Sink, defaultStateOf(j.Sink))
}

// defaultStateOf is the state a file or S3 sink has by default: its
// _filesink directory.
func defaultStateOf(sink string) string {
	return strings.TrimSuffix(sink, "/") + "/_filesink"
}

// localPath returns the directory of a local sink or state, "file://DIR"
// or a plain path, as the CLI reads them; ok is false for other schemes
// and "".
func localPath(uri string) (path string, ok bool) {
	switch {
	case uri == "":
		return "", false
	case strings.HasPrefix(uri, "file://"):
		return strings.TrimPrefix(uri, "file://"), uri != "file://"
	case strings.Contains(uri, "://"):
		return "", false
	}
	return uri, true
}

// resolvedPath is p made absolute, with the symbolic links of its longest
// existing prefix resolved, so that two names of one directory compare
// equal.
func resolvedPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	rest := ""
	for dir := abs; ; {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return abs
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// within reports whether path is dir or inside it (both resolved).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// validateFormat checks the format settings given against the format.
func (j *Job) validateFormat() error {
	if j.Given["invalid-utf8"] {
		if _, err := filesink.ParseInvalidUTF8(j.InvalidUTF8); err != nil {
			return specErr("--invalid-utf8 must be reject or replace, not %q", j.InvalidUTF8)
		}
		if f := j.Format; f != "" && f != "jsonl" && f != "json" {
			return specErr("--invalid-utf8 applies to --format jsonl only: csv, parquet and arrow decode strings as encoding/json does " +
				"(each invalid byte becomes U+FFFD), text writes lines unchanged")
		}
	}
	if !j.IsBulkFormat() {
		if name := j.anyGiven(BulkOnlySettings, ""); name != "" {
			return specErr("--%s applies to --format parquet or arrow only", name)
		}
		return nil
	}
	if j.Given["compression"] {
		return specErr("--compression applies to row formats; --format %s compresses its own pages: use --%s-compression", j.Format, j.Format)
	}
	if name := j.anyGiven("csv-columns csv-header", ""); name != "" {
		return specErr("--%s applies to --format csv only", name)
	}
	other := map[string]string{"parquet": "arrow-compression", "arrow": "parquet-compression parquet-dictionary parquet-page-size parquet-stats"}
	if name := j.anyGiven(other[j.Format], ""); name != "" {
		return specErr("--%s does not apply to --format %s", name, j.Format)
	}
	return nil
}

// DeliveryGuarantee checks the guarantee against the sink and returns the
// mode of an HTTP sink: file and S3 sinks give exactly-once (default) or
// at-least-once (parts published as they roll), MySQL sinks exactly-once
// only, an HTTP sink at-least-once (default) or at-most-once. Asking for
// what a sink cannot give is a *SpecError.
func (j *Job) DeliveryGuarantee() (async.Guarantee, error) {
	kind := j.Kind()
	http, mysql := kind == HTTPSink, kind == MySQLSink
	switch g := j.Guarantee; g {
	case "":
		return async.AtLeastOnce, nil
	case ExactlyOnce:
		if http {
			return 0, specErr("--guarantee exactly-once: an HTTP endpoint has no transaction to prepare, so an http(s):// sink gives at-least-once " +
				"(each batch carries a deterministic Idempotency-Key: a receiver that applies each key once sees every record once) or at-most-once")
		}
		return 0, nil
	case AtLeastOnce, AtMostOnce:
		if g == AtLeastOnce && !http && !mysql {
			return async.AtLeastOnce, nil // files published as they roll (filesink.WithPublishOnRoll)
		}
		if !http {
			name, also := "a file or S3 sink", " and at-least-once (files published as they roll)"
			if mysql {
				name, also = "a mysql:// sink", " only"
			}
			return 0, specErr("--guarantee %s: %s supports exactly-once (two-phase commit)%s; at-most-once is for http(s):// sinks", g, name, also)
		}
		if g == AtMostOnce {
			return async.AtMostOnce, nil
		}
		return async.AtLeastOnce, nil
	default:
		return 0, specErr("--guarantee must be exactly-once, at-least-once or at-most-once, not %q", g)
	}
}

// PublishOnRoll reports whether a file or S3 sink publishes each part as
// it rolls (at-least-once) instead of at its checkpoint.
func (j *Job) PublishOnRoll() bool {
	k := j.Kind()
	return j.Guarantee == AtLeastOnce && (k == FileSink || k == S3Sink)
}

// MemoryLimitBytes returns the Go soft memory limit (GC target) to set
// while the job runs, 0 for none: the policy of MemoryLimit. GOMEMLIMIT,
// when set in the environment, wins (0: the runtime applies it).
func (j *Job) MemoryLimitBytes() (int64, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	switch j.MemoryLimit {
	case "none":
		return 0, nil
	case "auto", "":
		if !j.IsBulkFormat() {
			return 0, nil
		}
		return max(j.BufferBudget*BulkHeapFactor, MinAutoMemoryLimit), nil
	}
	n, err := filesink.ParseSize(j.MemoryLimit)
	if err == nil && n == 0 {
		err = fmt.Errorf("must be positive")
	}
	if err != nil {
		return 0, specErr("--memory-limit: want auto, none or a size (%v)", err)
	}
	return n, nil
}

// Run validates the job, sets its Go memory limit for the time of the run
// (restoring the previous one after) and runs cfg, which holds what the
// caller made of the description (source, store, sinks): Run(ctx, cfg).
// The memory limit is process-wide: run one Job at a time per process.
func (j *Job) Run(ctx context.Context, cfg Config) (Result, error) {
	if err := j.Validate(); err != nil {
		return Result{}, err
	}
	limit, _ := j.MemoryLimitBytes()
	if limit > 0 {
		if cfg.Logger != nil {
			cfg.Logger.Debug("Go memory limit", "bytes", limit)
		}
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	}
	return Run(ctx, cfg)
}
