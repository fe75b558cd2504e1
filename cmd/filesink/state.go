package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/source/kafka"
)

const stateSynopsis = `--state DIR [--source kafka://BROKERS/TOPIC] [--json]

Prints the retained checkpoint records, oldest first: id, time, source
position, and per participant the in-progress parts and the committables
still pending at that checkpoint. For a job in group mode (--group), it
prints its lanes instead: per topic and partition the owner epoch, the
newest checkpoint, the next and end offsets, the files pending, whether
the lane is owned, released or finished, and its last owner; with
--source (the job's), also each lane's lag: the records committed to the
partition (its last stable offset) that the lane has not committed yet.
A record that cannot be read (truncated, garbage, checksum mismatch, a
newer format version) is named on a line of its own (on stderr with
--json) and skipped; the others are printed, and the exit status is then
1. With --sink iceberg://NAMESPACE.TABLE --warehouse LOCATION (and
--catalog as the run has it), --state defaults to the table's, and a last
section shows per lane of the job the newest checkpoint the table holds.
A job that decodes its values (--value-format avro) shows per record the
schemas its values used so far, per partition ("schemas: orders/0: v1 (id
1), v2 (id 3)").`

func cmdState(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("state", stateSynopsis, stdout)
	dir := fs.String("state", "", "checkpoint store `DIR` or s3://BUCKET/PREFIX (required; the run default is OUT/_filesink)")
	src := fs.String("source", "", "the group job's kafka://BROKERS/TOPIC `URI`: show each lane's lag")
	asJSON := fs.Bool("json", false, "print the records as JSON, one per line")
	sink := fs.String("sink", "", "an iceberg://NAMESPACE.TABLE `URI` (with --warehouse): also show per lane the checkpoint the table holds; --state defaults to the table's")
	var s3f s3Flags
	s3f.register(fs, false)
	var ice icebergFlags
	ice.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *sink != "" {
		lanes, stateURI, err := icebergCommitted(ctx, *sink, &ice, &s3f)
		if err != nil {
			return err
		}
		if *dir == "" {
			*dir = stateURI
		}
		defer func() {
			if err == nil && !*asJSON {
				fmt.Fprint(stdout, lanes)
			}
		}()
	}
	if *dir == "" {
		return usageError("state: --state is required")
	}
	if *src != "" && !isKafka(*src) {
		return usageError("state: --source %s: only a kafka:// source has lanes to show the lag of", redactURI(*src))
	}
	store, err := openStore(ctx, *dir, &s3f, nil, false, nil)
	if err != nil {
		return inCommand("state", err)
	}
	recs, bad, err := recovery.Readable(ctx, store)
	if err != nil {
		return err
	}
	if ls, ok := store.(*s3sink.Store); ok && len(recs)+len(bad) == 0 {
		heads, err := s3sink.ListLanes(ctx, ls)
		if err != nil {
			return inCommand("state", err)
		}
		if len(heads) > 0 {
			var lso map[kafka.LaneID]int64
			if *src != "" {
				if lso, err = lastStable(ctx, *src); err != nil {
					return inCommand("state", err)
				}
			}
			return printLanes(stdout, heads, lso, *asJSON)
		}
	}
	if *src != "" {
		return usageError("state: --source applies to a job in group mode; %s holds no lanes", store.Location())
	}
	if len(recs)+len(bad) == 0 {
		fmt.Fprintf(stdout, "no checkpoint records in %s\n", *dir)
		return nil
	}
	for _, c := range recs {
		if err := printRecord(stdout, c, *asJSON); err != nil {
			return err
		}
	}
	if len(bad) == 0 {
		return nil
	}
	report := stdout
	if *asJSON {
		report = stderr // stdout holds JSON lines only
	}
	for _, e := range bad {
		fmt.Fprintln(report, corruptLine(e))
	}
	return exitError{code: 1, msg: fmt.Sprintf("state: %d corrupt checkpoint record(s) in %s (filesink run stops on this state until it is repaired: see the runbook)", len(bad), store.Location())}
}

// lastStable asks the brokers of the kafka:// URI src for the last stable
// offset of every partition of its topics.
func lastStable(ctx context.Context, src string) (map[kafka.LaneID]int64, error) {
	cfg, err := kafka.ParseURI(src)
	if err != nil {
		return nil, usageError("state: --source: %v", err)
	}
	return kafka.LastStableOffsets(ctx, cfg)
}

