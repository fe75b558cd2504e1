package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	s3sink "github.com/filesink/filesink/committer/s3"
)

const uploadsSynopsis = `list|abort --sink s3://BUCKET/PREFIX [--state DIR] [flags]

Shows the incomplete multipart uploads and the tail objects (the bytes of an
open part file after its uploaded parts, kept at each checkpoint under
PREFIX/_filesink-staging/) of an S3 sink's part files (list), or aborts
uploads (abort: --upload-id ID for one, --all for every listed one).

The recovery sweep of "filesink run" aborts orphans by itself: uploads and
tail objects of this sink that no retained checkpoint record references.
Both commands read the job's checkpoint records (--state, default
s3://BUCKET/PREFIX/_filesink; for a job run with --group, the newest record
in each lane's state): list says for each upload and tail object which
checkpoint references it ("referenced by checkpoint 12 (filesink/0, in
progress)"; in group mode "referenced by lane orders/3 checkpoint 12
(filesink/0, pending commit)") or "unreferenced"; abort refuses an upload
that a retained checkpoint references, since aborting it loses that part
file's staged data (the next run then reads its records from the source
again, and fails with a data-loss error if the source no longer has
them), unless --force is given.
When the records cannot tell (the state cannot be read, holds no record,
or a record is corrupt), every upload they do not reference is "unknown"
and taken as referenced. abort --all aborts the unreferenced uploads and
refuses the others.

abort first takes the job's state as a run does (the directory's lock, the
S3 lease; in group mode it checks that no lane has an owner that may be
alive), so that no run opens an upload or decides a checkpoint while it
acts, and refuses (exit 1, naming the holder's host, pid and start) while a
running job holds it: that job's newest uploads are in flight. --force acts
anyway, says beforehand what each referenced upload it aborts loses (its
records and their source ranges), and afterwards which aborted upload the
running job decided meanwhile.

Exit status: 0 done, 1 error or an upload refused, 2 usage error.`

// uploadsArgs are the parsed flags of an uploads command.
type uploadsArgs struct {
	verb, sink, state, prefix, uploadID string
	subtask                             int
	all, force                          bool
	s3                                  s3Flags
}

// parseUploads reads the verb and flags of an uploads command.
func parseUploads(args []string, stdout io.Writer) (*uploadsArgs, error) {
	a := &uploadsArgs{}
	name := "uploads"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		a.verb, args = args[0], args[1:]
		name += " " + a.verb
	}
	fs := newFlagSet(name, uploadsSynopsis, stdout)
	fs.Usage = usageFunc(fs, "uploads", uploadsSynopsis) // the synopsis names the verbs
	fs.StringVar(&a.sink, "sink", "", "sink `URI` (required): s3://BUCKET/PREFIX")
	fs.StringVar(&a.state, "state", "", "the job's checkpoint store `DIR` or s3://BUCKET/PREFIX (default s3://BUCKET/PREFIX/_filesink): tells which uploads its records reference")
	fs.StringVar(&a.prefix, "prefix", "part", "part file name prefix of the sink")
	fs.IntVar(&a.subtask, "subtask", -1, "only this subtask's part files (default: all)")
	fs.StringVar(&a.uploadID, "upload-id", "", "abort: the upload to abort")
	fs.BoolVar(&a.all, "all", false, "abort: every listed upload (those a checkpoint references only with --force)")
	fs.BoolVar(&a.force, "force", false, "abort: abort even an upload that a retained checkpoint references (or may: state unreadable), losing its part file's records")
	a.s3.register(fs, false)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	switch {
	case a.verb != "list" && a.verb != "abort":
		return nil, usageError("uploads: want list or abort (see filesink uploads --help)")
	case !isS3(a.sink):
		return nil, usageError("uploads %s: --sink must be s3://BUCKET/PREFIX", a.verb)
	case a.verb == "list" && (a.uploadID != "" || a.all || a.force):
		return nil, usageError("uploads list: --upload-id, --all and --force apply to abort")
	case a.verb == "abort" && a.all == (a.uploadID != ""):
		return nil, usageError("uploads abort: give exactly one of --upload-id ID or --all")
	}
	return a, nil
}

func cmdUploads(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a, err := parseUploads(args, stdout)
	if err != nil { // flag.ErrHelp after the help text: exit 0
		return err
	}
	t, err := openTarget(ctx, a.sink, &a.s3, slog.New(slog.NewTextHandler(stderr, nil)), false)
	if err != nil {
		return inCommand("uploads "+a.verb, err)
	}
	be := t.backend.(*s3sink.Backend)
	ns := a.prefix + "-"
	if a.subtask >= 0 {
		ns = fmt.Sprintf("%s-%d-", a.prefix, a.subtask)
	}
	stateURI := a.state
	if stateURI == "" {
		stateURI = t.stateURI
	}
	if a.verb == "abort" {
		// Held from before the listing to the last abort: no run can
		// open an upload or decide a checkpoint meanwhile.
		hold, err := holdJob(ctx, "uploads abort", stateURI, "aborting the uploads it writes makes it fail, and an upload that its next checkpoint decides meanwhile loses that part file's records",
			&a.s3, t.client, a.force, stderr)
		if err != nil {
			return err
		}
		defer hold.release()
		ups, err := be.ListUploads(ctx, ns)
		if err != nil {
			return err
		}
		refs := readStagingRefs(ctx, stateURI, &a.s3, t, be)
		aborted, err := a.abort(ctx, be, ups, refs, stdout, stderr)
		if hold.live != "" && len(aborted) > 0 {
			decidedMeanwhile(ctx, stateURI, &a.s3, t, be, refs, aborted, stderr)
		}
		return err
	}
	ups, err := be.ListUploads(ctx, ns)
	if err != nil {
		return err
	}
	refs := readStagingRefs(ctx, stateURI, &a.s3, t, be)
	if !isS3(stateURI) && refs.err == nil && stateInUse(ctx, stateURI) {
		fmt.Fprintf(stderr, "filesink: warning: a filesink run holds %s: its newest uploads are in flight; do not abort them by hand\n", stateURI)
	}
	tails, err := be.ListTails(ctx, ns)
	if err != nil {
		return err
	}
	uploadsList(ups, tails, refs, stdout)
	return nil
}

