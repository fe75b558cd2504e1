package iceberg

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// LiveFile is a data file of a table's current snapshot.
type LiveFile struct {
	Path    string
	Size    int64
	Records int64
}

// Inspection is what Inspect found in a table for one job.
type Inspection struct {
	// Snapshot is the current snapshot's id, 0 when the table has none.
	Snapshot int64
	// Files are the live data files of the current snapshot.
	Files []LiveFile
	// Violations name what is wrong: a live data file missing or of
	// another size than its manifest entry says, a path live twice, a
	// snapshot of the job whose summary does not parse, a lane checkpoint
	// in two snapshots.
	Violations []string
	// Lanes holds, per lane of the job, the checkpoints the summaries of
	// the current snapshot's ancestors record, ascending (expired
	// snapshots are not there).
	Lanes map[string][]uint64
	// Committed is the newest checkpoint per lane the table holds for
	// the job (Committed).
	Committed map[string]uint64
}

// Inspect checks the current snapshot of tbl: every live data file is
// there with the size its manifest entry records, no path is live twice;
// and it reads the job's lane checkpoints. A nil error means every
// manifest was read; what is wrong is in Violations. It reads the table's
// files and is safe for concurrent use.
func Inspect(ctx context.Context, tbl *table.Table, job string) (*Inspection, error) {
	in := &Inspection{Lanes: map[string][]uint64{}}
	var err error
	if in.Committed, err = Committed(tbl, job); err != nil {
		return nil, err
	}
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return in, nil
	}
	in.Snapshot = cur.SnapshotID
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	manifests, err := cur.Manifests(fsys)
	if err != nil {
		return nil, fmt.Errorf("iceberg: snapshot %d: %w", cur.SnapshotID, err)
	}
	seen := map[string]bool{}
	for _, m := range manifests {
		entries, err := m.FetchEntries(fsys, true)
		if err != nil {
			return nil, fmt.Errorf("iceberg: manifest %s: %w", m.FilePath(), err)
		}
		for _, e := range entries {
			df := e.DataFile()
			p := df.FilePath()
			if seen[p] {
				in.Violations = append(in.Violations, fmt.Sprintf("data file %s is live twice", p))
			}
			seen[p] = true
			in.Files = append(in.Files, LiveFile{Path: p, Size: df.FileSizeBytes(), Records: df.Count()})
			in.Violations = append(in.Violations, checkSize(fsys, p, df.FileSizeBytes())...)
		}
	}
	in.Violations = append(in.Violations, in.lanes(tbl, job)...)
	return in, nil
}

// checkSize returns a violation if the file at p is missing or not size
// bytes long.
func checkSize(fsys iceio.IO, p string, size int64) []string {
	f, err := fsys.Open(p)
	if err != nil {
		return []string{fmt.Sprintf("data file %s: %v", p, err)}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return []string{fmt.Sprintf("data file %s: %v", p, err)}
	}
	if fi.Size() != size {
		return []string{fmt.Sprintf("data file %s has %d bytes, its manifest entry says %d", p, fi.Size(), size)}
	}
	return nil
}

// lanes fills in.Lanes from the summaries of the current snapshot's
// ancestors; a lane checkpoint in two snapshots is a violation.
func (in *Inspection) lanes(tbl *table.Table, job string) []string {
	var vs []string
	where := map[string]int64{}
	for _, s := range table.AncestorsOf(tbl.CurrentSnapshot().SnapshotID, tbl.Metadata().SnapshotByID) {
		if s.Summary == nil || s.Summary.Properties[SummaryJob] != job {
			continue
		}
		var lanes map[string]uint64
		if err := json.Unmarshal([]byte(s.Summary.Properties[SummaryLanes]), &lanes); err != nil {
			vs = append(vs, fmt.Sprintf("snapshot %d: summary %s does not parse: %v", s.SnapshotID, SummaryLanes, err))
			continue
		}
		for lane, cp := range lanes {
			key := fmt.Sprintf("%s@%d", lane, cp)
			if prev, dup := where[key]; dup {
				vs = append(vs, fmt.Sprintf("checkpoint %d of lane %s is in snapshots %d and %d", cp, lane, prev, s.SnapshotID))
			}
			where[key] = s.SnapshotID
			in.Lanes[lane] = append(in.Lanes[lane], cp)
		}
	}
	for _, cps := range in.Lanes {
		slices.Sort(cps)
	}
	return vs
}
