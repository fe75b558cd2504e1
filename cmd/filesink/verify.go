package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/filesink/bulk"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/vfs"
)

const verifySynopsis = `--sink URI [--state DIR] [--deep]

Audits the output from its files and commit manifests (OUT/_filesink/manifests):
every visible file is listed in exactly one manifest with its size and
CRC-32C, no listed file is missing, and the source ranges of all manifests
have no overlap (a duplicate) and, for the generator (whose record ids have
no gaps, unlike line numbers or Kafka offsets), no gap (a loss). --deep also re-reads every file and recounts its records.

A manifest that does not parse, or of a newer version than this filesink
reads, is a violation naming it; the other manifests are audited.

When the checkpoint store is there (--state, default OUT/_filesink), also
checks the output against the retained checkpoint records: every committed
part file is present with its recorded length, no staging file is visible as
output, and no orphaned in-progress file of this sink is left. A record that
cannot be read is a violation naming it; the others are checked (and no
in-progress file is reported as an orphan, since the bad record may
reference it).

While a run holds the state (a local state's lock, an S3 state's lease,
looked at without taking them), verify checks what that run has published
and decided, and prints a "NOTE live run:" line first and a NOTE line for
each thing it has in flight (a file whose manifest is not written yet, a
decided part being committed, an in-progress file newer than its records),
which is no violation. It reads the records and manifests again after it
listed the output, so a checkpoint taken meanwhile is no violation either.

For an iceberg://NAMESPACE.TABLE sink (with --warehouse, and --catalog
as the run has it), checks the table's current snapshot instead: every
live data file is there with the size its manifest entry records, no path
is live twice, and per lane each checkpoint that published data files (a
commit manifest) is in exactly one snapshot of the job, no snapshot holds
a checkpoint that published none, and the table holds no checkpoint the
state did not decide. A checkpoint published but not yet appended (a run
stopped between the two) is a NOTE: the next run appends it.

Prints every violation with the file, manifest or range concerned; exits 1
if there is any, 2 if the output (or the --state given) is not there.`

// verifyArgs are the parsed flags of the verify command.
type verifyArgs struct {
	sink, state, prefix string
	deep, noManifests   bool
	s3                  s3Flags
	iceberg             icebergFlags
}

// parseVerify reads the flags of the verify command.
func parseVerify(args []string, stdout io.Writer) (*verifyArgs, error) {
	a := &verifyArgs{}
	fs := newFlagSet("verify", verifySynopsis, stdout)
	fs.StringVar(&a.sink, "sink", "", "sink `URI` (required): file://OUT, OUT, s3://BUCKET/PREFIX or iceberg://NAMESPACE.TABLE (with --warehouse)")
	fs.StringVar(&a.state, "state", "", "checkpoint store: DIR or s3://BUCKET/PREFIX (default OUT/_filesink; optional)")
	fs.StringVar(&a.prefix, "prefix", "part", "part file name prefix of the sink")
	fs.BoolVar(&a.deep, "deep", false, "re-read every file and recount its records (parses Parquet and Arrow footers, decompresses gzip and zstd)")
	fs.BoolVar(&a.noManifests, "no-manifests", false, "skip the manifest audit (output written before filesink kept manifests)")
	a.s3.register(fs, false)
	a.iceberg.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if a.sink == "" {
		return nil, usageError("verify: --sink is required")
	}
	if strings.HasPrefix(a.sink, "iceberg://") != (a.iceberg.warehouse != "") {
		return nil, usageError("verify: an iceberg:// sink needs --warehouse, and --warehouse applies to one only")
	}
	if isMySQL(a.sink) {
		return nil, usageError("verify: --sink %s: verify checks file and S3 sinks; a MySQL sink's rows commit atomically with their XA branches (see filesink xa list for prepared branches)", redactURI(a.sink))
	}
	if a.state != "" && !isS3(a.state) {
		dir, err := localPath(a.state, "--state")
		if err == nil {
			err = checkPath("--state ", dir, true)
		}
		if err != nil {
			return nil, inCommand("verify", err)
		}
	}
	return a, nil
}

