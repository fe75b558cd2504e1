package filesink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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

// CheckCommitted implements recovery.Checker.
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
	return be.Check(ctx, e.Part)
}

// CheckOutput implements recovery.Checker: staging visible as output, and
// hidden in-progress files of this sink that no retained record references
// (unless Partial).
func (c Checker) CheckOutput(ctx context.Context, retained []*recovery.Checkpoint) ([]recovery.Violation, error) {
	prefix := c.Prefix
	if prefix == "" {
		prefix = "part"
	}
	refs, err := PartRefs(retained)
	if err != nil {
		return nil, err
	}
	referenced := map[bool]map[string]bool{false: {}, true: {}}
	for _, r := range refs {
		be, err := c.backend(r.DeadLetter)
		if err != nil {
			return nil, err
		}
		_, staging, err := be.Describe(r.Part)
		if err != nil {
			return nil, err
		}
		referenced[r.DeadLetter][staging] = true
	}
	var out []recovery.Violation
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
				out = append(out, recovery.Violation{Where: s, Problem: "orphaned in-progress file: no retained checkpoint references it (the next run sweeps it)"})
			}
		}
	}
	return out, nil
}
