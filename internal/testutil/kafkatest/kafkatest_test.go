package kafkatest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consume reads topic/partition from the start with read_committed
// isolation until it blocks for idle, and returns the values and offsets.
func consume(t *testing.T, addrs []string, topic string, partition int32, idle time.Duration) ([]string, []int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var vals []string
	var offs []int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), idle)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			vals = append(vals, string(r.Value))
			offs = append(offs, r.Offset)
		})
		if ctx.Err() != nil && fs.NumRecords() == 0 {
			return vals, offs
		}
	}
}

func TestProduceAndTransactions(t *testing.T) {
	c := Start(t, Topic{Name: "t", Partitions: 2})
	if got := c.MustProduce(t, "t", 1, "a", "b"); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("offsets %v", got)
	}
	if got := c.MustProduceTxn(t, "x1", true, "t", 1, "c"); !slices.Equal(got, []int64{2}) {
		t.Fatalf("offsets %v", got)
	}
	// c's commit marker takes offset 3.
	if got := c.MustProduceTxn(t, "x2", false, "t", 1, "ABORTED"); !slices.Equal(got, []int64{4}) {
		t.Fatalf("offsets %v", got)
	}
	open, offs := c.MustOpenTxn(t, "x3", "t", 1, "d")
	if !slices.Equal(offs, []int64{6}) {
		t.Fatalf("open txn offsets %v", offs)
	}
	c.MustProduce(t, "t", 1, "e") // 7, behind the open transaction

	vals, _ := consume(t, c.Addrs(), "t", 1, 300*time.Millisecond)
	if !slices.Equal(vals, []string{"a", "b", "c"}) {
		t.Fatalf("read_committed with a transaction open: %v, want [a b c]", vals)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := open.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := open.Commit(ctx); err == nil {
		t.Fatal("a second Commit succeeded")
	}
	vals, offs = consume(t, c.Addrs(), "t", 1, 300*time.Millisecond)
	if !slices.Equal(vals, []string{"a", "b", "c", "d", "e"}) || !slices.Equal(offs, []int64{0, 1, 2, 6, 7}) {
		t.Fatalf("after the commit: %v at %v", vals, offs)
	}
	if vals, _ := consume(t, c.Addrs(), "t", 0, 100*time.Millisecond); len(vals) != 0 {
		t.Fatalf("partition 0: %v", vals)
	}
}

func TestParseTopic(t *testing.T) {
	for in, want := range map[string]Topic{"a:3": {"a", 3}, "b": {"b", 1}} {
		if got, err := ParseTopic(in); err != nil || got != want {
			t.Errorf("ParseTopic(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", ":1", "a:0", "a:x"} {
		if _, err := ParseTopic(in); err == nil {
			t.Errorf("ParseTopic(%q) succeeded", in)
		}
	}
}

func TestBrokerProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := BuildBroker(t)
	p := StartBroker(t, bin, []Topic{{"t", 3}})
	c := &Cluster{addrs: []string{p.Addr}}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := c.ProduceStrings(ctx, "t", 2, "x", "y"); err != nil {
		t.Fatal(err)
	}
	if vals, _ := consume(t, c.Addrs(), "t", 2, 300*time.Millisecond); !slices.Equal(vals, []string{"x", "y"}) {
		t.Fatalf("got %v", vals)
	}
	p.Kill()
	select {
	case <-p.Done():
	default:
		t.Fatal("not exited after Kill")
	}
	p.Kill()
}

// TestGroupMinSessionTimeout: a member asking for a session timeout of
// 1 s is refused by kfake's default minimum (6 s) and admitted with
// GroupMinSessionTimeout, in process and as a process.
func TestGroupMinSessionTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	topics := []Topic{{"t", 2}}
	def := StartConfig(t, Config{Topics: topics})
	if err := TryJoin(ctx, def.Addrs(), "g", "t", time.Second); !errors.Is(err, kerr.InvalidSessionTimeout) {
		t.Fatalf("default minimum: join with a 1s session: %v, want %v", err, kerr.InvalidSessionTimeout)
	}
	low := StartConfig(t, Config{Topics: topics, GroupMinSessionTimeout: 500 * time.Millisecond})
	if err := TryJoin(ctx, low.Addrs(), "g", "t", time.Second); err != nil {
		t.Fatalf("minimum 500ms: join with a 1s session: %v", err)
	}
	if testing.Short() {
		return
	}
	bin := BuildBroker(t)
	p := StartBrokerConfig(t, bin, Config{Topics: topics, GroupMinSessionTimeout: 500 * time.Millisecond})
	if err := TryJoin(ctx, []string{p.Addr}, "g", "t", time.Second); err != nil {
		t.Fatalf("broker process with -group-min-session-timeout 500ms: join with a 1s session: %v", err)
	}
}
