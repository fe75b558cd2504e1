package filesink

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
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
	// Live, if set, is the run that writes the output during the audit
	// (see LiveRun); Output and DeadLetter must then be driver.Backends.
	Live *LiveRun
}

// Audit runs the checks and returns every violation found, each naming
// the file, manifest or range concerned. A manifest that does not parse,
// or is of another version (a newer filesink wrote it), is a violation
// naming it, and the audit goes on with the others (the files it lists
// are then reported as listed in no manifest). A nil error with no
// violation means the output is exactly what its manifests describe; an
// error means the audit could not run (a manifest that cannot be read, a
// listing that failed).
//
// With Live set, the output may change during the audit: what the run
// has in flight goes to Live.Note rather than into the violations (see
// LiveRun). Safe for concurrent use (each call keeps its own state).
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
	au.addManifests(manifests)
	if len(manifests) == 0 && len(bad) == 0 && a.Live == nil {
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
	sources := manifests
	if a.Live != nil {
		if sources, err = au.live(ctx, manifests, bad); err != nil {
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
	if au.badManifests > 0 {
		lostHint = " (or only in the files of a manifest that could not be used)"
	}
	au.out = append(au.out, auditSources(sources, a.location, lostHint)...)
	return au.out, nil
}

// addManifests adds the files of manifests to au.files; a file already
// there is a violation (listed in two manifests).
func (au *audit) addManifests(manifests []*Manifest) {
	ms := au.Output
	for _, m := range manifests {
		for i := range m.Files {
			f := &m.Files[i]
			k := fileKey{f.DeadLetter, f.Path}
			if prev, dup := au.files[k]; dup {
				au.add(au.location(k), "listed in two manifests, %s and %s", ms.MetaLocation(prev.m.Name), ms.MetaLocation(m.Name))
				continue
			}
			au.files[k] = listed{m, f, "manifest " + ms.MetaLocation(m.Name)}
		}
	}
}

// live is the second look of an audit of a live run, after the output was
// listed: it reads the run's records, then the manifests again, checks the
// files that no manifest read before the listing listed, and returns the
// manifests and record parts whose sources are to be audited. bad are the
// manifests read before that could not be used (already reported).
func (au *audit) live(ctx context.Context, before []*Manifest, bad []badManifest) ([]*Manifest, error) {
	ms := au.Output
	main, err := backendOf(au.Output, "output")
	if err != nil {
		return nil, err
	}
	dead, err := backendOf(au.DeadLetter, "dead-letter output")
	if err != nil {
		return nil, err
	}
	records, err := au.Live.Records(ctx)
	if err != nil {
		return nil, err
	}
	// Manifests written since the first read (after the records: each one
	// read now is of a checkpoint that a record read decided, or of a
	// newer one).
	after, badAfter, err := readManifests(ctx, ms)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, m := range before {
		known[m.Name] = true
	}
	var newest uint64
	if n := len(records); n > 0 {
		newest = records[n-1].ID
	}
	sources := slices.Clone(before)
	var added []*Manifest
	for _, m := range after {
		if known[m.Name] {
			continue
		}
		added = append(added, m)
		if len(records) == 0 || m.Checkpoint <= newest {
			sources = append(sources, m)
		}
	}
	for _, b := range badAfter {
		if !slices.Contains(bad, b) {
			au.add(b.where, "%s", b.problem)
			au.badManifests++
		}
	}
	au.addManifests(added)
	if len(before) == 0 && len(added) == 0 && au.badManifests == 0 {
		au.Live.note(ms.MetaLocation(ManifestDir), "no commit manifest yet: the live run has published nothing")
	}

	// The parts the records hold: decided ones (published or about to be,
	// their manifests perhaps not written yet) and the newest record's
	// open ones.
	decided, open, err := recordParts(records, func(dl bool, part json.RawMessage) (string, error) {
		be := main
		if dl {
			be = dead
		}
		if be == nil {
			return "", errors.New("no dead-letter output configured")
		}
		target, _, err := be.Describe(part)
		return target, err
	})
	if err != nil {
		return nil, err
	}
	sources = withRecordParts(sources, decided, open)
	if err := au.liveFiles(ctx, decided, added); err != nil {
		return nil, err
	}
	return sources, nil
}

// withRecordParts returns manifests followed by one manifest per part of
// parts that manifests do not list (with figures): the sources of a live
// audit.
func withRecordParts(manifests []*Manifest, parts ...[]recordPart) []*Manifest {
	listed := map[fileKey]bool{}
	for _, m := range manifests {
		for _, f := range m.Files {
			listed[fileKey{f.DeadLetter, f.Path}] = true
		}
	}
	for _, p := range slices.Concat(parts...) {
		if p.stats == nil || listed[p.key] {
			continue
		}
		listed[p.key] = true
		manifests = append(manifests, &Manifest{Checkpoint: p.checkpoint, Files: []ManifestFile{{Path: p.key.path, DeadLetter: p.key.dl, PartStats: *p.stats}}})
	}
	return manifests
}

// liveFiles checks, in a live audit, the files found that no manifest read
// before the listing listed (against a manifest read since, or the record
// that decided them), and the files of the manifests added since that the
// listing did not see (published after it passed them).
func (au *audit) liveFiles(ctx context.Context, decided []recordPart, added []*Manifest) error {
	byKey := map[fileKey]recordPart{}
	for _, p := range decided {
		byKey[p.key] = p
	}
	for _, u := range au.unlisted {
		fl := au.Output
		if u.key.dl {
			fl = au.DeadLetter
		}
		if l, ok := au.files[u.key]; ok {
			if err := au.checkFile(ctx, fl, u.key.path, u.size, l); err != nil {
				return err
			}
			continue
		}
		if p, ok := byKey[u.key]; ok && p.stats != nil {
			au.Live.note(fl.FileLocation(u.key.path), "published by checkpoint %d (%s); the live run has not written its manifest yet", p.checkpoint, p.participant)
			f := &ManifestFile{Path: u.key.path, DeadLetter: u.key.dl, PartStats: *p.stats}
			if err := au.checkFile(ctx, fl, u.key.path, u.size, listed{&Manifest{Checkpoint: p.checkpoint}, f, fmt.Sprintf("checkpoint %d", p.checkpoint)}); err != nil {
				return err
			}
			continue
		}
		au.unlistedFile(fl, u.key.path)
	}
	var late []fileKey
	for _, m := range added {
		for _, f := range m.Files {
			k := fileKey{f.DeadLetter, f.Path}
			if !au.seen[k] && au.files[k].m == m && (!k.dl || au.DeadLetter != nil) {
				late = append(late, k)
			}
		}
	}
	for _, k := range late {
		fl := au.Output
		if k.dl {
			fl = au.DeadLetter
		}
		l := au.files[k]
		err := au.checkFile(ctx, fl, k.path, -1, l)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not seen: reported as missing
		}
		if err != nil {
			return err
		}
		au.seen[k] = true
	}
	return nil
}

// listed is a file of a manifest (or, in a live audit, of a checkpoint
// record).
type listed struct {
	m    *Manifest
	f    *ManifestFile
	from string // "manifest LOCATION" or "checkpoint N", for messages
}

// unlisted is a visible file that no manifest read before the listing
// lists, kept by a live audit for its second look.
type unlisted struct {
	key  fileKey
	size int64
}

// audit is the running state of one Audit.
type audit struct {
	Auditor
	files        map[fileKey]listed // the files the manifests list
	seen         map[fileKey]bool   // the files found in the output
	badManifests int                // manifests that could not be used
	unlisted     []unlisted         // live: files found that files does not list
	out          []recovery.Violation
}

func (au *audit) add(where, format string, args ...any) {
	au.out = append(au.out, recovery.Violation{Where: where, Problem: fmt.Sprintf(format, args...)})
}

// checkFiles checks every file of output fl (the dead-letter output if dl)
// against the manifests' entries.
func (au *audit) checkFiles(ctx context.Context, fl driver.Output, dl bool) error {
	return fl.ListFiles(ctx, func(target string, size int64) error {
		k := fileKey{dl, target}
		au.seen[k] = true
		l, ok := au.files[k]
		switch {
		case !ok && au.Live != nil:
			au.unlisted = append(au.unlisted, unlisted{k, size})
			return nil
		case !ok:
			au.unlistedFile(fl, target)
			return nil
		}
		return au.checkFile(ctx, fl, target, size, l)
	})
}

// unlistedFile reports a visible file that no manifest lists.
func (au *audit) unlistedFile(fl driver.Output, target string) {
	hint := ""
	switch {
	case strings.HasSuffix(target, stagingSuffix) || strings.Contains(target, ".part-"):
		hint = " (an in-progress staging file made visible?)"
	case au.badManifests > 0:
		hint = " (or only in a manifest that could not be used)"
	}
	au.add(fl.FileLocation(target), "not listed in any manifest%s", hint)
}

// checkFile checks file target of fl, of size bytes (-1: not listed, the
// bytes read count), against its entry l. The only error it returns
// matches fs.ErrNotExist, for a file of unknown size that is not there;
// every other problem is a violation.
func (au *audit) checkFile(ctx context.Context, fl driver.Output, target string, size int64, l listed) error {
	where := fl.FileLocation(target)
	if size >= 0 && size != l.f.Size {
		au.add(where, "has %d bytes; %s lists %d", size, l.from, l.f.Size)
		return nil
	}
	crc, records, n, err := au.read(ctx, fl, l.f)
	if size < 0 && errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err != nil {
		au.add(where, "cannot be read: %v", err)
		return nil
	}
	if size < 0 && n != l.f.Size {
		au.add(where, "has %d bytes; %s lists %d", n, l.from, l.f.Size)
		return nil
	}
	if got := fmt.Sprintf("%08x", crc); got != l.f.CRC32C {
		au.add(where, "CRC-32C %s; %s lists %s: the content changed", got, l.from, l.f.CRC32C)
	}
	if records >= 0 && records != l.f.Records {
		au.add(where, "holds %d records; %s lists %d", records, l.from, l.f.Records)
	}
	return nil
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

// read returns the CRC-32C of a file's bytes, with Count set its record
// count (-1 without), and how many bytes it holds.
func (a Auditor) read(ctx context.Context, fl driver.Output, f *ManifestFile) (crc uint32, records, size int64, err error) {
	r, err := fl.OpenFile(ctx, f.Path)
	if err != nil {
		return 0, 0, 0, err
	}
	defer r.Close()
	h := &countingHash{Hash32: crc32.New(castagnoli)}
	src := io.TeeReader(r, h)
	records = -1
	if a.Count != nil {
		records, err = a.Count(f, src)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("count records: %w", err)
		}
	}
	if _, err := io.Copy(io.Discard, src); err != nil {
		return 0, 0, 0, err
	}
	return h.Sum32(), records, h.n, nil
}

// countingHash is a hash that counts the bytes written to it.
type countingHash struct {
	hash.Hash32
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.Hash32.Write(p)
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
