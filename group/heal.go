package group

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"time"

	"github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/source/kafka"
)

// A job must never wait for a rebalance to make progress. Two things can
// leave a partition with records to read and nobody reading it while every
// process is healthy:
//
//   - The group assigns the partition to this process, but its lane does
//     not run: its takeover failed (the state could not be read, or a
//     newer generation is recorded as its owner), or it was fenced by an
//     owner that has since lost it. franz-go calls OnPartitionsAssigned
//     only for partitions newly assigned, so nothing retries it until the
//     next rebalance. The process retries such lanes itself, every heal
//     interval, while the group still assigns them to it (retakeLanes).
//   - The group is stable and assigns the partition to no member. The
//     process then asks for a rebalance (checkUnassigned) once that has
//     lasted Config.HealAfter; only the group's leader can force one, and
//     every process asks, so the leader does.

// healInterval is how often a process looks for lanes to take again and
// for partitions the group assigns to nobody: a sixth of the session
// timeout, between 500 ms and 5 s.
func (r *runner) healInterval() time.Duration {
	return min(max(r.sessionTimeout()/6, 500*time.Millisecond), 5*time.Second)
}

func (r *runner) sessionTimeout() time.Duration {
	if d := r.cfg.Kafka.SessionTimeout; d > 0 {
		return d
	}
	return kafka.DefaultSessionTimeout
}

// healAfter is Config.HealAfter or its default, three session timeouts.
func (r *runner) healAfter() time.Duration {
	if d := r.cfg.HealAfter; d > 0 {
		return d
	}
	return 3 * r.sessionTimeout()
}

// retakeLater marks lane id to be taken again while the group assigns it
// to this process.
func (r *runner) retakeLater(id kafka.LaneID) {
	r.mu.Lock()
	r.retake[id] = true
	r.mu.Unlock()
}

// heal runs retakeLanes and checkUnassigned every heal interval until ctx
// is done.
func (r *runner) heal(ctx context.Context) {
	t := time.NewTicker(r.healInterval())
	defer t.Stop()
	since := map[kafka.LaneID]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.retakeLanes(ctx)
		if r.cfg.HealAfter >= 0 {
			r.checkUnassigned(ctx, since)
		}
	}
}

// retakeLanes takes over again the lanes marked by retakeLater that the
// group still assigns to this process and that do not run.
func (r *runner) retakeLanes(ctx context.Context) {
	r.mu.Lock()
	var ids []kafka.LaneID
	for id := range r.retake {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	slices.SortFunc(ids, kafka.LaneID.Compare)
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		l := r.lanes[id]
		r.mu.Unlock()
		if l != nil && !l.stopped() || !r.g.Holds(id) {
			r.mu.Lock()
			delete(r.retake, id)
			r.mu.Unlock()
			continue
		}
		if took := r.retakeLane(ctx, id); took != notTaken {
			r.mu.Lock()
			delete(r.retake, id)
			r.mu.Unlock()
		}
	}
}

// retakeLane takes lane id over again for this process's current
// generation; a recorded owner with a newer generation that is no longer
// a member of the group does not stop it (the group began its
// generations again).
func (r *runner) retakeLane(ctx context.Context, id kafka.LaneID) takeResult {
	head, _, err := s3.ReadLane(ctx, r.cfg.State, id.Topic, id.Partition)
	if err != nil {
		r.cfg.Logger.Debug("lane not taken again yet: reading its state failed", "lane", id.String(), "err", err)
		return notTaken
	}
	var first json.RawMessage
	if head == nil {
		pos, err := r.g.FirstPositions(ctx, []kafka.LaneID{id})
		if err != nil {
			r.cfg.Logger.Debug("lane not taken again yet", "lane", id.String(), "err", err)
			return notTaken
		}
		first = pos[id]
	}
	var members map[string]bool
	gone := func(o s3.LaneOwner) bool {
		if members == nil {
			if members, err = r.g.Members(ctx); err != nil {
				return false
			}
		}
		return !members[o.Member]
	}
	owner := s3.LaneOwner{Member: r.g.MemberID(), Generation: r.g.Generation(), Host: r.host, PID: os.Getpid(), RunID: r.runID}
	_, took := r.takeOver(ctx, id, owner, first, time.Now(), takeOpts{gone: gone, retake: true})
	if took == tookOver {
		r.retaken.Add(1)
		r.cfg.Logger.Info("lane taken again: the group assigns it to this process, whose run of it had stopped", "lane", id.String())
	}
	return took
}

// checkUnassigned forces a rebalance when partitions with records to read
// have been assigned to no member of the stable group for healAfter; since
// holds when each was first seen so.
func (r *runner) checkUnassigned(ctx context.Context, since map[kafka.LaneID]time.Time) {
	un, err := r.g.Unassigned(ctx)
	if err != nil {
		r.cfg.Logger.Debug("looking for partitions the group assigns to no member", "err", err)
		return
	}
	now := time.Now()
	seen := map[kafka.LaneID]bool{}
	var due []kafka.LaneID
	for _, u := range un {
		if !r.behind(ctx, u) {
			continue
		}
		seen[u.ID] = true
		first, ok := since[u.ID]
		switch {
		case !ok:
			since[u.ID] = now
		case now.Sub(first) >= r.healAfter():
			due = append(due, u.ID)
		}
	}
	for id := range since {
		if !seen[id] {
			delete(since, id)
		}
	}
	if len(due) == 0 {
		return
	}
	r.cfg.Logger.Warn("partitions with records to read are assigned to no member of the consumer group: forcing a rebalance",
		"group", r.cfg.Kafka.Name, "lanes", due, "for_at_least", r.healAfter())
	r.g.ForceRebalance()
	r.healed.Add(1)
	if f := r.cfg.Events.Healed; f != nil {
		f(due)
	}
	for _, id := range due {
		since[id] = now
	}
}

// behind reports whether the lane of u has records to read: it is not
// finished and its state's position is below the partition's end (or it
// has no state yet and the partition holds records).
func (r *runner) behind(ctx context.Context, u kafka.Unassigned) bool {
	head, _, err := s3.ReadLane(ctx, r.cfg.State, u.ID.Topic, u.ID.Partition)
	switch {
	case err != nil:
		return false
	case head == nil:
		return u.End > 0
	case head.Done || head.Checkpoint == nil:
		return false
	}
	_, next, end, err := kafka.LanePosition(head.Checkpoint.Source)
	if err != nil {
		return false
	}
	if end >= 0 {
		return next < end
	}
	return next < u.End
}
