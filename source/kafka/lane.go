package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/filesink/filesink/source"
)

// Compile-time checks.
var (
	_ source.Source   = (*LaneSource)(nil)
	_ source.Retained = (*LaneSource)(nil)
)

// errLeft ends Run after Leave.
var errLeft = errors.New("kafka: left the group")

// Run polls the group until ctx is done (it returns ctx.Err()) or Leave
// (it returns nil), and hands each partition's records to its lane's
// LaneSource. It never waits for a lane: a lane holding
// DefaultLaneRecords records or DefaultLaneBytes bytes that its Next has
// not taken yet is full; its partition is then paused, the records of the
// poll not handed over are held back (at most one poll's), and once Next
// has taken half of what the lane holds, Run hands them over and resumes
// the partition, which franz-go fetches from the offset after them.
// Memory stays bounded, and a slow lane holds up neither the other lanes
// nor a rebalance: Run allows rebalances after every poll. The records of
// lanes closed, revoked or, bounded, done are dropped and their partitions
// paused until assigned again. A fetch error of a partition becomes its
// lane's error. An error of the group session that rejoining cannot fix
// (authorization, an invalid session timeout, another member with this
// InstanceID...) returns; the Handler's Lost ran before. Run must not run
// twice at once. It does not leave the group: call Leave.
func (g *Group) Run(ctx context.Context) error {
	if !g.running.CompareAndSwap(false, true) {
		return fmt.Errorf("kafka: group %s: Run is already running", g.cfg.Name)
	}
	defer g.running.Store(false)
	for {
		// A lane to resume cancels the poll (wake).
		pctx, cancel := context.WithCancel(ctx)
		g.pollMu.Lock()
		g.pollCancel = cancel
		if len(g.resumeQ) > 0 || len(g.retakeQ) > 0 {
			cancel()
		}
		g.pollMu.Unlock()
		fs := g.cl.PollRecords(pctx, pollRecords)
		g.pollMu.Lock()
		g.pollCancel = nil
		g.pollMu.Unlock()
		cancel()
		// Until AllowRebalance no revoke can run: the partitions are
		// still ours, as SetOffsets wants.
		err := g.pollError(ctx, fs)
		if err == nil {
			g.dispatch(fs)
			g.resumeLanes()
			g.retakeLanes()
		}
		g.cl.AllowRebalance()
		switch {
		case errors.Is(err, errLeft):
			return nil
		case err != nil:
			return err
		}
	}
}

// wake has Run resume lane l: Next took half of what it held.
func (g *Group) wake(l *LaneSource) {
	g.pollMu.Lock()
	defer g.pollMu.Unlock()
	g.resumeQ = append(g.resumeQ, l)
	if g.pollCancel != nil {
		g.pollCancel()
	}
}

// resumeLanes hands the lanes to resume the records they held back and,
// once a lane took all of them, resumes its partition: franz-go fetches it
// again from the offset after the last record it returned, so nothing is
// fetched twice but what it had buffered for the paused partition. Run's
// goroutine only.
func (g *Group) resumeLanes() {
	g.pollMu.Lock()
	q := g.resumeQ
	g.resumeQ = nil
	g.pollMu.Unlock()
	var resume map[string][]int32
	for _, l := range q {
		if l.stash == nil || g.fed(l.id) != l || !l.live() {
			continue
		}
		if !g.offerAll(l, l.stash) {
			continue // still full: Next wakes Run again
		}
		l.stash = nil
		if resume == nil {
			resume = make(map[string][]int32)
		}
		resume[l.id.Topic] = append(resume[l.id.Topic], l.id.Partition)
	}
	if len(resume) > 0 {
		g.cl.ResumeFetchPartitions(resume)
	}
}

// pollError returns the error that ends Run, if fs holds one: ctx's,
// errLeft, or a fatal error of the group session. Other session errors are
// logged: franz-go rejoins by itself.
func (g *Group) pollError(ctx context.Context, fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		switch {
		case errors.Is(fe.Err, kgo.ErrClientClosed):
			if g.left.Load() {
				return errLeft
			}
			return fmt.Errorf("kafka: group %s: the client was closed", g.cfg.Name)
		case fe.Topic != "":
			// A partition's error: its lane's (dispatch).
		case errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, context.DeadlineExceeded):
			if err := ctx.Err(); err != nil {
				return err
			}
		case fatalGroupErr(fe.Err):
			return fmt.Errorf("kafka: group %s on brokers %s: %w", g.cfg.Name, strings.Join(g.v.Brokers, ","), fe.Err)
		case rejoinErr(fe.Err):
			// A rebalance or a stale generation: the lanes it took are
			// logged as lost (release).
			g.log.Info("kafka: group session ended; rejoining", "group", g.cfg.Name, "err", fe.Err)
		default:
			g.log.Warn("kafka: group session error; rejoining", "group", g.cfg.Name, "err", fe.Err)
		}
	}
	return nil
}

