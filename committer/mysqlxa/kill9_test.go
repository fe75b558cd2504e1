package mysqlxa_test

import (
	"context"
	"testing"

	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
)

// kill -9 of the server (its own mariadbd) while a branch is prepared and
// the next one is active: the prepared branch survives the restart (InnoDB
// keeps it in its redo log) and is committed if its checkpoint was decided,
// rolled back if not; the active one is gone. Totals are exact.
func TestKill9Server(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Start(t)
	for _, c := range []struct {
		point   string
		decided bool
	}{
		{"decided", true},
		{"phase1", false},
	} {
		t.Run(c.point, func(t *testing.T) {
			e := newEnv(t, srv)
			db := srv.Open(t, e.db)
			j, err := e.start(db, 1, crashOn(c.point, 2), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.run(crashN, crashPer); err == nil {
				t.Fatal("no crash")
			}
			srv.Kill9()
			srv.Restart(t)
			ctx := context.Background()
			xs, err := mysqlxa.ListBranches(ctx, e.admin, e.job)
			if err != nil || len(xs) != 1 || xs[0].Checkpoint != 2 {
				t.Fatalf("after kill -9 and restart: branches %v, %v; want checkpoint 2's", xs, err)
			}
			j2 := e.recoverAndFinish(1)
			st := j2.sinks[0].Stats()
			if c.decided && st.RolledBack.Load() != 0 || !c.decided && st.RolledBack.Load() != 1 {
				t.Errorf("rolled back %d branches (decided: %v)", st.RolledBack.Load(), c.decided)
			}
		})
	}
}
