package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defaults of a GroupConfig.
const (
	// DefaultSessionTimeout is how long the group waits for a member's
	// heartbeat before it takes the member's partitions away.
	DefaultSessionTimeout = 45 * time.Second
	// DefaultRebalanceTimeout is how long the group waits for its members
	// to rejoin in a rebalance (their Revoked callbacks included).
	DefaultRebalanceTimeout = 2 * time.Minute
	// DefaultLaneRecords and DefaultLaneBytes bound the records fetched
	// for a lane and not yet returned by its Next: the memory of a lane
	// whose reader is slower than the brokers.
	DefaultLaneRecords = 4096
	DefaultLaneBytes   = 4 << 20
	// defaultHeartbeatInterval is franz-go's; it is lowered to a third of
	// a shorter session timeout.
	defaultHeartbeatInterval = 3 * time.Second
	// pollRecords is the most records Run takes in one poll.
	pollRecords = 4096
	// groupFetchMaxWait bounds how long a broker holds a fetch of a group
	// member (franz-go's default is 5 s).
	groupFetchMaxWait = 250 * time.Millisecond
)

// LaneID names a lane: one partition of a topic, read by one member of the
// group at a time.
type LaneID struct {
	Topic     string
	Partition int32
}

// String returns "topic/partition", e.g. "orders/3".
func (id LaneID) String() string { return id.Topic + "/" + strconv.Itoa(int(id.Partition)) }

// Compare orders lanes by topic, then partition: -1, 0 or +1 (a negative,
// zero or positive number) as id sorts before, with or after o.
func (id LaneID) Compare(o LaneID) int {
	if c := strings.Compare(id.Topic, o.Topic); c != 0 {
		return c
	}
	return int(id.Partition) - int(o.Partition)
}

// GroupConfig configures a member of a consumer group that shares the
// partitions of Config.Topics with the other members (JoinGroup).
type GroupConfig struct {
	// Config holds the brokers, topics, TLS, SASL, Start, Bounded,
	// ClientID, ConnectTimeout and FetchMaxBytes, as for Open.
	// Partitions must be empty (the group assigns them) and Group (the
	// monitoring group of CommitToGroup) empty: the group's own offsets
	// serve the lag dashboards (CommitLane).
	Config
	// Name is the consumer group. Required.
	Name string
	// SessionTimeout is how long the group waits for a heartbeat of this
	// member before it gives the member's partitions to others
	// (DefaultSessionTimeout if 0). It must lie within the brokers'
	// group.min.session.timeout.ms and group.max.session.timeout.ms.
	SessionTimeout time.Duration
	// RebalanceTimeout is how long the group waits for the members to
	// rejoin in a rebalance, Handler.Revoked included
	// (DefaultRebalanceTimeout if 0).
	RebalanceTimeout time.Duration
	// InstanceID, if set, makes this member static (KIP-345): a restart
	// with the same id within the session timeout gets its partitions back
	// without a rebalance. Leave then does not leave the group: the
	// partitions move only after the session timeout.
	InstanceID string
	// Logger receives the group's events (lanes assigned, revoked, lost;
	// session errors), once per rebalance, and, if Config.Logger is nil,
	// the Kafka client's log (see Config.Logger: its internals at Debug
	// level). Nil: discard.
	Logger *slog.Logger

	// laneRecords and laneBytes override DefaultLaneRecords and
	// DefaultLaneBytes (tests).
	laneRecords int
	laneBytes   int64
}

// validate checks c and fills in the defaults.
func (c GroupConfig) validate() (validated, GroupConfig, error) {
	var errs []error
	if len(c.Partitions) > 0 {
		errs = append(errs, errors.New("partitions cannot be selected in a group: the group assigns them"))
	}
	if c.Group != "" {
		errs = append(errs, errors.New("a monitoring group (monitor_group=) cannot be used in a group: the group's own offsets serve the lag dashboards"))
	}
	v, err := c.Config.validate()
	if err != nil {
		errs = append(errs, err)
	}
	switch {
	case c.Name == "":
		errs = append(errs, errors.New("no group name"))
	case len(c.Name) > 249:
		errs = append(errs, fmt.Errorf("group %q: longer than 249 bytes", c.Name))
	}
	if len(c.InstanceID) > 249 {
		errs = append(errs, fmt.Errorf("instance id %q: longer than 249 bytes", c.InstanceID))
	}
	if c.SessionTimeout < 0 || c.RebalanceTimeout < 0 {
		errs = append(errs, fmt.Errorf("session timeout %v, rebalance timeout %v: negative", c.SessionTimeout, c.RebalanceTimeout))
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = DefaultRebalanceTimeout
	}
	if c.laneRecords <= 0 {
		c.laneRecords = DefaultLaneRecords
	}
	if c.laneBytes <= 0 {
		c.laneBytes = DefaultLaneBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	} else if v.Logger == nil {
		v.Logger = c.Logger
	}
	if len(errs) > 0 {
		return v, c, fmt.Errorf("kafka: bad group configuration: %w", errors.Join(errs...))
	}
	return v, c, nil
}