// decidedMeanwhile reads the checkpoint records of a live job again after
// --force aborted uploads, and says which of them a checkpoint decided
// after the first reading: their part files' records are lost.
func decidedMeanwhile(ctx context.Context, stateURI string, s3f *s3Flags, t *target, be *s3sink.Backend, before *stagingRefs, aborted []s3sink.Upload, stderr io.Writer) {
	after := readStagingRefs(ctx, stateURI, s3f, t, be)
	if after.err != nil {
		fmt.Fprintf(stderr, "filesink: warning: uploads abort: --force: cannot read the checkpoint records again to see whether the running job decided an aborted upload meanwhile: %s\n", oneLine(after.err.Error()))
		return
	}
	for _, u := range aborted {
		if len(before.uploads[u.UploadID]) > 0 || len(after.uploads[u.UploadID]) == 0 {
			continue
		}
		fmt.Fprintf(stderr, "filesink: warning: uploads abort: --force: the running job decided %s upload %s while it was aborted (%s): %s\n",
			u.Key, u.UploadID, refsText(after.uploads[u.UploadID]), after.lossText(after.uploads[u.UploadID]))
	}
}

// uploadsList prints the uploads and tail objects with the checkpoints
// that reference them.
func uploadsList(ups []s3sink.Upload, tails []s3sink.TailObject, refs *stagingRefs, stdout io.Writer) {
	fmt.Fprintln(stdout, refs.summary())
	var n [3]int // referenced, unreferenced, unknown
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if len(ups) > 0 {
		fmt.Fprintln(tw, "KEY\tUPLOAD ID\tINITIATED\tTAILS\tCHECKPOINTS")
	}
	for _, u := range ups {
		s, kind := refs.describe(refs.uploads[u.UploadID])
		n[kind]++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", u.Key, u.UploadID, u.Initiated.Format(time.RFC3339), u.Tails, s)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d upload(s)%s\n", len(ups), countRefs(n))
	n = [3]int{}
	if len(tails) > 0 {
		fmt.Fprintln(tw, "TAIL OBJECT\tCHECKPOINTS")
	}
	for _, tl := range tails {
		s, kind := refs.describe(refs.tails[tl.Key])
		n[kind]++
		fmt.Fprintf(tw, "%s\t%s\n", tl.Key, s)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d tail object(s)%s\n", len(tails), countRefs(n))
}

// countRefs says how many of a listing are referenced, unreferenced and
// unknown ("" for none).
func countRefs(n [3]int) string {
	if n[0]+n[1]+n[2] == 0 {
		return ""
	}
	s := fmt.Sprintf(": %d referenced, %d unreferenced", n[refReferenced], n[refUnreferenced])
	if n[refUnknown] > 0 {
		s += fmt.Sprintf(", %d unknown", n[refUnknown])
	}
	return s
}

// abort aborts the chosen uploads, refusing (without --force) those that a
// retained checkpoint references or may reference.
func (a *uploadsArgs) abort(ctx context.Context, be *s3sink.Backend, ups []s3sink.Upload, refs *stagingRefs, stdout, stderr io.Writer) ([]s3sink.Upload, error) {
	var refused []string
	var done []s3sink.Upload
	found, aborted := false, 0
	for _, u := range ups {
		if !a.all && u.UploadID != a.uploadID {
			continue
		}
		found = true
		why, needed := refs.needs(refs.uploads[u.UploadID])
		if needed && !a.force {
			refused = append(refused, fmt.Sprintf("uploads abort: %s upload %s: %s: aborting it loses that part file's staged data (the next run must read its records from the source again, and fails with a data-loss error if the source no longer has them); not aborted (give --force to abort it anyway)", u.Key, u.UploadID, why))
			continue
		}
		if needed {
			// Said before it is done: what the abort loses.
			fmt.Fprintf(stderr, "filesink: warning: --force: aborting %s upload %s: %s: %s; the next run of this job rebuilds that part file from the source, or fails with a data-loss error if the source no longer has those records\n",
				u.Key, u.UploadID, why, refs.lossText(refs.uploads[u.UploadID]))
		}
		if err := be.AbortUpload(ctx, u.Key, u.UploadID); err != nil {
			return done, err
		}
		fmt.Fprintf(stdout, "aborted %s %s\n", u.Key, u.UploadID)
		aborted++
		done = append(done, u)
	}
	switch {
	case !found && !a.all:
		return done, fmt.Errorf("uploads abort: no upload %s of this sink under %s", a.uploadID, a.sink)
	case len(refused) == 1 && aborted == 0:
		return done, exitError{code: 1, msg: refused[0]}
	case len(refused) > 0:
		for _, r := range refused {
			fmt.Fprintln(stderr, "filesink:", r)
		}
		return done, exitError{code: 1, msg: fmt.Sprintf("uploads abort: aborted %d upload(s), refused %d that checkpoints may need", aborted, len(refused))}
	}
	return done, nil
}
