package iceberg

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
)

// Keys of the summary of a compaction's replace snapshot.
const (
	// SummaryCompaction is the snapshot summary key of the compaction run
	// that made the replace snapshot: its run id.
	SummaryCompaction = "filesink.compaction"
	// SummaryCompactionAttempt is the snapshot summary key of the commit
	// attempt of that run that landed (1 for the first).
	SummaryCompactionAttempt = "filesink.compaction.attempt"
)

// DefaultTargetSize is the data file size Compact aims at by default.
const DefaultTargetSize int64 = 128 << 20

// CompactOptions tune Compact. The zero value takes the defaults.
type CompactOptions struct {
	// TargetSize is the size of the data files written (default 128 MiB).
	// Files below 3/4 of it are rewritten; files above 9/5 of it are left.
	TargetSize int64
	// MinInputFiles is the fewest small files of a partition worth
	// rewriting together (default 5, iceberg-go's).
	MinInputFiles int
	// MaxAttempts bounds the commits tried, and the rewrites (default
	// 20). A commit that fails on an append is tried again without a
	// rewrite, but under a job committing back to back it can take
	// several tries to find the head still.
	MaxAttempts int
	// Backoff is the wait before the second attempt, doubled each time up
	// to 5 s (default 50 ms).
	Backoff time.Duration
}

func (o CompactOptions) withDefaults() (CompactOptions, error) {
	if o.TargetSize < 0 || o.MinInputFiles < 0 || o.MaxAttempts < 0 || o.Backoff < 0 {
		return o, fmt.Errorf("iceberg: compact: negative option in %+v", o)
	}
	if o.TargetSize == 0 {
		o.TargetSize = DefaultTargetSize
	}
	if o.MinInputFiles == 0 {
		o.MinInputFiles = int(compaction.DefaultMinInputFiles)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 20
	}
	if o.Backoff == 0 {
		o.Backoff = 50 * time.Millisecond
	}
	return o, nil
}

// CompactResult tells what a Compact did.
type CompactResult struct {
	// Run is the run's id, the value of SummaryCompaction in its snapshot
	// and the name of its journal directory.
	Run string
	// SnapshotID is the replace snapshot committed; 0 when there was
	// nothing to rewrite.
	SnapshotID int64
	// FilesBefore and BytesBefore count the live data files of the
	// snapshot the rewrite replaced (of the table, when nothing was
	// rewritten); FilesAfter and BytesAfter those of the replace snapshot.
	FilesBefore, FilesAfter int64
	BytesBefore, BytesAfter int64
	// Removed and Added count the data files the replace snapshot removed
	// and added.
	Removed, Added int
	// Rewrites counts the times the run read and wrote the small files: 1,
	// plus one per conflict with a commit other than an append.
	Rewrites int
	// Attempts counts the commits tried.
	Attempts int
	// Swept counts the uncommitted data files of compactions (earlier
	// runs, or earlier attempts of this one) that the run deleted.
	Swept int
	// Pending counts the journal entries of other compactions left for a
	// later run: only a run that commits a replace snapshot sweeps.
	Pending int
}

