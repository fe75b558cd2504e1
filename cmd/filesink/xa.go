package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/filesink/filesink/committer/mysqlxa"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/vfs"
)

const xaSynopsis = `list|commit|rollback --sink 'mysql://USER:PASS@tcp(HOST:PORT)/DB' [flags]

Shows the prepared XA branches of filesink MySQL sinks on the server (list),
or commits or rolls back one of them by its xid (commit --xid GTRID/BQUAL,
rollback --xid GTRID/BQUAL).

filesink run resolves its branches by itself when it runs again on the same
--state: it commits the branches its checkpoint records decided and rolls
back the others. Resolve a branch by hand only when that run will not
happen soon and the branch holds row locks or data you need: commit only a
decided branch, roll back only an undecided one. With --state, list says
which is which (DECIDED yes: a checkpoint record references the branch; no:
none does) and commit and rollback refuse the wrong decision unless --force
is given.

commit needs --state: only the checkpoint records tell whether a branch was
decided, and committing one that was not makes the job apply its records a
second time. --without-state commits anyway (the job and its state are
gone, and you know the branch was decided). rollback without --state warns
that a decided branch's records would be lost.

commit and rollback with --state first take the state as a run does (the
directory's lock, the S3 lease), so no run starts while they act, and refuse
(exit 1, naming the holder's host, pid and start) while a running job holds
it, unless --force.

A branch is shown with its job, sink (the table by default), subtask,
checkpoint and session; its xid is GTRID/BQUAL as list prints it.

Exit status: 0 done, 1 error or refused, 2 usage error (commit without --state).`

// xaArgs are the parsed flags of an xa command.
type xaArgs struct {
	verb, sink, job, state string
	force, withoutState    bool
	target                 mysqlxa.Xid // commit, rollback: the branch
	s3                     s3Flags
}

// parseXA reads the verb and flags of an xa command; --help (with or
// without a verb) prints them.
func parseXA(args []string, stdout io.Writer) (*xaArgs, error) {
	a := &xaArgs{}
	name := "xa"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		a.verb, args = args[0], args[1:]
		name += " " + a.verb
	}
	verb := a.verb
	fs := newFlagSet(name, xaSynopsis, stdout)
	fs.Usage = usageFunc(fs, "xa", xaSynopsis) // the synopsis names the verbs
	fs.StringVar(&a.sink, "sink", "", "sink `URI` (required): mysql://USER:PASS@tcp(HOST:PORT)/DB; the password may come from "+mysqlPasswordEnv+" instead")
	fs.StringVar(&a.job, "job", "", "only branches of this job `ID` (default: the job of --state; without either, every filesink job's)")
	fs.StringVar(&a.state, "state", "", "the job's checkpoint store `DIR` or s3://BUCKET/PREFIX: picks its job and tells decided branches from undecided ones")
	xid := fs.String("xid", "", "commit, rollback: the branch, `GTRID/BQUAL` as list prints it")
	fs.BoolVar(&a.force, "force", false, "commit, rollback: act even if --state says the branch needs the other decision, or a running job holds --state")
	fs.BoolVar(&a.withoutState, "without-state", false, "commit: commit without --state, so without knowing whether a checkpoint decided the branch (if none did, the job applies its records a second time)")
	a.s3.register(fs, false)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if verb != "list" && verb != "commit" && verb != "rollback" {
		return nil, usageError("xa: want list, commit or rollback (see filesink xa --help)")
	}
	if a.sink == "" {
		return nil, usageError("xa %s: --sink is required", verb)
	}
	if !isMySQL(a.sink) {
		return nil, usageError("xa %s: --sink must be mysql://USER:PASS@tcp(HOST:PORT)/DB, not %s", verb, redactURI(a.sink))
	}
	if verb == "list" {
		if *xid != "" || a.force || a.withoutState {
			return nil, usageError("xa list: --xid, --force and --without-state apply to commit and rollback")
		}
		return a, nil
	}
	if *xid == "" {
		return nil, usageError("xa %s: --xid GTRID/BQUAL is required (see filesink xa list)", verb)
	}
	x, err := mysqlxa.ParseXidString(*xid)
	if err != nil {
		return nil, usageError("xa %s: --xid: %v", verb, err)
	}
	a.target = x
	switch {
	case a.withoutState && a.state != "":
		return nil, usageError("xa %s: --without-state and --state contradict each other", verb)
	case verb == "commit" && a.state == "" && !a.withoutState:
		return nil, usageError("xa commit: --state is required: only the job's checkpoint records tell whether a checkpoint decided the branch " +
			"(committing one that none decided makes the job apply its records twice, as it reads them again); give the job's --state, " +
			"or --without-state if the job and its state are gone and you know the branch was decided")
	}
	return a, nil
}

