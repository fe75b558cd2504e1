package filesink

import (
	"cmp"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"

	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/recovery"
)

// Auditor checks an output from its files and commit manifests alone (no
// checkpoint store needed): every visible file is listed in exactly one
// manifest with its size and CRC-32C, no listed file is missing, and the
// source ranges of all manifests have no overlap (a duplicate) and, for
// inputs numbered densely (WithDenseOrigins), no gap (a loss).
type Auditor struct {
	// Output is the sink's backend (or only its driver.Output).
	Output driver.Output
	// DeadLetter is the dead-letter output's backend, if the sink has one.
	DeadLetter driver.Output
	// Count, if set, counts the records of a file (the deep check): it is
	// given the file's manifest entry and its bytes, and its result is
	// compared with the manifest's record count.
	Count func(f *ManifestFile, r io.Reader) (int64, error)
}

// Audit runs the checks and returns every violation found, each naming
// the file, manifest or range concerned. A nil error with no violation
// means the output is exactly what its manifests describe; an error means
// the audit could not run (an unreadable manifest, a listing that failed).
func (a Auditor) Audit(ctx context.Context) ([]recovery.Violation, error) {
	ms := a.Output
	manifests, err := ReadManifests(ctx, ms)
	if err != nil {
		return nil, err
	}
	var out []recovery.Violation
	add := func(where, format string, args ...any) {
		out = append(out, recovery.Violation{Where: where, Problem: fmt.Sprintf(format, args...)})
	}
	type listed struct {
		m *Manifest
		f *ManifestFile
	}
	files := map[fileKey]listed{}
	for _, m := range manifests {
		for i := range m.Files {
			f := &m.Files[i]
			k := fileKey{f.DeadLetter, f.Path}
			if prev, dup := files[k]; dup {
				add(a.location(k), "listed in two manifests, %s and %s", ms.MetaLocation(prev.m.Name), ms.MetaLocation(m.Name))
				continue
			}
			files[k] = listed{m, f}
		}
	}
	if len(manifests) == 0 {
		add(ms.MetaLocation(ManifestDir), "no commit manifest")
	}
	seen := map[fileKey]bool{}
	for _, dl := range []bool{false, true} {
		be := a.Output
		if dl {
			be = a.DeadLetter
		}
		if be == nil {
			continue
		}
		fl := be
		err := fl.ListFiles(ctx, func(target string, size int64) error {
			k := fileKey{dl, target}
			seen[k] = true
			l, ok := files[k]
			if !ok {
				hint := ""
				if strings.HasSuffix(target, stagingSuffix) || strings.Contains(target, ".part-") {
					hint = " (an in-progress staging file made visible?)"
				}
				add(fl.FileLocation(target), "not listed in any manifest%s", hint)
				return nil
			}
			where := fl.FileLocation(target)
			if size != l.f.Size {
				add(where, "has %d bytes; manifest %s lists %d", size, ms.MetaLocation(l.m.Name), l.f.Size)
				return nil
			}
			crc, records, err := a.read(ctx, fl, l.f)
			if err != nil {
				add(where, "cannot be read: %v", err)
				return nil
			}
			if got := fmt.Sprintf("%08x", crc); got != l.f.CRC32C {
				add(where, "CRC-32C %s; manifest %s lists %s: the content changed", got, ms.MetaLocation(l.m.Name), l.f.CRC32C)
			}
			if records >= 0 && records != l.f.Records {
				add(where, "holds %d records; manifest %s lists %d", records, ms.MetaLocation(l.m.Name), l.f.Records)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var missing []fileKey
	for k := range files {
		if !seen[k] && (!k.dl || a.DeadLetter != nil) {
			missing = append(missing, k)
		}
	}
	slices.SortFunc(missing, func(x, y fileKey) int { return cmp.Compare(x.path, y.path) })
	for _, k := range missing {
		add(a.location(k), "listed in manifest %s but missing", ms.MetaLocation(files[k].m.Name))
	}
	out = append(out, auditSources(manifests, a.location)...)
	return out, nil
}

// stagingSuffix ends the names of in-progress files of the local
// backend (committer/localfs.StagingSuffix).
const stagingSuffix = ".inprogress"

type fileKey struct {
	dl   bool
	path string
}

func (a Auditor) location(k fileKey) string {
	be := a.Output
	if k.dl {
		be = a.DeadLetter
	}
	if be == nil {
		return k.path
	}
	return be.FileLocation(k.path)
}

// read returns the CRC-32C of a file's bytes and, with Count set, its
// record count (-1 without).
func (a Auditor) read(ctx context.Context, fl driver.Output, f *ManifestFile) (uint32, int64, error) {
	r, err := fl.OpenFile(ctx, f.Path)
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	h := crc32.New(castagnoli)
	src := io.TeeReader(r, h)
	records := int64(-1)
	if a.Count != nil {
		records, err = a.Count(f, src)
		if err != nil {
			return 0, 0, fmt.Errorf("count records: %w", err)
		}
	}
	if _, err := io.Copy(io.Discard, src); err != nil {
		return 0, 0, err
	}
	return h.Sum32(), records, nil
}

// run is one range of record numbers of an input held by one file.
type run struct {
	from, to int64
	file     string
}

// auditSources checks the source ranges of all manifests, input by input.
func auditSources(manifests []*Manifest, location func(fileKey) string) []recovery.Violation {
	type input struct {
		runs    []run
		coarse  bool
		dense   bool
		start   int64
		records int64
		last    int64
	}
	inputs := map[string]*input{}
	for _, m := range manifests {
		for _, f := range m.Files {
			file := location(fileKey{f.DeadLetter, f.Path})
			for _, r := range f.Sources {
				in := inputs[r.Input]
				if in == nil {
					in = &input{start: r.Start, last: r.Last}
					inputs[r.Input] = in
				}
				in.records += r.Records
				in.last = max(in.last, r.Last)
				in.dense = in.dense || r.Dense
				switch {
				case r.Coarse:
					in.coarse = true
				case len(r.Runs) == 0:
					in.runs = append(in.runs, run{r.First, r.Last, file})
				default:
					for _, x := range r.Runs {
						in.runs = append(in.runs, run{x[0], x[1], file})
					}
				}
			}
		}
	}
	var out []recovery.Violation
	names := make([]string, 0, len(inputs))
	for n := range inputs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		in := inputs[name]
		if in.coarse {
			// Records of this input are spread over files at a finer grain
			// than the manifests keep: compare the counts.
			if span := in.last - in.start + 1; in.dense && in.records != span {
				what := "lost"
				if in.records > span {
					what = "duplicated"
				}
				out = append(out, recovery.Violation{Where: "input " + name, Problem: fmt.Sprintf(
					"the manifests hold %d records numbered %d..%d (%d numbers): records were %s", in.records, in.start, in.last, span, what)})
			}
			continue
		}
		slices.SortFunc(in.runs, func(x, y run) int { return cmp.Or(cmp.Compare(x.from, y.from), cmp.Compare(x.to, y.to)) })
		next := in.start
		var prev run
		for i, r := range in.runs {
			if i > 0 && r.from <= prev.to {
				out = append(out, recovery.Violation{Where: "input " + name, Problem: fmt.Sprintf(
					"records %d..%d are in both %s and %s: duplicated", r.from, min(r.to, prev.to), prev.file, r.file)})
			} else if in.dense && r.from > next {
				out = append(out, recovery.Violation{Where: "input " + name, Problem: fmt.Sprintf(
					"records %d..%d are in no file: lost", next, r.from-1)})
			}
			if i == 0 || r.to > prev.to {
				prev = r
			}
			next = max(next, r.to+1)
		}
	}
	return out
}