// fatalGroupErr reports whether err, from the group session, is one that
// rejoining cannot fix.
func fatalGroupErr(err error) bool {
	ke, ok := errors.AsType[*kerr.Error](err)
	if !ok {
		return false // network: franz-go retries
	}
	switch ke {
	case kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.RebalanceInProgress, kerr.MemberIDRequired,
		kerr.FencedMemberEpoch, kerr.StaleMemberEpoch, kerr.UnknownTopicOrPartition:
		return false // the session ended: rejoin
	}
	return !ke.Retriable
}

// dispatch hands the records of fs to their lanes.
func (g *Group) dispatch(fs kgo.Fetches) {
	for i := range fs {
		for j := range fs[i].Topics {
			t := &fs[i].Topics[j]
			if t.Topic == "" {
				continue
			}
			for k := range t.Partitions {
				fp := &t.Partitions[k]
				id := LaneID{t.Topic, fp.Partition}
				l := g.fed(id)
				if l == nil {
					continue // not held: dropped
				}
				if fp.HighWatermark > 0 {
					l.hwm.Store(fp.HighWatermark)
				}
				g.deliver(l, id, fp.Records)
				if fp.Err != nil {
					l.fail(l.fetchErr(fp.Err, g.v.Brokers))
				}
			}
		}
	}
}

// deliver hands recs to lane l. If the lane becomes full, it pauses the
// partition and holds the rest back (at most one poll's records), to be
// handed over when Next has taken half of what the lane holds. It also
// pauses the partition of a lane closed, revoked or done.
func (g *Group) deliver(l *LaneSource, id LaneID, recs []*kgo.Record) {
	if len(recs) == 0 {
		return
	}
	if !l.live() {
		g.pause(id)
		return
	}
	if l.stash != nil { // fetched before the pause took effect: keep the order
		l.stash = append(l.stash, recs...)
		return
	}
	g.offerAll(l, recs)
}

// offerAll offers recs to lane l in order and reports whether it took them
// all. If it did not, the partition is paused, the rest is l.stash, and
// the lane asks Run to go on when it has room.
func (g *Group) offerAll(l *LaneSource, recs []*kgo.Record) bool {
	for i, r := range recs {
		if l.end >= 0 && r.Offset >= l.end {
			g.pause(l.id)
			l.stash = nil
			return true
		}
		if !l.offer(r) && !l.awaitRoom(r) {
			if l.stash == nil {
				g.cl.PauseFetchPartitions(map[string][]int32{l.id.Topic: {l.id.Partition}})
			}
			l.stash = slices.Clone(recs[i:])
			l.full.Store(true)
			l.maybeResume() // Next may have taken everything meanwhile
			return false
		}
	}
	return true
}

// pause stops fetching lane id's partition until it is assigned again.
func (g *Group) pause(id LaneID) {
	g.mu.Lock()
	done := g.paused[id]
	g.paused[id] = true
	g.mu.Unlock()
	if !done {
		g.cl.PauseFetchPartitions(map[string][]int32{id.Topic: {id.Partition}})
	}
}

// probeLane checks, for a bounded lane that waits, whether everything from
// its next offset to its end is aborted records whose abort marker lies at
// or past the end (see Source.probe): then the consumer never returns
// anything below the end, and the lane is done.
func (g *Group) probeLane(ctx context.Context, l *LaneSource) bool {
	md, err := g.adm.Metadata(ctx, l.id.Topic)
	if err != nil {
		return false
	}
	td, ok := md.Topics[l.id.Topic]
	if !ok {
		return false
	}
	pd, ok := td.Partitions[l.id.Partition]
	if !ok || pd.Leader < 0 {
		return false
	}
	off, ok := probeFetch(ctx, g.admCl, pd.Leader, l.id.Topic, l.id.Partition, td.ID, l.next, l.end)
	return ok && off >= l.end
}

