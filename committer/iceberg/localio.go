package iceberg

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"

	icebergio "github.com/apache/iceberg-go/io"

	"github.com/filesink/filesink/vfs"
)

// LocalIO is iceberg-go's IO for local warehouses ("file://" and plain
// paths) with the durability a commit needs: iceberg-go's own local IO
// never fsyncs, so after a power cut the catalog could name a metadata
// file, manifest list or manifest that the disk lost. Every file LocalIO
// writes is synced before Close (or WriteFile) returns, with its
// directory and every directory it made, and is created new: LocalIO
// never overwrites a file. Reads, Remove and WalkDir are iceberg-go's.
// Safe for concurrent use.
//
// Importing this package registers LocalIO on the OS filesystem for the
// "file" and "" schemes in iceberg-go's IO registry, which is global to
// the program: every local Iceberg table it writes gets the fsyncs.
type LocalIO struct {
	icebergio.LocalFS
	fs vfs.FS
}

var _ icebergio.WriteFileIO = (*LocalIO)(nil)

// NewLocalIO returns a LocalIO writing through fsys.
func NewLocalIO(fsys vfs.FS) *LocalIO { return &LocalIO{fs: fsys} }

func init() {
	factory := func(_ context.Context, _ *url.URL, _ map[string]string) (icebergio.IO, error) {
		return NewLocalIO(vfs.OS{}), nil
	}
	for _, scheme := range []string{"file", ""} {
		icebergio.Unregister(scheme)
		icebergio.Register(scheme, factory)
	}
}

// Create makes name, which must not exist, and its missing directories
// durably, and returns a writer whose Close returns nil only once the
// file's data and its directory entry are durable.
func (l *LocalIO) Create(name string) (icebergio.FileWriter, error) {
	path, err := localPath(name)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := vfs.MkdirAllSync(l.fs, dir); err != nil {
		return nil, fmt.Errorf("iceberg: %s: %w", dir, err)
	}
	f, err := l.fs.Create(path)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %w", err)
	}
	return &syncWriter{f: f, fs: l.fs, dir: dir}, nil
}

// WriteFile writes p as the new file name; a nil error means name and
// its content are durable.
func (l *LocalIO) WriteFile(name string, p []byte) error {
	w, err := l.Create(name)
	if err != nil {
		return err
	}
	if _, err := w.Write(p); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// syncWriter is a file LocalIO writes.
type syncWriter struct {
	f   vfs.File
	fs  vfs.FS
	dir string
}

func (w *syncWriter) Write(p []byte) (int, error) { return w.f.Write(p) }

func (w *syncWriter) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(struct{ io.Writer }{w.f}, r)
}

// Close syncs the file and its directory; a nil error means both are
// durable.
func (w *syncWriter) Close() error {
	if err := w.f.Sync(); err != nil {
		w.f.Close()
		return err
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	return w.fs.SyncDir(w.dir)
}

// localPath turns a local location ("file:///dir/f", "/dir/f") into a
// path of the OS.
func localPath(name string) (string, error) {
	if !strings.HasPrefix(strings.ToLower(name), "file:") {
		return name, nil
	}
	u, err := url.Parse(name)
	if err != nil {
		return "", fmt.Errorf("iceberg: location %q: %w", name, err)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("iceberg: location %q: a local file location names no host", name)
	}
	p := u.Path
	if runtime.GOOS == "windows" && len(p) >= 3 && p[0] == '/' && p[2] == ':' {
		p = p[1:] // file:///C:/dir
	}
	return filepath.FromSlash(p), nil
}
