package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/filesink/bulk"
	"github.com/filesink/filesink/recovery"
)

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("verify", `--sink URI [--state DIR] [--deep]

Audits the output from its files and commit manifests (OUT/_filesink/manifests):
every visible file is listed in exactly one manifest with its size and
CRC-32C, no listed file is missing, and the source ranges of all manifests
have no overlap (a duplicate) and, for the generator (whose record ids have
no gaps, unlike line numbers or Kafka offsets), no gap (a loss). --deep also re-reads every file and recounts its records.

When the checkpoint store is there (--state, default OUT/_filesink), also
checks the output against the retained checkpoint records: every committed
part file is present with its recorded length, no staging file is visible as
output, and no orphaned in-progress file of this sink is left.

Prints every violation with the file, manifest or range concerned; exits 1
if there is any.`, stdout)
	sink := fs.String("sink", "", "sink `URI` (required): file://OUT, OUT or s3://BUCKET/PREFIX")
	state := fs.String("state", "", "checkpoint store: DIR or s3://BUCKET/PREFIX (default OUT/_filesink; optional)")
	prefix := fs.String("prefix", "part", "part file name prefix of the sink")
	deep := fs.Bool("deep", false, "re-read every file and recount its records (parses Parquet and Arrow footers, decompresses gzip and zstd)")
	noManifests := fs.Bool("no-manifests", false, "skip the manifest audit (output written before filesink kept manifests)")
	var s3f s3Flags
	s3f.register(fs, false)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *sink == "" {
		return usageError("verify: --sink is required")
	}
	if isMySQL(*sink) {
		return usageError("verify: --sink %s: verify checks file and S3 sinks; a MySQL sink's rows commit atomically with their XA branches (see filesink xa list for prepared branches)", redactURI(*sink))
	}
	t, err := openTarget(ctx, *sink, &s3f, slog.New(slog.DiscardHandler), false)
	if err != nil {
		return err
	}
	if t.local != "" {
		if err := checkPath("verify: ", t.local, true); err != nil {
			return err
		}
	}
	var vs []recovery.Violation
	var notes []string
	if !*noManifests {
		a := filesink.Auditor{Output: t.backend, DeadLetter: t.dead}
		if *deep {
			a.Count = func(f *filesink.ManifestFile, r io.Reader) (int64, error) {
				return filesink.CountRecords(f, r, bulk.Counters()...)
			}
		}
		mv, err := a.Audit(ctx)
		if err != nil {
			return err
		}
		vs = append(vs, mv...)
		notes = append(notes, "manifests")
	}
	sv, note, err := verifyState(ctx, t, *state, *prefix, *noManifests, &s3f)
	if err != nil {
		return err
	}
	vs = append(vs, sv...)
	if note != "" {
		notes = append(notes, note)
	}
	for _, v := range vs {
		fmt.Fprintln(stdout, "VIOLATION", v)
	}
	if len(vs) > 0 {
		return exitError{code: 1, msg: fmt.Sprintf("verify: %d violation(s) in %s", len(vs), *sink)}
	}
	fmt.Fprintf(stdout, "OK: %s is consistent with its %s\n", *sink, strings.Join(notes, " and "))
	return nil
}

// verifyState checks the output of t against the retained checkpoint
// records at state (default: the sink's), if there are any; note says what
// was checked ("" if nothing).
func verifyState(ctx context.Context, t *target, state, prefix string, noManifests bool, s3f *s3Flags) ([]recovery.Violation, string, error) {
	stateURI := state
	if stateURI == "" {
		stateURI = t.stateURI
	}
	store, err := openStore(ctx, stateURI, s3f, t.client, false)
	var ids []uint64
	if err == nil {
		ids, err = store.List(ctx)
	}
	switch {
	case err == nil && len(ids) > 0:
		chk := filesink.Checker{Backend: t.backend, DeadLetter: t.dead, Prefix: prefix}
		sv, err := recovery.Verify(ctx, store, chk)
		if err != nil {
			return nil, "", err
		}
		return sv, fmt.Sprintf("%d checkpoint record(s) in %s", len(ids), store.Location()), nil
	case err != nil && state != "":
		return nil, "", err
	case noManifests:
		return nil, "", fmt.Errorf("verify: no checkpoint record in %s and --no-manifests: nothing to check against", stateURI)
	}
	return nil, "", nil
}