// Handler is what a member of the group does with its lanes; the group
// runner implements it. Its methods run on the Kafka client's group
// goroutine, one at a time, while Run delivers no records: each must
// return well within the rebalance timeout.
type Handler interface {
	// Assigned runs inside OnPartitionsAssigned, before any fetch of these
	// partitions, with the group generation of the assignment. It returns
	// each lane's position (a lane position document, see LanePosition)
	// to read from; a lane it leaves out is not read (its takeover
	// failed; logged by the handler). Keep it short: one GET and one PUT
	// per lane. Group.Lane returns the lanes' sources from the moment
	// Assigned is called; their Next and Position wait until it returned.
	Assigned(ctx context.Context, generation int32, lanes []LaneID) map[LaneID]json.RawMessage
	// Revoked runs inside OnPartitionsRevoked (after AllowRebalance): it
	// must stop the lanes — final checkpoint — and return when they are
	// stopped. It gets the lanes Assigned returned a position for.
	Revoked(ctx context.Context, lanes []LaneID)
	// Lost runs inside OnPartitionsLost (the member was dropped from the
	// group: session timeout, fencing): stop the lanes without a final
	// checkpoint. It gets the lanes Assigned returned a position for.
	Lost(ctx context.Context, lanes []LaneID)
}

// Group is this process's membership of a consumer group: the group
// assigns it partitions (cooperative-sticky), each partition is a lane
// with its own LaneSource, and a Handler starts and stops the lanes.
//
// Offsets come from the lane positions the Handler returns, never from the
// group's committed offsets, which only mirror progress for lag dashboards
// (CommitLane). The methods of a Group are safe for concurrent use.
type Group struct {
	v     validated
	cfg   GroupConfig
	h     Handler
	log   *slog.Logger
	admCl *kgo.Client   // metadata, offset listings, probes
	adm   *kadm.Client  // over admCl
	cl    *kgo.Client   // the group member
	ready chan struct{} // closed once cl is set: callbacks wait for it

	running atomic.Bool
	left    atomic.Bool

	pollMu     sync.Mutex
	pollCancel context.CancelFunc // cancels Run's poll in progress
	resumeQ    []*LaneSource      // full lanes Next drained (wake)

	retakeQ []*LaneSource // lanes Retake started: Run sets their offsets

	mu       sync.Mutex
	lanes    map[LaneID]*LaneSource // the lanes assigned and not revoked
	retaking map[LaneID]*LaneSource // lanes Retake made, until Run moved their fetch
	assigned map[LaneID]bool        // the partitions the group assigns to this member
	fetchAt  map[LaneID]int64       // where to fetch each lane from (AdjustFetchOffsetsFn); parked: a lane left out
	paused   map[LaneID]bool        // partitions Run paused for lanes closed, revoked or done
}

// parked is the fetchAt of a partition whose lane the Handler left out:
// it gets a cursor, paused, so that Retake can start it later.
const parked = -1

