package testjob

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/vfs"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Out is the output directory of every job.
const Out = "/out"

// Job describes a small job over a generator.
type Job struct {
	Count           int64  // records
	Keys            int    // distinct "key" values (buckets with Bucket "field:key")
	Bucket          string // bucketing spec, default "none"
	Compression     string // none, gzip, zstd
	Parallelism     int    // default 1
	PartSize        int64  // default 4 KiB: many rolls
	CheckpointEvery int64  // default 100 records
	RollOnCkpt      bool
	Hook            func(point string) error // committer hook
	// Bulk is a bulk format (WithBulkFormat; Compression must be empty).
	// Check reads its files by extension: FakeBulkExt, or a FileReader
	// given to it.
	Bulk filesink.BulkFormat
	// MaxOpenParts is each writer's limit of open part files
	// (WithMaxOpenParts; 0: the default).
	MaxOpenParts int
	// Replay gives the writers the generator's replayer
	// (filesink.WithReplayer): a part whose staged data is lost is
	// rebuilt from the source.
	Replay bool
	// Rebuilt, when not nil, gets the parts the writers rebuilt.
	Rebuilt *int64
}

// Run runs j on fsys until the end of input (nil) or the first error.
func (j Job) Run(ctx context.Context, fsys vfs.FS) error {
	store, err := recovery.OpenDir(ctx, fsys, Out+"/_filesink")
	if err != nil {
		return err
	}
	spec := j.Bucket
	if spec == "" {
		spec = "none"
	}
	assign, err := bucketing.Parse(spec, nil)
	if err != nil {
		return err
	}
	partSize := j.PartSize
	if partSize == 0 {
		partSize = 4 << 10
	}
	var policy filesink.RollingPolicy = filesink.DefaultPolicy{PartSize: partSize}
	if j.RollOnCkpt {
		policy = filesink.OnCheckpointPolicy{PartSize: partSize}
	}
	be := localfs.New(fsys, Out)
	keys := max(j.Keys, 1)
	gen := source.GenConfig{Count: j.Count, Seed: 1, Keys: keys}
	var sinks []pipeline.Sink
	var writers []*filesink.Writer
	for i := range max(j.Parallelism, 1) {
		comp, err := filesink.NewCompression(j.Compression)
		if err != nil {
			return err
		}
		opts := []filesink.Option{filesink.WithAssigner(assign), filesink.WithRollingPolicy(policy), filesink.WithBufferBudget(64 << 10)}
		if comp != nil {
			opts = append(opts, filesink.WithCompression(comp))
		}
		if j.Bulk != nil {
			opts = append(opts, filesink.WithBulkFormat(j.Bulk))
		}
		if j.MaxOpenParts > 0 {
			opts = append(opts, filesink.WithMaxOpenParts(j.MaxOpenParts))
		}
		if j.Replay {
			opts = append(opts, filesink.WithReplayer(source.GenReplayer(gen)))
		}
		w, err := filesink.New(be, i, opts...)
		if err != nil {
			return err
		}
		sinks = append(sinks, w)
		writers = append(writers, w)
	}
	if j.Rebuilt != nil {
		defer func() {
			for _, w := range writers {
				*j.Rebuilt += w.Stats().Rebuilt.Load()
			}
		}()
	}
	every := j.CheckpointEvery
	if every == 0 {
		every = 100
	}
	// Injected faults are not transient: retry once, fast.
	copts := []committer.Option{committer.WithRetry(2, time.Millisecond)}
	if j.Hook != nil {
		copts = append(copts, committer.WithHook(j.Hook))
	}
	_, err = pipeline.Run(ctx, pipeline.Config{
		OpenSource: func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
			return source.NewGenerator(gen, pos)
		},
		Store: store, Sinks: sinks, CheckpointInterval: -1, CheckpointEvery: every,
		BatchSize: 25, TickInterval: 1 << 40, CommitterOptions: copts,
	})
	return err
}

