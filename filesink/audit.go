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
// the file, manifest or range concerned. A manifest that does not parse,
// or is of another version (a newer filesink wrote it), is a violation
// naming it, and the audit goes on with the others (the files it lists
// are then reported as listed in no manifest). A nil error with no
// violation means the output is exactly what its manifests describe; an
// error means the audit could not run (a manifest that cannot be read, a
// listing that failed).
func (a Auditor) Audit(ctx context.Context) ([]recovery.Violation, error) {
	ms := a.Output
	manifests, bad, err := readManifests(ctx, ms)
	if err != nil {
		return nil, err
	}
	au := &audit{Auditor: a, files: map[fileKey]listed{}, seen: map[fileKey]bool{}, badManifests: len(bad)}
	for _, b := range bad {
		au.add(b.where, "%s", b.problem)
	}
	for _, m := range manifests {
		for i := range m.Files {
			f := &m.Files[i]
			k := fileKey{f.DeadLetter, f.Path}
			if prev, dup := au.files[k]; dup {
				au.add(a.location(k), "listed in two manifests, %s and %s", ms.MetaLocation(prev.m.Name), ms.MetaLocation(m.Name))
				continue
			}
			au.files[k] = listed{m, f}
		}
	}
	if len(manifests) == 0 && len(bad) == 0 {
		au.add(ms.MetaLocation(ManifestDir), "no commit manifest")
	}
	for _, dl := range []bool{false, true} {
		be := a.Output
		if dl {
			be = a.DeadLetter
		}
		if be == nil {
			continue
		}
		if err := au.checkFiles(ctx, be, dl); err != nil {
			return nil, err
		}
	}
	var missing []fileKey
	for k := range au.files {
		if !au.seen[k] && (!k.dl || a.DeadLetter != nil) {
			missing = append(missing, k)
		}
	}
	slices.SortFunc(missing, func(x, y fileKey) int { return cmp.Compare(x.path, y.path) })
	for _, k := range missing {
		au.add(a.location(k), "listed in manifest %s but missing", ms.MetaLocation(au.files[k].m.Name))
	}
	lostHint := ""
	if len(bad) > 0 {
		lostHint = " (or only in the files of a manifest that could not be used)"
	}
	au.out = append(au.out, auditSources(manifests, a.location, lostHint)...)
	return au.out, nil
}

// listed is a file of a manifest.
type listed struct {
	m *Manifest
	f *ManifestFile
}

// audit is the running state of one Audit.
type audit struct {
	Auditor
	files        map[fileKey]listed // the files the manifests list
	seen         map[fileKey]bool   // the files found in the output
	badManifests int                // manifests that could not be used
	out          []recovery.Violation
}

func (au *audit) add(where, format string, args ...any) {
	au.out = append(au.out, recovery.Violation{Where: where, Problem: fmt.Sprintf(format, args...)})
}

// checkFiles checks every file of output fl (the dead-letter output if dl)
// against the manifests' entries.
func (au *audit) checkFiles(ctx context.Context, fl driver.Output, dl bool) error {
	ms := au.Output
	return fl.ListFiles(ctx, func(target string, size int64) error {
		k := fileKey{dl, target}
		au.seen[k] = true
		l, ok := au.files[k]
		if !ok {
			hint := ""
			switch {
			case strings.HasSuffix(target, stagingSuffix) || strings.Contains(target, ".part-"):
				hint = " (an in-progress staging file made visible?)"
			case au.badManifests > 0:
				hint = " (or only in a manifest that could not be used)"
			}
			au.add(fl.FileLocation(target), "not listed in any manifest%s", hint)
			return nil
		}
		where := fl.FileLocation(target)
		if size != l.f.Size {
			au.add(where, "has %d bytes; manifest %s lists %d", size, ms.MetaLocation(l.m.Name), l.f.Size)
			return nil
		}
		crc, records, err := au.read(ctx, fl, l.f)
		if err != nil {
			au.add(where, "cannot be read: %v", err)
			return nil
		}
		if got := fmt.Sprintf("%08x", crc); got != l.f.CRC32C {
			au.add(where, "CRC-32C %s; manifest %s lists %s: the content changed", got, ms.MetaLocation(l.m.Name), l.f.CRC32C)
		}
		if records >= 0 && records != l.f.Records {
			au.add(where, "holds %d records; manifest %s lists %d", records, ms.MetaLocation(l.m.Name), l.f.Records)
		}
		return nil
	})
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

// auditSources checks the source ranges of all manifests, input by input;
// lostHint is added to the reports of records in no file.
func auditSources(manifests []*Manifest, location func(fileKey) string, lostHint string) []recovery.Violation {
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
				what := "lost" + lostHint
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
					"records %d..%d are in no file: lost%s", next, r.from-1, lostHint)})
			}
			if i == 0 || r.to > prev.to {
				prev = r
			}
			next = max(next, r.to+1)
		}
	}
	return out
}
