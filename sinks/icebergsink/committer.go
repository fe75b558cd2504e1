package icebergsink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/filesink/filesink/committer"
	icecommit "github.com/filesink/filesink/committer/iceberg"
	"github.com/filesink/filesink/filesink"
)

// Committer appends the decided checkpoints of a job's lanes to one
// table. Lanes that wait at the same time go into one snapshot: while an
// append runs, the lanes that arrive wait for the next one, which takes
// them all, so the catalog sees one commit at a time per process however
// many lanes the process runs. A Committer is safe for concurrent use.
type Committer struct {
	cat   table.CatalogIO
	ident table.Identifier
	part  Partitioning
	meta  *table.Table // the table at the start: specs and schema of the data files

	mu      sync.Mutex
	table   *icecommit.Table
	waiting []*request
	running bool

	observe func(time.Duration) // SetObserver

	commits, appended, skipped, attempts, snapshots atomic.Int64
	nanos                                           atomic.Int64
}

type request struct {
	lane icecommit.LaneCommit
	done chan error
}

// NewCommitter returns the committer to the table ident of cat, whose
// loaded metadata is tbl, partitioned as part. SetJob must name the job
// before the first Commit.
func NewCommitter(cat table.CatalogIO, ident table.Identifier, tbl *table.Table, part Partitioning) *Committer {
	return &Committer{cat: cat, ident: ident, meta: tbl, part: part}
}

// SetJob sets the job id the committer's snapshots and table properties
// carry (committer/iceberg's Table): checkpoints of the same lane of
// another job are not this job's.
func (c *Committer) SetJob(job string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.table = icecommit.NewTable(c.cat, c.ident, job)
}

// SetObserver makes every Commit that returns nil report its latency to
// observe (metrics); call it before the first Commit.
func (c *Committer) SetObserver(observe func(time.Duration)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe = observe
}

// Table returns the table's name, NAMESPACE.TABLE.
func (c *Committer) Table() string { return strings.Join(c.ident, ".") }

// Stats are what a Committer did so far.
type Stats struct {
	Commits   int64         // Commit calls that returned nil
	Appended  int64         // lane checkpoints this process appended
	Skipped   int64         // lane checkpoints the table held already (recovery, zombies, lost replies)
	Attempts  int64         // appends tried; above Snapshots, conflicts and retries
	Snapshots int64         // appends that committed a snapshot
	Latency   time.Duration // summed over the committed calls
}

// Stats returns the counts so far.
func (c *Committer) Stats() Stats {
	return Stats{Commits: c.commits.Load(), Appended: c.appended.Load(), Skipped: c.skipped.Load(),
		Attempts: c.attempts.Load(), Snapshots: c.snapshots.Load(), Latency: time.Duration(c.nanos.Load())}
}

// Commit appends the files of lane's decided checkpoint to the table,
// unless the table holds that checkpoint of the lane, or a later one,
// already. files are the checkpoint's published files (relative to the
// table location); dead letters are left out. A nil error means the table
// holds the lane's checkpoint: exactly once, whether this call or an
// earlier one appended it.
func (c *Committer) Commit(ctx context.Context, lane string, checkpoint uint64, files []filesink.ManifestFile) error {
	lc := icecommit.LaneCommit{Lane: lane, Checkpoint: checkpoint}
	for _, f := range files {
		if f.DeadLetter {
			continue
		}
		df, err := c.dataFile(f)
		if err != nil {
			return err
		}
		lc.Files = append(lc.Files, df)
	}
	if len(lc.Files) == 0 {
		return nil
	}
	start := time.Now()
	r := &request{lane: lc, done: make(chan error, 1)}
	c.mu.Lock()
	if c.table == nil {
		c.mu.Unlock()
		return errors.New("icebergsink: Commit before SetJob")
	}
	c.waiting = append(c.waiting, r)
	if !c.running {
		c.running = true
		go c.run(context.WithoutCancel(ctx))
	}
	c.mu.Unlock()
	select {
	case err := <-r.done:
		if errors.Is(err, icecommit.ErrDataLoss) {
			// Retrying cannot bring the file back: the run stops, and
			// the next one rebuilds it from the source if it can.
			return committer.Permanent(fmt.Errorf("%w: %w", committer.ErrDataLoss, err))
		}
		if errors.Is(err, icecommit.ErrBadDataFile) {
			return committer.Permanent(err)
		}
		if err == nil {
			d := time.Since(start)
			c.commits.Add(1)
			c.nanos.Add(int64(d))
			c.mu.Lock()
			observe := c.observe
			c.mu.Unlock()
			if observe != nil {
				observe(d)
			}
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run appends the waiting lanes, batch after batch, until none wait.
// A batch that fails is tried again lane by lane, so that one lane's
// data loss does not hold the others.
func (c *Committer) run(ctx context.Context) {
	for {
		c.mu.Lock()
		batch, t := c.waiting, c.table
		c.waiting = nil
		if len(batch) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		err := c.append(ctx, t, batch)
		if err == nil || len(batch) == 1 {
			for _, r := range batch {
				r.done <- err
			}
			continue
		}
		for _, r := range batch {
			r.done <- c.append(ctx, t, []*request{r})
		}
	}
}

func (c *Committer) append(ctx context.Context, t *icecommit.Table, batch []*request) error {
	lanes := make([]icecommit.LaneCommit, len(batch))
	for i, r := range batch {
		lanes[i] = r.lane
	}
	res, err := t.Commit(ctx, lanes)
	c.attempts.Add(int64(res.Attempts))
	c.appended.Add(int64(len(res.Appended)))
	c.skipped.Add(int64(len(res.Skipped) + len(res.Recovered)))
	if len(res.Appended) > 0 {
		c.snapshots.Add(1)
	}
	return err
}

// dataFile returns the Iceberg data file of a published file.
func (c *Committer) dataFile(f filesink.ManifestFile) (iceberg.DataFile, error) {
	meta := c.meta
	spec := meta.Spec()
	values, err := c.part.Values(f.Path, spec, meta.Schema())
	if err != nil {
		return nil, fmt.Errorf("icebergsink: table %s: %w", c.Table(), err)
	}
	rec := icecommit.FileRecord{Path: strings.TrimSuffix(meta.Location(), "/") + "/" + f.Path, Size: f.Size, Records: f.Records, SpecID: spec.ID(), Partition: values}
	df, err := rec.DataFile(meta)
	if err != nil {
		return nil, fmt.Errorf("icebergsink: table %s: %w", c.Table(), err)
	}
	return df, nil
}
