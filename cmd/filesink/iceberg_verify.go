package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	icecommit "github.com/filesink/filesink/committer/iceberg"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/recovery"
)

// openIcebergCatalog opens the --catalog of an iceberg:// sink for its
// --warehouse, with the S3 flags' endpoint for an s3:// one. cmd names
// the command for messages.
func openIcebergCatalog(ctx context.Context, cmd string, f *icebergFlags, s3f *s3Flags) (*icecommit.Catalog, error) {
	props, err := s3f.icebergProps(f.warehouse)
	if err != nil {
		return nil, err
	}
	cat, err := icecommit.OpenCatalog(ctx, f.catalog, f.warehouse, props)
	if err != nil {
		return nil, inCommand(cmd, err)
	}
	return cat, nil
}

// openIcebergTable opens the catalog of an existing iceberg:// sink and
// loads its table; it makes nothing (a local warehouse without the
// embedded catalog, when no --catalog is given, is refused rather than
// given an empty one). The caller closes the catalog.
func openIcebergTable(ctx context.Context, cmd, sink string, f *icebergFlags, s3f *s3Flags) (*icecommit.Catalog, *table.Table, error) {
	ident, err := icebergIdent(sink)
	if err != nil {
		return nil, nil, err
	}
	if err := embeddedCatalogThere(cmd, f); err != nil {
		return nil, nil, err
	}
	cat, err := openIcebergCatalog(ctx, cmd, f, s3f)
	if err != nil {
		return nil, nil, err
	}
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		cat.Close()
		if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
			return nil, nil, exitError{code: 2, msg: fmt.Sprintf("%s: table %s is not in %s", cmd, strings.Join(ident, "."), cat.Desc)}
		}
		return nil, nil, inCommand(cmd, fmt.Errorf("iceberg: loading table %s: %w", strings.Join(ident, "."), err))
	}
	return cat, tbl, nil
}

// embeddedCatalogThere refuses a local warehouse without the embedded
// catalog when no --catalog is given: opening it would make an empty one
// where a mistyped path points.
func embeddedCatalogThere(cmd string, f *icebergFlags) error {
	wh := f.warehouse
	if f.catalog != "" || (strings.Contains(wh, "://") && !strings.HasPrefix(wh, "file://")) {
		return nil
	}
	db := filepath.Join(strings.TrimPrefix(wh, "file://"), icecommit.EmbeddedCatalogFile)
	if _, err := os.Stat(db); errors.Is(err, iofs.ErrNotExist) {
		return usageError("%s: --warehouse %s: no embedded catalog %s there; give the warehouse the job wrote to, or its --catalog", cmd, wh, db)
	}
	return nil
}

// tableSink is the file sink output of a table location: a local path for
// file://, the s3:// location as it is.
func tableSink(tbl *table.Table) (string, error) {
	loc := strings.TrimSuffix(tbl.Location(), "/")
	if p, ok := strings.CutPrefix(loc, "file://"); ok {
		return p, nil
	}
	if isS3(loc) {
		return loc, nil
	}
	return "", fmt.Errorf("iceberg: table %s is at %s: filesink writes tables on a local disk or S3", strings.Join(tbl.Identifier(), "."), loc)
}

// tableTarget opens the table location as a file sink output (its data
// files, manifests and default state).
func tableTarget(ctx context.Context, tbl *table.Table, s3f *s3Flags) (*target, error) {
	loc, err := tableSink(tbl)
	if err != nil {
		return nil, err
	}
	return openTarget(ctx, loc, s3f, slog.New(slog.DiscardHandler), false)
}

// stateJobID returns the job id a state keeps, else the one its location
// implies (what run uses).
func stateJobID(ctx context.Context, store recovery.Store, stateURI string) (string, error) {
	if id, err := store.JobID(ctx); err != nil || id != "" {
		return id, err
	}
	return deriveStateJob(stateURI)
}

// manifestLane is the lane of a commit manifest's writer name:
// PREFIX-N (subtask N) is lane filesink/N (filesink.ParticipantName), and
// PREFIX-TOPIC.PARTITION (a group lane) is TOPIC/PARTITION.
func manifestLane(writer string) string {
	_, rest, ok := strings.Cut(writer, "-")
	if !ok {
		return writer
	}
	if n, err := strconv.Atoi(rest); err == nil {
		return filesink.ParticipantName(n)
	}
	if i := strings.LastIndex(rest, "."); i > 0 {
		return rest[:i] + "/" + rest[i+1:]
	}
	return rest
}

