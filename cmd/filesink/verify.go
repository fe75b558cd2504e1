package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/filesink/filesink/committer/localfs"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/internal/vfs"
	"github.com/filesink/filesink/recovery"
)

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("verify", `--sink URI [--state DIR]

Checks the output against the retained checkpoint records: every committed
part file is present with its recorded length, no staging file is visible as
output, and no orphaned in-progress file of this sink is left. Prints every
violation; exits 1 if there is any.`, stderr)
	sink := fs.String("sink", "", "sink `URI` (required): file://OUT or OUT")
	state := fs.String("state", "", "checkpoint directory (default OUT/_filesink)")
	prefix := fs.String("prefix", "part", "part file name prefix of the sink")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *sink == "" {
		return usageError("verify: --sink is required")
	}
	out, err := localPath(*sink, "--sink")
	if err != nil {
		return err
	}
	dir := *state
	if dir == "" {
		dir = filepath.Join(out, "_filesink")
	}
	store, err := openExistingStore(ctx, dir)
	if err != nil {
		return err
	}
	chk := filesink.Checker{
		Backend:    localfs.New(vfs.OS{}, out),
		DeadLetter: localfs.New(vfs.OS{}, filepath.Join(out, "_dead-letter")),
		Prefix:     *prefix,
	}
	vs, err := recovery.Verify(ctx, store, chk)
	for _, v := range vs {
		fmt.Fprintln(stdout, "VIOLATION", v)
	}
	if err != nil {
		return err
	}
	if len(vs) > 0 {
		return exitError{code: 1, msg: fmt.Sprintf("verify: %d violation(s) in %s", len(vs), out)}
	}
	ids, _ := store.List(ctx)
	fmt.Fprintf(stdout, "OK: %s is consistent with %d checkpoint record(s) in %s\n", out, len(ids), dir)
	return nil
}

// openExistingStore opens a checkpoint directory that must exist.
func openExistingStore(ctx context.Context, dir string) (*recovery.DirStore, error) {
	if _, err := (vfs.OS{}).Stat(dir); err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %w", dir, err)
	}
	return recovery.OpenDir(ctx, vfs.OS{}, dir)
}