// JoinGroup checks that the brokers answer and the topics exist, then joins
// the consumer group cfg.Name in the background: the Handler's Assigned
// runs once the group assigned this member its partitions (possibly
// before JoinGroup returns, possibly much later). Call Run to deliver the
// records and Leave to leave.
//
// Errors are as Open's: an unknown topic is an *UnknownTopicError, brokers
// that do not answer within cfg.ConnectTimeout an *UnreachableError, a bad
// configuration one line naming every problem. A nil error guarantees the
// brokers answered and every topic exists; not that the group was joined.
func JoinGroup(ctx context.Context, cfg GroupConfig, h Handler) (_ *Group, err error) {
	v, cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("kafka: group %s: no handler", cfg.Name)
	}
	opts, err := v.clientOpts()
	if err != nil {
		return nil, err
	}
	admCl, hook, err := adminClient(opts)
	if err != nil {
		return nil, err
	}
	g := &Group{
		v: v, cfg: cfg, h: h, log: cfg.Logger,
		admCl: admCl, adm: kadm.NewClient(admCl),
		ready: make(chan struct{}),
		lanes: make(map[LaneID]*LaneSource), assigned: make(map[LaneID]bool), retaking: make(map[LaneID]*LaneSource), fetchAt: make(map[LaneID]int64), paused: make(map[LaneID]bool),
	}
	defer func() {
		if err != nil {
			admCl.Close()
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, v.ConnectTimeout)
	defer cancel()
	if _, _, err := listTopics(ctx, cctx, g.adm, v, hook); err != nil {
		return nil, err
	}
	if g.cl, err = kgo.NewClient(append(opts, g.groupOpts()...)...); err != nil {
		return nil, fmt.Errorf("kafka: new group member of %s: %w", cfg.Name, err)
	}
	close(g.ready)
	return g, nil
}

// groupOpts are the franz-go options of the group member.
func (g *Group) groupOpts() []kgo.Opt {
	v, c := g.v, g.cfg
	opts := []kgo.Opt{
		kgo.ConsumerGroup(c.Name),
		kgo.ConsumeTopics(v.Topics...),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.BlockRebalanceOnPoll(),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(c.SessionTimeout),
		kgo.RebalanceTimeout(c.RebalanceTimeout),
		kgo.HeartbeatInterval(min(defaultHeartbeatInterval, c.SessionTimeout/3)),
		kgo.OnPartitionsAssigned(g.onAssigned),
		kgo.OnPartitionsRevoked(g.onRevoked),
		kgo.OnPartitionsLost(g.onLost),
		kgo.AdjustFetchOffsetsFn(g.adjust),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxBytes(v.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(v.FetchMaxPartitionBytes),
		// See startConsumer.
		kgo.DisableFetchSessions(),
		// A partition resumed after its lane was full is fetched only
		// when the fetch in flight returns, which a broker holds up to
		// the max wait when the other partitions have nothing new.
		kgo.FetchMaxWait(groupFetchMaxWait),
	}
	if c.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(c.InstanceID))
	}
	return opts
}

// laneIDs returns the lanes of a franz-go partition map, sorted.
func laneIDs(m map[string][]int32) []LaneID {
	var ids []LaneID
	for t, ps := range m {
		for _, p := range ps {
			ids = append(ids, LaneID{t, p})
		}
	}
	slices.SortFunc(ids, LaneID.Compare)
	return ids
}

// onAssigned is OnPartitionsAssigned: it makes the lanes' sources, asks the
// Handler for their positions and records where to fetch each from, before
// franz-go fetches the group's offsets and calls adjust.
func (g *Group) onAssigned(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	<-g.ready
	ids := laneIDs(m)
	if len(ids) == 0 {
		return
	}
	_, gen := cl.GroupMetadata()
	// A partition assigned again while we still hold its lane (the topic
	// was recreated): the old lane is lost, a new one starts.
	g.mu.Lock()
	var again []LaneID
	for _, id := range ids {
		if g.lanes[id] != nil {
			again = append(again, id)
		}
	}
	g.mu.Unlock()
	if len(again) > 0 {
		g.log.Warn("kafka: lanes assigned again while held; stopping them as lost", "group", g.cfg.Name, "lanes", again)
		g.h.Lost(ctx, again)
		g.detach(again)
	}
	lanes := make(map[LaneID]*LaneSource, len(ids))
	g.mu.Lock()
	for _, id := range ids {
		l := g.newLane(id)
		g.lanes[id] = l
		g.assigned[id] = true
		lanes[id] = l
	}
	g.mu.Unlock()
	pos := g.h.Assigned(ctx, gen, ids)
	g.position(ids, lanes, pos, gen)
}