// verifyIceberg audits an iceberg:// sink: the table's live data files
// (present, with their recorded size, no path twice), and per lane the
// checkpoints the snapshots hold against the commit manifests and the
// state: each checkpoint that published files is in one snapshot, none
// is in a snapshot without having published files, and the table holds
// no checkpoint the state did not decide.
func verifyIceberg(ctx context.Context, a *verifyArgs, stdout io.Writer) error {
	cat, tbl, err := openIcebergTable(ctx, "verify", a.sink, &a.iceberg, &a.s3)
	if err != nil {
		return err
	}
	defer cat.Close()
	t, err := tableTarget(ctx, tbl, &a.s3)
	if err != nil {
		return inCommand("verify", err)
	}
	stateURI := a.state
	if stateURI == "" {
		stateURI = t.stateURI
	}
	store, err := openStore(ctx, stateURI, &a.s3, t.client, false, nil)
	if err != nil {
		return inCommand("verify", err)
	}
	job, err := stateJobID(ctx, store, stateURI)
	if err != nil {
		return inCommand("verify", err)
	}
	in, err := icecommit.Inspect(ctx, tbl, job)
	if err != nil {
		return inCommand("verify", err)
	}
	manifests, err := filesink.ReadManifests(ctx, t.backend)
	if err != nil {
		return inCommand("verify", err)
	}
	last, err := recovery.Latest(ctx, store)
	if err != nil {
		return inCommand("verify", err)
	}
	vs, notes := icebergLanes(in, manifests, last)
	vs = append(in.Violations, vs...)
	for _, n := range notes {
		fmt.Fprintln(stdout, "NOTE", n)
	}
	for _, v := range vs {
		fmt.Fprintln(stdout, "VIOLATION", v)
	}
	if len(vs) > 0 {
		return exitError{code: 1, msg: fmt.Sprintf("verify: %d violation(s) in %s", len(vs), a.sink)}
	}
	fmt.Fprintf(stdout, "OK: %s (job %s) is consistent: %d live data file(s), %d lane(s) whose snapshots match their commit manifests and state\n",
		a.sink, job, len(in.Files), len(in.Committed))
	return nil
}

// icebergLanes compares the job's lane checkpoints in the table with the
// commit manifests (the checkpoints that published data files) and the
// newest decided checkpoint (nil: none, or a group's lanes).
func icebergLanes(in *icecommit.Inspection, manifests []*filesink.Manifest, last *recovery.Checkpoint) (vs, notes []string) {
	published := map[string][]uint64{}
	for _, m := range manifests {
		for _, f := range m.Files {
			if !f.DeadLetter {
				lane := manifestLane(m.Writer)
				published[lane] = append(published[lane], m.Checkpoint)
				break
			}
		}
	}
	for lane, cps := range in.Lanes {
		for _, cp := range cps {
			if !slices.Contains(published[lane], cp) {
				vs = append(vs, fmt.Sprintf("a snapshot holds checkpoint %d of lane %s, which published no data file (no commit manifest)", cp, lane))
			}
		}
		if last != nil && in.Committed[lane] > last.ID {
			vs = append(vs, fmt.Sprintf("the table holds checkpoint %d of lane %s, the state's newest decided checkpoint is %d: the state is not this table's", in.Committed[lane], lane, last.ID))
		}
	}
	for lane, cps := range published {
		have := in.Lanes[lane]
		for _, cp := range cps {
			switch {
			case slices.Contains(have, cp):
			case cp > in.Committed[lane]:
				notes = append(notes, fmt.Sprintf("checkpoint %d of lane %s is published but not yet in the table: the next run (or the live one) appends it", cp, lane))
			case len(have) == 0 || cp < have[0]:
				// Its snapshot was expired.
			default:
				vs = append(vs, fmt.Sprintf("checkpoint %d of lane %s published data files, but no snapshot holds it", cp, lane))
			}
		}
	}
	slices.Sort(vs)
	slices.Sort(notes)
	return vs, notes
}

// icebergCommitted returns the lines of `state --sink iceberg://...`: per
// lane of the job, the newest checkpoint the table holds; and the table's
// default state location.
func icebergCommitted(ctx context.Context, sink string, f *icebergFlags, s3f *s3Flags) (string, string, error) {
	if !strings.HasPrefix(sink, "iceberg://") || f.warehouse == "" {
		return "", "", usageError("state: --sink takes an iceberg://NAMESPACE.TABLE sink, with its --warehouse")
	}
	cat, tbl, err := openIcebergTable(ctx, "state", sink, f, s3f)
	if err != nil {
		return "", "", err
	}
	defer cat.Close()
	t, err := tableTarget(ctx, tbl, s3f)
	if err != nil {
		return "", "", inCommand("state", err)
	}
	store, err := openStore(ctx, t.stateURI, s3f, t.client, false, nil)
	if err != nil {
		return "", "", inCommand("state", err)
	}
	job, err := stateJobID(ctx, store, t.stateURI)
	if err != nil {
		return "", "", inCommand("state", err)
	}
	committed, err := icecommit.Committed(tbl, job)
	if err != nil {
		return "", "", inCommand("state", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "table %s (job %s): %d lane(s) committed\n", strings.TrimPrefix(sink, "iceberg://"), job, len(committed))
	lanes := make([]string, 0, len(committed))
	for l := range committed {
		lanes = append(lanes, l)
	}
	slices.Sort(lanes)
	for _, l := range lanes {
		fmt.Fprintf(&b, "  lane %s: checkpoint %d\n", l, committed[l])
	}
	return b.String(), t.stateURI, nil
}
