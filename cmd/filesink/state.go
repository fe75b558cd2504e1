package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/filesink/filesink/recovery"
)

func cmdState(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("state", `--state DIR [--json]

Prints the retained checkpoint records, oldest first: id, time, source
position, and per participant the in-progress parts and the committables
still pending at that checkpoint.`, stdout)
	dir := fs.String("state", "", "checkpoint store `DIR` or s3://BUCKET/PREFIX (required; the run default is OUT/_filesink)")
	asJSON := fs.Bool("json", false, "print the records as JSON, one per line")
	var s3f s3Flags
	s3f.register(fs, false)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return usageError("state: --state is required")
	}
	store, err := openStore(ctx, *dir, &s3f, nil, false)
	if err != nil {
		return inCommand("state", err)
	}
	recs, err := recovery.Retained(ctx, store)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		fmt.Fprintf(stdout, "no checkpoint records in %s\n", *dir)
		return nil
	}
	for _, c := range recs {
		if *asJSON {
			b, err := json.Marshal(c)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s\n", b)
			continue
		}
		fmt.Fprintf(stdout, "checkpoint %d  %s\n  source: %s\n", c.ID, c.Time.Format(time.RFC3339Nano), orNone(c.Source))
		for _, p := range c.Participants {
			var st struct {
				Parts []json.RawMessage `json:"parts"`
			}
			_ = json.Unmarshal(p.State, &st)
			fmt.Fprintf(stdout, "  %s: %d in progress, %d pending\n", p.Name, len(st.Parts), len(p.Pending))
			for _, s := range st.Parts {
				fmt.Fprintf(stdout, "    in progress: %s\n", s)
			}
			for _, pc := range p.Pending {
				fmt.Fprintf(stdout, "    pending (checkpoint %d): %s\n", pc.Checkpoint, pc.Data)
			}
		}
	}
	return nil
}

func orNone(b json.RawMessage) string {
	if len(b) == 0 {
		return "(none: not replayable)"
	}
	return string(b)
}
