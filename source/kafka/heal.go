package kafka

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Holds reports whether the group assigns partition id to this member now
// (whether or not a lane of it runs). Safe for concurrent use.
func (g *Group) Holds(id LaneID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.assigned[id]
}

// Retake starts lane id again from pos (a lane position document) for a
// partition the group still assigns to this member but whose lane does
// not run: the Handler left it out of Assigned (its takeover failed), or
// its source was closed (the lane was fenced). Group.Lane returns the new
// source at once; its Next waits until Run has moved the partition's
// fetch to pos, and fails if the partition was revoked meanwhile. A nil
// error means the source was made; an error, that the partition is not
// assigned to this member or its lane still runs, or that pos is bad.
// Safe for concurrent use.
func (g *Group) Retake(id LaneID, pos json.RawMessage) error {
	g.mu.Lock()
	if !g.assigned[id] {
		g.mu.Unlock()
		return fmt.Errorf("kafka: retake lane %s of group %s: the partition is not assigned to this member", id, g.cfg.Name)
	}
	if old := g.lanes[id]; old != nil && old.live() || g.retaking[id] != nil {
		g.mu.Unlock()
		return fmt.Errorf("kafka: retake lane %s of group %s: its lane still runs", id, g.cfg.Name)
	}
	l := g.newLane(id)
	if err := l.setPosition(pos, g.v.Bounded); err != nil {
		g.mu.Unlock()
		return err
	}
	// Run hands it records only once the fetch moved (retakeLanes): a
	// fenced lane's cursor may have read past pos.
	g.retaking[id] = l
	g.mu.Unlock()
	g.pollMu.Lock()
	g.retakeQ = append(g.retakeQ, l)
	if g.pollCancel != nil {
		g.pollCancel()
	}
	g.pollMu.Unlock()
	return nil
}

// retakeLanes moves the fetch of the partitions of the lanes Retake made
// to their positions and resumes them (SetOffsets, from the polling
// goroutine while no revoke can run, as franz-go wants). A lane whose
// partition was revoked meanwhile fails. Run's goroutine only.
func (g *Group) retakeLanes() {
	g.pollMu.Lock()
	q := g.retakeQ
	g.retakeQ = nil
	g.pollMu.Unlock()
	if len(q) == 0 {
		return
	}
	set := map[string]map[int32]kgo.EpochOffset{}
	resume := map[string][]int32{}
	g.mu.Lock()
	var taken []*LaneSource
	for _, l := range q {
		id := l.id
		if !g.assigned[id] || g.retaking[id] != l {
			l.settle(fmt.Errorf("kafka: lane %s of group %s, taken again: %w", id, g.cfg.Name, ErrLaneRevoked))
			continue
		}
		delete(g.retaking, id)
		if old := g.lanes[id]; old != nil {
			old.detach()
		}
		g.lanes[id] = l
		taken = append(taken, l)
		if l.end < 0 || l.next < l.end {
			g.fetchAt[id] = l.next
			if set[id.Topic] == nil {
				set[id.Topic] = map[int32]kgo.EpochOffset{}
			}
			set[id.Topic][id.Partition] = kgo.EpochOffset{Epoch: -1, Offset: l.next}
			delete(g.paused, id)
			resume[id.Topic] = append(resume[id.Topic], id.Partition)
		}
	}
	g.mu.Unlock()
	if len(set) > 0 {
		// Discards what franz-go buffered for the partitions.
		g.cl.SetOffsets(set)
		g.cl.ResumeFetchPartitions(resume)
	}
	for _, l := range taken {
		l.settle(nil)
	}
}

// Unassigned is a partition of the group's topics that no member of the
// group is assigned, with its end offset (the last stable offset).
type Unassigned struct {
	ID  LaneID
	End int64
}

// Unassigned returns the partitions of the topics that no member of the
// stable group is assigned, sorted, with their end offsets. It returns
// nothing while the group rebalances (or is empty, or not a consumer
// group): only a stable group that leaves a partition out is a problem.
// It asks the brokers (metadata, DescribeGroups, ListOffsets). Safe for
// concurrent use.
func (g *Group) Unassigned(ctx context.Context) ([]Unassigned, error) {
	d, err := g.describe(ctx)
	if err != nil || d.State != "Stable" || len(d.Members) == 0 {
		return nil, err
	}
	held := d.AssignedPartitions()
	parts, err := g.Partitions(ctx)
	if err != nil {
		return nil, err
	}
	var out []Unassigned
	for _, p := range parts {
		if _, ok := held[p.Topic][p.Partition]; !ok {
			out = append(out, Unassigned{ID: p})
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	ends, err := g.adm.ListCommittedOffsets(ctx, g.v.Topics...)
	if err != nil {
		return nil, g.v.listErr("last stable offsets", err)
	}
	for i := range out {
		if out[i].End, err = lookup(ends, tp{out[i].ID.Topic, out[i].ID.Partition}, "last stable offset"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ForceRebalance asks the group to rebalance now. Only the group's leader
// can make a stable group rebalance this way (Kafka answers any other
// member's rejoin with its current assignment), so every member that sees
// a partition left unassigned asks. Safe for concurrent use.
func (g *Group) ForceRebalance() { g.cl.ForceRebalance() }

// Members returns the member ids of the group now (DescribeGroups). Safe
// for concurrent use.
func (g *Group) Members(ctx context.Context) (map[string]bool, error) {
	d, err := g.describe(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(d.Members))
	for _, m := range d.Members {
		out[m.MemberID] = true
	}
	return out, nil
}

// describe describes the group (DescribeGroups).
func (g *Group) describe(ctx context.Context) (kadm.DescribedGroup, error) {
	described, err := g.adm.DescribeGroups(ctx, g.cfg.Name)
	if err != nil {
		return kadm.DescribedGroup{}, fmt.Errorf("kafka: describe group %s: %w", g.cfg.Name, err)
	}
	d, ok := described[g.cfg.Name]
	switch {
	case !ok:
		return d, fmt.Errorf("kafka: describe group %s: not described", g.cfg.Name)
	case d.Err != nil:
		return d, fmt.Errorf("kafka: describe group %s: %w", g.cfg.Name, d.Err)
	}
	return d, nil
}
