package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/filesink/filesink/source"
)

// Replayer reads records of the configured brokers again by offset, read
// committed, as the Source and the lanes of a Group delivered them: the
// file sink rebuilds from it a part whose staged data the store lost
// (source.Replayer). Every Replay uses a client of its own; Close is not
// needed.
type Replayer struct {
	v validated
}

var _ source.Replayer = (*Replayer)(nil)

// NewReplayer returns the Replayer of the brokers and credentials of cfg
// (its topics and start do not matter). It connects to nothing.
func NewReplayer(cfg Config) (*Replayer, error) {
	if cfg.Start == "" {
		cfg.Start = StartEarliest
	}
	v, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	return &Replayer{v: v}, nil
}

// Replay implements source.Replayer for input "topic/partition": it
// fetches the partition from the first offset of runs to the last and
// calls fn with the records at the offsets of runs, transaction markers
// and aborted records left out. Offsets before the partition's log start
// (retention, deleted records) or at or past its last stable offset (a
// recreated topic) are a *source.GoneError.
func (r *Replayer) Replay(ctx context.Context, input string, runs [][2]int64, fn func(source.Record) error) error {
	if len(runs) == 0 {
		return nil
	}
	first, last := runs[0][0], runs[len(runs)-1][1]
	gone := func(reason string) error {
		return &source.GoneError{Input: input, From: first, To: last, Reason: reason}
	}
	i := strings.LastIndexByte(input, '/')
	p, err := strconv.ParseInt(input[i+1:], 10, 32)
	if i <= 0 || err != nil {
		return gone("it is not a Kafka topic/partition")
	}
	topic, partition := input[:i], int32(p)
	opts, err := r.v.clientOpts()
	if err != nil {
		return err
	}
	end, err := r.bounds(ctx, opts, topic, partition, first, last, gone)
	if err != nil {
		return err
	}
	return r.fetch(ctx, opts, input, topic, partition, runs, end, gone, fn)
}

// bounds checks that the partition still holds first..last and returns
// its last stable offset.
func (r *Replayer) bounds(ctx context.Context, opts []kgo.Opt, topic string, partition int32, first, last int64, gone func(string) error) (int64, error) {
	adm, _, err := adminClient(opts)
	if err != nil {
		return 0, err
	}
	defer adm.Close()
	ac := kadm.NewClient(adm)
	starts, err := ac.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, r.v.listErr("start offsets", err)
	}
	ends, err := ac.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return 0, r.v.listErr("last stable offsets", err)
	}
	k := tp{topic, partition}
	start, err := lookup(starts, k, "start offset")
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return 0, gone("the topic or partition no longer exists")
		}
		return 0, err
	}
	end, err := lookup(ends, k, "last stable offset")
	if err != nil {
		return 0, err
	}
	switch {
	case start > first:
		return 0, gone(fmt.Sprintf("the partition starts at offset %d now (retention or deleted records)", start))
	case end <= last:
		return 0, gone(fmt.Sprintf("the partition ends at offset %d now (the topic was recreated)", end))
	}
	return end, nil
}

// fetch consumes the partition from the first offset of runs and calls
// fn with the records of runs, up to the last one (or end, the last
// stable offset).
func (r *Replayer) fetch(ctx context.Context, opts []kgo.Opt, input, topic string, partition int32, runs [][2]int64, end int64, gone func(string) error, fn func(source.Record) error) error {
	first, last := runs[0][0], runs[len(runs)-1][1]
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(first)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxBytes(r.v.FetchMaxBytes),
		kgo.DisableFetchSessions(),
	)...)
	if err != nil {
		return fmt.Errorf("kafka: new consumer: %w", err)
	}
	defer cl.Close()
	at := 0
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if errors.Is(err, kerr.OffsetOutOfRange) {
				err = gone("its offsets are out of range now (retention or deleted records)")
			} else {
				err = fmt.Errorf("kafka: fetch %s at offset %d from brokers %s: %w", input, first, strings.Join(r.v.Brokers, ","), err)
			}
			ferr = errors.Join(ferr, err)
		})
		if ferr != nil {
			return ferr
		}
		var done bool
		var fnErr error
		fs.EachRecord(func(rec *kgo.Record) {
			if done || fnErr != nil || rec.Offset < first {
				return
			}
			if rec.Offset >= last || rec.Offset+1 >= end {
				done = true
			}
			if rec.Offset > last || rec.Attrs.IsControl() {
				return
			}
			for rec.Offset > runs[at][1] {
				at++
			}
			if rec.Offset >= runs[at][0] {
				fnErr = fn(source.Record{Value: rec.Value, Key: rec.Key, Origin: source.Origin{Name: input, Num: rec.Offset}})
			}
		})
		if fnErr != nil {
			return fnErr
		}
		if done {
			return nil
		}
	}
}
