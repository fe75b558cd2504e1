package mysqlxa_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
	"github.com/filesink/filesink/source"
)

// crashOn returns a hook failing at the nth time point is reached.
func crashOn(point string, nth int) func(string) error {
	seen := 0
	return func(p string) error {
		if p == point {
			seen++
			if seen == nth {
				return fmt.Errorf("simulated crash at %s (#%d)", p, nth)
			}
		}
		return nil
	}
}

const (
	crashN   = 40 // records per crash test
	crashPer = 10 // records per checkpoint
)

// recoverAndFinish starts the job again on a fresh pool, as a restarted
// process would, runs it to the end and checks exactly-once.
func (e *env) recoverAndFinish(subtasks int) *job {
	e.t.Helper()
	j, err := e.start(e.srv.Open(e.t, e.db), subtasks, nil, nil)
	if err != nil {
		e.t.Fatalf("recover: %v", err)
	}
	if err := j.run(crashN, crashPer); err != nil {
		e.t.Fatalf("run after recovery: %v", err)
	}
	j.close()
	e.checkExactlyOnce(crashN)
	return j
}

// Crash at every named point of the protocol during checkpoint 2, then
// recover: either as a process crash (every connection of the old process
// closes) or leaving the old connections alive (zombie sessions that still
// hold their branches, as after a network partition).
func TestCrashAtProtocolPoints(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	points := []string{"prepared:mysqlxa/0", "phase1", "decided", "committed:1", "phase2", "pruned"}
	for _, point := range points {
		for _, zombie := range []bool{false, true} {
			name := point + "/crash"
			if zombie {
				name = point + "/zombie"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, srv)
				db := srv.Open(t, e.db)
				j, err := e.start(db, 1, crashOn(point, 2), nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := j.run(crashN, crashPer); err == nil || !strings.Contains(err.Error(), "simulated crash") {
					t.Fatalf("run = %v, want the simulated crash", err)
				}
				if !zombie {
					db.Crash()
				}
				j2 := e.recoverAndFinish(1)
				if zombie && (point == "decided" || point == "phase1" || point == "prepared:mysqlxa/0") && j2.sinks[0].Stats().Killed.Load() == 0 {
					t.Errorf("no stale session killed, but the old one held the branch")
				}
			})
		}
	}
}

