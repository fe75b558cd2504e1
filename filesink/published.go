package filesink

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/filesink/filesink/committer/driver"
)

// Published is what an output already holds, as its commit manifests and
// its visible files tell it without a checkpoint store: what a run that
// starts without a checkpoint record finds there (ReadPublished). It lets
// such a run refuse to publish everything a second time when its state
// was lost, or rebuild its source position from the manifests.
type Published struct {
	// Output names the output (its manifest directory).
	Output string
	// Manifests is the number of commit manifests, Checkpoint the newest
	// checkpoint one of them was written for.
	Manifests  int
	Checkpoint uint64
	// Files is the number of files the manifests list, Records the
	// records they hold.
	Files   int
	Records int64
	// Unlisted are the visible files no manifest lists (their locations),
	// sorted: files of a checkpoint whose commit was interrupted before
	// its manifest was written, or files that are not the sink's.
	Unlisted []string

	ranges  map[string][]numRange // exact published record numbers, by input
	coarse  map[string][]coarseRange
	inexact []string
}

type numRange struct{ from, to int64 }

type coarseRange struct {
	numRange
	records  int64
	manifest string
}

// Empty reports whether the output holds nothing of an earlier run.
func (p *Published) Empty() bool { return p.Manifests == 0 && len(p.Unlisted) == 0 }

// ReadPublished reads the manifests of out (and the visible files of out
// and, if not nil, of the dead-letter output dead) into a Published. An
// unreadable manifest is an error naming it.
func ReadPublished(ctx context.Context, out, dead driver.Output) (*Published, error) {
	manifests, err := ReadManifests(ctx, out)
	if err != nil {
		return nil, err
	}
	p := &Published{Output: out.MetaLocation(ManifestDir), Manifests: len(manifests),
		ranges: map[string][]numRange{}, coarse: map[string][]coarseRange{}}
	listed := map[fileKey]bool{}
	for _, m := range manifests {
		p.Checkpoint = max(p.Checkpoint, m.Checkpoint)
		for i := range m.Files {
			f := &m.Files[i]
			listed[fileKey{f.DeadLetter, f.Path}] = true
			p.Files++
			p.Records += f.Records
			p.note(out.MetaLocation(m.Name), f)
		}
	}
	for _, dl := range []bool{false, true} {
		o := out
		if dl {
			o = dead
		}
		if o == nil {
			continue
		}
		err := o.ListFiles(ctx, func(target string, _ int64) error {
			if !listed[fileKey{dl, target}] {
				p.Unlisted = append(p.Unlisted, o.FileLocation(target))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(p.Unlisted)
	return p, nil
}

// note adds the source ranges of file f of the manifest at where.
func (p *Published) note(where string, f *ManifestFile) {
	if f.Records > 0 && len(f.Sources) == 0 {
		p.inexact = append(p.inexact, fmt.Sprintf("manifest %s lists %s without the source records it holds", where, f.Path))
		return
	}
	for _, s := range f.Sources {
		switch {
		case len(s.Runs) > 0:
			for _, r := range s.Runs {
				p.ranges[s.Input] = append(p.ranges[s.Input], numRange{min(r[0], r[1]), max(r[0], r[1])})
			}
		case !s.Coarse:
			p.ranges[s.Input] = append(p.ranges[s.Input], numRange{s.First, s.Last})
		default:
			p.coarse[s.Input] = append(p.coarse[s.Input], coarseRange{numRange{s.First, s.Last}, s.Records, where})
		}
	}
}

// SkipSet returns, input by input, the record numbers the output holds,
// as sorted, disjoint, inclusive ranges: what a run that rebuilds its
// position from the output must not write again. It fails, naming the
// manifest and input, when the manifests do not say exactly which
// records they hold: a file written before manifests recorded source
// ranges, or a file that holds records of an input in more than MaxRuns
// runs (Coarse) where the files around it do not account for every
// number in its range.
func (p *Published) SkipSet() (map[string][][2]int64, error) {
	if len(p.inexact) > 0 {
		return nil, fmt.Errorf("the output's manifests do not record which source records they hold: %s", p.inexact[0])
	}
	out := make(map[string][][2]int64, len(p.ranges)+len(p.coarse))
	inputs := make([]string, 0, len(p.ranges)+len(p.coarse))
	for in := range p.ranges {
		inputs = append(inputs, in)
	}
	for in := range p.coarse {
		if _, ok := p.ranges[in]; !ok {
			inputs = append(inputs, in)
		}
	}
	slices.Sort(inputs)
	for _, in := range inputs {
		exact := mergeRanges(p.ranges[in])
		if err := coveredCoarse(in, exact, p.coarse[in]); err != nil {
			return nil, err
		}
		var cs []numRange
		for _, c := range p.coarse[in] {
			cs = append(cs, c.numRange)
		}
		all := mergeRanges(append(exact, cs...))
		rs := make([][2]int64, len(all))
		for i, r := range all {
			rs[i] = [2]int64{r.from, r.to}
		}
		out[in] = rs
	}
	return out, nil
}

// coveredCoarse checks that every number of the merged coarse ranges of
// input is published: the coarse files' records plus the exact numbers
// inside them add up to the size of the range (no record is published
// twice, so that is every number).
func coveredCoarse(input string, exact []numRange, coarse []coarseRange) error {
	if len(coarse) == 0 {
		return nil
	}
	slices.SortFunc(coarse, func(a, b coarseRange) int { return cmp.Compare(a.from, b.from) })
	for i := 0; i < len(coarse); {
		seg, records, first := coarse[i].numRange, int64(0), coarse[i]
		for ; i < len(coarse) && coarse[i].from <= seg.to+1; i++ {
			seg.to = max(seg.to, coarse[i].to)
			records += coarse[i].records
		}
		for _, e := range exact {
			lo, hi := max(e.from, seg.from), min(e.to, seg.to)
			if lo <= hi {
				records += hi - lo + 1
			}
		}
		if records != seg.to-seg.from+1 {
			return fmt.Errorf("manifest %s records only the bounds %d..%d of the records of %s it holds (more than %d runs), and the output holds %d of the %d numbers in that range: which ones cannot be told",
				first.manifest, first.from, first.to, input, MaxRuns, records, seg.to-seg.from+1)
		}
	}
	return nil
}

func mergeRanges(rs []numRange) []numRange {
	if len(rs) == 0 {
		return nil
	}
	slices.SortFunc(rs, func(a, b numRange) int { return cmp.Compare(a.from, b.from) })
	out := []numRange{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if r.from <= last.to+1 {
			last.to = max(last.to, r.to)
			continue
		}
		out = append(out, r)
	}
	return out
}
