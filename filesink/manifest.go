package filesink

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/source"
)

// ManifestDir is the directory of the commit manifests, relative to the
// output's driver.MetaDir ("_filesink/manifests" in the output).
const ManifestDir = "manifests"

// ManifestVersion is the version of the manifest format written.
const ManifestVersion = 1

// Manifest is the commit manifest of one checkpoint of one writer: the
// files that the writer published in phase 2 of that checkpoint. It is
// written once, after all of them are visible, as
// _filesink/manifests/<checkpoint, 20 digits>-<prefix>-<subtask>.json,
// and never overwritten: a reader that lists manifests in checkpoint order
// sees every checkpoint whole.
type Manifest struct {
	Version    int            `json:"version"`
	Checkpoint uint64         `json:"checkpoint"`
	Writer     string         `json:"writer"` // <prefix>-<subtask>
	Files      []ManifestFile `json:"files"`

	// Name is where the manifest was read from (relative to MetaDir); not
	// part of the manifest.
	Name string `json:"-"`
}

// ManifestFile is one published file of a manifest.
type ManifestFile struct {
	// Path is the file's path relative to its output (the dead-letter
	// output for a dead-letter file), slash-separated.
	Path       string `json:"path"`
	DeadLetter bool   `json:"dead_letter,omitempty"`
	PartStats
}

// PartStats describes the content of a part file: what a manifest
// records for each file, and what a checkpoint keeps for an open part so
// that a resumed part goes on from the same figures.
type PartStats struct {
	Size    int64 `json:"size"`
	Records int64 `json:"records"`
	// Header is set when the file starts with a header row (CSV with
	// columns and a header), which Records does not count.
	Header bool `json:"header,omitempty"`
	// CRC32C is the CRC-32C (Castagnoli) of the file's bytes, as written
	// (compressed, for a compressed format), in hex.
	CRC32C string `json:"crc32c"`
	// MinEventTime and MaxEventTime bound the event times of the file's
	// records, when the bucket assigner reads them (bucketing.EventTime).
	MinEventTime *time.Time `json:"min_event_time,omitempty"`
	MaxEventTime *time.Time `json:"max_event_time,omitempty"`
	// Sources are the source records the file holds, by input, sorted by
	// input name.
	Sources []SourceRange `json:"sources,omitempty"`
	// Digest is the sum, modulo 2^64, of the 64-bit XXH3 hashes of the
	// records as the source gave them, in hex: a check of the file's
	// records that does not depend on their order or on how the format
	// framed them. A rebuilt file must match it. Absent for files of
	// batches (WriteBatch) and of older versions.
	Digest string `json:"digest,omitempty"`
	// Rebuilt is set when the file was made again from the source records
	// listed in Sources because the store lost its staged data (see
	// WithReplayer): the same records, checked against Records and Digest.
	Rebuilt bool `json:"rebuilt,omitempty"`
}

// SourceRange is the part of one input a file holds: the record numbers
// (source.Origin.Num: line numbers of a file, record ids of the
// generator, offsets of a Kafka partition) of its records.
type SourceRange struct {
	// Input is the source.Origin.Name: a file's path, "gen", or
	// "topic/partition".
	Input string `json:"input"`
	// First and Last are the smallest and largest record numbers, Records
	// how many records of the input the file holds.
	First   int64 `json:"first"`
	Last    int64 `json:"last"`
	Records int64 `json:"records"`
	// Runs lists the ranges [from, to] of consecutive numbers the file
	// holds when there is more than one (records of one input spread over
	// buckets or subtasks), in the order written. Omitted when the file
	// holds exactly First..Last, or when there were more than MaxRuns of
	// them (Coarse).
	Runs   [][2]int64 `json:"runs,omitempty"`
	Coarse bool       `json:"coarse,omitempty"`
	// Dense is set when the input numbers its records without gaps from
	// Start (a file's lines from 1, the generator's ids from 0): the
	// auditor then also reports numbers no file holds.
	Dense bool  `json:"dense,omitempty"`
	Start int64 `json:"start,omitempty"`
}

// MaxRuns bounds SourceRange.Runs; beyond it a range is Coarse.
const MaxRuns = 512

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// partStats is the running PartStats of an open part. Records and inputs
// are updated on the writer's goroutine, crc by the I/O goroutine (read
// after the queue is drained).
type partStats struct {
	// unknown: the part was resumed from a checkpoint written before parts
	// kept figures; it gets none (and no manifest entry).
	unknown bool
	records int64
	header  bool
	// minET and maxET bound the records' event times, when known (hasET).
	minET, maxET time.Time
	hasET        bool
	crc          uint32
	inputs       map[string]*inputRuns
	last         *inputRuns
	// digest is the running Digest; noDigest is set when a record of the
	// part has none (a batch), or the part was resumed from a checkpoint
	// without one.
	digest   uint64
	noDigest bool
	rebuilt  bool
}

type inputRuns struct {
	name          string
	first, last   int64
	records       int64
	runs          [][2]int64
	coarse, dense bool
	start         int64
}

