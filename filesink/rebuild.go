package filesink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"strings"
	"time"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/source"
)

// WithReplayer lets the Writer rebuild a part whose staged data the store
// lost from the source: when recovery finds the staged data of a decided
// part (Commit) or of an in-progress one (Restore) gone or short
// (committer.ErrDataLoss), and the checkpoint lists the source records the
// part holds (PartStats.Sources), the Writer reads exactly those records
// again through r, encodes them into new staged data, checks the result
// against the checkpoint (the record count, and the Digest of the records,
// or, for a checkpoint without one, the size and CRC-32C) and publishes it
// as the checkpoint decided (an in-progress part goes on from it). It logs
// one warning per rebuilt part, counts it in Stats.Rebuilt, and the
// manifest marks the file as Rebuilt. Without r, or when r cannot give the
// records back (source.ErrGone) or they do not match, the error is a
// *RebuildError matching committer.ErrDataLoss that names the part and the
// records. Dead-letter parts are not rebuilt.
func WithReplayer(r source.Replayer) Option {
	return optionFunc(func(c *config) { c.replayer = r })
}

// RebuildError reports a part whose staged data the store lost and that
// could not be made again from the source. It matches committer.ErrDataLoss
// and, when the source no longer holds the records, source.ErrGone.
type RebuildError struct {
	// Part is the part file's target (FileLocation); Lost the store's
	// error; Err why it could not be rebuilt.
	Part string
	Lost error
	Err  error
}

func (e *RebuildError) Error() string {
	return fmt.Sprintf("filesink: the staged data of part %s is lost and it cannot be rebuilt from the source: %v "+
		"(a plain rerun stops here again; to go on without these records, start a fresh --state with --resume-from-output); "+
		"the store said: %v", e.Part, e.Err, e.Lost)
}

// Unwrap returns committer.ErrDataLoss, the store's error and the reason.
func (e *RebuildError) Unwrap() []error { return []error{committer.ErrDataLoss, e.Lost, e.Err} }

// rebuildable reports whether Commit or Restore may try to rebuild the
// part of e after err.
func (w *Writer) rebuildable(e *entry, err error) bool {
	return !e.DeadLetter && e.Stats != nil && len(e.Stats.Sources) > 0 &&
		(errors.Is(err, committer.ErrDataLoss) || errors.Is(err, committer.ErrAlreadyExists))
}

// lostPart turns the store's error about e's part into a *RebuildError
// when the part cannot be rebuilt at all, and returns the others as they
// are.
func (w *Writer) lostPart(e *entry, target string, err error) error {
	if !errors.Is(err, committer.ErrDataLoss) || e.DeadLetter {
		return err
	}
	switch {
	case e.Stats == nil || len(e.Stats.Sources) == 0:
		return &RebuildError{Part: target, Lost: err, Err: errors.New("the checkpoint does not list the part's source records (written by an older version)")}
	case w.replayer == nil:
		return &RebuildError{Part: target, Lost: err, Err: fmt.Errorf("the source cannot read records again (%s)", describeRanges(e.Stats.Sources))}
	}
	return err
}

// describeRanges names the records of sources: "in/a.jsonl:1..200, gen:7..9".
func describeRanges(sources []SourceRange) string {
	var b strings.Builder
	for i, s := range sources {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s:%d..%d", s.Input, s.First, s.Last)
		if n := s.Last - s.First + 1; n != s.Records {
			fmt.Fprintf(&b, " (%d records)", s.Records)
		}
	}
	return b.String()
}

// rebuilt is a part made again from the source: its writer (still open
// for an in-progress part; closed, with pending, for a decided one) and
// its figures.
type rebuilt struct {
	pw      driver.PartWriter
	pending json.RawMessage
	stats   partStats
	size    int64
}

// discardBackend is the backend of a rebuild that only computes what the
// part's bytes would be (size and CRC-32C), to compare them with a file
// already published.
type discardBackend struct{ driver.Backend }

