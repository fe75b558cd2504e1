package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"regexp"
	"strings"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// CompactDir is the directory, under a table's location, of the
// compaction journals: CompactDir/RUN/SEQ.json names one data file that
// the compaction run RUN created (or was about to create), written
// before the file is created.
const CompactDir = "_filesink/compact"

// writerName matches the name iceberg-go's data file writer gives a file
// ("%05d-%d-%s-%05d.%s": partition id, task id, write UUID, file count,
// extension), after the hash an object-storage location provider may put
// in front of it. The file sink's names ("part-...") never match.
var writerName = regexp.MustCompile(`(?:^|-)\d{5,}-\d+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-\d{5,}\.[a-z]+$`)

// journalRecord is the content of a journal entry.
type journalRecord struct {
	Run  string `json:"run"`
	Path string `json:"path"`
}

// journalEntry is a journal entry as listed: its own location (as the
// table's IO lists it) and the data file it names ("" if unreadable: a
// crash while writing it, before the data file was created).
type journalEntry struct {
	file string
	path string
}

// journalDir is the journal directory of tbl.
func journalDir(tbl *table.Table) string {
	return strings.TrimSuffix(tbl.Location(), "/") + "/" + CompactDir
}

// dataDirs are the directories, with a trailing slash, under which
// iceberg-go writes tbl's data files: DATA under the table's location
// (partitioned files always go there), and write.data.path if set.
func dataDirs(tbl *table.Table) []string {
	dirs := []string{strings.TrimSuffix(tbl.Location(), "/") + "/data/"}
	if p := tbl.Properties()[table.WriteDataPathKey]; p != "" {
		dirs = append(dirs, strings.TrimSuffix(p, "/")+"/")
	}
	return dirs
}

func under(name string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(name, d) {
			return true
		}
	}
	return false
}

// isCompactionOutput reports whether name can be a data file of a
// compaction of a table with data directories dirs: under one of them,
// with the name iceberg-go's writer gives.
func isCompactionOutput(name string, dirs []string) bool {
	return under(name, dirs) && writerName.MatchString(name[strings.LastIndex(name, "/")+1:])
}

// journalIO is the table's IO as a compaction run writes through it: a
// data file is recorded in the run's journal before it is created.
// Everything else is the table's IO. Safe for concurrent use.
type journalIO struct {
	icebergio.IO
	w    icebergio.WriteFileIO
	c    *compactRun
	dir  string   // the run's journal directory
	data []string // the table's data directories
}

var (
	_ icebergio.WriteFileIO = (*journalIO)(nil)
	_ icebergio.ReadFileIO  = (*journalIO)(nil)
	_ icebergio.StatIO      = (*journalIO)(nil)
)

// journalIO returns the journaling IO of the run for tbl.
func (c *compactRun) journalIO(ctx context.Context, tbl *table.Table) (icebergio.IO, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	w, ok := fs.(icebergio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("iceberg: table %s: its IO %T cannot write files", c.name(), fs)
	}
	return &journalIO{IO: fs, w: w, c: c, dir: journalDir(tbl) + "/" + c.run, data: dataDirs(tbl)}, nil
}

// Create records name in the journal if it is a data file, then creates
// it.
func (j *journalIO) Create(name string) (icebergio.FileWriter, error) {
	if err := j.record(name); err != nil {
		return nil, err
	}
	return j.w.Create(name)
}

// WriteFile records name in the journal if it is a data file, then
// writes it.
func (j *journalIO) WriteFile(name string, p []byte) error {
	if err := j.record(name); err != nil {
		return err
	}
	return j.w.WriteFile(name, p)
}

// record writes the journal entry of name, if a data file, durably (as
// durably as the table's IO writes).
func (j *journalIO) record(name string) error {
	if !under(name, j.data) {
		return nil
	}
	b, err := json.Marshal(journalRecord{Run: j.c.run, Path: name})
	if err != nil {
		return err
	}
	entry := fmt.Sprintf("%s/%08d.json", j.dir, j.c.seq.Add(1))
	if err := j.w.WriteFile(entry, b); err != nil {
		return fmt.Errorf("iceberg: compaction journal %s: %w", entry, err)
	}
	return nil
}