// LaneSource is the source of one lane: the records of one partition that
// the group assigned to this member, from the position the Handler
// returned. It implements source.Source: Next returns the committed
// records in offset order (read_committed: transaction markers and
// records of aborted transactions move the position without being
// returned), with Origin "topic/partition" and the offset, as the Source
// of Open does; bounded, it returns io.EOF once the lane reached its end.
// Position returns the lane position document (see LanePosition).
//
// A LaneSource is not safe for concurrent use: one goroutine calls Next,
// Position and Close (Run hands it records concurrently).
type LaneSource struct {
	g        *Group
	id       LaneID
	name     string // "topic/partition", the Origin name
	desc     string
	interval time.Duration // bounded: idle time before a probe

	ready   chan struct{} // closed once positioned (or refused)
	initErr error         // why the lane has no position; set before ready

	start     string
	next, end int64 // end -1: unbounded

	ch       chan *kgo.Record
	bytes    atomic.Int64 // bytes of the values in ch
	maxBytes int64
	full     atomic.Bool   // the partition is paused until Next drains ch
	waiting  atomic.Bool   // Run waits in awaitRoom for Next to drain ch
	drained  chan struct{} // capacity 1: Next drained ch to half while Run waited
	hwm      atomic.Int64  // the partition's high watermark in the newest fetch

	// Run's goroutine only.
	stash    []*kgo.Record // paused for being full: records held back, in order (Run's goroutine)
	closeCh  chan struct{}
	closeMu  sync.Once
	detachCh chan struct{} // the lane was revoked or lost
	detachMu sync.Once
	errMu    sync.Mutex
	fetchE   error         // a fetch error, behind the records queued before it
	errCh    chan struct{} // closed when fetchE is set

	// Next's goroutine only.
	err     error // sticky
	closed  bool
	settled bool
	timer   *time.Timer
}

func (g *Group) newLane(id LaneID) *LaneSource {
	l := &LaneSource{
		g: g, id: id, name: id.String(), interval: g.v.probeInterval,
		ready: make(chan struct{}), next: 0, end: -1,
		ch: make(chan *kgo.Record, g.cfg.laneRecords), maxBytes: g.cfg.laneBytes, drained: make(chan struct{}, 1),
		closeCh: make(chan struct{}), detachCh: make(chan struct{}),
		errCh: make(chan struct{}),
	}
	l.desc = "kafka lane " + l.name + " of group " + g.cfg.Name + " on " + strings.Join(g.v.Brokers, ",")
	if g.v.Bounded {
		l.desc += " (bounded)"
	}
	return l
}

// setPosition decodes the lane's position; before settle.
func (l *LaneSource) setPosition(pos json.RawMessage, bounded bool) error {
	doc, parts, err := decodeLanePosition(pos)
	if err != nil {
		return err
	}
	p := parts[0]
	if p.topic != l.id.Topic || p.partition != l.id.Partition {
		return fmt.Errorf("%w: kafka position %s: for partition %s/%d, not lane %s", source.ErrBadPosition, truncate(pos, 200), p.topic, p.partition, l.id)
	}
	if doc.Bounded != bounded {
		return &source.InputChangedError{Input: "kafka lane " + l.name, Reason: fmt.Sprintf("the lane position was taken with bounded=%t, the group runs with bounded=%t", doc.Bounded, bounded)}
	}
	l.start, l.next, l.end = doc.Start, p.next, p.end
	return nil
}

// settle makes the lane ready, with the error of a lane without position.
func (l *LaneSource) settle(err error) {
	l.initErr = err
	close(l.ready)
}

func (l *LaneSource) detach() { l.detachMu.Do(func() { close(l.detachCh) }) }

// live reports whether the lane still takes records.
func (l *LaneSource) live() bool {
	select {
	case <-l.closeCh:
		return false
	case <-l.detachCh:
		return false
	default:
		return true
	}
}

// fail records a fetch error; Next returns it once the records queued
// before it are read.
func (l *LaneSource) fail(err error) {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if l.fetchE == nil {
		l.fetchE = err
		close(l.errCh)
	}
}

func (l *LaneSource) fetchErr(err error, brokers []string) error {
	if errors.Is(err, kerr.OffsetOutOfRange) {
		return &source.InputChangedError{Input: "kafka " + l.name,
			Reason: "the lane's offset is out of range: records were deleted (retention) or the topic was recreated"}
	}
	return fmt.Errorf("kafka: fetch lane %s from brokers %s: %w", l.name, strings.Join(brokers, ","), err)
}

