package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/recovery"
)

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("verify", `--sink URI [--state DIR]

Checks the output against the retained checkpoint records: every committed
part file is present with its recorded length, no staging file is visible as
output, and no orphaned in-progress file of this sink is left. Prints every
violation; exits 1 if there is any.`, stderr)
	sink := fs.String("sink", "", "sink `URI` (required): file://OUT, OUT or s3://BUCKET/PREFIX")
	state := fs.String("state", "", "checkpoint store: DIR or s3://BUCKET/PREFIX (default OUT/_filesink)")
	prefix := fs.String("prefix", "part", "part file name prefix of the sink")
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
	stateURI := *state
	if stateURI == "" {
		stateURI = t.stateURI
	}
	store, err := openStore(ctx, stateURI, &s3f, t.client, false)
	if err != nil {
		return err
	}
	chk := filesink.Checker{Backend: t.backend, DeadLetter: t.dead, Prefix: *prefix}
	vs, err := recovery.Verify(ctx, store, chk)
	for _, v := range vs {
		fmt.Fprintln(stdout, "VIOLATION", v)
	}
	if err != nil {
		return err
	}
	if len(vs) > 0 {
		return exitError{code: 1, msg: fmt.Sprintf("verify: %d violation(s) in %s", len(vs), *sink)}
	}
	ids, _ := store.List(ctx)
	fmt.Fprintf(stdout, "OK: %s is consistent with %d checkpoint record(s) in %s\n", *sink, len(ids), store.Location())
	return nil
}