func (discardBackend) Open(context.Context, string) (driver.PartWriter, error) {
	return &discardWriter{}, nil
}

func (discardBackend) Rebuild(context.Context, json.RawMessage) (driver.PartWriter, error) {
	return &discardWriter{}, nil
}

// rebuildBackend opens the one part of a rebuild with Backend.Rebuild,
// which clears what is left of the lost staging data first.
type rebuildBackend struct {
	driver.Backend
	lost json.RawMessage
}

func (r rebuildBackend) Open(ctx context.Context, _ string) (driver.PartWriter, error) {
	return r.Backend.Rebuild(ctx, r.lost)
}

type discardWriter struct{ n int64 }

func (d *discardWriter) Write(p []byte) (int, error) { d.n += int64(len(p)); return len(p), nil }
func (d *discardWriter) Size() int64                 { return d.n }
func (d *discardWriter) Persist(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}
func (d *discardWriter) PersistAsync(context.Context) (func(context.Context) (json.RawMessage, error), error) {
	return func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }, nil
}
func (d *discardWriter) MustRoll() bool { return false }
func (d *discardWriter) CloseForCommit(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}
func (d *discardWriter) Close() error { return nil }

// neverRoll is the rolling policy of a rebuild: the part holds exactly
// the records replayed.
type neverRoll struct{}

func (neverRoll) OnCheckpoint(PartInfo) bool      { return false }
func (neverRoll) OnEvent(PartInfo, int) bool      { return false }
func (neverRoll) OnTime(PartInfo, time.Time) bool { return false }

// fixedBucket puts every record in one bucket, with the event time the
// original assigner reads, when it reads one.
type fixedBucket struct {
	path string
}

func (f fixedBucket) Bucket([]byte, time.Time) (string, error) { return f.path, nil }

type fixedTimedBucket struct {
	fixedBucket
	et bucketing.EventTimed
}

func (f fixedTimedBucket) BucketTime(record []byte) (string, time.Time, error) {
	_, t, err := f.et.BucketTime(record)
	return f.path, t, err
}

// rebuildBudget is the buffer budget of a rebuild: fixed, so that a
// compressed part is framed the same way every time it is rebuilt.
const rebuildBudget = 8 << 20