func cmdXA(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a, err := parseXA(args, stdout)
	if err != nil { // flag.ErrHelp after the help text: exit 0
		return err
	}
	jobID := a.job
	var decided map[string]bool // xid -> referenced by a retained record
	if a.state != "" && a.verb != "list" {
		// Held until the branch is resolved: no run decides a checkpoint
		// or resolves the branch meanwhile.
		hold, err := holdJob(ctx, "xa "+a.verb, a.state, "it resolves its own branches, and a branch it prepares or decides meanwhile must not be resolved by hand",
			&a.s3, nil, a.force, stderr)
		if err != nil {
			return err
		}
		defer hold.release()
	}
	if a.state != "" {
		id, err := stateJob(ctx, a.state, &a.s3)
		if err != nil {
			return inCommand("xa "+a.verb, err)
		}
		if jobID != "" && jobID != id {
			return usageError("xa %s: --job %q is not the job of --state %s (%q)", a.verb, jobID, a.state, id)
		}
		jobID = id
		if decided, err = decidedBranches(ctx, a.state, &a.s3); err != nil {
			return err
		}
		if a.verb == "list" && !isS3(a.state) && stateInUse(ctx, a.state) {
			fmt.Fprintf(stderr, "filesink: warning: a filesink run holds %s: its branches are in flight; do not resolve them by hand\n", a.state)
		}
	}
	if a.verb == "rollback" && a.state == "" {
		fmt.Fprintf(stderr, "filesink: warning: xa rollback without --state: whether a checkpoint decided branch %s is unknown; if one did, its records are lost (filesink run would have committed it)\n", a.target)
	}
	if a.verb != "list" && jobID != "" && a.target.Job != jobID {
		return usageError("xa %s: branch %s belongs to job %q, not %q", a.verb, a.target, a.target.Job, jobID)
	}
	warnPasswords(stderr, "xa "+a.verb, map[string]bool{"sink": true}, map[string]string{"sink": a.sink})
	db, err := openMySQL(ctx, a.sink, "--sink")
	if err != nil {
		return err
	}
	defer db.Close()
	if a.verb == "list" {
		return xaList(ctx, db, jobID, decided, stdout)
	}
	return a.resolve(ctx, db, decided, stdout)
}

// xaList prints the prepared branches of job (every filesink job's if "").
func xaList(ctx context.Context, db *sql.DB, jobID string, decided map[string]bool, stdout io.Writer) error {
	xs, err := mysqlxa.ListBranches(ctx, db, jobID)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	head := "JOB\tSINK\tSUBTASK\tCHECKPOINT\tSESSION"
	if decided != nil {
		head += "\tDECIDED"
	}
	fmt.Fprintln(tw, head+"\tXID")
	for _, x := range xs {
		line := fmt.Sprintf("%s\t%s\t%d\t%d\t%d", x.Job, x.Sink, x.Subtask, x.Checkpoint, x.ConnID)
		if decided != nil {
			line += "\t" + yesNo(decided[x.String()])
		}
		fmt.Fprintln(tw, line+"\t"+x.String())
	}
	tw.Flush()
	scope := "every filesink job"
	if jobID != "" {
		scope = "job " + jobID
	}
	fmt.Fprintf(stdout, "%d prepared branch(es) of %s\n", len(xs), scope)
	return nil
}

// resolve commits or rolls back the target branch, refusing (without
// --force) the decision the checkpoint records contradict.
func (a *xaArgs) resolve(ctx context.Context, db *sql.DB, decided map[string]bool, stdout io.Writer) error {
	verb, target := a.verb, a.target
	if decided != nil && !a.force {
		switch d := decided[target.String()]; {
		case verb == "commit" && !d:
			return exitError{code: 1, msg: fmt.Sprintf("xa commit: no checkpoint record in %s references branch %s: it was never decided, and committing it would publish records that the job reads again; roll it back (or give --force)", a.state, target)}
		case verb == "rollback" && d:
			return exitError{code: 1, msg: fmt.Sprintf("xa rollback: checkpoint %d in %s decided branch %s: rolling it back loses its records (filesink run commits it); commit it (or give --force)", target.Checkpoint, a.state, target)}
		}
	}
	var err error
	if verb == "commit" {
		err = mysqlxa.CommitBranch(ctx, db, target)
	} else {
		err = mysqlxa.RollbackBranch(ctx, db, target)
	}
	if err != nil {
		return err
	}
	past := map[string]string{"commit": "committed", "rollback": "rolled back"}[verb]
	fmt.Fprintf(stdout, "%s %s (job %s, sink %s, subtask %d, checkpoint %d)\n", past, target, target.Job, target.Sink, target.Subtask, target.Checkpoint)
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// stateJob returns the job id of the MySQL sink whose checkpoints are at
// stateURI, without writing anything: the one kept in the store, else the
// one derived from the location (see jobID).
func stateJob(ctx context.Context, stateURI string, s3f *s3Flags) (string, error) {
	store, err := openStore(ctx, stateURI, s3f, nil, false, nil)
	if err != nil {
		return "", err
	}
	if id, err := store.JobID(ctx); err != nil || id != "" {
		return id, err
	}
	return deriveStateJob(stateURI)
}

// stateInUse reports whether a filesink process holds the state directory.
func stateInUse(ctx context.Context, dir string) bool {
	s, err := recovery.OpenDir(ctx, vfs.OS{}, dir)
	if err != nil {
		return true
	}
	s.Close()
	return false
}

// decidedBranches returns the xids (GTRID/BQUAL) of the MySQL branches
// that the retained checkpoint records at stateURI reference.
func decidedBranches(ctx context.Context, stateURI string, s3f *s3Flags) (map[string]bool, error) {
	store, err := openStore(ctx, stateURI, s3f, nil, false, nil)
	if err != nil {
		return nil, err
	}
	recs, err := recovery.Retained(ctx, store)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, r := range recs {
		for _, p := range r.Participants {
			if !strings.HasPrefix(p.Name, "mysqlxa/") {
				continue
			}
			for _, pc := range p.Pending {
				var c struct {
					Gtrid string `json:"gtrid"`
					Bqual string `json:"bqual"`
				}
				if err := json.Unmarshal(pc.Data, &c); err == nil && c.Gtrid != "" {
					out[c.Gtrid+"/"+c.Bqual] = true
				}
			}
		}
	}
	return out, nil
}
