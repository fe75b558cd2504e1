package filesink_test

// Throughput of the sink beside the raw sequential write of the same bytes.
//
// Both sides write the same pre-generated ~1 KiB JSON lines, in the same
// order, into the same directory layout (one directory per bucket), and make
// them durable at the same points: every benchCheckpointBytes of input and at
// the end. The sink side is the full protocol (filesink.Writer over the local
// backend, driven by a committer.Coordinator with a recovery.DirStore); the
// raw side is what a simple program would do: one bufio.Writer per file,
// os.File.Write, fsync of every file written since the last sync point, and
// an fsync of each new directory at the end.
//
// Run with scripts/bench (or make bench), which prints the ratio of the two
// beside its target. Nothing here asserts a duration.
//
// FILESINK_BENCH_RECORDS overrides the number of records per op (default
// 200,000, about 205 MB). The output goes under b.TempDir(), so TMPDIR
// selects the filesystem.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filesink/filesink/internal/testutil/cputime"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
)

const (
	benchRecordSize      = 1024     // bytes per line, without the newline
	benchCheckpointBytes = 64 << 20 // input bytes between checkpoints (fsyncs)
)

var benchBucketCounts = []int{1, 1000}

// benchData is a pre-generated input: record i is data[start(i):ends[i]],
// newline included.
type benchData struct {
	data    []byte
	ends    []int
	bucket  []int32  // bucket index of each record (for the raw side)
	buckets []string // bucket paths, as the sink's assigner names them
}

func (d *benchData) record(i int) []byte {
	start := 0
	if i > 0 {
		start = d.ends[i-1]
	}
	return d.data[start:d.ends[i]]
}

var (
	benchMu    sync.Mutex
	benchCache = map[int]*benchData{}
)

func benchRecordCount(b *testing.B) int {
	if s := os.Getenv("FILESINK_BENCH_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("FILESINK_BENCH_RECORDS=%q: want a positive integer", s)
		}
		return n
	}
	return 200_000
}

