package recovery

import (
	"context"
	"fmt"
)

// Violation is one broken invariant that Verify found.
type Violation struct {
	Where   string // file, object or record concerned
	Problem string
}

func (v Violation) String() string { return v.Where + ": " + v.Problem }

// Checker checks a sink's output against checkpoint records; each sink
// provides one.
type Checker interface {
	// CheckCommitted returns nil if committable c of participant, decided by
	// c.Checkpoint, is published exactly as recorded, or an error saying
	// why not.
	CheckCommitted(ctx context.Context, participant string, c Committable) error
	// CheckOutput scans the output and returns every problem that does not
	// depend on one committable: staging data visible as output, orphaned
	// staging data no retained record references, in-progress data shorter
	// than recorded.
	CheckOutput(ctx context.Context, retained []*Checkpoint) ([]Violation, error)
}

// Verify checks the output described by the records in s with chk and
// returns every violation found (empty: the output is consistent with the
// records). An error means the check itself could not run, for example a
// corrupt record.
func Verify(ctx context.Context, s Store, chk Checker) ([]Violation, error) {
	retained, err := Retained(ctx, s)
	if err != nil {
		return nil, err
	}
	return VerifyRecords(ctx, retained, chk)
}

// VerifyRecords is Verify over records already read (oldest first), for a
// caller that read them itself, for example with Readable. An error means
// the check could not run; the violations found before it are returned.
func VerifyRecords(ctx context.Context, retained []*Checkpoint, chk Checker) ([]Violation, error) {
	var out []Violation
	seen := map[string]bool{}
	for _, c := range retained {
		for _, p := range c.Participants {
			for _, pc := range p.Pending {
				key := p.Name + "\x00" + string(pc.Data)
				if seen[key] {
					continue
				}
				seen[key] = true
				if err := chk.CheckCommitted(ctx, p.Name, pc); err != nil {
					if ctx.Err() != nil {
						return out, ctx.Err()
					}
					out = append(out, Violation{Where: fmt.Sprintf("checkpoint %d (%s)", pc.Checkpoint, p.Name), Problem: err.Error()})
				}
			}
		}
	}
	vs, err := chk.CheckOutput(ctx, retained)
	return append(out, vs...), err
}
