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

const uploadsSynopsis = `list|abort --sink s3://BUCKET/PREFIX [flags]

Shows the incomplete multipart uploads of an S3 sink's part files (list), or
aborts them (abort). The recovery sweep of "filesink run" aborts orphans by
itself: uploads of this sink that no retained checkpoint references. Abort by
hand only what no checkpoint needs: aborting a referenced upload loses that
part file's records (its resume or commit then fails with a data-loss error).
abort takes --upload-id ID (one upload) or --all (every listed upload).`

// uploadsArgs are the parsed flags of an uploads command.
type uploadsArgs struct {
	verb, sink, prefix, uploadID string
	subtask                      int
	all                          bool
	s3                           s3Flags
}

// parseUploads reads the verb and flags of an uploads command; --help
// (with or without a verb) prints them.
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
	fs.StringVar(&a.prefix, "prefix", "part", "part file name prefix of the sink")
	fs.IntVar(&a.subtask, "subtask", -1, "only this subtask's part files (default: all)")
	fs.StringVar(&a.uploadID, "upload-id", "", "abort: the upload to abort")
	fs.BoolVar(&a.all, "all", false, "abort: every listed upload")
	a.s3.register(fs, false)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	switch {
	case a.verb != "list" && a.verb != "abort":
		return nil, usageError("uploads: want list or abort (see filesink uploads --help)")
	case !isS3(a.sink):
		return nil, usageError("uploads %s: --sink must be s3://BUCKET/PREFIX", a.verb)
	case a.verb == "abort" && a.all == (a.uploadID != ""):
		return nil, usageError("uploads abort: give exactly one of --upload-id ID or --all")
	case a.verb == "list" && (a.all || a.uploadID != ""):
		return nil, usageError("uploads list: --upload-id and --all apply to abort")
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
	if a.verb == "list" {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tUPLOAD ID\tINITIATED\tTAILS")
		for _, u := range ups {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", u.Key, u.UploadID, u.Initiated.Format(time.RFC3339), u.Tails)
		}
		tw.Flush()
		fmt.Fprintf(stdout, "%d upload(s)\n", len(ups))
		return nil
	}
	n := 0
	for _, u := range ups {
		if !a.all && u.UploadID != a.uploadID {
			continue
		}
		if err := be.AbortUpload(ctx, u.Key, u.UploadID); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "aborted %s %s\n", u.Key, u.UploadID)
		n++
	}
	if n == 0 && !a.all {
		return fmt.Errorf("uploads abort: no upload %s of this sink under %s", a.uploadID, a.sink)
	}
	return nil
}