// ReadFile reads name through the table's IO.
func (j *journalIO) ReadFile(name string) ([]byte, error) { return readFile(j.IO, name) }

// Stat describes name through the table's IO.
func (j *journalIO) Stat(name string) (iofs.FileInfo, error) {
	if s, ok := j.IO.(icebergio.StatIO); ok {
		return s.Stat(name)
	}
	f, err := j.IO.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// readFile reads name through fsys.
func readFile(fsys icebergio.IO, name string) ([]byte, error) {
	if rf, ok := fsys.(icebergio.ReadFileIO); ok {
		return rf.ReadFile(name)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// listJournal lists the journal entries of every compaction run of tbl.
func (c *compactRun) listJournal(ctx context.Context, tbl *table.Table) ([]journalEntry, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	l, ok := fs.(icebergio.ListableIO)
	if !ok {
		return nil, fmt.Errorf("iceberg: table %s: its IO %T cannot list the compaction journal", c.name(), fs)
	}
	var out []journalEntry
	err = l.WalkDir(journalDir(tbl), func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := readFile(fs, p)
		if errors.Is(err, iofs.ErrNotExist) {
			return nil // swept meanwhile
		}
		if err != nil {
			return err
		}
		var r journalRecord
		if json.Unmarshal(b, &r) != nil {
			r.Path = ""
		}
		out = append(out, journalEntry{file: p, path: r.Path})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("iceberg: table %s: listing the compaction journal: %w", c.name(), err)
	}
	return out, nil
}

// sweep deletes, of the data files journal names, those no snapshot of
// tbl references and that look like compaction output (isCompactionOutput),
// then the journal entries. st's own files are referenced by the run's
// snapshot. It returns the files deleted.
//
// Run only after the run's replace snapshot is committed and tbl loaded
// after it, with journal listed before that commit: a compaction whose
// files journal lists planned on an older head, so its commit can no
// longer land (its compare-and-swap fails on the replace, and the replace
// is no append it could commit on top of). The files a compaction
// creates after that listing are not in journal.
func (c *compactRun) sweep(ctx context.Context, tbl *table.Table, journal []journalEntry, st *staged) (int, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return 0, err
	}
	ours := map[string]bool{}
	for _, gr := range st.groups {
		for _, df := range gr.NewDataFiles {
			ours[df.FilePath()] = true
		}
	}
	check := map[string]bool{}
	for _, e := range journal {
		if e.path != "" && !ours[e.path] {
			check[e.path] = true
		}
	}
	refs, err := referenced(ctx, fs, tbl, check)
	if err != nil {
		return 0, err
	}
	dirs := dataDirs(tbl)
	swept, runDirs := 0, map[string]bool{}
	var errs []error
	for _, e := range journal {
		if check[e.path] && !refs[e.path] && isCompactionOutput(e.path, dirs) {
			err := fs.Remove(e.path)
			if err != nil && !errors.Is(err, iofs.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			if err == nil {
				swept++
			}
		}
		if err := fs.Remove(e.file); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		runDirs[e.file[:strings.LastIndexAny(e.file, `/\`)+1]] = true
	}
	for d := range runDirs {
		_ = fs.Remove(strings.TrimRight(d, `/\`)) // a local run directory, once empty
	}
	return swept, errors.Join(errs...)
}

// referenced returns which of paths a manifest of a snapshot of tbl
// names (as added, existing or deleted).
func referenced(ctx context.Context, fs icebergio.IO, tbl *table.Table, paths map[string]bool) (map[string]bool, error) {
	out := map[string]bool{}
	if len(paths) == 0 {
		return out, nil
	}
	seen := map[string]bool{}
	for _, s := range tbl.Metadata().Snapshots() {
		manifests, err := s.Manifests(fs)
		if err != nil {
			return nil, fmt.Errorf("snapshot %d: %w", s.SnapshotID, err)
		}
		for _, m := range manifests {
			if seen[m.FilePath()] {
				continue
			}
			seen[m.FilePath()] = true
			for e, err := range m.Entries(fs, false) {
				if err != nil {
					return nil, fmt.Errorf("snapshot %d: manifest %s: %w", s.SnapshotID, m.FilePath(), err)
				}
				if p := e.DataFile().FilePath(); paths[p] {
					out[p] = true
				}
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