// benchLoadData generates (once per key count) the records with
// source.NewGenerator and copies them out, so that generation is not timed.
func benchLoadData(b *testing.B, keys int) *benchData {
	benchMu.Lock()
	defer benchMu.Unlock()
	if d := benchCache[keys]; d != nil {
		return d
	}
	n := benchRecordCount(b)
	g, err := source.NewGenerator(source.GenConfig{Count: int64(n), Seed: 1, Size: benchRecordSize, Keys: keys}, nil)
	if err != nil {
		b.Fatal(err)
	}
	assign := bucketing.Field("key")
	d := &benchData{data: make([]byte, 0, n*(benchRecordSize+1)), ends: make([]int, 0, n), bucket: make([]int32, 0, n)}
	index := map[string]int32{}
	ctx := context.Background()
	for {
		rec, err := g.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		bk, err := assign.Bucket(rec.Value, time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		idx, ok := index[bk]
		if !ok {
			idx = int32(len(d.buckets))
			index[bk] = idx
			d.buckets = append(d.buckets, bk)
		}
		d.data = append(append(d.data, rec.Value...), '\n')
		d.ends = append(d.ends, len(d.data))
		d.bucket = append(d.bucket, idx)
	}
	if len(d.ends) != n || len(d.buckets) != keys {
		b.Fatalf("generated %d records in %d buckets, want %d in %d", len(d.ends), len(d.buckets), n, keys)
	}
	benchCache[keys] = d
	return d
}

// BenchmarkSink writes the records through the whole sink: Writer.Write per
// record, a checkpoint (phase 1, decide, phase 2) every benchCheckpointBytes
// and a final one at the end. "ckpt-s/op" and "final-s/op" are the time spent
// in the intermediate checkpoints and in the final one (where the fsyncs
// are); see benchLoop for the other metrics.
func BenchmarkSink(b *testing.B) {
	for _, n := range benchBucketCounts {
		b.Run("buckets="+strconv.Itoa(n), func(b *testing.B) {
			d := benchLoadData(b, n)
			benchLoop(b, d, benchRunSink)
		})
	}
}

// BenchmarkOpenLimit writes the records of 2,000 buckets, round robin
// (record i to bucket i mod 2,000), through the whole sink as
// BenchmarkSink does, with at most 200 part files open: "release" is what
// the sink does at the limit (the least recently written part is fsynced
// and closed, and resumed on its next write), "roll" is the alternative
// (it is rolled: closed for commit, a new part file on its next write);
// "unlimited" has room for all 2,000. "files/op" counts the part files
// published, "released/op" the parts released.
func BenchmarkOpenLimit(b *testing.B) {
	const buckets, limit = 2000, 200
	for _, c := range []struct {
		name string
		opts []filesink.Option
	}{
		{"unlimited", []filesink.Option{filesink.WithMaxOpenParts(2 * buckets)}},
		{"release", []filesink.Option{filesink.WithMaxOpenParts(limit)}},
		{"roll", []filesink.Option{filesink.WithMaxOpenParts(limit), filesink.WithEvictByRolling()}},
	} {
		b.Run(c.name, func(b *testing.B) {
			d := benchLoadData(b, buckets)
			benchLoop(b, d, func(d *benchData, dir string) (benchOpStats, error) {
				return benchRunSinkWith(d, dir, c.opts...)
			})
		})
	}
}

// BenchmarkRawWrite writes the same bytes in the same order to plain files
// with the same fsync points. "ckpt-s/op" and "final-s/op" are the time spent
// in flush+fsync at the intermediate sync points and at the end.
func BenchmarkRawWrite(b *testing.B) {
	for _, n := range benchBucketCounts {
		b.Run("buckets="+strconv.Itoa(n), func(b *testing.B) {
			d := benchLoadData(b, n)
			benchLoop(b, d, benchRunRaw)
		})
	}
}

// benchOpStats are the costs of one op beside its duration: the time spent in
// the intermediate checkpoints (sync points) and in the final one, and the
// number of and time spent in file and directory fsyncs. benchLoop adds the
// process's CPU time (user+system, all threads) during the op.
type benchOpStats struct {
	ckpt, final          time.Duration
	fsyncs, dirSyncs     int64
	fsyncDur, dirSyncDur time.Duration
	files, released      int64 // part files published; parts released at the open-file limit
}

func (s *benchOpStats) add(o benchOpStats) {
	s.ckpt += o.ckpt
	s.final += o.final
	s.fsyncs += o.fsyncs
	s.dirSyncs += o.dirSyncs
	s.fsyncDur += o.fsyncDur
	s.dirSyncDur += o.dirSyncDur
	s.files += o.files
	s.released += o.released
}

func benchLoop(b *testing.B, d *benchData, run func(d *benchData, dir string) (benchOpStats, error)) {
	base := b.TempDir()
	b.SetBytes(int64(len(d.data)))
	b.ReportAllocs()
	var total benchOpStats
	iter := 0
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		dir := filepath.Join(base, strconv.Itoa(iter))
		iter++
		cpu0 := benchCPUTime(b)
		b.StartTimer()
		st, err := run(d, dir)
		b.StopTimer()
		cpu += benchCPUTime(b) - cpu0
		if err != nil {
			b.Fatal(err)
		}
		total.add(st)
		if iter == 1 {
			if err := benchCheckOutput(dir, d); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n := float64(iter)
	b.ReportMetric(cpu.Seconds()/n, "cpu-s/op")
	b.ReportMetric(total.ckpt.Seconds()/n, "ckpt-s/op")
	b.ReportMetric(total.final.Seconds()/n, "final-s/op")
	b.ReportMetric(float64(total.fsyncs)/n, "fsyncs/op")
	b.ReportMetric(total.fsyncDur.Seconds()/n, "fsync-s/op")
	b.ReportMetric(float64(total.dirSyncs)/n, "dirsyncs/op")
	b.ReportMetric(total.dirSyncDur.Seconds()/n, "dirsync-s/op")
	b.ReportMetric(float64(len(d.ends))*n/b.Elapsed().Seconds(), "records/s")
	if total.files > 0 {
		b.ReportMetric(float64(total.files)/n, "files/op")
		b.ReportMetric(float64(total.released)/n, "released/op")
	}
}

// benchCPUTime returns the user+system CPU time of the process so far (all
// threads, the garbage collector's included).
func benchCPUTime(b *testing.B) time.Duration {
	d, err := cputime.Process()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// benchCountingFS is vfs.OS counting file and directory fsyncs and the time
// spent in them.
type benchCountingFS struct {
	vfs.OS
	st *benchOpStats
}

func (c benchCountingFS) Create(name string) (vfs.File, error) {
	f, err := c.OS.Create(name)
	if err != nil {
		return nil, err
	}
	return benchCountingFile{f, c.st}, nil
}

func (c benchCountingFS) OpenAppend(name string) (vfs.File, error) {
	f, err := c.OS.OpenAppend(name)
	if err != nil {
		return nil, err
	}
	return benchCountingFile{f, c.st}, nil
}

func (c benchCountingFS) SyncDir(name string) error {
	t := time.Now()
	err := c.OS.SyncDir(name)
	c.st.dirSyncDur += time.Since(t)
	c.st.dirSyncs++
	return err
}

type benchCountingFile struct {
	vfs.File
	st *benchOpStats
}

func (f benchCountingFile) Sync() error {
	t := time.Now()
	err := f.File.Sync()
	f.st.fsyncDur += time.Since(t)
	f.st.fsyncs++
	return err
}

// benchRunSink writes d through a fresh sink under dir/out, with its checkpoint
// records in dir/out/_filesink as the CLI keeps them.
func benchRunSink(d *benchData, dir string) (benchOpStats, error) { return benchRunSinkWith(d, dir) }

// benchRunSinkWith is benchRunSink with more options for the writer.
func benchRunSinkWith(d *benchData, dir string, opts ...filesink.Option) (benchOpStats, error) {
	var st benchOpStats
	ctx := context.Background()
	fsys := benchCountingFS{st: &st}
	out := filepath.Join(dir, "out")
	store, err := recovery.OpenDir(ctx, fsys, filepath.Join(out, "_filesink"))
	if err != nil {
		return st, err
	}
	w, err := filesink.New(localfs.New(fsys, out), 0, append([]filesink.Option{filesink.WithAssigner(bucketing.Field("key"))}, opts...)...)
	if err != nil {
		return st, err
	}
	defer w.Close()
	coord, err := committer.New(store, []committer.Participant{w})
	if err != nil {
		return st, err
	}
	if _, err := coord.Recover(ctx); err != nil {
		return st, err
	}
	st = benchOpStats{} // count the op, not the setup
	checkpoint := func(next int, final bool) error {
		t := time.Now()
		_, err := coord.Checkpoint(ctx, json.RawMessage(`{"next":`+strconv.Itoa(next)+`}`), final)
		if final {
			st.final += time.Since(t)
		} else {
			st.ckpt += time.Since(t)
		}
		return err
	}
	since := 0
	for i := range d.ends {
		rec := d.record(i)
		if err := w.Write(ctx, rec[:len(rec)-1], source.Origin{Name: "gen", Num: int64(i)}); err != nil {
			return st, err
		}
		if since += len(rec); since >= benchCheckpointBytes {
			if err := checkpoint(i+1, false); err != nil {
				return st, err
			}
			since = 0
		}
	}
	err = checkpoint(len(d.ends), true)
	st.files, st.released = w.Stats().Committed.Load(), w.Stats().Released.Load()
	return st, err
}

// benchRawFile is one output file of the raw writer.
type benchRawFile struct {
	f     *os.File
	w     *bufio.Writer
	dirty bool
}

// benchRawBufferSize gives the raw writer the sink's memory: the sink's default
// buffer budget split over the open files, between the sink's minimum and
// maximum flush sizes (4 MiB for 1 file, 65 KiB each for 1000 files).
func benchRawBufferSize(files int) int {
	return int(min(max(filesink.DefaultBufferBudget/int64(files+1), 16<<10), 4<<20))
}

// benchRunRaw writes d to dir/out/<bucket>/data.jsonl: a bufio.Writer per file,
// fsync of every file written since the last sync point every
// benchCheckpointBytes and at the end, then an fsync of each directory it
// created (and of out) so that the new names are durable too.
func benchRunRaw(d *benchData, dir string) (benchOpStats, error) {
	var st benchOpStats
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return st, err
	}
	files := make([]*benchRawFile, len(d.buckets))
	var dirty []*benchRawFile
	bufSize := benchRawBufferSize(len(d.buckets))
	syncAll := func() error {
		for _, rf := range dirty {
			if err := rf.w.Flush(); err != nil {
				return err
			}
			t := time.Now()
			if err := rf.f.Sync(); err != nil {
				return err
			}
			st.fsyncDur += time.Since(t)
			st.fsyncs++
			rf.dirty = false
		}
		dirty = dirty[:0]
		return nil
	}
	defer func() {
		for _, rf := range files {
			if rf != nil {
				rf.f.Close()
			}
		}
	}()
	since := 0
	for i, k := range d.bucket {
		rf := files[k]
		if rf == nil {
			bdir := filepath.Join(out, filepath.FromSlash(d.buckets[k]))
			if err := os.MkdirAll(bdir, 0o755); err != nil {
				return st, err
			}
			f, err := os.OpenFile(filepath.Join(bdir, "data.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return st, err
			}
			rf = &benchRawFile{f: f, w: bufio.NewWriterSize(f, bufSize)}
			files[k] = rf
		}
		if !rf.dirty {
			rf.dirty = true
			dirty = append(dirty, rf)
		}
		rec := d.record(i)
		if _, err := rf.w.Write(rec); err != nil {
			return st, err
		}
		if since += len(rec); since >= benchCheckpointBytes {
			t := time.Now()
			if err := syncAll(); err != nil {
				return st, err
			}
			st.ckpt += time.Since(t)
			since = 0
		}
	}
	t := time.Now()
	if err := syncAll(); err != nil {
		return st, err
	}
	for i, rf := range files {
		files[i] = nil
		if err := rf.f.Close(); err != nil {
			return st, err
		}
	}
	dirs := []string{out}
	seen := map[string]bool{}
	for _, bk := range d.buckets {
		if p := filepath.Join(out, filepath.FromSlash(bk)); !seen[p] {
			seen[p] = true
			dirs = append(dirs, p)
		}
	}
	for _, p := range dirs {
		td := time.Now()
		if err := (vfs.OS{}).SyncDir(p); err != nil {
			return st, err
		}
		st.dirSyncDur += time.Since(td)
		st.dirSyncs++
	}
	st.final = time.Since(t)
	return st, nil
}

// benchCheckOutput checks that dir/out holds exactly the input's bytes as
// visible files (outside _filesink) and nothing in progress.
func benchCheckOutput(dir string, d *benchData) error {
	var total int64
	files := 0
	err := filepath.WalkDir(filepath.Join(dir, "out"), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if e.Name() == "_filesink" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(e.Name(), ".") {
			return fmt.Errorf("%s: in-progress file left in the output", p)
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		total += fi.Size()
		files++
		return nil
	})
	if err != nil {
		return err
	}
	if total != int64(len(d.data)) || files < len(d.buckets) {
		return fmt.Errorf("output has %d bytes in %d files, want %d bytes in at least %d files", total, files, len(d.data), len(d.buckets))
	}
	return nil
}
