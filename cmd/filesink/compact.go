package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	icecommit "github.com/filesink/filesink/committer/iceberg"
	"github.com/filesink/filesink/filesink"
)

const compactSynopsis = `--sink iceberg://NAMESPACE.TABLE --warehouse LOCATION [--catalog URI] [--target-size SIZE] [flags]

Rewrites the small data files of an Iceberg table (each checkpoint of a job
appends its own) into files of about --target-size, in one replace snapshot;
the rows do not change. A data file below 3/4 of the target size is
rewritten when its partition has at least 5 of them.

Safe while a job appends to the table: a commit that loses to an append is
tried again on the new head without rewriting, the appended files stay, and
the job's checkpoints stay deduplicated. A compaction that dies leaves the
table as it was: the files it wrote, recorded under
TABLE/_filesink/compact/, are deleted by the next compaction that commits
(a file any snapshot references never is). The replaced files stay, as
older snapshots reference them, until snapshot expiry removes them.

Prints one line: the table's data files and bytes before and after, and the
replace snapshot. Exit status: 0 done (also with nothing to do), 1 error,
2 usage error.`

// compactArgs are the parsed flags of the compact command.
type compactArgs struct {
	sink, targetSize string
	target           int64
	iceberg          icebergFlags
	s3               s3Flags
}

// parseCompact reads the flags of the compact command.
func parseCompact(args []string, stdout io.Writer) (*compactArgs, error) {
	a := &compactArgs{}
	fs := newFlagSet("compact", compactSynopsis, stdout)
	fs.StringVar(&a.sink, "sink", "", "the table `URI`, iceberg://NAMESPACE.TABLE (required)")
	fs.StringVar(&a.targetSize, "target-size", "128MiB", "the `SIZE` of the data files written (e.g. 512MiB)")
	a.iceberg.register(fs)
	a.s3.register(fs, false)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	switch {
	case a.sink == "":
		return nil, usageError("compact: --sink is required")
	case !strings.HasPrefix(a.sink, "iceberg://"):
		return nil, usageError("compact: --sink %s: compact rewrites Iceberg tables; give iceberg://NAMESPACE.TABLE", redactURI(a.sink))
	case a.iceberg.warehouse == "":
		return nil, usageError("compact: --warehouse is required")
	}
	if _, err := icebergIdent(a.sink); err != nil {
		return nil, usageError("compact: --sink %s: want iceberg://NAMESPACE.TABLE", a.sink)
	}
	n, err := filesink.ParseSize(a.targetSize)
	if err != nil || n <= 0 {
		return nil, usageError("compact: --target-size %q: want a positive size such as 128MiB", a.targetSize)
	}
	a.target = n
	return a, nil
}

// cmdCompact runs the compact command; a signal on sig stops it as a
// crash would (the table as it was, the files written left to the next
// compaction).
func cmdCompact(ctx context.Context, args []string, stdout io.Writer, sig <-chan os.Signal) error {
	a, err := parseCompact(args, stdout)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sig:
			cancel()
		case <-ctx.Done():
		}
	}()
	ident, _ := icebergIdent(a.sink)
	if err := embeddedCatalogThere("compact", &a.iceberg); err != nil {
		return err
	}
	cat, err := openIcebergCatalog(ctx, "compact", &a.iceberg, &a.s3)
	if err != nil {
		return err
	}
	defer cat.Close()
	res, err := icecommit.Compact(ctx, cat, ident, icecommit.CompactOptions{TargetSize: a.target})
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	fmt.Fprintln(stdout, compactLine(strings.Join(ident, "."), a.target, res))
	return nil
}

// compactLine is the one line compact prints.
func compactLine(table string, target int64, res icecommit.CompactResult) string {
	var b strings.Builder
	if res.SnapshotID == 0 {
		fmt.Fprintf(&b, "compact: %s: %d data files, %s: nothing to compact (no partition has enough data files below %s)",
			table, res.FilesBefore, sizeText(res.BytesBefore), sizeText(target*3/4))
	} else {
		fmt.Fprintf(&b, "compact: %s: %d data files, %s -> %d data files, %s (%d replaced by %d); replace snapshot %d, run %s, %d commit attempt(s); %d orphan file(s) of unfinished compactions deleted",
			table, res.FilesBefore, sizeText(res.BytesBefore), res.FilesAfter, sizeText(res.BytesAfter), res.Removed, res.Added, res.SnapshotID, res.Run, res.Attempts, res.Swept)
	}
	if res.Pending > 0 {
		fmt.Fprintf(&b, "; %d file(s) of unfinished compactions left for the next compaction that commits", res.Pending)
	}
	return b.String()
}

// sizeText writes n bytes in KiB, MiB or GiB.
func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
}