// remake reads the records of e's part again and writes them, as a part
// named target, to be (open=false: closed for commit; open=true: left open
// to go on with). It returns the part and checks it against e.Stats.
//
// With plain set, the part is written without compression: its bytes are
// the records' encoding that a compressed file holds once decompressed
// (for sameFile).
func (w *Writer) remake(ctx context.Context, be driver.Backend, e *entry, target string, open, plain bool) (*rebuilt, error) {
	cfg := w.config
	if plain {
		cfg.comp = nil
	}
	cfg.dl, cfg.onBad, cfg.pool, cfg.budget = nil, nil, nil, rebuildBudget
	cfg.policy, cfg.publishOnRoll, cfg.maxOpen, cfg.maxOpenSet = neverRoll{}, false, MinOpenParts, true
	cfg.target = target
	cfg.assign = fixedBucket{path: e.Bucket}
	if et, ok := w.assign.(bucketing.EventTimed); ok {
		cfg.assign = fixedTimedBucket{fixedBucket{e.Bucket}, et}
	}
	tw, err := newWriter(rebuildBackend{be, e.Part}, w.subtask, cfg)
	if err != nil {
		return nil, err
	}
	defer tw.Close()
	now := w.now()
	tw.BeginBatch()
	for _, s := range e.Stats.Sources {
		runs := s.Runs
		if len(runs) == 0 || s.Coarse {
			runs = [][2]int64{{s.First, s.Last}}
		}
		err := w.replayer.Replay(ctx, s.Input, runs, func(rec source.Record) error {
			if s.Coarse && !w.inBucket(rec.Value, e.Bucket, now) {
				return nil
			}
			err := tw.Write(ctx, rec.Value, rec.Origin)
			if errors.Is(err, source.ErrBadRecord) {
				return nil // it went to the dead-letter output, not to this part
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	tw.EndBatch()
	key := bucketKey{path: e.Bucket}
	b := tw.buckets[key]
	if b == nil || b.part == nil {
		return nil, fmt.Errorf("the source gave none of the part's %d records", e.Stats.Records)
	}
	r := &rebuilt{}
	if open {
		if err := tw.flushAll(ctx); err != nil {
			return nil, err
		}
		p := b.part
		if p.pw == nil {
			if err := tw.open(ctx, b); err != nil {
				return nil, err
			}
		}
		r.pw, r.stats, r.size = p.pw, p.stats, p.pw.Size()
		tw.lruRemove(b)
		b.part = nil
		<-tw.slots
	} else {
		wait, err := tw.Prepare(ctx, 0, true)
		if err != nil {
			return nil, err
		}
		snap, err := wait(ctx)
		if err != nil {
			return nil, err
		}
		if len(snap.Committables) != 1 {
			return nil, fmt.Errorf("the rebuild made %d parts", len(snap.Committables))
		}
		var ne entry
		if err := json.Unmarshal(snap.Committables[0], &ne); err != nil {
			return nil, err
		}
		if r.stats, err = restoreStats(ne.Stats); err != nil {
			return nil, err
		}
		r.pending, r.size = ne.Part, ne.Stats.Size
	}
	r.stats.rebuilt = true
	if err := checkRebuilt(e.Stats, r); err != nil {
		if r.pw != nil {
			r.pw.Close()
		}
		return nil, err
	}
	return r, nil
}

// inBucket reports whether record goes to bucket by the Writer's
// assigner (for a part whose source records are not listed one by one).
func (w *Writer) inBucket(record []byte, bucket string, now time.Time) bool {
	var got string
	var err error
	if et, ok := w.assign.(bucketing.EventTimed); ok {
		got, _, err = et.BucketTime(record)
	} else {
		got, err = w.assign.Bucket(record, now)
	}
	if err == nil {
		got, err = bucketing.Sanitize(got)
	}
	return err == nil && got == bucket
}

// checkRebuilt compares a rebuilt part with the figures its checkpoint
// recorded: the same number of records and the same records (Digest), or,
// for a checkpoint without a digest, the same bytes.
func checkRebuilt(want *PartStats, r *rebuilt) error {
	s := &r.stats
	switch {
	case s.records != want.Records:
		return fmt.Errorf("the source gave %d of its records, the checkpoint recorded %d", s.records, want.Records)
	case want.Digest != "":
		if got := fmt.Sprintf("%016x", s.digest); got != want.Digest {
			return fmt.Errorf("the records the source gave differ from those written (digest %s, the checkpoint recorded %s)", got, want.Digest)
		}
	case r.size != want.Size || fmt.Sprintf("%08x", s.crc) != want.CRC32C:
		return fmt.Errorf("the records give %d bytes with CRC-32C %08x, the checkpoint recorded %d bytes with %s",
			r.size, s.crc, want.Size, want.CRC32C)
	}
	return nil
}

// rebuildPending rebuilds the decided part of e, whose commit failed with
// lost (its staged data gone or short, or its target already there), and
// publishes it. A target that exists with exactly the rebuilt bytes (a
// rebuild that published it before a crash) is success.
func (w *Writer) rebuildPending(ctx context.Context, be driver.Backend, e *entry, lost error) error {
	target, _, err := be.Describe(e.Part)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		if errors.Is(lost, committer.ErrAlreadyExists) && !errors.Is(err, source.ErrGone) {
			return lost // somebody else's file: nothing to rebuild
		}
		return &RebuildError{Part: be.FileLocation(target), Lost: lost, Err: err}
	}
	var r *rebuilt
	if !errors.Is(lost, committer.ErrAlreadyExists) {
		// The staged data is lost: write the part again (Backend.Rebuild
		// clears what is left of it) and publish it.
		r, err = w.remake(ctx, be, e, target, false, false)
		if err == nil {
			if err := be.Commit(ctx, r.pending); err != nil {
				return fail(err)
			}
			w.noteRebuilt(target, e, r, lost)
			return nil
		}
		if !errors.Is(err, committer.ErrAlreadyExists) {
			return fail(err)
		}
	}
	// The target exists: published by a rebuild before a crash, if it
	// holds the bytes a rebuild gives. Nothing is written: a target that
	// is somebody else's file leaves the staging data as it is.
	r, err = w.remake(ctx, discardBackend{be}, e, target, false, true)
	if err != nil {
		return fail(err)
	}
	if err := sameFile(ctx, be, target, r); err != nil {
		return fail(err)
	}
	w.noteRebuilt(target, e, r, lost)
	return nil
}

// sameFile checks that the published file target holds what r, written
// without compression, holds: its bytes, decompressed by the target's
// extension (.gz, .zst: the frames of a compressed part follow the
// writer's buffers, so only its content is fixed). It then sets r's size
// and CRC-32C to those of the file as published, for its manifest.
func sameFile(ctx context.Context, be driver.Backend, target string, r *rebuilt) error {
	rc, err := be.OpenFile(ctx, target)
	if err != nil {
		return err
	}
	defer rc.Close()
	raw := crc32.New(castagnoli)
	counted := &countWriter{}
	tee := io.TeeReader(rc, io.MultiWriter(raw, counted))
	in, _, done, err := decompressByName(target, tee)
	if err != nil {
		return fmt.Errorf("read %s: %w", be.FileLocation(target), err)
	}
	defer done()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, in)
	if err != nil {
		return fmt.Errorf("read %s: %w", be.FileLocation(target), err)
	}
	if _, err := io.Copy(io.Discard, tee); err != nil { // the rest of the raw bytes
		return fmt.Errorf("read %s: %w", be.FileLocation(target), err)
	}
	if n != r.size || h.Sum32() != r.stats.crc {
		return fmt.Errorf("%s exists with other content: %w", be.FileLocation(target), committer.ErrAlreadyExists)
	}
	r.size, r.stats.crc = counted.n, raw.Sum32()
	return nil
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// noteRebuilt logs and counts a rebuilt part, and keeps its figures for
// the manifest of its checkpoint.
func (w *Writer) noteRebuilt(target string, e *entry, r *rebuilt, lost error) {
	w.stats.Rebuilt.Add(1)
	w.log.Warn("rebuilt a part from the source: its staged data was lost",
		"part", target, "records", describeRanges(e.Stats.Sources), "reason", lost)
	if r.pending == nil {
		return
	}
	w.rebuiltMu.Lock()
	defer w.rebuiltMu.Unlock()
	if w.rebuiltParts == nil {
		w.rebuiltParts = map[string]*PartStats{}
	}
	w.rebuiltParts[target] = r.stats.snapshot(r.size)
}

// rebuiltStats returns the figures of target if it was rebuilt in this
// run, else nil.
func (w *Writer) rebuiltStats(target string) *PartStats {
	w.rebuiltMu.Lock()
	defer w.rebuiltMu.Unlock()
	return w.rebuiltParts[target]
}

// partName is the target of a new part of bucket key with extension ext.
func (w *Writer) partName(key bucketKey, ext string) string {
	if w.target != "" {
		return w.target
	}
	name := fmt.Sprintf("%s%s-%d%s", w.namespace(), w.runID, w.counter, ext)
	w.counter++
	return path.Join(key.path, name)
}

// RebuiltFiles returns the paths of the files that the manifests of out
// mark as Rebuilt, in manifest order. Manifests that do not parse are
// left out (Auditor.Audit reports them). A nil error means every manifest
// was read.
func RebuiltFiles(ctx context.Context, out driver.Output) ([]string, error) {
	manifests, _, err := readManifests(ctx, out)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, m := range manifests {
		for _, f := range m.Files {
			if f.Rebuilt {
				files = append(files, f.Path)
			}
		}
	}
	return files, nil
}
