package mysqlxa

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// ListBranches returns the prepared XA branches of filesink MySQL sinks on
// the server that db connects to, decoded (job, sink, subtask, checkpoint),
// ordered by job, sink, subtask and checkpoint; job "" lists every job's.
// It serves `filesink xa list`. MySQL 8 needs the XA_RECOVER_ADMIN
// privilege. Safe for concurrent use.
func ListBranches(ctx context.Context, db *sql.DB, job string) ([]Xid, error) {
	all, err := recoverXids(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("mysqlxa: %w", err)
	}
	var out []Xid
	for _, x := range all {
		if job == "" || x.Job == job {
			out = append(out, x)
		}
	}
	slices.SortFunc(out, func(a, b Xid) int {
		if c := strings.Compare(a.Job, b.Job); c != 0 {
			return c
		}
		if c := strings.Compare(a.Sink, b.Sink); c != 0 {
			return c
		}
		if a.Subtask != b.Subtask {
			return a.Subtask - b.Subtask
		}
		if a.Checkpoint != b.Checkpoint {
			if a.Checkpoint < b.Checkpoint {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Bqual(), b.Bqual())
	})
	return out, nil
}

// CommitBranch commits prepared branch x (XA COMMIT), for `filesink xa
// commit`: an operator's decision, to be taken only for a branch whose
// checkpoint was decided (Recover does this by itself). A nil error means
// the branch is committed now. A branch the server does not list is an
// error; one a live session still holds is an error naming the session to
// KILL first. Safe for concurrent use.
func CommitBranch(ctx context.Context, db *sql.DB, x Xid) error {
	return endBranch(ctx, db, x, "COMMIT")
}

// RollbackBranch rolls back prepared branch x (XA ROLLBACK), for `filesink
// xa rollback`: its records are discarded, so only for a branch whose
// checkpoint was never decided (Recover and the sweep do this by
// themselves). A nil error means the branch is rolled back now. Safe for
// concurrent use.
func RollbackBranch(ctx context.Context, db *sql.DB, x Xid) error {
	return endBranch(ctx, db, x, "ROLLBACK")
}

func endBranch(ctx context.Context, db *sql.DB, x Xid, verb string) error {
	if err := x.check(); err != nil {
		return fmt.Errorf("mysqlxa: %w", err)
	}
	_, err := db.ExecContext(ctx, "XA "+verb+" "+x.SQL())
	if err == nil {
		return nil
	}
	if code(err) == errXANotA {
		all, lerr := recoverXids(ctx, db)
		if lerr == nil && slices.Contains(all, x) {
			return fmt.Errorf("mysqlxa: XA %s %s: a live session (probably %d) still holds the branch; KILL it and try again: %w", verb, x, x.ConnID, err)
		}
		return fmt.Errorf("mysqlxa: XA %s %s: no such prepared branch (already committed or rolled back?): %w", verb, x, err)
	}
	return fmt.Errorf("mysqlxa: XA %s %s: %w", verb, x, err)
}
