// Package kafkatest runs Kafka for tests: an in-process kfake cluster (a
// Kafka broker speaking the real protocol, with transactions and
// read_committed), helpers that produce plain and transactional records, and,
// in cmd/kfakebroker, the same broker as a separate process for black-box
// tests that kill things.
//
// Nothing here is safe to use outside tests: the cluster keeps its log in
// memory and listens on 127.0.0.1 only.
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// opTimeout bounds one produce or transaction call of the helpers.
const opTimeout = 30 * time.Second

// Topic is a topic to create when the cluster starts.
type Topic struct {
	Name       string
	Partitions int32
}

// ParseTopic parses "NAME:PARTITIONS" (or "NAME", one partition).
func ParseTopic(s string) (Topic, error) {
	name, parts, ok := strings.Cut(s, ":")
	t := Topic{Name: name, Partitions: 1}
	if name == "" {
		return t, fmt.Errorf("kafkatest: topic %q: empty name (want NAME:PARTITIONS)", s)
	}
	if ok {
		n, err := strconv.ParseInt(parts, 10, 32)
		if err != nil || n < 1 {
			return t, fmt.Errorf("kafkatest: topic %q: partitions %q: want an integer >= 1", s, parts)
		}
		t.Partitions = int32(n)
	}
	return t, nil
}

// Config configures a cluster. The zero value is one broker on a free port
// of 127.0.0.1 with no topics.
type Config struct {
	// Topics are created at start.
	Topics []Topic
	// Brokers is the number of brokers (1 if 0). Ignored when Listen is set.
	Brokers int
	// Listen, if set, is the one address the single broker listens on
	// ("127.0.0.1:9092", ":0" for any free port).
	Listen string
	// DataDir, if set, makes kfake persist its log there, so that a broker
	// restarted on the same directory keeps its records.
	DataDir string
	// GroupMinSessionTimeout, if set, is the shortest session timeout a
	// consumer group member may ask for (kfake's default, as Kafka's, is
	// 6 s): tests of group membership use sessions of a second.
	GroupMinSessionTimeout time.Duration
	// Opts are extra kfake options, applied last.
	Opts []kfake.Opt
}

// Cluster is a running kfake cluster. Its methods are safe for concurrent
// use.
type Cluster struct {
	*kfake.Cluster
	addrs []string
}

// NewCluster starts a cluster. The caller closes it.
func NewCluster(cfg Config) (*Cluster, error) {
	var opts []kfake.Opt
	switch {
	case cfg.Listen != "":
		addr := cfg.Listen
		opts = append(opts, kfake.NumBrokers(1), kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, addr)
		}))
	case cfg.Brokers > 0:
		opts = append(opts, kfake.NumBrokers(cfg.Brokers))
	default:
		opts = append(opts, kfake.NumBrokers(1))
	}
	for _, t := range cfg.Topics {
		if t.Name == "" || t.Partitions < 1 {
			return nil, fmt.Errorf("kafkatest: topic %q with %d partitions: want a name and at least 1 partition", t.Name, t.Partitions)
		}
		opts = append(opts, kfake.SeedTopics(t.Partitions, t.Name))
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
	}
	if cfg.GroupMinSessionTimeout > 0 {
		opts = append(opts, kfake.GroupMinSessionTimeout(cfg.GroupMinSessionTimeout))
	}
	opts = append(opts, cfg.Opts...)
	kc, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: start kfake: %w", err)
	}
	return &Cluster{Cluster: kc, addrs: kc.ListenAddrs()}, nil
}

// Start starts a cluster with the given topics (one broker) and closes it
// when the test ends.
func Start(tb testing.TB, topics ...Topic) *Cluster {
	tb.Helper()
	return StartConfig(tb, Config{Topics: topics})
}

