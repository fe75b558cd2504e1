package filesink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/driver"
	"github.com/filesink/filesink/recovery"
)

// Checker is the recovery.Checker of the file sink: it checks committed part
// files and scans the output of a backend (and of its dead-letter backend,
// when one is given) with the backends' driver.Output.
type Checker struct {
	Backend    driver.Backend
	DeadLetter driver.Backend // may be nil
	// Prefix is the part prefix of the sink (default "part").
	Prefix string
	// Partial says that the records given to CheckOutput are not all the
	// retained ones (some could not be read, see recovery.Readable): an
	// in-progress file that none of them references is then not reported
	// as an orphan, since a missing record may reference it.
	Partial bool
	// Live, if set, is the run that writes the output during the check
	// (see LiveRun).
	Live *LiveRun
}

// PartRef is a part file that a checkpoint record of a filesink
// participant references: an in-progress part (its resumable) or a
// decided part waiting for its commit (its committable).
type PartRef struct {
	Checkpoint  uint64 // the record's id
	Participant string // "filesink/0"
	DeadLetter  bool   // a part of the dead-letter output
	Pending     bool   // a committable; false: an in-progress part
	// Part is the backend's resumable or committable (the driver's
	// opaque description of the part's staging data).
	Part json.RawMessage
	// Stats are the part's figures as the record has them (records,
	// size, the source ranges it holds); nil in records of versions that
	// did not keep them.
	Stats *PartStats
}

// PartRefs returns the parts that the filesink participants of records
// reference, record by record in the order given. An error names the
// record and participant whose state or committable does not parse.
func PartRefs(records []*recovery.Checkpoint) ([]PartRef, error) {
	var out []PartRef
	for _, ck := range records {
		for _, p := range ck.Participants {
			if !strings.HasPrefix(p.Name, "filesink/") {
				continue
			}
			if p.State != nil {
				var st state
				if err := json.Unmarshal(p.State, &st); err != nil {
					return nil, fmt.Errorf("checkpoint %d: bad state of %s: %w", ck.ID, p.Name, err)
				}
				for _, e := range st.Parts {
					out = append(out, PartRef{Checkpoint: ck.ID, Participant: p.Name, DeadLetter: e.DeadLetter, Part: e.Part, Stats: e.Stats})
				}
			}
			for _, pc := range p.Pending {
				var e entry
				if err := json.Unmarshal(pc.Data, &e); err != nil {
					return nil, fmt.Errorf("checkpoint %d: bad committable of %s: %w", ck.ID, p.Name, err)
				}
				out = append(out, PartRef{Checkpoint: ck.ID, Participant: p.Name, DeadLetter: e.DeadLetter, Pending: true, Part: e.Part, Stats: e.Stats})
			}
		}
	}
	return out, nil
}

var _ recovery.Checker = Checker{}

// backend returns the main or the dead-letter backend.
func (c Checker) backend(dl bool) (driver.Backend, error) {
	be := c.Backend
	if dl {
		be = c.DeadLetter
	}
	if be == nil {
		return nil, errors.New("no dead-letter output configured")
	}
	return be, nil
}

// CheckCommitted implements recovery.Checker. With Live set, a part not
// committed yet is checked again after the run's records were read again:
// nil if it is committed by then, or if it is still not and the newest
// record carries it (the run is committing it: a note).
func (c Checker) CheckCommitted(ctx context.Context, participant string, pc recovery.Committable) error {
	if !strings.HasPrefix(participant, "filesink/") {
		return nil
	}
	var e entry
	if err := json.Unmarshal(pc.Data, &e); err != nil {
		return fmt.Errorf("bad committable %s: %w", pc.Data, err)
	}
	be, err := c.backend(e.DeadLetter)
	if err != nil {
		return err
	}
	err = be.Check(ctx, e.Part)
	if err != nil && !errors.Is(err, committer.ErrNotCommitted) && rebuiltPart(ctx, be, e.Part) {
		// Published from the source again after the store lost its
		// staged data: its manifest says so, and the manifest audit
		// checks the file against it.
		return nil
	}
	if c.Live == nil || !errors.Is(err, committer.ErrNotCommitted) {
		return err
	}
	records, rerr := c.Live.Records(ctx)
	if rerr != nil {
		return rerr
	}
	if err = be.Check(ctx, e.Part); !errors.Is(err, committer.ErrNotCommitted) {
		return err
	}
	target, _, derr := be.Describe(e.Part)
	if derr != nil || len(records) == 0 {
		return err
	}
	newest := records[len(records)-1]
	decided, _, rerr := recordParts([]*recovery.Checkpoint{newest}, c.describe)
	if rerr != nil {
		return rerr
	}
	for _, p := range decided {
		if p.key == (fileKey{e.DeadLetter, target}) && p.participant == participant {
			c.Live.note(fmt.Sprintf("checkpoint %d (%s)", pc.Checkpoint, participant), "%s: decided, being committed by the live run (its newest checkpoint %d carries it)", be.FileLocation(target), newest.ID)
			return nil
		}
	}
	return err
}