// laneLag is a lane's lag: the partition's last stable offset in lso
// minus the lane's next offset, nil if either is unknown (no lso: no
// --source).
func laneLag(h *s3sink.LaneHead, lso map[kafka.LaneID]int64) *int64 {
	hi, ok := lso[kafka.LaneID{Topic: h.Topic, Partition: h.Partition}]
	if !ok || h.Checkpoint == nil {
		return nil
	}
	_, next, _, err := kafka.LanePosition(h.Checkpoint.Source)
	if err != nil {
		return nil
	}
	lag := max(hi-next, 0)
	return &lag
}

// printLanes prints the lanes of a group-mode job: per partition its
// owner, epoch, offsets and newest checkpoint, and its lag if lso holds
// the partition's last stable offset, as a table or JSON lines.
func printLanes(stdout io.Writer, heads []*s3sink.LaneHead, lso map[kafka.LaneID]int64, asJSON bool) error {
	if asJSON {
		for _, h := range heads {
			b, err := json.Marshal(struct {
				*s3sink.LaneHead
				Lag *int64 `json:"lag,omitempty"`
			}{h, laneLag(h, lso)})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s\n", b)
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	lagCol := ""
	if lso != nil {
		lagCol = "LAG\t"
	}
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tEPOCH\tCHECKPOINT\tNEXT\tEND\t"+lagCol+"PENDING\tSTATUS\tOWNER\tUPDATED")
	finished := 0
	for _, h := range heads {
		id, next, end, pending := uint64(0), "-", "-", 0
		if c := h.Checkpoint; c != nil {
			id = c.ID
			if _, n, e, err := kafka.LanePosition(c.Source); err == nil {
				next = strconv.FormatInt(n, 10)
				if e >= 0 {
					end = strconv.FormatInt(e, 10)
				}
			}
			for _, p := range c.Participants {
				pending += len(p.Pending)
			}
		}
		status := "owned"
		switch {
		case h.Done:
			status = "finished"
			finished++
		case h.Released:
			status = "released"
		}
		owner := fmt.Sprintf("%s pid %d (generation %d)", h.Owner.Host, h.Owner.PID, h.Owner.Generation)
		lag := ""
		if lso != nil {
			lag = "-\t"
			if l := laneLag(h, lso); l != nil {
				lag = strconv.FormatInt(*l, 10) + "\t"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s%d\t%s\t%s\t%s\n", h.Topic, h.Partition, h.Epoch, id, next, end, lag, pending,
			status, owner, h.Updated.Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d lane(s), %d finished\n", len(heads), finished)
	return nil
}

// corruptLine names a checkpoint record that could not be read, and why,
// for the commands that go on with the others.
func corruptLine(e *recovery.CorruptError) string {
	return fmt.Sprintf("%s %s: %s (skipped)", e.Err, e.File, e.Reason)
}

// printRecord prints one checkpoint record, as text or as a JSON line.
func printRecord(stdout io.Writer, c *recovery.Checkpoint, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return nil
	}
	fmt.Fprintf(stdout, "checkpoint %d  %s\n  source: %s\n", c.ID, c.Time.Format(time.RFC3339Nano), orNone(c.Source))
	if seen := schemasOf(c.Source); len(seen) > 0 {
		fmt.Fprintf(stdout, "  schemas: %s\n", seen)
	}
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
	return nil
}

// schemasSeen are the value schemas a decoded source saw, per input.
type schemasSeen map[string][]source.Schema

// String is "orders/0: v1 (id 1), v2 (id 3); orders/1: v1 (id 1)", the
// inputs in order.
func (s schemasSeen) String() string {
	var b strings.Builder
	for i, in := range slices.Sorted(maps.Keys(s)) {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(in + ": ")
		for j, sch := range s[in] {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(sch.String())
		}
	}
	return b.String()
}

// schemasOf returns the value schemas a checkpoint's source position
// records per input (a decoded source's: --value-format avro), under the
// position's output skip set if it has one; nil when there are none.
func schemasOf(pos json.RawMessage) schemasSeen {
	pos, err := pipeline.SourcePosition(pos)
	if err != nil {
		return nil
	}
	_, seen, err := source.SplitDecodedPosition(pos)
	if err != nil {
		return nil
	}
	return seen
}

func orNone(b json.RawMessage) string {
	if len(b) == 0 {
		return "(none: not replayable)"
	}
	return string(b)
}