// StartConfig starts a cluster configured by cfg and closes it when the
// test ends.
func StartConfig(tb testing.TB, cfg Config) *Cluster {
	tb.Helper()
	c, err := NewCluster(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// Addrs returns the brokers' host:port addresses.
func (c *Cluster) Addrs() []string { return append([]string(nil), c.addrs...) }

// Bootstrap returns the addresses joined by commas, as a kafka:// URI wants
// them.
func (c *Cluster) Bootstrap() string { return strings.Join(c.addrs, ",") }

// Client returns a new plain (non-transactional, idempotent) client of the
// cluster that produces to the partition each record names. The caller
// closes it.
func (c *Cluster) Client(opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{
		kgo.SeedBrokers(c.addrs...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: new client: %w", err)
	}
	return cl, nil
}

// Produce writes values to topic/partition, one record each, in order, and
// returns the offset of each. It waits until every record is acknowledged.
func (c *Cluster) Produce(ctx context.Context, topic string, partition int32, values ...[]byte) ([]int64, error) {
	cl, err := c.Client()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return produce(ctx, cl, topic, partition, values)
}

// ProduceStrings is Produce with string values.
func (c *Cluster) ProduceStrings(ctx context.Context, topic string, partition int32, values ...string) ([]int64, error) {
	return c.Produce(ctx, topic, partition, Bytes(values...)...)
}

// MustProduce is ProduceStrings that fails the test on error.
func (c *Cluster) MustProduce(tb testing.TB, topic string, partition int32, values ...string) []int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	offs, err := c.ProduceStrings(ctx, topic, partition, values...)
	if err != nil {
		tb.Fatal(err)
	}
	return offs
}

// ProduceRecords writes recs (each naming its topic and partition, and
// possibly a timestamp, key or headers) and waits until every one is
// acknowledged; the records' Offset fields are set.
func (c *Cluster) ProduceRecords(ctx context.Context, recs ...*kgo.Record) error {
	cl, err := c.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("kafkatest: produce: %w", err)
	}
	return nil
}

func produce(ctx context.Context, cl *kgo.Client, topic string, partition int32, values [][]byte) ([]int64, error) {
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Partition: partition, Value: v}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		return nil, fmt.Errorf("kafkatest: produce to %s/%d: %w", topic, partition, err)
	}
	offs := make([]int64, len(res))
	for i, r := range res {
		offs[i] = r.Record.Offset
	}
	return offs, nil
}

// Bytes converts strings to byte slices.
func Bytes(values ...string) [][]byte {
	out := make([][]byte, len(values))
	for i, v := range values {
		out[i] = []byte(v)
	}
	return out
}

// Txn is an open transaction of its own transactional producer. Produce
// adds records; Commit or Abort ends it. A Txn that is neither committed nor
// aborted stays open (holding read_committed consumers at the last stable
// offset) until Close, which aborts it, or until the cluster stops. A Txn
// is not safe for concurrent use.
type Txn struct {
	cl    *kgo.Client
	ended bool
	last  map[topicPartition]int64 // per partition written: the offset after the last record
}

// BeginTxn starts a transaction with the transactional id txnID (each open
// transaction needs its own id).
func (c *Cluster) BeginTxn(ctx context.Context, txnID string) (*Txn, error) {
	cl, err := c.Client(kgo.TransactionalID(txnID), kgo.TransactionTimeout(5*time.Minute))
	if err != nil {
		return nil, err
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafkatest: begin transaction %q: %w", txnID, err)
	}
	return &Txn{cl: cl, last: map[topicPartition]int64{}}, nil
}

// Produce writes values to topic/partition inside the transaction and
// returns their offsets.
func (x *Txn) Produce(ctx context.Context, topic string, partition int32, values ...[]byte) ([]int64, error) {
	offs, err := produce(ctx, x.cl, topic, partition, values)
	if len(offs) > 0 {
		x.last[topicPartition{topic, partition}] = offs[len(offs)-1] + 1
	}
	return offs, err
}

// Commit commits the transaction and closes its producer.
func (x *Txn) Commit(ctx context.Context) error { return x.end(ctx, kgo.TryCommit) }

// Abort aborts the transaction and closes its producer.
func (x *Txn) Abort(ctx context.Context) error { return x.end(ctx, kgo.TryAbort) }

