package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/filesink/filesink/group"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/source"
)

// progress draws one status line on a terminal: records, records/s, bytes,
// checkpoint, and a bar when the total is known (generator). In group mode
// the figures are the process's, summed over its lanes. Safe for
// concurrent use.
type progress struct {
	w     io.Writer
	on    bool
	start time.Time
	total int64

	mu   sync.Mutex
	last time.Time
	p    pipeline.Progress
	g    *group.Progress // group mode: the lanes' totals (p unused)
}

func newProgress(w io.Writer, mode, src string) *progress {
	p := &progress{w: w, start: time.Now()}
	switch mode {
	case "on":
		p.on = true
	case "auto":
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				p.on = true
			}
		}
	}
	if rest, ok := strings.CutPrefix(src, "gen://?"); ok {
		if cfg, err := source.ParseGenQuery(rest); err == nil {
			p.total = cfg.Count
		}
	}
	return p
}

// update takes the totals of a run (pipeline.Config.Progress).
func (p *progress) update(s pipeline.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.p = s
	p.drawDue(s.Done)
}

// updateGroup takes the totals of a process in group mode
// (group.Config.Progress).
func (p *progress) updateGroup(s group.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.g = &s
	p.drawDue(false)
}

// drawDue draws the line if the last one is 200 ms old, or now is set.
func (p *progress) drawDue(now bool) {
	if !p.on {
		return
	}
	if t := time.Now(); t.Sub(p.last) >= 200*time.Millisecond || now {
		p.last = t
		p.draw()
	}
}

func (p *progress) draw() {
	el := time.Since(p.start).Seconds()
	records, size := p.p.Records, p.p.Bytes
	if p.g != nil {
		records, size = p.g.Records, p.g.Bytes
	}
	rate := float64(records) / max(el, 1e-3)
	mb := float64(size) / (1 << 20)
	bar := ""
	if p.total > 0 {
		frac := min(float64(records)/float64(p.total), 1)
		n := int(frac * 30)
		bar = fmt.Sprintf("[%s%s] %3.0f%% ", strings.Repeat("=", n), strings.Repeat(" ", 30-n), frac*100)
	}
	fmt.Fprintf(p.w, "\r%s%d records (%.0f/s), %.1f MiB (%.1f MiB/s), ", bar, records, rate, mb, mb/max(el, 1e-3))
	if g := p.g; g != nil {
		fmt.Fprintf(p.w, "%d committed, %d lane(s), %d lane checkpoint(s)   ", g.Committed, g.Lanes, g.Checkpoints)
		return
	}
	fmt.Fprintf(p.w, "checkpoint %d   ", p.p.Checkpoint)
}

// finish draws the last line and ends it.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		p.draw()
		fmt.Fprintln(p.w)
	}
}