// Compact rewrites the small data files of the table ident into files of
// about opts.TargetSize, in one replace snapshot whose summary records
// SummaryCompaction (a new run id) and SummaryCompactionAttempt; the
// rows do not change. Tables with delete files are refused (filesink
// only appends).
//
// The data files are written with iceberg-go's compaction executor
// (table.ExecuteCompactionGroup, on a plan of compaction.Config) and
// committed with its rewrite builder (Transaction.NewRewrite,
// RewriteFiles.ApplyResult), the machinery Table.RewriteDataFiles
// drives; each data file is recorded in the run's journal, under the
// table's location in CompactDir, before it is created. The commit is a
// compare-and-swap on the head the rewrite was planned on (iceberg-go's
// replay is not used: a table with commit.retry.num-retries above 0 is
// refused). When it fails, Compact loads the table again: if the run's
// snapshot is there (a lost reply), it is done; if only appends came
// since the plan, the written files are committed again on the new head
// (every file they replace is still live, and the appended files stay);
// otherwise it plans and rewrites again.
//
// A nil error means the replace snapshot is committed (SnapshotID), or
// that there was nothing to rewrite (SnapshotID 0). A crash or an error
// leaves the table as it was or with the replace committed, never in
// between; the files written and not committed stay, recorded in the
// journal. After committing, Compact deletes the journaled files of all
// compactions that no snapshot of the table references (see sweep): a
// compaction still running elsewhere cannot commit them any more, since
// its compare-and-swap fails on the replace this run committed.
//
// Compact is safe for concurrent use, with appends (Table.Commit) and
// with other compactions of the same table.
func Compact(ctx context.Context, cat table.CatalogIO, ident table.Identifier, opts CompactOptions) (CompactResult, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return CompactResult{}, err
	}
	c := &compactRun{cat: cat, ident: ident, opts: opts, run: strings.ToLower(rand.Text())}
	res := CompactResult{Run: c.run}
	var st *staged
	tried := map[int]*staged{} // by attempt
	var journal []journalEntry
	var lastErr error
	for {
		tbl, err := c.load(ctx)
		if err != nil {
			return res, err
		}
		if snap := runSnapshot(tbl, c.run); snap != nil {
			return c.finish(ctx, res, tbl, snap, tried, journal)
		}
		if res.Attempts >= opts.MaxAttempts || res.Rewrites >= opts.MaxAttempts {
			if lastErr == nil {
				lastErr = errors.New("the table changed by more than appends during every rewrite")
			}
			return res, fmt.Errorf("iceberg: compacting table %s: %d attempts, %d rewrites: %w", c.name(), res.Attempts, res.Rewrites, lastErr)
		}
		if st == nil || !appendsSince(tbl, st.base) {
			plan, err := c.plan(ctx, tbl)
			if err != nil {
				return res, err
			}
			if len(plan.Groups) == 0 {
				return c.nothing(ctx, res, tbl, plan)
			}
			if st, err = c.rewrite(ctx, tbl, plan); err != nil {
				return res, err
			}
			res.Rewrites++
			continue // load the head again: what was appended meanwhile is kept
		}
		res.Attempts++
		tried[res.Attempts] = st
		if journal, err = c.listJournal(ctx, tbl); err != nil {
			return res, err
		}
		if err := c.commit(ctx, tbl, st, res.Attempts); err != nil {
			lastErr = err // a conflict, or an unknown outcome: load and decide again
			if err := sleep(ctx, backoff(opts.Backoff, res.Attempts)); err != nil {
				return res, err
			}
		}
	}
}

// compactRun is one run of Compact.
type compactRun struct {
	cat   table.CatalogIO
	ident table.Identifier
	opts  CompactOptions
	run   string
	// seq numbers the run's journal entries.
	seq atomic.Int64
}

// staged is a rewrite of a plan: its files are written, not committed.
type staged struct {
	base   *table.Table // the table as planned
	groups []table.CompactionGroupResult
}

func (c *compactRun) name() string { return strings.Join(c.ident, ".") }

// load loads the table and refuses it if iceberg-go would replay a
// commit by itself.
func (c *compactRun) load(ctx context.Context) (*table.Table, error) {
	tbl, err := c.cat.LoadTable(ctx, c.ident)
	if err != nil {
		return nil, fmt.Errorf("iceberg: loading table %s: %w", c.name(), err)
	}
	if v := tbl.Properties()[propRetries]; v != "" && v != "0" {
		return nil, fmt.Errorf("iceberg: table %s has %s=%s: a compaction's commit would be replayed on a head it did not check; set it to 0", c.name(), propRetries, v)
	}
	return tbl, nil
}

// plan plans the rewrite of tbl's current snapshot.
func (c *compactRun) plan(ctx context.Context, tbl *table.Table) (compaction.Plan, error) {
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return compaction.Plan{}, fmt.Errorf("iceberg: compacting table %s: planning: %w", c.name(), err)
	}
	for _, t := range tasks {
		if len(t.DeleteFiles)+len(t.EqualityDeleteFiles)+len(t.DeletionVectorFiles) > 0 {
			return compaction.Plan{}, fmt.Errorf("iceberg: compacting table %s: data file %s has delete files; compact rewrites tables that are only appended to", c.name(), t.File.FilePath())
		}
	}
	cfg := compaction.DefaultConfig()
	cfg.TargetFileSizeBytes = c.opts.TargetSize
	cfg.MinFileSizeBytes = c.opts.TargetSize * 3 / 4
	cfg.MaxFileSizeBytes = c.opts.TargetSize * 9 / 5
	cfg.MinInputFiles = uint(c.opts.MinInputFiles)
	plan, err := cfg.PlanCompaction(tasks)
	if err != nil {
		return plan, fmt.Errorf("iceberg: compacting table %s: %w", c.name(), err)
	}
	return plan, nil
}