func (x *Txn) end(ctx context.Context, how kgo.TransactionEndTry) error {
	if x.ended {
		return errors.New("kafkatest: transaction already ended")
	}
	x.ended = true
	defer x.cl.Close()
	if err := x.cl.Flush(ctx); err != nil {
		return fmt.Errorf("kafkatest: flush transaction: %w", err)
	}
	if err := x.cl.EndTransaction(ctx, how); err != nil {
		return fmt.Errorf("kafkatest: end transaction (commit=%v): %w", how, err)
	}
	return x.awaitMarkers(ctx)
}

// markerWait bounds how long ending a transaction waits for its markers.
const markerWait = 2 * time.Second

type topicPartition struct {
	Topic     string
	Partition int32
}

// awaitMarkers returns once the transaction's commit or abort markers are
// written, that is once the last stable offset of every partition it wrote
// is past its records: a broker answers EndTxn before it writes the markers,
// and a test that reads right after must see the transaction decided. It
// gives up quietly after markerWait: another transaction left open on the
// partition holds its last stable offset back.
func (x *Txn) awaitMarkers(ctx context.Context) error {
	adm := kadm.NewClient(x.cl)
	ctx, cancel := context.WithTimeout(ctx, markerWait)
	defer cancel()
	for tp, after := range x.last {
		for {
			ends, err := adm.ListCommittedOffsets(ctx, tp.Topic)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("kafkatest: last stable offset of %s/%d: %w", tp.Topic, tp.Partition, err)
			}
			if o, ok := ends.Lookup(tp.Topic, tp.Partition); ok && o.Err == nil && o.Offset > after {
				break
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

// Close aborts the transaction if it is still open and closes its producer.
func (x *Txn) Close() {
	if x.ended {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_ = x.Abort(ctx)
}

// ProduceTxn writes values to topic/partition in one transaction of its own
// producer, then commits it (commit true) or aborts it, and returns the
// offsets of the records (the commit or abort marker takes the offset after
// the last one).
func (c *Cluster) ProduceTxn(ctx context.Context, txnID string, commit bool, topic string, partition int32, values ...[]byte) ([]int64, error) {
	x, err := c.BeginTxn(ctx, txnID)
	if err != nil {
		return nil, err
	}
	offs, err := x.Produce(ctx, topic, partition, values...)
	if err != nil {
		x.Close()
		return nil, err
	}
	if commit {
		err = x.Commit(ctx)
	} else {
		err = x.Abort(ctx)
	}
	return offs, err
}

// MustProduceTxn is ProduceTxn with string values that fails the test on
// error.
func (c *Cluster) MustProduceTxn(tb testing.TB, txnID string, commit bool, topic string, partition int32, values ...string) []int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	offs, err := c.ProduceTxn(ctx, txnID, commit, topic, partition, Bytes(values...)...)
	if err != nil {
		tb.Fatal(err)
	}
	return offs
}

// MustOpenTxn begins a transaction, writes values to topic/partition in it
// and leaves it open; it is aborted when the test ends unless the caller
// ends it first.
func (c *Cluster) MustOpenTxn(tb testing.TB, txnID, topic string, partition int32, values ...string) (*Txn, []int64) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	x, err := c.BeginTxn(ctx, txnID)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(x.Close)
	offs, err := x.Produce(ctx, topic, partition, Bytes(values...)...)
	if err != nil {
		tb.Fatal(err)
	}
	return x, offs
}

// TryJoin joins consumer group group, consuming topic, as a member with the
// given session timeout, and leaves it again. It returns nil once the group
// assigned the member partitions, else the group's error (a session timeout
// below the brokers' minimum is kerr.InvalidSessionTimeout) or ctx's.
func TryJoin(ctx context.Context, addrs []string, group, topic string, session time.Duration) error {
	assigned := make(chan struct{}, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(session), kgo.HeartbeatInterval(session/3),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			if len(m) > 0 {
				select {
				case assigned <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		return fmt.Errorf("kafkatest: new group client: %w", err)
	}
	defer cl.Close()
	for {
		select {
		case <-assigned:
			return nil
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		for _, fe := range fs.Errors() {
			if fe.Topic == "" && (errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled)) {
				continue
			}
			return fmt.Errorf("kafkatest: join group %s: %w", group, fe.Err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
