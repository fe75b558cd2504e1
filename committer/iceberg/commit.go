// Package iceberg commits the data files of decided checkpoints to an
// Apache Iceberg table: one append snapshot per commit, exactly once
// through crashes, lost replies, concurrent writers and zombies.
//
// The commit is a compare-and-swap on the table's head, keyed by the job
// and its lanes (a lane is a Kafka partition in group mode, or the one
// lane of a job of one process). Each snapshot it appends records, in its
// summary, the job and the checkpoint of every lane it holds; the same
// transaction also sets, per lane, the table property
// "filesink.committed.<job>.<lane>", which snapshot expiry does not
// remove. Before appending, and again after any failure, Commit loads the
// table and drops the lanes whose checkpoint the table already holds (a
// checkpoint whose commit landed though its reply was lost, or a zombie's
// checkpoint that the lane's new owner has passed), then appends the rest
// on the head it loaded. iceberg-go's own refresh-and-replay retry is not
// used: a table whose commit.retry.num-retries is above 0 is refused, and
// its duplicate-path check stays on.
package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Keys of the snapshot summary and of the table's properties.
const (
	// SummaryJob is the snapshot summary key of the job that appended it.
	SummaryJob = "filesink.job-id"
	// SummaryLanes is the snapshot summary key of its lanes: a JSON object
	// of lane -> checkpoint id.
	SummaryLanes = "filesink.lanes"
	// propCommitted + job + "." + lane is the table property holding the
	// lane's newest committed checkpoint id.
	propCommitted = "filesink.committed."
	// propRetries is iceberg-go's (and Iceberg's) commit retry count.
	propRetries = "commit.retry.num-retries"
)

// LaneCommit is what one lane's decided checkpoint adds to the table.
type LaneCommit struct {
	Lane       string // the lane's name; "" for the lane of a job of one process
	Checkpoint uint64 // the decided checkpoint; a lane's checkpoints grow
	Files      []iceberg.DataFile
}

// Result tells what a Commit did.
type Result struct {
	// Appended lists the lanes whose files this call's snapshot added.
	// Empty when the table held every lane's checkpoint already, or when
	// the table held the snapshot after a failed reply (Recovered).
	Appended []string
	// Skipped lists the lanes whose checkpoint (or a later one) the table
	// held before this call appended anything.
	Skipped []string
	// Recovered lists the lanes whose commit failed with an unknown outcome
	// and that the reloaded table showed committed.
	Recovered []string
	// Attempts counts the appends tried (0: nothing to append).
	Attempts int
}

// CommitError is an append that failed before reaching the catalog (the
// files or the table's state refuse it), or after MaxAttempts tries.
type CommitError struct {
	Table string
	Lanes []string
	Err   error
}

func (e *CommitError) Error() string {
	return fmt.Sprintf("iceberg: committing lanes %q to table %s: %v", e.Lanes, e.Table, e.Err)
}

func (e *CommitError) Unwrap() error { return e.Err }

// ErrDataLoss is wrapped by the error of a commit whose data file is
// missing or shorter than its checkpoint records: the decided checkpoint
// cannot be committed as it was decided.
var ErrDataLoss = errors.New("a decided data file is missing or has another size")

// ErrBadDataFile is wrapped by the error of a commit whose data file is
// not a Parquet file of the table's schema (its columns lack the table's
// field ids): appending it would make readers see nulls or wrong columns.
var ErrBadDataFile = errors.New("a decided data file does not fit the table")

// Table commits to one Iceberg table for one job. It holds no state
// between calls; a Table is safe for concurrent use, and any number of
// processes may commit to the same table at once (each lane from one
// process at a time, as the lanes' fences see to; a zombie's commit is a
// no-op).
type Table struct {
	cat   table.CatalogIO
	ident table.Identifier
	job   string
	// MaxAttempts bounds the appends Commit tries (default 10).
	MaxAttempts int
	// Backoff is the wait before the second attempt, doubled each time up
	// to 5 s (default 50 ms).
	Backoff time.Duration
}

// NewTable returns the committer of job to the table ident of cat.
func NewTable(cat table.CatalogIO, ident table.Identifier, job string) *Table {
	return &Table{cat: cat, ident: ident, job: job, MaxAttempts: 10, Backoff: 50 * time.Millisecond}
}

