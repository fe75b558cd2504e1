package icebergtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filesink/filesink/internal/testutil/ci"
)

// module is the path of the module whose root holds scripts/.
const module = "github.com/filesink/filesink"

// ErrUnavailable means the reader cannot run on this machine: node or npm
// is missing, or scripts/icebergread could not install its packages.
var ErrUnavailable = errors.New("the Iceberg reader cannot run")

// Table is what the reader found in a table's current snapshot.
type Table struct {
	FormatVersion     int        `json:"format_version"`
	CurrentSnapshotID string     `json:"current_snapshot_id"` // "" when the table has no snapshot
	Snapshots         []Snapshot `json:"snapshots"`           // all of the metadata's, in its order
	Files             []File     `json:"files"`               // the live data files, in manifest order
	// DuplicatePaths lists the paths that more than one live entry names.
	DuplicatePaths []string `json:"duplicate_paths"`
	// Rows is the number of rows DuckDB read from the live files, a file
	// registered twice counted twice.
	Rows int64 `json:"rows"`
	// RecordsByFile is the row count DuckDB read per path, nil for a file
	// it could not read.
	RecordsByFile map[string]*int64 `json:"records_by_file"`
	// Data holds every row of the live files as a JSON object (64-bit
	// integers as strings), file by file; only with WithRows.
	Data []json.RawMessage `json:"data"`
	// Errors lists what is wrong but readable (see the package doc); a
	// correct table has none.
	Errors []string `json:"errors"`
}

// Snapshot is one snapshot of the table's metadata.
type Snapshot struct {
	ID             string            `json:"id"`
	Parent         string            `json:"parent"` // "" for the first
	SequenceNumber int64             `json:"sequence_number"`
	TimestampMS    int64             `json:"timestamp_ms"`
	Operation      string            `json:"operation"` // "append", ...
	Summary        map[string]string `json:"summary"`
	ManifestList   string            `json:"manifest_list"`
}

// File is one live data file of the current snapshot, as its manifest
// entry describes it.
type File struct {
	Path       string         `json:"path"`      // as the manifest names it
	Records    int64          `json:"records"`   // record_count of the entry
	Size       int64          `json:"size"`      // file_size_in_bytes of the entry
	Partition  map[string]any `json:"partition"` // by partition field name; longs as strings
	Status     string         `json:"status"`    // ADDED or EXISTING
	SnapshotID string         `json:"snapshot_id"`
	Manifest   string         `json:"manifest"`
}

// Option changes what Read reads.
type Option func(*config)

type config struct {
	rows    bool
	columns []string
	s3      *s3Source
}

// WithRows makes Read return every row of the live files in Table.Data.
func WithRows() Option { return func(c *config) { c.rows = true } }

// WithColumns makes Read return the named columns of every row of the
// live files in Table.Data (less to read than WithRows on large tables).
func WithColumns(names ...string) Option { return func(c *config) { c.columns = names } }

// Read reads the Iceberg table whose metadata file is metadataPath (a local
// path, or with WithS3 an s3:// location or a key of the bucket) with the
// independent reader. A nil error means the reader read the metadata, the
// manifest list and every manifest of the current snapshot, found no delete
// files, and tried every live data file; what it found wrong is in
// Table.Errors. The error wraps ErrUnavailable when node, npm or the
// reader's packages are missing.
func Read(ctx context.Context, metadataPath string, opts ...Option) (*Table, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	node, modules, err := install(ctx, root)
	if err != nil {
		return nil, err
	}
	args := []string{filepath.Join(root, "scripts", "icebergread.mjs")}
	if cfg.s3 != nil {
		dir, err := os.MkdirTemp("", "icebergtest-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		maps, err := cfg.s3.mirror(ctx, dir)
		if err != nil {
			return nil, err
		}
		for _, m := range maps {
			args = append(args, "--map", m)
		}
		metadataPath = cfg.s3.location(metadataPath)
	}
	args = append(args, "--metadata", metadataPath)
	switch {
	case len(cfg.columns) > 0:
		args = append(args, "--columns", strings.Join(cfg.columns, ","))
	case cfg.rows:
		args = append(args, "--rows")
	}
	return run(ctx, node, modules, args, metadataPath)
}

// run runs the reader and decodes its output.
func run(ctx context.Context, node, modules string, args []string, metadataPath string) (*Table, error) {
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("reading Iceberg table %s: %s", metadataPath, msg)
	}
	var tbl Table
	if err := json.Unmarshal(stdout.Bytes(), &tbl); err != nil {
		return nil, fmt.Errorf("reading Iceberg table %s: the reader's output: %v", metadataPath, err)
	}
	return &tbl, nil
}

// install finds node and runs scripts/icebergread, which installs the
// reader's packages on first use. It returns node's path and the
// node_modules directory; a nil error means both exist.
func install(ctx context.Context, root string) (node, modules string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("%w: node is not installed", ErrUnavailable)
	}
	script := filepath.Join(root, "scripts", "icebergread")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", "", fmt.Errorf("%s: %w", script, ctx.Err())
		}
		return "", "", fmt.Errorf("%w: %s: %v: %s", ErrUnavailable, script, err, strings.TrimSpace(stderr.String()))
	}
	modules = strings.TrimSpace(stdout.String())
	if fi, err := os.Stat(modules); err != nil || !fi.IsDir() {
		return "", "", fmt.Errorf("%w: %s printed %q, not a directory", ErrUnavailable, script, modules)
	}
	return node, modules, nil
}

// repoRoot walks up from the working directory (a test's package
// directory) to the directory whose go.mod declares this module.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declares(data, module) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod of %s in %s or above", module, wd)
		}
	}
}

// declares reports whether go.mod content declares module mod.
func declares(gomod []byte, mod string) bool {
	for line := range strings.SplitSeq(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == mod {
			return true
		}
	}
	return false
}

// MustRead is Read for tests, with t's context. When the reader cannot run
// (ErrUnavailable) it skips t with a loud reason, or fails it when
// CI=true; any other error fails t.
func MustRead(t testing.TB, metadataPath string, opts ...Option) *Table {
	t.Helper()
	tbl, err := Read(t.Context(), metadataPath, opts...)
	if err != nil {
		unavailable(t, err)
		t.Fatalf("icebergtest: %v", err)
	}
	return tbl
}

// unavailable skips t when err wraps ErrUnavailable, or fails it when
// CI=true; it returns for other errors.
func unavailable(t testing.TB, err error) {
	t.Helper()
	switch {
	case !errors.Is(err, ErrUnavailable):
	case ci.Enabled():
		t.Fatalf("icebergtest: %v (CI=true: the Iceberg reader must run)", err)
	default:
		t.Skipf("SKIPPED: icebergtest: %v (with CI=true this fails)", err)
	}
}
