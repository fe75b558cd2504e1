package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	s3sink "github.com/filesink/filesink/committer/s3"
)

func cmdUploads(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const synopsis = `list|abort --sink s3://BUCKET/PREFIX [flags]

Shows the incomplete multipart uploads of an S3 sink's part files (list), or
aborts them (abort). The recovery sweep of "filesink run" aborts orphans by
itself: uploads of this sink that no retained checkpoint references. Abort by
hand only what no checkpoint needs: aborting a referenced upload loses that
part file's records (its resume or commit then fails with a data-loss error).
abort takes --upload-id ID (one upload) or --all (every listed upload).`
	if len(args) == 0 || (args[0] != "list" && args[0] != "abort") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprintf(stderr, "Usage: filesink uploads %s\n", synopsis)
			return nil
		}
		return usageError("uploads: want list or abort (see filesink uploads --help)")
	}
	verb := args[0]
	fs := newFlagSet("uploads "+verb, synopsis, stderr)
	sink := fs.String("sink", "", "sink `URI` (required): s3://BUCKET/PREFIX")
	prefix := fs.String("prefix", "part", "part file name prefix of the sink")
	subtask := fs.Int("subtask", -1, "only this subtask's part files (default: all)")
	uploadID := fs.String("upload-id", "", "abort: the upload to abort")
	all := fs.Bool("all", false, "abort: every listed upload")
	var s3f s3Flags
	s3f.register(fs, false)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if !isS3(*sink) {
		return usageError("uploads: --sink must be s3://BUCKET/PREFIX")
	}
	t, err := openTarget(ctx, *sink, &s3f, slog.New(slog.NewTextHandler(stderr, nil)), false)
	if err != nil {
		return err
	}
	be := t.backend.(*s3sink.Backend)
	ns := *prefix + "-"
	if *subtask >= 0 {
		ns = fmt.Sprintf("%s-%d-", *prefix, *subtask)
	}
	ups, err := be.ListUploads(ctx, ns)
	if err != nil {
		return err
	}
	if verb == "list" {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tUPLOAD ID\tINITIATED\tTAILS")
		for _, u := range ups {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", u.Key, u.UploadID, u.Initiated.Format(time.RFC3339), u.Tails)
		}
		tw.Flush()
		fmt.Fprintf(stdout, "%d upload(s)\n", len(ups))
		return nil
	}
	if *all == (*uploadID != "") {
		return usageError("uploads abort: give exactly one of --upload-id ID or --all")
	}
	n := 0
	for _, u := range ups {
		if !*all && u.UploadID != *uploadID {
			continue
		}
		if err := be.AbortUpload(ctx, u.Key, u.UploadID); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "aborted %s %s\n", u.Key, u.UploadID)
		n++
	}
	if n == 0 && !*all {
		return fmt.Errorf("uploads abort: no upload %s of this sink under %s", *uploadID, *sink)
	}
	return nil
}
