package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/source"
)

// progress draws one status line on a terminal: records, records/s, bytes,
// checkpoint, and a bar when the total is known (generator).
type progress struct {
	w     io.Writer
	on    bool
	start time.Time
	last  time.Time
	total int64
	p     pipeline.Progress
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

func (p *progress) update(s pipeline.Progress) {
	p.p = s
	if !p.on {
		return
	}
	if now := time.Now(); now.Sub(p.last) >= 200*time.Millisecond || s.Done {
		p.last = now
		p.draw()
	}
}

func (p *progress) draw() {
	el := time.Since(p.start).Seconds()
	rate := float64(p.p.Records) / max(el, 1e-3)
	mb := float64(p.p.Bytes) / (1 << 20)
	bar := ""
	if p.total > 0 {
		frac := min(float64(p.p.Records)/float64(p.total), 1)
		n := int(frac * 30)
		bar = fmt.Sprintf("[%s%s] %3.0f%% ", strings.Repeat("=", n), strings.Repeat(" ", 30-n), frac*100)
	}
	fmt.Fprintf(p.w, "\r%s%d records (%.0f/s), %.1f MiB (%.1f MiB/s), checkpoint %d   ",
		bar, p.p.Records, rate, mb, mb/max(el, 1e-3), p.p.Checkpoint)
}

func (p *progress) finish() {
	if p.on {
		p.draw()
		fmt.Fprintln(p.w)
	}
}