// rewrite writes the plan's groups as new data files, each recorded in
// the run's journal before it is created.
func (c *compactRun) rewrite(ctx context.Context, tbl *table.Table, plan compaction.Plan) (*staged, error) {
	fsF := func(ctx context.Context) (icebergio.IO, error) { return c.journalIO(ctx, tbl) }
	view := table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), fsF, c.cat)
	st := &staged{base: tbl}
	for _, g := range plan.Groups {
		group := table.CompactionTaskGroup{PartitionKey: g.PartitionKey, Tasks: g.Tasks, TotalSizeBytes: g.TotalSizeBytes}
		gr, err := table.ExecuteCompactionGroup(ctx, view, group, table.WithCompactionTargetFileSize(c.opts.TargetSize))
		if err != nil {
			return nil, fmt.Errorf("iceberg: compacting table %s: %w", c.name(), err)
		}
		st.groups = append(st.groups, gr)
	}
	return st, nil
}

// commit commits st as one replace snapshot on the head of tbl.
func (c *compactRun) commit(ctx context.Context, tbl *table.Table, st *staged, attempt int) error {
	txn := tbl.NewTransaction()
	rw := txn.NewRewrite(iceberg.Properties{SummaryCompaction: c.run, SummaryCompactionAttempt: strconv.Itoa(attempt)})
	for _, gr := range st.groups {
		rw.ApplyResult(gr)
	}
	if err := rw.Commit(ctx); err != nil {
		return err
	}
	_, err := txn.Commit(ctx)
	return err
}

// finish fills res from the run's snapshot snap of tbl and sweeps; tried
// holds what each attempt committed.
func (c *compactRun) finish(ctx context.Context, res CompactResult, tbl *table.Table, snap *table.Snapshot, tried map[int]*staged, journal []journalEntry) (CompactResult, error) {
	res.SnapshotID = snap.SnapshotID
	res.FilesAfter, res.BytesAfter = totals(snap)
	if snap.ParentSnapshotID != nil {
		if parent := tbl.Metadata().SnapshotByID(*snap.ParentSnapshotID); parent != nil {
			res.FilesBefore, res.BytesBefore = totals(parent)
		}
	}
	attempt, _ := strconv.Atoi(snap.Summary.Properties[SummaryCompactionAttempt])
	st := tried[attempt]
	if st == nil {
		st = &staged{} // not to be: then every journaled file is checked
	}
	for _, gr := range st.groups {
		res.Removed += len(gr.OldDataFiles)
		res.Added += len(gr.NewDataFiles)
	}
	swept, err := c.sweep(ctx, tbl, journal, st)
	res.Swept = swept
	if err != nil {
		return res, fmt.Errorf("iceberg: table %s: compaction committed as snapshot %d; sweeping: %w", c.name(), snap.SnapshotID, err)
	}
	return res, nil
}

// nothing is the result of a run with nothing to rewrite.
func (c *compactRun) nothing(ctx context.Context, res CompactResult, tbl *table.Table, plan compaction.Plan) (CompactResult, error) {
	res.FilesBefore, res.BytesBefore = int64(plan.TotalInputFiles), plan.TotalInputBytes
	res.FilesAfter, res.BytesAfter = res.FilesBefore, res.BytesBefore
	journal, err := c.listJournal(ctx, tbl)
	res.Pending = len(journal)
	return res, err
}

// runSnapshot returns the snapshot of run among the ancestors of tbl's
// current snapshot, or nil.
func runSnapshot(tbl *table.Table, run string) *table.Snapshot {
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return nil
	}
	for _, s := range table.AncestorsOf(cur.SnapshotID, tbl.Metadata().SnapshotByID) {
		if s.Summary != nil && s.Summary.Properties[SummaryCompaction] == run {
			return &s
		}
	}
	return nil
}

// appendsSince reports whether tbl's current snapshot descends from
// base's through appends only: then every data file base held is live.
func appendsSince(tbl, base *table.Table) bool {
	b := base.CurrentSnapshot()
	if b == nil || tbl.Metadata().TableUUID() != base.Metadata().TableUUID() {
		return false
	}
	for s := tbl.CurrentSnapshot(); s != nil; {
		if s.SnapshotID == b.SnapshotID {
			return true
		}
		if s.Summary == nil || s.Summary.Operation != table.OpAppend || s.ParentSnapshotID == nil {
			return false
		}
		s = tbl.Metadata().SnapshotByID(*s.ParentSnapshotID)
	}
	return false
}

// totals reads the live data files and bytes a snapshot's summary
// records.
func totals(s *table.Snapshot) (files, bytes int64) {
	if s.Summary == nil {
		return 0, 0
	}
	files, _ = strconv.ParseInt(s.Summary.Properties["total-data-files"], 10, 64)
	bytes, _ = strconv.ParseInt(s.Summary.Properties["total-files-size"], 10, 64)
	return files, bytes
}

// backoff is the wait after attempt failed: base doubled per attempt up
// to 5 s, from half to all of it at random.
func backoff(base time.Duration, attempt int) time.Duration {
	t := Table{Backoff: base}
	return t.backoff(attempt)
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