func cmdVerify(ctx context.Context, args []string, stdout io.Writer) error {
	a, err := parseVerify(args, stdout)
	if err != nil {
		return err
	}
	if strings.HasPrefix(a.sink, "iceberg://") {
		return verifyIceberg(ctx, a, stdout)
	}
	t, err := openTarget(ctx, a.sink, &a.s3, slog.New(slog.DiscardHandler), false)
	if err != nil {
		return inCommand("verify", err)
	}
	if t.local != "" {
		if err := checkPath("verify: ", t.local, true); err != nil {
			return err
		}
	}
	stateURI := a.state
	if stateURI == "" {
		stateURI = t.stateURI
	}
	holder, live, err := liveRun(ctx, t, stateURI, &a.s3)
	if err != nil {
		return inCommand("verify", err)
	}
	var inFlight []recovery.Violation
	if live != nil {
		live.Note = func(v recovery.Violation) { inFlight = append(inFlight, v) }
		fmt.Fprintf(stdout, "NOTE live run: state %s is held by a running filesink (%s): what it has published and decided is checked; what it has in flight is noted, not reported as a violation\n", stateURI, holder)
	}
	var vs []recovery.Violation
	var notes []string
	if !a.noManifests {
		au := filesink.Auditor{Output: t.backend, DeadLetter: t.dead, Live: live}
		if a.deep {
			au.Count = func(f *filesink.ManifestFile, r io.Reader) (int64, error) {
				return filesink.CountRecords(f, r, bulk.Counters()...)
			}
		}
		mv, err := au.Audit(ctx)
		if err != nil {
			return err
		}
		vs = append(vs, mv...)
		notes = append(notes, "manifests")
		rebuilt, err := filesink.RebuiltFiles(ctx, t.backend)
		if err != nil {
			return err
		}
		if n := len(rebuilt); n > 0 {
			fmt.Fprintf(stdout, "NOTE rebuilt: %d file(s) were made again from the source because the store lost their staged data (their manifests say so; checked like the others), e.g. %s\n", n, rebuilt[0])
		}
	}
	sv, note, err := verifyState(ctx, t, a.state, a.prefix, a.noManifests, &a.s3, live)
	if err != nil {
		return err
	}
	vs = append(vs, sv...)
	if note != "" {
		notes = append(notes, note)
	}
	for _, v := range inFlight {
		fmt.Fprintln(stdout, "NOTE", v)
	}
	for _, v := range vs {
		fmt.Fprintln(stdout, "VIOLATION", v)
	}
	if len(vs) > 0 {
		return exitError{code: 1, msg: fmt.Sprintf("verify: %d violation(s) in %s", len(vs), a.sink)}
	}
	ok := fmt.Sprintf("OK: %s is consistent with its %s", a.sink, strings.Join(notes, " and "))
	if live != nil {
		ok += fmt.Sprintf(" so far (a live run writes it: %d note(s) on what it has in flight)", len(inFlight))
	}
	fmt.Fprintln(stdout, ok)
	return nil
}

// liveRun returns the run that holds the state at stateURI now, if one
// does, without taking the state: a local directory's lock tested with
// recovery.LockHolder, an S3 state's lease read with Holder (a lease that
// a command such as uploads abort holds is no run). holder names
// it ("host H, pid P, started T"); live reads its records (Note unset). A
// state that is not there has no live run. An error means the state could
// not be looked at.
func liveRun(ctx context.Context, t *target, stateURI string, s3f *s3Flags) (holder string, live *filesink.LiveRun, err error) {
	if isS3(stateURI) {
		store, err := openStore(ctx, stateURI, s3f, t.client, false, nil)
		if err != nil {
			return "", nil, err
		}
		st, ok := store.(*s3sink.Store)
		if !ok {
			return "", nil, nil
		}
		h, err := st.Holder(ctx)
		if err != nil || h == nil || h.Command != "" {
			return "", nil, err // a command holding the state writes no output
		}
		return h.String(), &filesink.LiveRun{Records: retainedRecords(store)}, nil
	}
	dir, err := localPath(stateURI, "--state")
	if err != nil {
		return "", nil, err
	}
	h, err := recovery.LockHolder(ctx, dir)
	if err != nil || h == nil {
		return "", nil, err
	}
	store, err := recovery.OpenDir(ctx, vfs.OS{}, dir, recovery.ReadOnly())
	if err != nil {
		return "", nil, err
	}
	return h.String(), &filesink.LiveRun{Records: retainedRecords(store)}, nil
}

// retainedRecords reads the records of store that can be read (the others
// are reported by verifyState).
func retainedRecords(store recovery.Store) func(context.Context) ([]*recovery.Checkpoint, error) {
	return func(ctx context.Context) ([]*recovery.Checkpoint, error) {
		recs, _, err := readableLive(ctx, store)
		return recs, err
	}
}

