package metrics

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/vfs"
)

// CountingFS returns fsys, for a local backend (localfs.New), counting
// the staging files (".*.inprogress") it removes while a wrapped sink's
// Sweep runs as filesink_orphans_swept_total{kind="staging_file"}.
// (localfs removes a staging file only in its sweep, and in a commit
// that finds a crashed link+unlink publish done; the commit does not run
// during a sweep.)
func (m *Metrics) CountingFS(fsys vfs.FS) vfs.FS { return countingFS{FS: fsys, m: m} }

type countingFS struct {
	vfs.FS
	m *Metrics
}

func (c countingFS) Remove(name string) error {
	err := c.FS.Remove(name)
	if base := filepath.Base(name); err == nil && c.m.sweeping.Load() > 0 &&
		strings.HasPrefix(base, ".") && strings.HasSuffix(base, localfs.StagingSuffix) {
		c.m.orphans[kindStagingFile].Add(1)
	}
	return err
}

// The S3 backend's sweep logs what it deletes (committer/s3, sweep.go);
// LogHandler counts those records.
const (
	s3AbortedUpload  = "s3: sweep aborted an orphaned upload"
	s3DeletedObjects = "s3: sweep deleted orphaned staging objects" // attribute "objects": how many
)

// LogHandler returns h, for the logger of an S3 backend
// (s3.WithLogger), counting the orphans its sweep reports as
// filesink_orphans_swept_total{kind="upload"} and {kind="staging_object"}.
// Records are counted whatever h's level; they are passed on to h only
// if it is enabled for them.
func (m *Metrics) LogHandler(h slog.Handler) slog.Handler { return &countingHandler{h: h, m: m} }

type countingHandler struct {
	h slog.Handler
	m *Metrics
}

// Enabled lets info records through for counting (the sweep's are info).
func (c *countingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || c.h.Enabled(ctx, l)
}

func (c *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	switch r.Message {
	case s3AbortedUpload:
		c.m.orphans[kindUpload].Add(1)
	case s3DeletedObjects:
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "objects" {
				if v := a.Value.Resolve(); v.Kind() == slog.KindInt64 {
					c.m.orphans[kindStagingObject].Add(v.Int64())
				}
				return false
			}
			return true
		})
	}
	if !c.h.Enabled(ctx, r.Level) {
		return nil
	}
	return c.h.Handle(ctx, r)
}

func (c *countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countingHandler{h: c.h.WithAttrs(as), m: c.m}
}

func (c *countingHandler) WithGroup(name string) slog.Handler {
	return &countingHandler{h: c.h.WithGroup(name), m: c.m}
}
