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
file's records (the next run then fails with a data-loss error), unless
--force is given.
When the records cannot tell (the state cannot be read, holds no record,
or a record is corrupt), every upload they do not reference is "unknown"
and taken as referenced. abort --all aborts the unreferenced uploads and
refuses the others.

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
	ups, err := be.ListUploads(ctx, ns)
	if err != nil {
		return err
	}
	stateURI := a.state
	if stateURI == "" {
		stateURI = t.stateURI
	}
	refs := readStagingRefs(ctx, stateURI, &a.s3, t, be)
	if !isS3(stateURI) && refs.err == nil && stateInUse(ctx, stateURI) {
		fmt.Fprintf(stderr, "filesink: warning: a filesink run holds %s: its newest uploads are in flight; do not abort them by hand\n", stateURI)
	}
	if a.verb == "list" {
		tails, err := be.ListTails(ctx, ns)
		if err != nil {
			return err
		}
		uploadsList(ups, tails, refs, stdout)
		return nil
	}
	return a.abort(ctx, be, ups, refs, stdout, stderr)
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
func (a *uploadsArgs) abort(ctx context.Context, be *s3sink.Backend, ups []s3sink.Upload, refs *stagingRefs, stdout, stderr io.Writer) error {
	var refused []string
	found, aborted := false, 0
	for _, u := range ups {
		if !a.all && u.UploadID != a.uploadID {
			continue
		}
		found = true
		why, needed := refs.needs(refs.uploads[u.UploadID])
		if needed && !a.force {
			refused = append(refused, fmt.Sprintf("uploads abort: %s upload %s: %s: aborting it loses that part file's records (the next run fails with a data-loss error); not aborted (give --force to abort it anyway)", u.Key, u.UploadID, why))
			continue
		}
		if err := be.AbortUpload(ctx, u.Key, u.UploadID); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "aborted %s %s\n", u.Key, u.UploadID)
		aborted++
		if needed {
			fmt.Fprintf(stderr, "filesink: warning: --force: aborted %s upload %s: %s: the next run of this job fails with a data-loss error for that part file\n", u.Key, u.UploadID, why)
		}
	}
	switch {
	case !found && !a.all:
		return fmt.Errorf("uploads abort: no upload %s of this sink under %s", a.uploadID, a.sink)
	case len(refused) == 1 && aborted == 0:
		return exitError{code: 1, msg: refused[0]}
	case len(refused) > 0:
		for _, r := range refused {
			fmt.Fprintln(stderr, "filesink:", r)
		}
		return exitError{code: 1, msg: fmt.Sprintf("uploads abort: aborted %d upload(s), refused %d that checkpoints may need", aborted, len(refused))}
	}
	return nil
}