// The process dies while the branch of checkpoint 2 is active (a batch was
// sent): the server rolls the branch back.
func TestCrashWhileBranchActive(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	db := srv.Open(t, e.db)
	j, err := e.start(db, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.run(crashPer, crashPer); err != nil {
		t.Fatal(err)
	}
	if err := j.write(crashPer + 7); err != nil { // one batch of 5 sent, 2 buffered
		t.Fatal(err)
	}
	if got := j.sinks[0].Stats().Rows.Load(); got != crashPer+5 {
		t.Fatalf("%d rows sent, want %d", got, crashPer+5)
	}
	db.Crash()
	e.recoverAndFinish(1)
}

// Crash between XA END and XA PREPARE: the branch is idle, not prepared;
// the server rolls it back when the session ends.
func TestCrashAfterXAEnd(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	db := srv.Open(t, e.db)
	j, err := e.start(db, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	mysqlxa.SetHook(j.sinks[0], crashOn("xa-ended", 2))
	if err := j.run(crashN, crashPer); err == nil || !strings.Contains(err.Error(), "simulated crash") {
		t.Fatalf("run = %v, want the simulated crash", err)
	}
	db.Crash()
	e.recoverAndFinish(1)
}

// The reply to XA COMMIT is lost after the server committed: the sink
// resolves it from another session (XAER_NOTA and the marker row exist)
// and the run goes on.
func TestCommitReplyLost(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	db := srv.Open(t, e.db)
	j, err := e.start(db, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.run(crashPer, crashPer); err != nil {
		t.Fatal(err)
	}
	db.CutReply("XA COMMIT")
	if err := j.run(crashN, crashPer); err != nil {
		t.Fatal(err)
	}
	j.close()
	if db.Cuts() != 1 {
		t.Fatalf("%d replies cut, want 1", db.Cuts())
	}
	e.checkExactlyOnce(crashN)
}

// The reply to XA COMMIT is lost during recovery: the coordinator's retry
// finds the branch committed.
func TestCommitReplyLostInRecovery(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	db := srv.Open(t, e.db)
	j, err := e.start(db, 1, crashOn("decided", 2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.run(crashN, crashPer); err == nil {
		t.Fatal("no crash")
	}
	db.Crash()
	db2 := srv.Open(t, e.db)
	db2.CutReply("XA COMMIT")
	j2, err := e.start(db2, 1, nil, nil)
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	if err := j2.run(crashN, crashPer); err != nil {
		t.Fatal(err)
	}
	j2.close()
	if db2.Cuts() != 1 {
		t.Fatalf("%d replies cut, want 1", db2.Cuts())
	}
	e.checkExactlyOnce(crashN)
}

// Two checkpoints are prepared and decided, neither committed (a lost
// notification), when the process dies: recovery commits both, in order.
func TestTwoPendingCheckpoints(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	e.keys = 0 // the second branch must not wait for the first one's row locks
	db := srv.Open(t, e.db)
	j, err := e.start(db, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if err := j.write(j.pos + crashPer); err != nil {
			t.Fatal(err)
		}
		pos, _ := json.Marshal(j.pos)
		if _, err := j.coord.Prepare(ctx, pos, false); err != nil {
			t.Fatal(err)
		}
	}
	if xs, _ := mysqlxa.ListBranches(ctx, e.admin, e.job); len(xs) != 2 {
		t.Fatalf("%d branches prepared, want 2: %v", len(xs), xs)
	}
	if len(e.totals()) != 0 {
		t.Fatal("rows visible before any commit")
	}
	db.Crash()
	e.recoverAndFinish(1)
}

// A prepared branch survives as long as its session: committing it from
// another session waits for the stale session, kills it, then commits.
func TestZombieSessionHoldsBranch(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	db := srv.Open(t, e.db)
	j, err := e.start(db, 1, crashOn("decided", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.run(crashN, crashPer); err == nil {
		t.Fatal("no crash")
	}
	// The old process lives on: its session holds the prepared branch.
	xs, err := mysqlxa.ListBranches(context.Background(), e.admin, e.job)
	if err != nil || len(xs) != 1 {
		t.Fatalf("branches %v, %v", xs, err)
	}
	if err := mysqlxa.CommitBranch(context.Background(), e.admin, xs[0]); err == nil || !strings.Contains(err.Error(), "live session") {
		t.Fatalf("CommitBranch of a held branch = %v, want an error naming the live session", err)
	}
	j2 := e.recoverAndFinish(1)
	if k := j2.sinks[0].Stats().Killed.Load(); k != 1 {
		t.Errorf("%d sessions killed, want 1", k)
	}
	if db.PingContext(context.Background()) != nil {
		t.Log("old pool reconnects after its session was killed")
	}
}

// A decided branch rolled back behind the sink's back is a loud
// committer.ErrDataLoss naming the branch, never a silent success.
func TestBranchRolledBackBehindOurBack(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	db := srv.Open(t, e.db)
	j, err := e.start(db, 1, crashOn("decided", 2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.run(crashN, crashPer); err == nil {
		t.Fatal("no crash")
	}
	db.Crash()
	ctx := context.Background()
	xs, err := mysqlxa.ListBranches(ctx, e.admin, e.job)
	if err != nil || len(xs) != 1 || xs[0].Checkpoint != 2 {
		t.Fatalf("branches %v, %v", xs, err)
	}
	// The server ends the crashed sessions asynchronously: until then the
	// branch is still attached to one of them.
	for try := 0; ; try++ {
		err := mysqlxa.RollbackBranch(ctx, e.admin, xs[0])
		if err == nil {
			break
		}
		if try == 100 {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err = e.start(srv.Open(t, e.db), 1, nil, nil)
	var dl *mysqlxa.DataLossError
	if !errors.Is(err, committer.ErrDataLoss) || !errors.As(err, &dl) || dl.Checkpoint != 2 || dl.Xid != xs[0] {
		t.Fatalf("recover = %v, want a DataLossError for checkpoint 2", err)
	}
	if !strings.Contains(err.Error(), xs[0].String()) {
		t.Errorf("error does not name the xid %s: %v", xs[0], err)
	}
	// Checkpoint 1 stays committed; nothing else appeared.
	e.keys = 7
	got, want := e.totals(), e.want(crashPer)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %+v, want %+v (checkpoint 1 only)", k, got[k], w)
		}
	}
}

// An empty checkpoint still prepares a branch (its marker row), which
// survives a crash and is committed by recovery.
func TestEmptyCheckpointCrash(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	db := srv.Open(t, e.db)
	j, err := e.start(db, 1, crashOn("decided", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.coord.Checkpoint(context.Background(), json.RawMessage(`0`), false); err == nil {
		t.Fatal("no crash")
	}
	if xs, _ := mysqlxa.ListBranches(context.Background(), e.admin, e.job); len(xs) != 1 {
		t.Fatalf("empty checkpoint: %d branches prepared, want 1", len(xs))
	}
	db.Crash()
	e.recoverAndFinish(1)
	var n int
	if err := e.admin.QueryRow("SELECT row_count FROM " + e.db + ".filesink_xa_marker WHERE checkpoint = 1").Scan(&n); err != nil || n != 0 {
		t.Fatalf("marker of the empty checkpoint: rows %d, %v", n, err)
	}
}

// Recovery itself crashes, at each of its points, once or twice in a row
// from the same record.
func TestCrashDuringRecovery(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	for _, points := range [][]string{
		{"recover:committed:1"},
		{"recover:phase2"},
		{"recover:restored"},
		{"recover:swept"},
		{"recover:committed:1", "recover:restored"},
	} {
		t.Run(strings.Join(points, "+"), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, srv)
			db := srv.Open(t, e.db)
			j, err := e.start(db, 1, crashOn("decided", 2), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.run(crashN, crashPer); err == nil {
				t.Fatal("no crash")
			}
			// Leave checkpoint 3's branch active too: it dies with the process.
			db.Crash()
			for _, p := range points {
				db := srv.Open(t, e.db)
				if _, err := e.start(db, 1, crashOn(p, 1), nil); err == nil || !strings.Contains(err.Error(), "simulated crash") {
					t.Fatalf("recovery crashing at %s = %v", p, err)
				}
				db.Crash()
			}
			e.recoverAndFinish(1)
		})
	}
}

// A branch of a checkpoint that was never decided, prepared by a crashed
// run and held by its live session, is rolled back by Restore (after the
// session is killed), and the replayed records are written once.
func TestUndecidedBranchOfZombie(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	e.keys = 0 // the zombie's branch holds its rows' locks until killed
	db := srv.Open(t, e.db)
	j, err := e.start(db, 1, crashOn("phase1", 3), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.run(crashN, crashPer); err == nil {
		t.Fatal("no crash")
	}
	j2 := e.recoverAndFinish(1)
	st := j2.sinks[0].Stats()
	if st.RolledBack.Load() != 1 || st.Killed.Load() != 1 {
		t.Errorf("rolled back %d, killed %d; want 1 and 1", st.RolledBack.Load(), st.Killed.Load())
	}
}

// The CLI helpers: list the job's branches decoded, commit one by hand;
// recovery then finds it committed (XAER_NOTA and its marker row).
func TestAdminListAndCommit(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	db := srv.Open(t, e.db)
	j, err := e.start(db, 1, crashOn("decided", 2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.run(crashN, crashPer); err == nil {
		t.Fatal("no crash")
	}
	db.Crash()
	ctx := context.Background()
	xs, err := mysqlxa.ListBranches(ctx, e.admin, e.job)
	if err != nil || len(xs) != 1 {
		t.Fatalf("branches %v, %v", xs, err)
	}
	x := xs[0]
	if x.Job != e.job || x.Sink != e.table || x.Subtask != 0 || x.Checkpoint != 2 {
		t.Fatalf("decoded branch %+v", x)
	}
	if all, err := mysqlxa.ListBranches(ctx, e.admin, ""); err != nil || len(all) < 1 {
		t.Fatalf("all jobs: %v, %v", all, err)
	}
	parsed, err := mysqlxa.ParseXidString(x.String())
	if err != nil || parsed != x {
		t.Fatalf("ParseXidString(%s) = %+v, %v", x, parsed, err)
	}
	for try := 0; ; try++ { // until the server has dropped the crashed session
		err := mysqlxa.CommitBranch(ctx, e.admin, parsed)
		if err == nil {
			break
		}
		if try == 100 {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := mysqlxa.CommitBranch(ctx, e.admin, parsed); err == nil || !strings.Contains(err.Error(), "no such prepared branch") {
		t.Fatalf("second CommitBranch = %v", err)
	}
	e.recoverAndFinish(1)
}

// The old process's session lives on with an active branch that holds row
// locks (the server keeps a session whose client vanished until
// wait_timeout, as after a network partition): Restore finds it by its
// branch lock and kills it, so the new run's rows on the same keys do not
// wait for those locks until they time out.
func TestZombieActiveBranch(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	db := srv.Open(t, e.db)
	j, err := e.start(db, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.run(crashPer, crashPer); err != nil {
		t.Fatal(err)
	}
	if err := j.write(crashPer + 7); err != nil { // a batch on every key is in the active branch
		t.Fatal(err)
	}
	// The old sink is abandoned, its session alive.
	j2 := e.recoverAndFinish(1)
	if k := j2.sinks[0].Stats().Killed.Load(); k != 1 {
		t.Errorf("%d sessions killed, want 1", k)
	}
}

// Two live instances of one job: the second cannot start a branch of a
// subtask whose branch the first holds.
func TestBranchLockRefusesTwin(t *testing.T) {
	t.Parallel()
	srv := mariadbtest.Shared(t)
	e := newEnv(t, srv)
	db := srv.Open(t, e.db)
	ctx := context.Background()
	a := e.sink(db.DB, e.options())
	b := e.sink(db.DB, e.options())
	defer a.Close()
	defer b.Close()
	for _, s := range []*mysqlxa.Sink{a, b} {
		if err := s.Restore(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := committer.PrepareNow(ctx, a, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, snap.Committables[0]); err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // a batch: a's branch of checkpoint 2 starts
		if err := a.Write(ctx, e.record(i), source.Origin{Name: "a", Num: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := committer.PrepareNow(ctx, b, 1, false); err == nil || !strings.Contains(err.Error(), "run twice") {
		t.Fatalf("twin's Prepare = %v, want the branch lock error", err)
	}
}