// note counts one record of origin.
func (s *partStats) note(o source.Origin, dense *int64) {
	s.records++
	in := s.last
	if in == nil || in.name != o.Name {
		in = s.inputs[o.Name]
		if in == nil {
			if s.inputs == nil {
				s.inputs = map[string]*inputRuns{}
			}
			in = &inputRuns{name: o.Name, first: o.Num, last: o.Num}
			if dense != nil {
				in.dense, in.start = true, *dense
			}
			s.inputs[o.Name] = in
		}
		s.last = in
	}
	in.records++
	in.first, in.last = min(in.first, o.Num), max(in.last, o.Num)
	if in.coarse {
		return
	}
	if n := len(in.runs); n > 0 && in.runs[n-1][1]+1 == o.Num {
		in.runs[n-1][1] = o.Num
		return
	}
	if len(in.runs) == MaxRuns {
		in.runs, in.coarse = nil, true
		return
	}
	in.runs = append(in.runs, [2]int64{o.Num, o.Num})
}

// noteRecord counts one record of origin in p, with its event time when
// the assigner read one.
func (w *Writer) noteRecord(p *part, origin source.Origin) {
	p.stats.note(origin, w.dense)
	p.stats.digest += w.recHash
	if w.eventTimed == nil || w.recTime.IsZero() { // zero: the bucket could not be read
		return
	}
	s := &p.stats
	if !s.hasET || w.recTime.Before(s.minET) {
		s.minET = w.recTime
	}
	if !s.hasET || w.recTime.After(s.maxET) {
		s.maxET = w.recTime
	}
	s.hasET = true
}

// snapshot returns the figures of a part whose file holds size bytes (nil
// if they are unknown).
func (s *partStats) snapshot(size int64) *PartStats {
	if s.unknown {
		return nil
	}
	ps := &PartStats{Size: size, Records: s.records, Header: s.header, CRC32C: fmt.Sprintf("%08x", s.crc), Rebuilt: s.rebuilt}
	if !s.noDigest {
		ps.Digest = fmt.Sprintf("%016x", s.digest)
	}
	if s.hasET {
		lo, hi := s.minET.UTC(), s.maxET.UTC()
		ps.MinEventTime, ps.MaxEventTime = &lo, &hi
	}
	for _, in := range s.inputs {
		r := SourceRange{Input: in.name, First: in.first, Last: in.last, Records: in.records,
			Coarse: in.coarse, Dense: in.dense, Start: in.start}
		if len(in.runs) > 1 {
			r.Runs = slices.Clone(in.runs)
		}
		ps.Sources = append(ps.Sources, r)
	}
	slices.SortFunc(ps.Sources, func(a, b SourceRange) int { return cmp.Compare(a.Input, b.Input) })
	return ps
}

// restore makes the running figures of a resumed part.
func restoreStats(ps *PartStats) (partStats, error) {
	var s partStats
	if ps == nil {
		s.unknown = true
		return s, nil
	}
	crc, err := strconv.ParseUint(ps.CRC32C, 16, 32)
	if err != nil {
		return s, fmt.Errorf("bad CRC-32C %q", ps.CRC32C)
	}
	s.records, s.crc, s.header, s.rebuilt = ps.Records, uint32(crc), ps.Header, ps.Rebuilt
	if ps.Digest == "" {
		s.noDigest = true
	} else if s.digest, err = strconv.ParseUint(ps.Digest, 16, 64); err != nil {
		return s, fmt.Errorf("bad digest %q", ps.Digest)
	}
	if ps.MinEventTime != nil && ps.MaxEventTime != nil {
		s.minET, s.maxET, s.hasET = *ps.MinEventTime, *ps.MaxEventTime, true
	}
	for _, r := range ps.Sources {
		in := &inputRuns{name: r.Input, first: r.First, last: r.Last, records: r.Records,
			coarse: r.Coarse, dense: r.Dense, start: r.Start, runs: slices.Clone(r.Runs)}
		if !in.coarse && len(in.runs) == 0 {
			in.runs = [][2]int64{{r.First, r.Last}}
		}
		if s.inputs == nil {
			s.inputs = map[string]*inputRuns{}
		}
		s.inputs[r.Input] = in
	}
	return s, nil
}

// manifestName is the name of the manifest of checkpoint id of the writer
// named writer, relative to driver.MetaDir.
func manifestName(id uint64, writer string) string {
	return fmt.Sprintf("%s/%020d-%s.json", ManifestDir, id, writer)
}

