package filesink

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/recovery"
)

// LiveRun is a run that writes an output while an Auditor or a Checker
// looks at it (a process holds the output's checkpoint store). The output
// then moves during the look: parts open, files are published, manifests
// and checkpoint records are written and pruned. Given a LiveRun, the
// audit and the check read the records again after they listed the
// output, and report what the run has in flight as notes instead of
// violations:
//
//   - a visible file that no manifest lists but a retained record decided
//     (published, its manifest not written yet), checked against the
//     figures the record keeps for it;
//   - a decided part not committed yet that the newest record still
//     carries (the run is committing it);
//   - an in-progress file that no record references and that is newer
//     than every part of its writer that the records reference, or of a
//     writer they do not know (the run opened it after its newest record);
//   - on a backend whose staging outlives the commit (SweepEvery > 0: S3
//     tail objects), staging data no record references that is still
//     there when the output is scanned again: the run sweeps it.
//
// Everything else is reported as without a LiveRun, after a second look
// where the first one may have raced with the run: a visible file
// published after the manifests were read is checked against the manifest
// written since, or of a checkpoint record that decided it; an orphaned
// in-progress file must still be there when the output is scanned again;
// a decided part must still be uncommitted after the records were read
// again. The sources are audited over the manifests of the checkpoints
// the records read cover, plus the decided and open parts of those
// records, so that a checkpoint being published is no gap.
type LiveRun struct {
	// Records reads the run's retained checkpoint records, oldest first,
	// as they are when it is called. Required.
	Records func(ctx context.Context) ([]*recovery.Checkpoint, error)
	// Note, if set, receives each thing the run has in flight, as Where
	// and Problem. It is called on the goroutine of Audit, CheckCommitted
	// or CheckOutput.
	Note func(recovery.Violation)
}

func (l *LiveRun) note(where, format string, args ...any) {
	if l.Note != nil {
		l.Note(recovery.Violation{Where: where, Problem: fmt.Sprintf(format, args...)})
	}
}

// recordPart is a part of a filesink participant of a checkpoint record,
// with the figures the record keeps for it.
type recordPart struct {
	key         fileKey
	checkpoint  uint64 // the record's id (of a decided part: the checkpoint that decided it)
	participant string
	stats       *PartStats
}

// recordParts returns the decided parts of records (their committables,
// each part once) and the open parts of the newest record (its state),
// with their targets as describe gives them (dl: of the dead-letter
// output).
func recordParts(records []*recovery.Checkpoint, describe func(dl bool, part json.RawMessage) (string, error)) (decided, open []recordPart, err error) {
	seen := map[fileKey]bool{}
	for i, ck := range records {
		for _, p := range ck.Participants {
			if !strings.HasPrefix(p.Name, "filesink/") {
				continue
			}
			for _, pc := range p.Pending {
				var e entry
				if err := json.Unmarshal(pc.Data, &e); err != nil {
					return nil, nil, fmt.Errorf("checkpoint %d: bad committable of %s: %w", ck.ID, p.Name, err)
				}
				target, err := describe(e.DeadLetter, e.Part)
				if err != nil {
					return nil, nil, fmt.Errorf("checkpoint %d: committable of %s: %w", ck.ID, p.Name, err)
				}
				k := fileKey{e.DeadLetter, target}
				if !seen[k] {
					seen[k] = true
					decided = append(decided, recordPart{k, pc.Checkpoint, p.Name, e.Stats})
				}
			}
			if i != len(records)-1 || p.State == nil {
				continue
			}
			var st state
			if err := json.Unmarshal(p.State, &st); err != nil {
				return nil, nil, fmt.Errorf("checkpoint %d: bad state of %s: %w", ck.ID, p.Name, err)
			}
			for _, e := range st.Parts {
				target, err := describe(e.DeadLetter, e.Part)
				if err != nil {
					return nil, nil, fmt.Errorf("checkpoint %d: state of %s: %w", ck.ID, p.Name, err)
				}
				open = append(open, recordPart{fileKey{e.DeadLetter, target}, ck.ID, p.Name, e.Stats})
			}
		}
	}
	return decided, open, nil
}

// partSeq splits the base name of a part file or of its staging data
// (".part-0-1a2b3c4d-7.jsonl.inprogress", "part-0-1a2b3c4d-7.jsonl") of a
// sink with this part prefix into its writer ("0-1a2b3c4d": subtask and
// run id) and its number in that writer's sequence. ok is false for a name
// the file sink did not make.
func partSeq(base, prefix string) (writer string, n int64, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(base, "."), prefix+"-")
	if !ok {
		return "", 0, false
	}
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		rest = rest[:i]
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return rest[:i], n, true
}

// backendOf returns o as a driver.Backend, for a live audit, which
// describes the parts of the run's records.
func backendOf(o driver.Output, what string) (driver.Backend, error) {
	if o == nil {
		return nil, nil
	}
	be, ok := o.(driver.Backend)
	if !ok {
		return nil, fmt.Errorf("filesink: audit of a live run: the %s is a %T, not a driver.Backend (the parts of the run's records cannot be described)", what, o)
	}
	return be, nil
}