func (t *Table) name() string { return strings.Join(t.ident, ".") }

// Commit appends, in one snapshot, the files of the lanes whose checkpoint
// the table does not hold yet. A nil error means that, once it returns,
// the table holds every lane's checkpoint of lanes (or a later one) in a
// snapshot of this job: exactly once, whether this call, an earlier one
// whose reply was lost, or a later checkpoint of the lane's owner put it
// there. Each attempt loads the table and appends on the head it loaded; a
// conflict with another writer or an unknown outcome makes it load and
// decide again. Data files are checked (present, with their recorded
// size) before the first append; a missing or short one fails with an
// error wrapping ErrDataLoss and nothing is committed.
func (t *Table) Commit(ctx context.Context, lanes []LaneCommit) (Result, error) {
	var res Result
	var lastErr error
	checked := false
	for {
		tbl, committed, err := t.load(ctx)
		if err != nil {
			return res, err
		}
		todo, done := pending(lanes, committed)
		if res.Attempts == 0 {
			res.Skipped = done
		} else {
			res.Recovered = slices.DeleteFunc(done, func(l string) bool { return slices.Contains(res.Skipped, l) })
		}
		if len(todo) == 0 {
			return res, nil
		}
		if res.Attempts >= t.MaxAttempts {
			return res, &CommitError{Table: t.name(), Lanes: laneNames(todo), Err: fmt.Errorf("%d attempts: %w", res.Attempts, lastErr)}
		}
		if !checked {
			if err := checkFiles(ctx, tbl, todo); err != nil {
				return res, &CommitError{Table: t.name(), Lanes: laneNames(todo), Err: err}
			}
			checked = true
		}
		if res.Attempts > 0 {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(t.backoff(res.Attempts)):
			}
		}
		res.Attempts++
		txn, err := t.transaction(ctx, tbl, todo)
		if err != nil {
			return res, &CommitError{Table: t.name(), Lanes: laneNames(todo), Err: err}
		}
		if _, err := txn.Commit(ctx); err != nil {
			lastErr = err // a conflict, or an unknown outcome: load and decide again
			continue
		}
		res.Appended = laneNames(todo)
		return res, nil
	}
}

// load loads the table, refuses it if iceberg-go would replay a commit by
// itself, and returns the lanes' committed checkpoints of this job.
func (t *Table) load(ctx context.Context) (*table.Table, map[string]uint64, error) {
	tbl, err := t.cat.LoadTable(ctx, t.ident)
	if err != nil {
		return nil, nil, fmt.Errorf("iceberg: loading table %s: %w", t.name(), err)
	}
	if v := tbl.Properties()[propRetries]; v != "" && v != "0" {
		return nil, nil, fmt.Errorf("iceberg: table %s has %s=%s: its commits would be replayed on a head this job did not check; set it to 0", t.name(), propRetries, v)
	}
	committed, err := Committed(tbl, t.job)
	if err != nil {
		return nil, nil, fmt.Errorf("iceberg: table %s: %w", t.name(), err)
	}
	return tbl, committed, nil
}

// transaction builds the append of todo on tbl: the files, the summary,
// and the lanes' committed properties.
func (t *Table) transaction(ctx context.Context, tbl *table.Table, todo []LaneCommit) (*table.Transaction, error) {
	lanes := map[string]uint64{}
	props := iceberg.Properties{}
	var files []iceberg.DataFile
	for _, l := range todo {
		// A lane twice (a checkpoint and the next one of its next run,
		// both waiting): the table holds the later one.
		lanes[l.Lane] = max(lanes[l.Lane], l.Checkpoint)
		props[propCommitted+t.job+"."+l.Lane] = strconv.FormatUint(lanes[l.Lane], 10)
		files = append(files, l.Files...)
	}
	summary, err := json.Marshal(lanes)
	if err != nil {
		return nil, err
	}
	txn := tbl.NewTransaction()
	if err := txn.SetProperties(props); err != nil {
		return nil, err
	}
	if err := txn.AddDataFiles(ctx, files, iceberg.Properties{SummaryJob: t.job, SummaryLanes: string(summary)}); err != nil {
		return nil, err
	}
	return txn, nil
}

