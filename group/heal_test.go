package group_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/group"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source/kafka"
)

// withhold makes the group leave partition p of the topic unassigned in
// the next assignment the leader sends (SyncGroup), once: the group is
// then stable with a partition no member reads, as it has been seen after
// heavy churn. It returns a channel closed once that happened.
func (e *env) withhold(p int32) <-chan struct{} {
	done := make(chan struct{})
	var once sync.Once
	e.kc.ControlKey(int16(kmsg.SyncGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		sg := req.(*kmsg.SyncGroupRequest)
		for i := range sg.GroupAssignment {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(sg.GroupAssignment[i].MemberAssignment); err != nil {
				continue
			}
			for j := range a.Topics {
				t := &a.Topics[j]
				if t.Topic == topic && slices.Contains(t.Partitions, p) {
					t.Partitions = slices.DeleteFunc(t.Partitions, func(q int32) bool { return q == p })
					sg.GroupAssignment[i].MemberAssignment = a.AppendTo(nil)
					once.Do(func() { close(done) })
				}
			}
		}
		select {
		case <-done:
			e.kc.DropControl()
		default:
		}
		return nil, nil, false
	})
	return done
}

// The group becomes stable with a partition assigned to no member: the
// process finds the partition behind and unassigned, forces a rebalance
// after HealAfter, and the bounded job finishes on its own with every
// record exactly once. Without the heal it never finishes.
func TestGroupHealsUnassignedPartition(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, partitions)
	e.produce(ctx, 200)
	withheld := e.withhold(0)
	var mu sync.Mutex
	var healed [][]kafka.LaneID
	m := e.start(ctx, true, func(c *group.Config) {
		c.HealAfter = 2 * time.Second
		c.Events.Healed = func(ids []kafka.LaneID) {
			mu.Lock()
			healed = append(healed, ids)
			mu.Unlock()
		}
	})
	select {
	case <-withheld:
	case <-time.After(time.Minute):
		t.Fatal("the group never assigned the partitions")
	}
	select {
	case <-m.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the bounded job did not finish: the unassigned partition was not healed")
	}
	if m.err != nil || !m.res.Finished {
		t.Fatalf("member: %+v, %v", m.res, m.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(healed) == 0 || m.res.Healed == 0 || !slices.Contains(healed[0], kafka.LaneID{Topic: topic, Partition: 0}) {
		t.Errorf("no rebalance forced for partition 0: events %v, result %+v", healed, m.res)
	}
	e.check(ctx)
}

// ghostOwns writes lane p's state as owned by a member that is not in the
// group, with group generation gen, at the start of the partition (end:
// the bounded end, -1 for none): what a group deleted and begun again
// (its generations restart) leaves, or a process that lost the lane.
func (e *env) ghostOwns(ctx context.Context, p int32, gen int32, end int64) {
	e.t.Helper()
	st, err := s3.NewStore(e.client, e.bucket, "out/_filesink")
	if err != nil {
		e.t.Fatal(err)
	}
	id := kafka.LaneID{Topic: topic, Partition: p}
	_, err = s3.NewLaneStore(st, topic, p).Acquire(ctx, s3.LaneOwner{Member: "ghost", Generation: gen}, func() *recovery.Checkpoint {
		return &recovery.Checkpoint{Time: time.Now(), Source: kafka.EncodeLanePosition(id, "earliest", 0, end)}
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// A lane whose state names an owner of a newer group generation that is
// not a member (the group was deleted and its generations began again) is
// not taken over in the rebalance, and the group does not assign it again:
// the process takes it again by itself, and the bounded job finishes.
func TestGroupRetakesLaneAfterGenerationReset(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, partitions)
	e.produce(ctx, 200)
	e.mu.Lock()
	end := e.end[0]
	e.mu.Unlock()
	e.ghostOwns(ctx, 0, 1000, end)
	m := e.start(ctx, true, nil)
	select {
	case <-m.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the bounded job did not finish: the lane left out was not taken again")
	}
	if m.err != nil || !m.res.Finished || m.res.Retaken == 0 {
		t.Fatalf("member: %+v, %v (want it finished, with a lane taken again)", m.res, m.err)
	}
	e.check(ctx)
}

// A lane fenced while the group still assigns it to the process (another
// owner, no longer in the group, took it over) is taken again at a higher
// epoch and goes on: every record exactly once.
func TestGroupRetakesFencedLane(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, partitions)
	e.produce(ctx, 100)
	m := e.start(ctx, false, nil)
	waitUntil(t, "the member owns every lane", func() bool { return e.takeovers() >= partitions })
	e.waitCommitted(ctx)
	// Another owner (of a newer generation, not in the group) takes lane 0
	// from under the member, at its state's position.
	st, err := s3.NewStore(e.client, e.bucket, "out/_filesink")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s3.NewLaneStore(st, topic, 0).Acquire(ctx, s3.LaneOwner{Member: "ghost", Generation: 1000}, nil); err != nil {
		t.Fatal(err)
	}
	e.produce(ctx, 100)
	waitUntil(t, "the member was fenced", func() bool { return e.fenced.Load() > 0 })
	e.produce(ctx, 100)
	e.waitCommitted(ctx)
	m.halt(t)
	if m.res.Retaken == 0 {
		t.Errorf("the fenced lane was not taken again: %+v", m.res)
	}
	e.check(ctx)
}

// The group's committed offsets, which consumer-group lag tools read,
// reach the partitions' end offsets (lag 0) once the job caught up, also
// when the commits of a lane's last busy checkpoint failed and the lane
// went idle: each idle checkpoint offers the position again until the
// group has it.
func TestGroupCommittedOffsetsCatchUpWhenIdle(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, partitions)
	e.produce(ctx, 100)
	// The first commits of every partition fail.
	var mu sync.Mutex
	failed := map[int32]int{}
	e.kc.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.kc.KeepControl()
		oc := req.(*kmsg.OffsetCommitRequest)
		resp := oc.ResponseKind().(*kmsg.OffsetCommitResponse)
		mu.Lock()
		defer mu.Unlock()
		fail := false
		for _, tt := range oc.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = tt.Topic
			for _, p := range tt.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				if failed[p.Partition] < 2 {
					failed[p.Partition]++
					rp.ErrorCode = kerr.RebalanceInProgress.Code
					fail = true
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		if !fail {
			return nil, nil, false
		}
		return resp, nil, true
	})
	m := e.start(ctx, false, nil)
	e.waitCommitted(ctx)
	cl, err := e.kc.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var behind []string
	defer func() {
		if t.Failed() {
			t.Logf("partitions behind (committed of end offset): %v", behind)
		}
	}()
	waitUntil(t, "the group's committed offsets reach the lanes' positions", func() bool {
		offs, err := adm.FetchOffsets(ctx, "g")
		if err != nil {
			return false
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false
		}
		behind = behind[:0]
		for p := range int32(e.parts) {
			o, ok := offs.Lookup(topic, p)
			end, _ := ends.Lookup(topic, p)
			if !ok || o.At != end.Offset {
				behind = append(behind, fmt.Sprintf("%d: %d of %d", p, o.At, end.Offset))
			}
		}
		return len(behind) == 0
	})
	m.halt(t)
}

// Three processes find a bounded job finished: each finished lane gets
// one end-of-job sweep, by one of them, not one per process.
func TestGroupOneEndOfJobSweep(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, partitions)
	e.produce(ctx, 100)
	var mu sync.Mutex
	swept := map[kafka.LaneID]int{}
	hook := func(c *group.Config) {
		c.Hook = func(point string, id kafka.LaneID) error {
			if point == "job:swept" {
				mu.Lock()
				swept[id]++
				mu.Unlock()
			}
			return nil
		}
	}
	waitFinished(t, e.start(ctx, true, hook), e.start(ctx, true, hook), e.start(ctx, true, hook))
	e.check(ctx)
	mu.Lock()
	defer mu.Unlock()
	for p := range int32(partitions) {
		if n := swept[kafka.LaneID{Topic: topic, Partition: p}]; n != 1 {
			t.Errorf("lane %d: %d end-of-job sweeps, want 1", p, n)
		}
	}
}
