package filesink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/source"
)

// genRecords writes records gen:from..gen:to-1 of cfg to w, as the
// generator source gives them.
func genRecords(t *testing.T, w *filesink.Writer, cfg source.GenConfig, from, to int64) {
	t.Helper()
	err := source.GenReplayer(cfg).Replay(context.Background(), "gen", [][2]int64{{from, to - 1}}, func(r source.Record) error {
		return w.Write(context.Background(), r.Value, r.Origin)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// countingReplayer counts the records it gives back.
type countingReplayer struct {
	source.Replayer
	n atomic.Int64
}

func (c *countingReplayer) Replay(ctx context.Context, input string, runs [][2]int64, fn func(source.Record) error) error {
	return c.Replayer.Replay(ctx, input, runs, func(r source.Record) error { c.n.Add(1); return fn(r) })
}

// goneReplayer gives nothing back.
type goneReplayer struct{}

func (goneReplayer) Replay(_ context.Context, input string, runs [][2]int64, _ func(source.Record) error) error {
	return &source.GoneError{Input: input, From: runs[0][0], To: runs[len(runs)-1][1], Reason: "retention removed them"}
}

// wantGen checks that the published files of root hold exactly the
// records gen:0..gen:n-1 of cfg, once each.
func wantGen(t *testing.T, root string, cfg source.GenConfig, n int64) {
	t.Helper()
	var got [][]byte
	for _, data := range published(t, root) {
		got = append(got, bytes.SplitAfter(data, []byte("\n"))...)
	}
	got = slices.DeleteFunc(got, func(b []byte) bool { return len(b) == 0 })
	var want [][]byte
	source.GenReplayer(cfg).Replay(context.Background(), "gen", [][2]int64{{0, n - 1}}, func(r source.Record) error {
		want = append(want, append(slices.Clone(r.Value), '\n'))
		return nil
	})
	slices.SortFunc(got, bytes.Compare)
	slices.SortFunc(want, bytes.Compare)
	if len(got) != len(want) {
		t.Fatalf("published %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("published record %q, want %q", got[i], want[i])
		}
	}
}

// manifests returns the manifests of root's output.
func manifests(t *testing.T, root string) []filesink.Manifest {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(root, "_filesink", "manifests", "*.json"))
	var out []filesink.Manifest
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		var m filesink.Manifest
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestRebuildPendingLocal(t *testing.T) {
	ctx := context.Background()
	cfg := source.GenConfig{Count: 1000, Size: 120}
	for _, comp := range []string{"", "gzip", "zstd"} {
		t.Run("compression="+comp, func(t *testing.T) {
			be, root := newLocal(t)
			opts := []filesink.Option{filesink.WithRollingPolicy(filesink.NewDefaultPolicy())}
			if comp != "" {
				c, err := filesink.NewCompression(comp)
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, filesink.WithCompression(c))
			}
			w := newWriter(t, be, 0, opts...)
			genRecords(t, w, cfg, 0, 1000)
			snap := prepare(t, w, 1, true)
			if len(snap.Committables) != 1 {
				t.Fatalf("%d committables, want 1", len(snap.Committables))
			}
			w.Close()
			// The store loses the pending file before phase 2.
			for _, h := range hidden(t, root) {
				if err := os.Remove(filepath.Join(root, h)); err != nil {
					t.Fatal(err)
				}
			}
			rp := &countingReplayer{Replayer: source.GenReplayer(cfg)}
			w2 := newWriter(t, be, 0, append(opts, filesink.WithReplayer(rp))...)
			if err := w2.Restore(ctx, nil); err != nil {
				t.Fatal(err)
			}
			commitAll(t, w2, snap.Committables)
			if err := w2.CommittedCheckpoint(ctx, 1, snap.Committables); err != nil {
				t.Fatal(err)
			}
			if n := w2.Stats().Rebuilt.Load(); n != 1 {
				t.Errorf("Stats().Rebuilt = %d, want 1", n)
			}
			if rp.n.Load() != 1000 {
				t.Errorf("the replayer gave %d records, want 1000", rp.n.Load())
			}
			if comp == "" {
				wantGen(t, root, cfg, 1000)
			}
			ms := manifests(t, root)
			if len(ms) != 1 || len(ms[0].Files) != 1 || !ms[0].Files[0].Rebuilt {
				t.Fatalf("manifests %+v: want one file marked rebuilt", ms)
			}
			// A second commit (a crash before the manifest) finds the
			// rebuilt file and rebuilds nothing more.
			w3 := newWriter(t, be, 0, append(opts, filesink.WithReplayer(rp))...)
			commitAll(t, w3, snap.Committables)
			if err := w3.CommittedCheckpoint(ctx, 1, snap.Committables); err != nil {
				t.Fatalf("the manifest again: %v", err)
			}
			if n := len(published(t, root)); n != 1 {
				t.Errorf("%d published files, want 1", n)
			}
		})
	}
}

func TestRebuildInProgressLocal(t *testing.T) {
	ctx := context.Background()
	cfg := source.GenConfig{Count: 3000, Size: 80}
	be, root := newLocal(t)
	opts := []filesink.Option{filesink.WithRollingPolicy(filesink.NewDefaultPolicy()), filesink.WithAssigner(bucketing.Field("key"))}
	cfg.Keys = 3
	w := newWriter(t, be, 0, opts...)
	genRecords(t, w, cfg, 0, 2000)
	snap := prepare(t, w, 1, false)
	if snap.State == nil || len(snap.Committables) != 0 {
		t.Fatalf("want open parts and no committables, got %+v", snap)
	}
	w.Close()
	for _, h := range hidden(t, root) {
		os.Remove(filepath.Join(root, h))
	}
	rp := &countingReplayer{Replayer: source.GenReplayer(cfg)}
	w2 := newWriter(t, be, 0, append(opts, filesink.WithReplayer(rp))...)
	if err := w2.Restore(ctx, snap.State); err != nil {
		t.Fatal(err)
	}
	if n := w2.Stats().Rebuilt.Load(); n != 3 {
		t.Errorf("Stats().Rebuilt = %d, want 3 (one part per key)", n)
	}
	genRecords(t, w2, cfg, 2000, 3000)
	snap2 := prepare(t, w2, 2, true)
	commitAll(t, w2, snap2.Committables)
	if err := w2.CommittedCheckpoint(ctx, 2, snap2.Committables); err != nil {
		t.Fatal(err)
	}
	wantGen(t, root, cfg, 3000)
	for _, m := range manifests(t, root) {
		for _, f := range m.Files {
			if !f.Rebuilt {
				t.Errorf("%s is not marked rebuilt", f.Path)
			}
		}
	}
}

func TestRebuildSourceGone(t *testing.T) {
	ctx := context.Background()
	cfg := source.GenConfig{Count: 100, Size: 60}
	be, root := newLocal(t)
	w := newWriter(t, be, 0)
	genRecords(t, w, cfg, 0, 100)
	snap := prepare(t, w, 1, true)
	w.Close()
	for _, h := range hidden(t, root) {
		os.Remove(filepath.Join(root, h))
	}
	for name, opts := range map[string][]filesink.Option{
		"gone":        {filesink.WithReplayer(goneReplayer{})},
		"no replayer": nil,
	} {
		w2 := newWriter(t, be, 0, opts...)
		err := w2.Commit(ctx, snap.Committables[0])
		var re *filesink.RebuildError
		if !errors.As(err, &re) || !errors.Is(err, committer.ErrDataLoss) {
			t.Fatalf("%s: Commit = %v, want a *RebuildError matching data loss", name, err)
		}
		msg := err.Error()
		for _, want := range []string{"gen", "0..99", "a plain rerun stops here again", "--resume-from-output"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q does not say %q", name, msg, want)
			}
		}
		if name == "gone" && !errors.Is(err, source.ErrGone) {
			t.Errorf("%s: %v does not match source.ErrGone", name, err)
		}
		if len(published(t, root)) != 0 {
			t.Fatalf("%s: something was published", name)
		}
	}
}

// TestRebuildOtherRecords is a source that gives other records than it
// gave before (a file changed in place): nothing is published.
func TestRebuildOtherRecords(t *testing.T) {
	ctx := context.Background()
	be, root := newLocal(t)
	w := newWriter(t, be, 0)
	genRecords(t, w, source.GenConfig{Count: 100, Size: 200}, 0, 100)
	snap := prepare(t, w, 1, true)
	w.Close()
	for _, h := range hidden(t, root) {
		os.Remove(filepath.Join(root, h))
	}
	other := source.GenReplayer(source.GenConfig{Count: 100, Size: 200, Seed: 9})
	w2 := newWriter(t, be, 0, filesink.WithReplayer(other))
	err := w2.Commit(ctx, snap.Committables[0])
	if !errors.Is(err, committer.ErrDataLoss) || !strings.Contains(err.Error(), "differ") {
		t.Fatalf("Commit = %v, want data loss: the records differ", err)
	}
	if len(published(t, root)) != 0 {
		t.Fatal("something was published")
	}
}

// TestEncodingDeterministic checks that every row format gives the same
// bytes for the same records, so that a rebuilt part is the part it
// replaces; a compressed one the same content (its frames follow the
// writer's buffers and I/O, which a rebuild checks by decompressing).
func TestEncodingDeterministic(t *testing.T) {
	cfg := source.GenConfig{Count: 5000, Size: 200}
	csv := &filesink.CSV{Columns: []string{"id", "key", "ts", "payload"}, HeaderRow: true}
	for _, tc := range []struct {
		name string
		opts []filesink.Option
	}{
		{"jsonl", nil},
		{"text", []filesink.Option{filesink.WithEncoder(filesink.Text{})}},
		{"csv", []filesink.Option{filesink.WithEncoder(csv)}},
		{"jsonl.gz", []filesink.Option{filesink.WithCompression(mustCompression(t, "gzip"))}},
		{"jsonl.zst", []filesink.Option{filesink.WithCompression(mustCompression(t, "zstd"))}},
		{"csv.zst", []filesink.Option{filesink.WithEncoder(csv), filesink.WithCompression(mustCompression(t, "zstd"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var files [2][]byte
			for i := range files {
				be, root := newLocal(t)
				w := newWriter(t, be, 0, append(tc.opts, filesink.WithRunID("fixed"), filesink.WithBufferBudget(1<<20))...)
				genRecords(t, w, cfg, 0, cfg.Count)
				snap := prepare(t, w, 1, true)
				commitAll(t, w, snap.Committables)
				pub := published(t, root)
				if len(pub) != 1 {
					t.Fatalf("%d files, want 1", len(pub))
				}
				for _, data := range pub {
					files[i] = data
				}
			}
			if strings.HasSuffix(tc.name, ".gz") || strings.HasSuffix(tc.name, ".zst") {
				for i := range files {
					var err error
					kind := map[bool]string{true: "gzip", false: "zstd"}[strings.HasSuffix(tc.name, ".gz")]
					if files[i], err = decompress(kind, files[i]); err != nil {
						t.Fatal(err)
					}
				}
			}
			if len(files[0]) == 0 || !bytes.Equal(files[0], files[1]) {
				t.Fatalf("the same records gave different bytes (%d and %d)", len(files[0]), len(files[1]))
			}
		})
	}
}

func mustCompression(t *testing.T, name string) filesink.Compression {
	c, err := filesink.NewCompression(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