// Check reads every finished file under Out and returns a description of
// every problem: an id of 0..count-1 missing or seen more than once, a
// staging file visible as output, an undecodable file. Empty means exactly
// once. Files whose names end with a reader's Ext are read by it; JSON
// lines (compressed by extension) and FakeBulk files are read without one.
func Check(fsys vfs.FS, count int64, readers ...FileReader) []string {
	seen := make(map[int64][]string)
	var problems []string
	var walk func(dir string)
	walk = func(dir string) {
		ents, err := fsys.ReadDir(dir)
		if err != nil {
			problems = append(problems, fmt.Sprintf("readdir %s: %v", dir, err))
			return
		}
		for _, e := range ents {
			name := path.Join(dir, e.Name())
			if e.Name()[0] == '.' || e.Name()[0] == '_' {
				continue
			}
			if e.IsDir() {
				walk(name)
				continue
			}
			if strings.Contains(e.Name(), "inprogress") || strings.Contains(e.Name(), ".tmp") {
				problems = append(problems, "staging file visible: "+name)
			}
			ids, err := readIDs(fsys, name, readers)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", name, err))
			}
			for _, id := range ids {
				seen[id] = append(seen[id], name)
			}
		}
	}
	if _, err := fsys.Stat(Out); err == nil {
		walk(Out)
	}
	var missing []int64
	for id := range count {
		switch files := seen[id]; {
		case len(files) == 0:
			missing = append(missing, id)
		case len(files) > 1:
			if len(problems) < 20 {
				problems = append(problems, fmt.Sprintf("id %d published %d times: %v", id, len(files), files))
			}
		}
	}
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("%d ids missing, first %v", len(missing), missing[:min(5, len(missing))]))
	}
	for id := range seen {
		if id < 0 || id >= count {
			problems = append(problems, fmt.Sprintf("unexpected id %d", id))
		}
	}
	// Where the job committed through a coordinator (which writes
	// manifests), the manifests list exactly the visible files, with their
	// sizes and checksums, and no source record twice.
	if _, err := fsys.Stat(path.Join(Out, driver.MetaDir, filesink.ManifestDir)); err == nil {
		vs, err := filesink.Auditor{Output: localfs.New(fsys, Out)}.Audit(context.Background())
		if err != nil {
			problems = append(problems, fmt.Sprintf("manifest audit: %v", err))
		}
		for _, v := range vs[:min(len(vs), 20)] {
			problems = append(problems, "manifest audit: "+v.String())
		}
	}
	sort.Strings(problems)
	return problems
}

// FileReader reads the ids of the records of a file format.
type FileReader struct {
	Ext string // file name suffix, such as ".parquet"
	IDs func(data []byte) ([]int64, error)
}

func readIDs(fsys vfs.FS, name string, readers []FileReader) ([]int64, error) {
	raw, err := vfs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	for _, r := range readers {
		if strings.HasSuffix(name, r.Ext) {
			return r.IDs(raw)
		}
	}
	if strings.HasSuffix(name, FakeBulkExt) {
		f, err := DecodeFakeBulk(raw)
		if err != nil {
			return nil, err
		}
		var ids []int64
		for i, rec := range f.Records {
			var r struct {
				ID *int64 `json:"id"`
			}
			if err := json.Unmarshal(rec, &r); err != nil || r.ID == nil {
				return ids, fmt.Errorf("record %d is not a record: %q", i, rec)
			}
			ids = append(ids, *r.ID)
		}
		return ids, nil
	}
	var r io.Reader = bytes.NewReader(raw)
	switch {
	case strings.HasSuffix(name, ".gz"):
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		r = zr
	case strings.HasSuffix(name, ".zst"):
		zr, err := zstd.NewReader(r)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	var ids []int64
	for i, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		var rec struct {
			ID *int64 `json:"id"`
		}
		if err := json.Unmarshal(line, &rec); err != nil || rec.ID == nil {
			return ids, fmt.Errorf("line %d is not a record: %q", i+1, line)
		}
		ids = append(ids, *rec.ID)
	}
	return ids, nil
}

// Files lists the finished files under Out with their sizes.
func Files(fsys vfs.FS) map[string]int64 {
	out := map[string]int64{}
	var walk func(string)
	walk = func(dir string) {
		ents, _ := fsys.ReadDir(dir)
		for _, e := range ents {
			name := path.Join(dir, e.Name())
			if e.IsDir() {
				walk(name)
			} else if fi, err := e.Info(); err == nil {
				out[name] = fi.Size()
			}
		}
	}
	walk(Out)
	return out
}