// position sets the lanes' positions from the Handler's answer and
// resumes the fetching of their partitions, which Run may have paused for
// an earlier lane.
func (g *Group) position(ids []LaneID, lanes map[LaneID]*LaneSource, pos map[LaneID]json.RawMessage, gen int32) {
	var (
		resume = make(map[string][]int32)
		park   = make(map[string][]int32)
		taken  []LaneID
	)
	g.mu.Lock()
	for _, id := range ids {
		l := lanes[id]
		p, ok := pos[id]
		if !ok {
			delete(g.lanes, id)
			l.settle(fmt.Errorf("kafka: lane %s of group %s: not taken over by this member in generation %d", id, g.cfg.Name, gen))
			// Parked: a paused cursor, for Retake.
			g.fetchAt[id] = parked
			g.paused[id] = true
			park[id.Topic] = append(park[id.Topic], id.Partition)
			continue
		}
		if err := l.setPosition(p, g.v.Bounded); err != nil {
			g.log.Error("kafka: bad lane position; the lane is not read", "group", g.cfg.Name, "lane", id.String(), "err", err)
			l.settle(err)
			continue
		}
		taken = append(taken, id)
		if l.end < 0 || l.next < l.end {
			g.fetchAt[id] = l.next
		}
		delete(g.paused, id)
		resume[id.Topic] = append(resume[id.Topic], id.Partition)
		l.settle(nil)
	}
	g.mu.Unlock()
	for id := range pos {
		if lanes[id] == nil {
			g.log.Warn("kafka: the handler returned a position for a lane not assigned; ignored", "group", g.cfg.Name, "lane", id.String())
		}
	}
	if len(park) > 0 {
		g.cl.PauseFetchPartitions(park)
	}
	if len(resume) > 0 {
		g.cl.ResumeFetchPartitions(resume)
	}
	g.log.Info("kafka: lanes assigned", "group", g.cfg.Name, "generation", gen, "lanes", ids, "taken", taken)
}

// adjust is AdjustFetchOffsetsFn: every partition starts at its lane
// position's next offset, never at the group's committed offset. A
// partition whose lane the Handler left out gets a paused cursor at the
// partition's end, which Retake moves to the lane's position. A partition
// without a position otherwise (its position was bad, or its bounded lane
// is done) is dropped from the map: franz-go then gives it no cursor and
// never fetches it while it stays assigned.
func (g *Group) adjust(_ context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for t, ps := range offs {
		for p := range ps {
			at, ok := g.fetchAt[LaneID{t, p}]
			switch {
			case !ok:
				delete(ps, p)
			case at == parked:
				ps[p] = kgo.NewOffset().AtEnd()
			default:
				ps[p] = kgo.NewOffset().At(at).WithEpoch(-1)
			}
		}
		if len(ps) == 0 {
			delete(offs, t)
		}
	}
	return offs, nil
}

// onRevoked is OnPartitionsRevoked; franz-go also calls it with nothing at
// the end of every session.
func (g *Group) onRevoked(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
	g.release(ctx, m, false)
}

// onLost is OnPartitionsLost.
func (g *Group) onLost(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
	g.release(ctx, m, true)
}

// release has the Handler stop the lanes of m that it took, then detaches
// them.
func (g *Group) release(ctx context.Context, m map[string][]int32, lost bool) {
	<-g.ready
	all := laneIDs(m)
	var ids []LaneID
	g.mu.Lock()
	for _, id := range all {
		if g.lanes[id] != nil || g.retaking[id] != nil {
			ids = append(ids, id)
		}
	}
	g.mu.Unlock()
	if len(ids) > 0 {
		if lost {
			g.log.Warn("kafka: lanes lost", "group", g.cfg.Name, "lanes", ids)
			g.h.Lost(ctx, ids)
		} else {
			g.log.Info("kafka: lanes revoked", "group", g.cfg.Name, "lanes", ids)
			g.h.Revoked(ctx, ids)
		}
	}
	g.detach(all)
}

// detach forgets the lanes: their sources stop returning records.
func (g *Group) detach(ids []LaneID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		if l := g.lanes[id]; l != nil {
			l.detach()
			delete(g.lanes, id)
		}
		if l := g.retaking[id]; l != nil {
			l.detach()
			delete(g.retaking, id)
		}
		delete(g.fetchAt, id)
		delete(g.assigned, id)
	}
}

// Lane returns the source of an assigned lane, nil if this member holds no
// such lane (never assigned, left out by the Handler and not taken again,
// revoked or lost).
func (g *Group) Lane(id LaneID) *LaneSource {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l := g.retaking[id]; l != nil {
		return l
	}
	return g.lanes[id]
}

// fed returns the lane that Run hands the records of partition id to.
func (g *Group) fed(id LaneID) *LaneSource {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lanes[id]
}

// Generation returns the group generation this member is in now (-1
// before it joined). The Handler gets the generation of each assignment.
func (g *Group) Generation() int32 {
	_, gen := g.cl.GroupMetadata()
	return gen
}

// MemberID returns this member's id in the group ("" before it joined).
func (g *Group) MemberID() string {
	id, _ := g.cl.GroupMetadata()
	return id
}

