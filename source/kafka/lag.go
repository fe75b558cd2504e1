package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
)

// LastStableOffsets returns, for every partition of cfg.Topics, its last
// stable offset: the offset a read_committed consumer (every lane) reads
// up to now. A lane's lag is that minus its next offset. It is what
// `filesink state --source` shows; the brokers are asked once.
//
// Errors are as Open's: an unknown topic is an *UnknownTopicError, brokers
// that do not answer within cfg.ConnectTimeout an *UnreachableError. A nil
// error guarantees an offset for every partition of every topic. Safe for
// concurrent use.
func LastStableOffsets(ctx context.Context, cfg Config) (map[LaneID]int64, error) {
	v, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	opts, err := v.clientOpts()
	if err != nil {
		return nil, err
	}
	cl, hook, err := adminClient(opts)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	cctx, cancel := context.WithTimeout(ctx, v.ConnectTimeout)
	defer cancel()
	exist, _, err := listTopics(ctx, cctx, adm, v, hook)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListCommittedOffsets(ctx, v.Topics...)
	if err != nil {
		return nil, v.listErr("last stable offsets", err)
	}
	out := make(map[LaneID]int64, len(exist))
	for k := range exist {
		o, err := lookup(ends, k, "last stable offset")
		if err != nil {
			return nil, err
		}
		out[LaneID{Topic: k.topic, Partition: k.partition}] = o
	}
	return out, nil
}