// CommittedCheckpoint implements committer.Participant: it
// publishes the manifest of checkpoint id, listing the files of
// committables in their order, with the backend's PutMeta. The manifest is built from the
// committables alone, so a second call after a crash writes the same
// bytes, which PutMeta accepts. Safe for concurrent use with the other
// methods.
func (w *Writer) CommittedCheckpoint(ctx context.Context, id uint64, committables []json.RawMessage) error {
	m := Manifest{Version: ManifestVersion, Checkpoint: id, Writer: strings.TrimSuffix(w.namespace(), "-")}
	if w.manifestWriter != "" {
		m.Writer = w.manifestWriter
	}
	files, err := w.Published(committables)
	if err != nil {
		return err
	}
	m.Files = files
	if len(m.Files) == 0 {
		return nil
	}
	data, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	name := manifestName(id, m.Writer)
	err = w.backend.PutMeta(ctx, name, data)
	if errors.Is(err, committer.ErrAlreadyExists) && w.sameManifest(ctx, name, &m) {
		// Written before a crash by a run that rebuilt one of its files
		// (or that did not need to, where this one did): the same files
		// with the same bytes.
		return nil
	}
	if err != nil {
		return fmt.Errorf("filesink: manifest of checkpoint %d: %w", id, err)
	}
	return nil
}

// Published returns the files that committables of one checkpoint
// publish, in their order, as the checkpoint's manifest lists them: the
// path relative to the output, whether it is a dead letter, and the
// file's figures (those of its rebuild if the writer made it again).
// Committables of versions without figures are left out. A nil error
// means every committable was one of this writer's. It is safe to call
// concurrently with the writer's other methods.
func (w *Writer) Published(committables []json.RawMessage) ([]ManifestFile, error) {
	var files []ManifestFile
	for _, c := range committables {
		var e entry
		if err := json.Unmarshal(c, &e); err != nil {
			return nil, committer.Permanent(fmt.Errorf("filesink: bad committable %s: %w", c, err))
		}
		if e.Stats == nil {
			continue // written before manifests existed
		}
		be := w.backendOf(e.DeadLetter)
		if be == nil {
			return nil, committer.Permanent(fmt.Errorf("filesink: committable %s is for the dead-letter output, which is not configured", c))
		}
		target, _, err := be.Describe(e.Part)
		if err != nil {
			return nil, committer.Permanent(err)
		}
		stats := e.Stats
		if r := w.rebuiltStats(target); r != nil && !e.DeadLetter {
			stats = r
		}
		files = append(files, ManifestFile{Path: target, DeadLetter: e.DeadLetter, PartStats: *stats})
	}
	return files, nil
}

// sameManifest reports whether the manifest stored as name lists the
// files of m with the same figures, Rebuilt marks aside.
func (w *Writer) sameManifest(ctx context.Context, name string, m *Manifest) bool {
	data, err := w.backend.GetMeta(ctx, name)
	if err != nil {
		return false
	}
	var old Manifest
	if json.Unmarshal(data, &old) != nil || len(old.Files) != len(m.Files) {
		return false
	}
	for i := range old.Files {
		a, b := old.Files[i], m.Files[i]
		a.Rebuilt, b.Rebuilt = false, false
		if a.Path != b.Path || a.Size != b.Size || a.CRC32C != b.CRC32C || a.Records != b.Records {
			return false
		}
	}
	return true
}

// ReadManifests returns the commit manifests of an output, in checkpoint
// order (then by writer): following them, a reader sees each checkpoint's
// files all at once. A manifest that cannot be read or parsed, or is of
// another version, is an error naming it.
func ReadManifests(ctx context.Context, ms driver.Output) ([]*Manifest, error) {
	out, bad, err := readManifests(ctx, ms)
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("filesink: %s", bad[0])
	}
	return out, nil
}

// badManifest is a manifest that was read but cannot be used.
type badManifest struct {
	where   string // its location
	problem string
}

func (b badManifest) String() string { return b.where + ": " + b.problem }

// readManifests is ReadManifests that returns the manifests it cannot
// parse, or of another version, apart instead of failing on the first; an
// error means the manifests could not be listed or read.
func readManifests(ctx context.Context, ms driver.Output) ([]*Manifest, []badManifest, error) {
	names, err := ms.ListMeta(ctx, ManifestDir)
	if err != nil {
		return nil, nil, err
	}
	var out []*Manifest
	var bad []badManifest
	for _, name := range names {
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		data, err := ms.GetMeta(ctx, name)
		if err != nil {
			return nil, nil, fmt.Errorf("filesink: read manifest %s: %w", ms.MetaLocation(name), err)
		}
		var m Manifest
		switch err := json.Unmarshal(data, &m); {
		case err != nil:
			bad = append(bad, badManifest{ms.MetaLocation(name), fmt.Sprintf("corrupt commit manifest: %v", err)})
			continue
		case m.Version > ManifestVersion:
			bad = append(bad, badManifest{ms.MetaLocation(name), fmt.Sprintf("commit manifest of version %d, written by a newer filesink; this filesink reads version %d", m.Version, ManifestVersion)})
			continue
		case m.Version != ManifestVersion:
			bad = append(bad, badManifest{ms.MetaLocation(name), fmt.Sprintf("commit manifest of version %d; this filesink reads version %d", m.Version, ManifestVersion)})
			continue
		}
		m.Name = name
		out = append(out, &m)
	}
	slices.SortFunc(out, func(a, b *Manifest) int {
		if c := cmp.Compare(a.Checkpoint, b.Checkpoint); c != 0 {
			return c
		}
		return cmp.Compare(a.Writer, b.Writer)
	})
	return out, bad, nil
}