// readableLive is recovery.Readable for a store that a live run writes: a
// listing that finds a name that is no record's is made again, up to 5
// times 50 ms apart, before it is reported (an S3 store may list an
// object being written or deleted as a directory for an instant).
func readableLive(ctx context.Context, store recovery.Store) ([]*recovery.Checkpoint, []*recovery.CorruptError, error) {
	for try := 0; ; try++ {
		good, bad, err := recovery.Readable(ctx, store)
		var ce *recovery.CorruptError
		if !errors.As(err, &ce) || try == 5 {
			return good, bad, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// laneRecords returns the newest record of every lane of a group-mode
// job's state (a lane that never decided a checkpoint has none), and how
// many lanes there are.
func laneRecords(ctx context.Context, st *s3sink.Store) ([]*recovery.Checkpoint, int, error) {
	heads, err := s3sink.ListLanes(ctx, st)
	if err != nil {
		return nil, 0, err
	}
	var recs []*recovery.Checkpoint
	for _, h := range heads {
		if h.Checkpoint != nil && len(h.Checkpoint.Participants) > 0 {
			recs = append(recs, h.Checkpoint)
		}
	}
	return recs, len(heads), nil
}

// verifyState checks the output of t against the retained checkpoint
// records at state (default: the sink's), if there are any; note says what
// was checked ("" if nothing). A record that cannot be read is a violation
// naming it, and the others are checked. With live set, the check is of a
// running job (filesink.LiveRun); a group-mode state is checked as if no
// run were live.
func verifyState(ctx context.Context, t *target, state, prefix string, noManifests bool, s3f *s3Flags, live *filesink.LiveRun) ([]recovery.Violation, string, error) {
	stateURI := state
	if stateURI == "" {
		stateURI = t.stateURI
	}
	store, err := openStore(ctx, stateURI, s3f, t.client, false, nil)
	var recs []*recovery.Checkpoint
	var bad []*recovery.CorruptError
	if err == nil {
		if live != nil {
			recs, bad, err = readableLive(ctx, store)
		} else {
			recs, bad, err = recovery.Readable(ctx, store)
		}
	}
	if err == nil && len(recs)+len(bad) == 0 {
		if ls, ok := store.(*s3sink.Store); ok {
			// Group mode: every lane's state holds its newest record.
			var lanes int
			if recs, lanes, err = laneRecords(ctx, ls); err == nil && lanes > 0 {
				chk := filesink.Checker{Backend: t.backend, DeadLetter: t.dead, Prefix: prefix}
				sv, err := recovery.VerifyRecords(ctx, recs, chk)
				if err != nil {
					return nil, "", err
				}
				return sv, fmt.Sprintf("%d lane state(s) in %s", lanes, store.Location()), nil
			}
		}
	}
	var listing *recovery.CorruptError
	switch {
	case errors.As(err, &listing): // a stray name: no record can be listed
		return []recovery.Violation{{Where: listing.File, Problem: fmt.Sprintf("%s: %s; the checkpoint records are not checked (filesink run stops on this state until it is repaired: see the runbook)", listing.Err, listing.Reason)}}, "", nil
	case err == nil && len(recs)+len(bad) > 0:
		var vs []recovery.Violation
		for _, e := range bad {
			vs = append(vs, recovery.Violation{Where: e.File, Problem: fmt.Sprintf("%s: %s; skipped, the other records are checked (filesink run stops on this state until it is repaired: see the runbook)", e.Err, e.Reason)})
		}
		// Without every record, an in-progress file that no record read
		// references may be a skipped record's: no orphan is reported.
		chk := filesink.Checker{Backend: t.backend, DeadLetter: t.dead, Prefix: prefix, Partial: len(bad) > 0, Live: live}
		sv, err := recovery.VerifyRecords(ctx, recs, chk)
		if err != nil {
			return nil, "", err
		}
		return append(vs, sv...), fmt.Sprintf("%d checkpoint record(s) in %s", len(recs), store.Location()), nil
	case err != nil && state != "":
		return nil, "", err
	case noManifests:
		return nil, "", fmt.Errorf("verify: no checkpoint record in %s and --no-manifests: nothing to check against", stateURI)
	}
	return nil, "", nil
}
