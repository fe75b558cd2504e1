package group

import (
	"sync"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/pipeline"
)

// Progress is what the lanes of one process did so far in its Run, summed
// over every lane run, whether it ended with a handoff, at the end of its
// input, or without a final checkpoint (lost, fenced, cancelled). No total
// ever decreases.
type Progress struct {
	// Records and Bytes were read by the lanes (records of a lane run that
	// ended without a final checkpoint included: the lane's next owner
	// reads those that were not committed again).
	Records, Bytes int64
	// Committed is the number of records covered by the lane checkpoints
	// this process decided: from the decide on, they are published exactly
	// once, by this process or by the lane's next owner. The Committed of
	// all the processes of a job that finished sum to the records in its
	// output.
	Committed int64
	// Checkpoints is the number of lane checkpoints completed (decided and
	// published) by this process.
	Checkpoints int64
	// Lanes is the number of lanes this process runs now.
	Lanes int
}

// progress keeps the totals of a runner's lane runs.
type progress struct {
	report func(Progress) // Config.Progress, or nil

	mu     sync.Mutex
	totals Progress
}

// add adds a lane run's increments to the totals and reports them.
func (p *progress) add(d Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.totals.Records += d.Records
	p.totals.Bytes += d.Bytes
	p.totals.Committed += d.Committed
	p.totals.Checkpoints += d.Checkpoints
	p.totals.Lanes += d.Lanes
	if p.report != nil {
		p.report(p.totals) // under mu: the calls are serialized and never go back in time
	}
}

func (p *progress) get() Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.totals
}

// laneCount counts what one lane run reads and commits, from its
// pipeline's events, and adds it to the process's totals as it goes.
// Progress and CheckpointBegun come from the run's goroutine, in the order
// of the records (the records a Progress reports were handed to the sinks
// before the barrier that follows it); Decided may come from another.
type laneCount struct {
	p *progress

	mu          sync.Mutex
	last        pipeline.Progress // the run's totals so far
	barriers    map[uint64]int64  // records read before the barrier of each checkpoint begun, not yet decided
	committed   int64             // records read before the barrier of the newest decided checkpoint
	checkpoints int64
}

func newLaneCount(p *progress) *laneCount {
	return &laneCount{p: p, barriers: map[uint64]int64{}}
}

// events is the listener that feeds c.
func (c *laneCount) events() pipeline.EventListener {
	return pipeline.EventListener{
		EventListener: committer.EventListener{CheckpointBegun: c.begun, Decided: c.decided},
		Progress:      c.progress,
	}
}

func (c *laneCount) progress(p pipeline.Progress) {
	c.mu.Lock()
	d := Progress{Records: p.Records - c.last.Records, Bytes: p.Bytes - c.last.Bytes, Checkpoints: p.Checkpoints - c.last.Checkpoints}
	c.last = p
	c.mu.Unlock()
	if d != (Progress{}) {
		c.p.add(d)
	}
}

func (c *laneCount) begun(i committer.CheckpointBegunInfo) {
	c.mu.Lock()
	c.barriers[i.ID] = c.last.Records
	c.mu.Unlock()
}

func (c *laneCount) decided(i committer.DecidedInfo) {
	c.mu.Lock()
	n, ok := c.barriers[i.ID]
	for id := range c.barriers {
		if id <= i.ID {
			delete(c.barriers, id)
		}
	}
	var d int64
	if ok && n > c.committed {
		d, c.committed = n-c.committed, n
	}
	c.mu.Unlock()
	if d > 0 {
		c.p.add(Progress{Committed: d})
	}
}

// running counts the lane run as started (+1) or ended (-1) in Lanes.
func (c *laneCount) running(n int) { c.p.add(Progress{Lanes: n}) }