// FirstPositions resolves the start (cfg.Start: earliest, latest or a
// time) and, bounded, the end offset (the last stable offset now) of
// lanes that have no state yet, and returns them as lane position
// documents. A nil error guarantees a position for every lane.
func (g *Group) FirstPositions(ctx context.Context, lanes []LaneID) (map[LaneID]json.RawMessage, error) {
	var topics []string
	for _, id := range lanes {
		if !slices.Contains(g.v.Topics, id.Topic) {
			return nil, fmt.Errorf("kafka: lane %s: topic %s is not read by group %s (topics %s)", id, id.Topic, g.cfg.Name, strings.Join(g.v.Topics, ","))
		}
		if !slices.Contains(topics, id.Topic) {
			topics = append(topics, id.Topic)
		}
	}
	out := make(map[LaneID]json.RawMessage, len(lanes))
	if len(lanes) == 0 {
		return out, nil
	}
	starts, ends, err := listStartsEnds(ctx, g.adm, g.v, topics)
	if err != nil {
		return nil, err
	}
	start := g.v.start.String()
	for _, id := range lanes {
		k := tp{id.Topic, id.Partition}
		next, err := lookup(starts, k, "start offset ("+start+")")
		if err != nil {
			return nil, err
		}
		end := int64(-1)
		if g.v.Bounded {
			if end, err = lookup(ends, k, "last stable offset"); err != nil {
				return nil, err
			}
		}
		out[id] = EncodeLanePosition(id, start, next, end)
	}
	return out, nil
}

// CommitLane commits next as the offset of lane id to the group, for lag
// dashboards only: the group's offsets are never read back. It fails for
// a lane this member does not hold. It waits for a rebalance in progress.
// A nil error guarantees the brokers stored the offset.
func (g *Group) CommitLane(ctx context.Context, id LaneID, next int64) error {
	if g.Lane(id) == nil {
		return fmt.Errorf("kafka: commit offset %d of lane %s to group %s: the lane is not held by this member", next, id, g.cfg.Name)
	}
	var rerr error
	offs := map[string]map[int32]kgo.EpochOffset{id.Topic: {id.Partition: {Epoch: -1, Offset: next}}}
	g.cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			rerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && rerr == nil {
					rerr = err
				}
			}
		}
	})
	if rerr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("kafka: commit offset %d of lane %s to group %s: %w", next, id, g.cfg.Name, rerr)
	}
	return nil
}

// Partitions returns every partition of the topics (from the brokers'
// metadata now), sorted: the lanes a bounded job must complete.
func (g *Group) Partitions(ctx context.Context) ([]LaneID, error) {
	md, err := g.adm.Metadata(ctx, g.v.Topics...)
	if err != nil {
		return nil, fmt.Errorf("kafka: metadata of topics %s from brokers %s: %w", strings.Join(g.v.Topics, ","), strings.Join(g.v.Brokers, ","), err)
	}
	var ids []LaneID
	for _, t := range g.v.Topics {
		td, ok := md.Topics[t]
		if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			return nil, &UnknownTopicError{Topic: t, Partition: -1, Brokers: g.v.Brokers}
		}
		if td.Err != nil {
			return nil, fmt.Errorf("kafka: topic %s on brokers %s: %w", t, strings.Join(g.v.Brokers, ","), td.Err)
		}
		for p := range td.Partitions {
			ids = append(ids, LaneID{t, p})
		}
	}
	slices.SortFunc(ids, LaneID.Compare)
	return ids, nil
}

// Leave leaves the group and closes the clients. The Handler's Revoked
// runs for the lanes held before the group hears of the leave, so no other
// member is assigned one of them before it was stopped. A static member
// (InstanceID) does not leave: its partitions move after the session
// timeout. Run then returns nil. Calling Leave again does nothing. A nil
// error guarantees the group acknowledged the leave.
func (g *Group) Leave(ctx context.Context) error {
	if !g.left.CompareAndSwap(false, true) {
		return nil
	}
	err := g.cl.LeaveGroupContext(ctx)
	g.cl.Close()
	g.admCl.Close()
	g.mu.Lock()
	ids := make([]LaneID, 0, len(g.lanes))
	for id := range g.lanes {
		ids = append(ids, id)
	}
	g.mu.Unlock()
	g.detach(ids)
	if err != nil {
		return fmt.Errorf("kafka: leave group %s: %w", g.cfg.Name, err)
	}
	return nil
}