// rebuiltPart reports whether the manifests of be mark the target of
// part as rebuilt from the source.
func rebuiltPart(ctx context.Context, be driver.Backend, part json.RawMessage) bool {
	target, _, err := be.Describe(part)
	if err != nil {
		return false
	}
	rebuilt, err := RebuiltFiles(ctx, be)
	return err == nil && slices.Contains(rebuilt, target)
}

// describe returns the target of a part of the main or the dead-letter
// backend.
func (c Checker) describe(dl bool, part json.RawMessage) (string, error) {
	be, err := c.backend(dl)
	if err != nil {
		return "", err
	}
	target, _, err := be.Describe(part)
	return target, err
}

// CheckOutput implements recovery.Checker: staging visible as output, and
// hidden in-progress files of this sink that no retained record references
// (unless Partial). With Live set, such a file is looked at again after
// the run's records were read again: one they reference is fine; one
// newer than every part of its writer that they reference (or of a writer
// they do not know) is the run's (a note); any other is an orphan if it
// is still there when the output is scanned again, unless the backend's
// staging outlives the commit (SweepEvery > 0): the run sweeps it (a
// note).
func (c Checker) CheckOutput(ctx context.Context, retained []*recovery.Checkpoint) ([]recovery.Violation, error) {
	prefix := c.Prefix
	if prefix == "" {
		prefix = "part"
	}
	referenced := map[bool]map[string]bool{false: {}, true: {}}
	newest := map[string]int64{} // by writer, the highest part number referenced
	if err := c.reference(retained, prefix, referenced, newest); err != nil {
		return nil, err
	}
	var out []recovery.Violation
	type orphan struct {
		dl   bool
		name string
	}
	var orphans []orphan
	for _, dl := range []bool{false, true} {
		if dl && c.DeadLetter == nil {
			continue
		}
		be, err := c.backend(dl)
		if err != nil {
			return nil, err
		}
		staging, problems, err := be.Scan(ctx)
		if err != nil {
			return out, err
		}
		for _, p := range problems {
			out = append(out, recovery.Violation{Where: "output", Problem: p})
		}
		for _, s := range staging {
			name := s[strings.LastIndexByte(s, '/')+1:]
			if !c.Partial && strings.HasPrefix(name, "."+prefix+"-") && !referenced[dl][s] {
				orphans = append(orphans, orphan{dl, s})
			}
		}
	}
	if c.Live != nil && len(orphans) > 0 {
		records, err := c.Live.Records(ctx)
		if err != nil {
			return out, err
		}
		if err := c.reference(records, prefix, referenced, newest); err != nil {
			return out, err
		}
		var left []orphan
		for _, o := range orphans {
			if referenced[o.dl][o.name] {
				continue
			}
			w, n, ok := partSeq(o.name[strings.LastIndexByte(o.name, '/')+1:], prefix)
			if hi, known := newest[w]; ok && (!known || n > hi) {
				c.Live.note(o.name, "in-progress file of the live run, newer than its newest checkpoint record read")
				continue
			}
			left = append(left, o)
		}
		// Still there when scanned again: orphaned (a part published or
		// swept meanwhile is gone).
		still := map[bool]map[string]bool{false: {}, true: {}}
		for _, dl := range []bool{false, true} {
			if len(left) == 0 || dl && c.DeadLetter == nil {
				continue
			}
			be, err := c.backend(dl)
			if err != nil {
				return out, err
			}
			staging, _, err := be.Scan(ctx)
			if err != nil {
				return out, err
			}
			for _, s := range staging {
				still[dl][s] = true
			}
		}
		orphans = slices.DeleteFunc(left, func(o orphan) bool { return !still[o.dl][o.name] })
		// A backend whose staging outlives the commit (S3 tail objects)
		// is swept while the run goes on.
		orphans = slices.DeleteFunc(orphans, func(o orphan) bool {
			be, err := c.backend(o.dl)
			if err != nil || be.SweepEvery() <= 0 {
				return false
			}
			c.Live.note(o.name, "staging data that no retained checkpoint references; the live run sweeps it (every %d checkpoints)", be.SweepEvery())
			return true
		})
	}
	for _, o := range orphans {
		out = append(out, recovery.Violation{Where: o.name, Problem: "orphaned in-progress file: no retained checkpoint references it (the next run sweeps it)"})
	}
	return out, nil
}

// reference adds the staging names of the parts that records reference to
// referenced (by output), and raises newest, by writer, to the highest
// number of such a part.
func (c Checker) reference(records []*recovery.Checkpoint, prefix string, referenced map[bool]map[string]bool, newest map[string]int64) error {
	refs, err := PartRefs(records)
	if err != nil {
		return err
	}
	for _, r := range refs {
		be, err := c.backend(r.DeadLetter)
		if err != nil {
			return err
		}
		target, staging, err := be.Describe(r.Part)
		if err != nil {
			return err
		}
		referenced[r.DeadLetter][staging] = true
		if w, n, ok := partSeq(target[strings.LastIndexByte(target, '/')+1:], prefix); ok {
			if hi, known := newest[w]; !known || n > hi {
				newest[w] = n
			}
		}
	}
	return nil
}
