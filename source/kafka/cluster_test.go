package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/source"
)

func admin(t *testing.T, c *kafkatest.Cluster) *kadm.Client {
	t.Helper()
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// TestThreeBrokers: partitions led by different brokers, resumed from a
// position, with an aborted tail on each (the probe talks to each leader).
func TestThreeBrokers(t *testing.T) {
	c, err := kafkatest.NewCluster(kafkatest.Config{Brokers: 3, Topics: []kafkatest.Topic{{Name: "t", Partitions: 6}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := produceN(t, c, "t", 6, 4)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var open []*kafkatest.Txn
	for p := range int32(6) {
		a, _ := c.MustOpenTxn(t, "A"+string(rune('0'+p)), "t", p, "ABORTED")
		b, _ := c.MustOpenTxn(t, "B"+string(rune('0'+p)), "t", p, "OPEN")
		if err := a.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		open = append(open, b)
	}
	cfg := testConfig(c, "t")
	cfg.Brokers = cfg.Brokers[:1] // bootstrap from one, fetch from all
	cfg.Bounded = true
	s := mustOpen(t, cfg, nil)
	first := readN(t, s, 10)
	pos := position(t, s)
	s.Close()
	rest := readToEOF(t, mustOpen(t, cfg, pos))
	sameRecords(t, append(first, rest...), want)
	for _, b := range open {
		b.Close()
	}
}

// TestDeletedRecords: a position before the log start (records deleted by
// retention) is refused, naming the partition and offsets.
func TestDeletedRecords(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 1})
	c.MustProduce(t, "t", 0, "a", "b", "c", "d")
	cfg := testConfig(c, "t")
	s := mustOpen(t, cfg, nil)
	readN(t, s, 1)
	pos := position(t, s)
	s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	offs := make(kadm.Offsets)
	offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 3})
	if resp, err := admin(t, c).DeleteRecords(ctx, offs); err != nil || resp.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, resp.Error())
	}
	_, err := Open(ctx, cfg, pos)
	if !errors.Is(err, source.ErrInputChanged) || !strings.Contains(err.Error(), "kafka t/0") ||
		!strings.Contains(err.Error(), "offset 1") || !strings.Contains(err.Error(), "offset 3") {
		t.Fatalf("Open = %v", err)
	}
}

// TestPartitionAddedAfterCheckpoint: an unbounded restart reads a new
// partition from its start; a bounded one keeps the partitions of its
// first start.
func TestPartitionAddedAfterCheckpoint(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 1})
	c.MustProduce(t, "t", 0, "a")
	var pos = map[bool][]byte{}
	for _, bounded := range []bool{false, true} {
		cfg := testConfig(c, "t")
		cfg.Bounded = bounded
		s := mustOpen(t, cfg, nil)
		readN(t, s, 1)
		pos[bounded] = position(t, s)
		s.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if resp, err := admin(t, c).CreatePartitions(ctx, 1, "t"); err != nil || resp.Error() != nil {
		t.Fatalf("CreatePartitions: %v %v", err, resp.Error())
	}
	c.MustProduce(t, "t", 1, "new")

	cfg := testConfig(c, "t")
	if got := readN(t, mustOpen(t, cfg, pos[false]), 1); got[0] != (rec{"t/1:0", "new"}) {
		t.Fatalf("unbounded: got %v", got)
	}
	cfg.Bounded = true
	if got := readToEOF(t, mustOpen(t, cfg, pos[true])); len(got) != 0 {
		t.Fatalf("bounded: got %v", got)
	}
	// Selecting partitions the position does not have is refused.
	cfg.Partitions = []int32{0, 1}
	if _, err := Open(ctx, cfg, pos[true]); !errors.Is(err, source.ErrInputChanged) || !strings.Contains(err.Error(), "lacks partition t/1") {
		t.Fatalf("Open = %v", err)
	}
}