// offer queues r for Next unless the lane is full: it holds records and r
// would take it over its records or bytes.
func (l *LaneSource) offer(r *kgo.Record) bool {
	n := int64(len(r.Value))
	if len(l.ch) > 0 && l.bytes.Load()+n > l.maxBytes {
		return false
	}
	l.bytes.Add(n)
	select {
	case l.ch <- r:
		return true
	default:
		l.bytes.Add(-n)
		return false
	}
}

// laneWait is how long Run waits for a full lane to take half of what it
// holds before it pauses the lane's partition. Waiting keeps franz-go's
// fetched data (no poll, no new fetch) where a pause would discard what
// it holds for the partition, to fetch it again; not waiting longer keeps
// a stuck lane from holding up the others and the rebalances.
const laneWait = 250 * time.Millisecond

// awaitRoom waits up to laneWait for the lane to drain to half (Next
// signals it), then offers r again; it reports whether the lane took r.
// A lane closed or revoked meanwhile ends the wait.
func (l *LaneSource) awaitRoom(r *kgo.Record) bool {
	t := time.NewTimer(laneWait)
	defer t.Stop()
	l.waiting.Store(true) // before the check: a drain after it signals
	defer l.waiting.Store(false)
	for l.live() {
		if l.halfEmpty() {
			return l.offer(r)
		}
		select {
		case <-l.drained:
		case <-t.C:
			return false
		case <-l.closeCh:
			return false
		case <-l.detachCh:
			return false
		}
	}
	return false
}

// halfEmpty reports whether the lane holds at most half its records and
// bytes.
func (l *LaneSource) halfEmpty() bool {
	return len(l.ch) <= cap(l.ch)/2 && l.bytes.Load() <= l.maxBytes/2
}

// took accounts for a record Next took from the queue, and tells Run,
// if it waits for room, that there is.
func (l *LaneSource) took(r *kgo.Record) *kgo.Record {
	l.bytes.Add(-int64(len(r.Value)))
	l.maybeResume()
	if l.waiting.Load() && l.halfEmpty() {
		select {
		case l.drained <- struct{}{}:
		default:
		}
	}
	return r
}

// maybeResume has Run resume a lane paused for being full once it holds
// at most half its records and bytes. Run (after pausing) and Next (after
// taking) both call it: whichever sees the lane drained asks, once.
func (l *LaneSource) maybeResume() {
	if l.full.Load() && l.halfEmpty() && l.full.CompareAndSwap(true, false) {
		l.g.wake(l)
	}
}

// errProbedEnd: a probe found nothing to return below the lane's end.
var errProbedEnd = errors.New("kafka: lane probed to its end")

// Next implements source.Source. It returns the next committed record of
// the lane; bounded, io.EOF once the lane's next offset reached its end.
// Cancelling ctx makes it return ctx.Err() with nothing lost. A fetch
// error, the revocation of the lane (Handler.Revoked or Lost returned),
// or a position the lane could not use is sticky. Record.Value stays
// valid as long as it is referenced (ValuesRetained).
func (l *LaneSource) Next(ctx context.Context) (source.Record, error) {
	switch {
	case l.closed:
		return source.Record{}, source.ErrClosed
	case l.err != nil:
		return source.Record{}, l.err
	}
	if !l.settled {
		select {
		case <-l.ready:
		case <-ctx.Done():
			return source.Record{}, ctx.Err()
		}
		l.settled = true
		if l.err = l.initErr; l.err != nil {
			return source.Record{}, l.err
		}
	}
	for {
		if l.end >= 0 && l.next >= l.end {
			return source.Record{}, io.EOF
		}
		r, err := l.wait(ctx)
		switch {
		case err == errProbedEnd:
			l.next = l.end
			continue
		case err != nil && err == ctx.Err():
			return source.Record{}, err
		case err != nil:
			l.err = err
			return source.Record{}, err
		}
		if r.Offset < l.next {
			continue
		}
		if l.end >= 0 && r.Offset >= l.end {
			l.next = l.end
			continue
		}
		l.next = r.Offset + 1
		if r.Attrs.IsControl() {
			continue
		}
		return source.Record{Value: r.Value, Key: r.Key, Origin: source.Origin{Name: l.name, Num: r.Offset}}, nil
	}
}