// backoff is the wait after attempt failed: Backoff doubled per attempt
// up to 5 s, from half to all of it at random (committers that lost the
// same race do not meet again).
func (t *Table) backoff(attempt int) time.Duration {
	d := t.Backoff
	for range attempt - 1 {
		if d *= 2; d >= 5*time.Second {
			d = 5 * time.Second
			break
		}
	}
	return d/2 + rand.N(d/2+1)
}

// Committed returns the newest checkpoint of each lane of job that tbl
// holds: the larger of the lane's table property and the checkpoints the
// summaries of the current snapshot's ancestors record.
func Committed(tbl *table.Table, job string) (map[string]uint64, error) {
	out := map[string]uint64{}
	prefix := propCommitted + job + "."
	for k, v := range tbl.Properties() {
		lane, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("property %s=%q: not a checkpoint id", k, v)
		}
		out[lane] = max(out[lane], n)
	}
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return out, nil
	}
	for _, s := range table.AncestorsOf(cur.SnapshotID, tbl.Metadata().SnapshotByID) {
		if s.Summary == nil || s.Summary.Properties[SummaryJob] != job {
			continue
		}
		var lanes map[string]uint64
		if err := json.Unmarshal([]byte(s.Summary.Properties[SummaryLanes]), &lanes); err != nil {
			return nil, fmt.Errorf("snapshot %d: summary %s: %v", s.SnapshotID, SummaryLanes, err)
		}
		for lane, n := range lanes {
			out[lane] = max(out[lane], n)
		}
	}
	return out, nil
}

// pending splits lanes into those whose checkpoint committed does not
// hold and the names of those it does.
func pending(lanes []LaneCommit, committed map[string]uint64) (todo []LaneCommit, done []string) {
	for _, l := range lanes {
		if n, ok := committed[l.Lane]; ok && n >= l.Checkpoint {
			done = append(done, l.Lane)
			continue
		}
		todo = append(todo, l)
	}
	return todo, done
}

func laneNames(lanes []LaneCommit) []string {
	out := make([]string, len(lanes))
	for i, l := range lanes {
		out[i] = l.Lane
	}
	return out
}

// checkFiles checks that every data file of lanes exists with the size
// its checkpoint recorded.
func checkFiles(ctx context.Context, tbl *table.Table, lanes []LaneCommit) error {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	for _, l := range lanes {
		for _, df := range l.Files {
			f, err := fs.Open(df.FilePath())
			if err != nil {
				return fmt.Errorf("%w: lane %q checkpoint %d: %s: %v", ErrDataLoss, l.Lane, l.Checkpoint, df.FilePath(), err)
			}
			err = checkFile(f, df, tbl.Schema())
			f.Close()
			if err != nil {
				return fmt.Errorf("lane %q checkpoint %d: %w", l.Lane, l.Checkpoint, err)
			}
		}
	}
	return nil
}

// checkFile checks the open data file f of df: the size df records, and
// the table's field ids on its Parquet columns (readers match columns by
// id: a file written for another schema would read as nulls or wrong
// columns).
func checkFile(f iceio.File, df iceberg.DataFile, sc *iceberg.Schema) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", df.FilePath(), err)
	}
	if fi.Size() != df.FileSizeBytes() {
		return fmt.Errorf("%w: %s has %d bytes, the checkpoint recorded %d", ErrDataLoss, df.FilePath(), fi.Size(), df.FileSizeBytes())
	}
	rd, err := file.NewParquetReader(f)
	if err != nil {
		return fmt.Errorf("%w: %s: not a Parquet file: %v", ErrBadDataFile, df.FilePath(), err)
	}
	defer rd.Close()
	pq := rd.MetaData().Schema
	for i := range pq.NumColumns() {
		node := pq.Column(i).SchemaNode()
		id := int(node.FieldID())
		f, ok := sc.FindFieldByID(id)
		if id <= 0 || !ok || f.Name != node.Name() {
			return fmt.Errorf("%w: %s: column %s has field id %d, which the table names %q: the file was not written for this table's schema", ErrBadDataFile, df.FilePath(), pq.Column(i).Path(), id, f.Name)
		}
	}
	return nil
}