// wait returns the next queued record; or ctx's error; or, once the
// queue is empty, a fetch error or the lane's revocation; or, bounded and
// idle for the probe interval, errProbedEnd if a probe found the end.
func (l *LaneSource) wait(ctx context.Context) (*kgo.Record, error) {
	for {
		select {
		case r := <-l.ch:
			return l.took(r), nil
		default:
		}
		select {
		case <-l.errCh:
			l.errMu.Lock()
			defer l.errMu.Unlock()
			return nil, l.fetchE
		case <-l.detachCh:
			return nil, fmt.Errorf("kafka: lane %s of group %s: %w", l.name, l.g.cfg.Name, ErrLaneRevoked)
		default:
		}
		var probe <-chan time.Time
		if l.end >= 0 {
			if l.timer == nil {
				l.timer = time.NewTimer(l.interval)
			} else {
				l.timer.Reset(l.interval)
			}
			probe = l.timer.C
		}
		select {
		case r := <-l.ch:
			return l.took(r), nil
		case <-l.errCh:
		case <-l.detachCh:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-probe:
			if l.g.probeLane(ctx, l) {
				return nil, errProbedEnd
			}
		}
	}
}

// Position implements source.Source: the lane position document (see
// LanePosition) with the offset after the last record Next returned (or
// after the markers and aborted records that followed it). Before
// Handler.Assigned returned it waits for it; for a lane without a usable
// position it returns the reason. It may be called after Close.
func (l *LaneSource) Position() (json.RawMessage, error) {
	<-l.ready
	if l.initErr != nil {
		return nil, l.initErr
	}
	return EncodeLanePosition(l.id, l.start, l.next, l.end), nil
}

// Replayable implements source.Source: it returns true.
func (l *LaneSource) Replayable() bool { return true }

// HighWatermark returns the partition's high watermark (the offset after
// its last record) in the newest fetch, 0 before one. Safe for concurrent
// use.
func (l *LaneSource) HighWatermark() int64 { return l.hwm.Load() }

// ValuesRetained implements source.Retained: a record's value is the
// fetch's memory, never reused.
func (l *LaneSource) ValuesRetained() bool { return true }

// Describe implements source.Source, e.g. "kafka lane orders/3 of group
// g on 10.0.0.1:9092 (bounded)". It never contains credentials.
func (l *LaneSource) Describe() string { return l.desc }

// Close implements source.Source: it detaches the source from the group;
// records fetched for it from then on are dropped (and its partition is
// paused until assigned again). It does not leave the group. Calling it
// again does nothing.
func (l *LaneSource) Close() error {
	l.closed = true
	l.closeMu.Do(func() { close(l.closeCh) })
	if l.timer != nil {
		l.timer.Stop()
	}
	return nil
}

// EncodeLanePosition returns the position document of a lane:
//
//	{"v":1,"start":"earliest","bounded":true,
//	 "partitions":[{"topic":"t","partition":3,"next":42,"end":100}]}
//
// the position document of Open with exactly one partition. start is how
// the first start was resolved ("earliest", "latest" or an RFC 3339
// time); end is the offset a bounded lane stops at, -1 for an unbounded
// one.
func EncodeLanePosition(id LaneID, start string, next, end int64) json.RawMessage {
	p := &part{topic: id.Topic, partition: id.Partition, next: next, end: end}
	return appendPosition(make([]byte, 0, 128), start, end >= 0, []*part{p})
}

// LanePosition decodes a lane position document (EncodeLanePosition): the
// lane, its next offset and its end (-1: unbounded). A malformed document,
// or one with other than one partition, is an error matching
// source.ErrBadPosition.
func LanePosition(pos json.RawMessage) (id LaneID, next, end int64, err error) {
	_, parts, err := decodeLanePosition(pos)
	if err != nil {
		return LaneID{}, 0, 0, err
	}
	p := parts[0]
	return LaneID{p.topic, p.partition}, p.next, p.end, nil
}

func decodeLanePosition(pos json.RawMessage) (posDoc, []part, error) {
	if isNullPosition(pos) {
		return posDoc{}, nil, fmt.Errorf("%w: kafka lane position: empty", source.ErrBadPosition)
	}
	doc, parts, err := decodePosition(pos)
	if err != nil {
		return doc, nil, err
	}
	if len(parts) != 1 {
		return doc, nil, fmt.Errorf("%w: kafka position %s: a lane position has one partition, not %d", source.ErrBadPosition, truncate(pos, 200), len(parts))
	}
	return doc, parts, nil
}
