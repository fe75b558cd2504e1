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
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/source"
)

// event is a Handler call (or a lane's end or error), numbered in the order
// of all members' events.
type event struct {
	seq    int
	member string
	kind   string // assigned, revoked, lost, eof, error
	lanes  []LaneID
	gen    int32
	pos    json.RawMessage // eof: the lane's final position
	err    error
}

// journal orders the events of every member of a test.
type journal struct {
	mu sync.Mutex
	ev []event
}

func (j *journal) add(e event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e.seq = len(j.ev) + 1
	j.ev = append(j.ev, e)
}

func (j *journal) events() []event {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.ev)
}

// first returns the first event of member of kind holding lane (any lane if
// lane is nil) after seq.
func (j *journal) first(member, kind string, lane *LaneID, after int) (event, bool) {
	for _, e := range j.events() {
		if e.seq > after && e.member == member && e.kind == kind && (lane == nil || slices.Contains(e.lanes, *lane)) {
			return e, true
		}
	}
	return event{}, false
}

// laneStore is the lanes' state shared by the members: what a HEAD is to
// the group runner. A reader stores its lane's position after each record.
type laneStore struct {
	mu  sync.Mutex
	pos map[LaneID]json.RawMessage
}

func (s *laneStore) get(id LaneID) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pos[id]
}

func (s *laneStore) put(id LaneID, pos json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pos[id] = pos
}

// gotRec is a record a member's lane returned.
type gotRec struct {
	member string
	rec
}

// fakeHandler is a Handler that runs a reader goroutine per lane, as the
// group runner runs a pipeline.
type fakeHandler struct {
	member string
	j      *journal
	store  *laneStore
	out    chan gotRec
	gset   chan struct{}
	g      *Group
	// first, if set, rewrites the first position of a lane.
	first func(id LaneID, pos json.RawMessage) json.RawMessage
	// leaveOut lanes get no position.
	leaveOut map[LaneID]bool
	// gateLane's reader waits for gate before reading.
	gateLane LaneID
	gate     chan struct{}
	// noCommit: Revoked commits nothing to the group.
	noCommit bool

	mu      sync.Mutex
	readers map[LaneID]*laneReader
}

type laneReader struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func newFakeHandler(member string, j *journal, store *laneStore, out chan gotRec) *fakeHandler {
	return &fakeHandler{member: member, j: j, store: store, out: out, gset: make(chan struct{}), readers: make(map[LaneID]*laneReader)}
}

func (h *fakeHandler) Assigned(ctx context.Context, gen int32, lanes []LaneID) map[LaneID]json.RawMessage {
	<-h.gset
	h.j.add(event{member: h.member, kind: "assigned", lanes: lanes, gen: gen})
	pos := make(map[LaneID]json.RawMessage)
	var fresh []LaneID
	for _, id := range lanes {
		if h.g.Lane(id) == nil {
			h.j.add(event{member: h.member, kind: "error", lanes: []LaneID{id}, err: errors.New("Lane is nil inside Assigned")})
		}
		switch {
		case h.leaveOut[id]:
		case h.store.get(id) != nil:
			pos[id] = h.store.get(id)
		default:
			fresh = append(fresh, id)
		}
	}
	if len(fresh) > 0 {
		fp, err := h.g.FirstPositions(ctx, fresh)
		if err != nil {
			h.j.add(event{member: h.member, kind: "error", lanes: fresh, err: err})
		}
		for id, p := range fp {
			if h.first != nil {
				p = h.first(id, p)
			}
			pos[id] = p
		}
	}
	for id := range pos {
		h.start(id)
	}
	return pos
}

// start runs the reader of lane id: Next until io.EOF, an error or the
// lane's stop, storing the position after each record.
func (h *fakeHandler) start(id LaneID) {
	src := h.g.Lane(id)
	ctx, cancel := context.WithCancel(context.Background())
	r := &laneReader{cancel: cancel, done: make(chan struct{})}
	h.mu.Lock()
	h.readers[id] = r
	h.mu.Unlock()
	go func() {
		defer close(r.done)
		defer src.Close()
		for {
			if h.gate != nil && id == h.gateLane {
				select {
				case <-h.gate:
				case <-ctx.Done():
					return
				}
			}
			rc, err := src.Next(ctx)
			switch {
			case err == io.EOF:
				pos, _ := src.Position()
				if _, err := src.Next(ctx); err != io.EOF {
					h.j.add(event{member: h.member, kind: "error", lanes: []LaneID{id}, err: fmt.Errorf("Next after io.EOF: %v", err)})
				}
				h.j.add(event{member: h.member, kind: "eof", lanes: []LaneID{id}, pos: pos})
				return
			case ctx.Err() != nil:
				return
			case err != nil:
				h.j.add(event{member: h.member, kind: "error", lanes: []LaneID{id}, err: err})
				return
			}
			pos, err := src.Position()
			if err != nil {
				h.j.add(event{member: h.member, kind: "error", lanes: []LaneID{id}, err: err})
				return
			}
			h.store.put(id, pos)
			h.out <- gotRec{h.member, rec{rc.Origin.String(), string(rc.Value)}}
		}
	}()
}

func (h *fakeHandler) stop(lanes []LaneID) {
	for _, id := range lanes {
		h.mu.Lock()
		r := h.readers[id]
		delete(h.readers, id)
		h.mu.Unlock()
		if r != nil {
			r.cancel()
			<-r.done
		}
	}
}

// Revoked stops the lanes and, as the group runner's final checkpoint
// does, commits their offsets to the group.
func (h *fakeHandler) Revoked(ctx context.Context, lanes []LaneID) {
	h.j.add(event{member: h.member, kind: "revoked", lanes: lanes})
	h.stop(lanes)
	for _, id := range lanes {
		pos := h.store.get(id)
		if pos == nil || h.noCommit {
			continue
		}
		_, next, _, err := LanePosition(pos)
		if err == nil {
			err = h.g.CommitLane(ctx, id, next)
		}
		if err != nil {
			h.j.add(event{member: h.member, kind: "error", lanes: []LaneID{id}, err: fmt.Errorf("CommitLane in Revoked: %w", err)})
		}
	}
}

func (h *fakeHandler) Lost(_ context.Context, lanes []LaneID) {
	h.j.add(event{member: h.member, kind: "lost", lanes: lanes})
	h.stop(lanes)
}

// held returns the lanes whose readers run.
func (h *fakeHandler) held() []LaneID {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []LaneID
	for id := range h.readers {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, LaneID.Compare)
	return ids
}

// groupTest is a kfake cluster with topic "t" of 4 partitions and short
// group sessions allowed, and the state its members share.
type groupTest struct {
	t     *testing.T
	c     *kafkatest.Cluster
	j     *journal
	store *laneStore
	out   chan gotRec
}

func newGroupTest(t *testing.T) *groupTest {
	c := kafkatest.StartConfig(t, kafkatest.Config{
		Topics:                 []kafkatest.Topic{{Name: "t", Partitions: 4}},
		GroupMinSessionTimeout: 500 * time.Millisecond,
	})
	return &groupTest{t: t, c: c, j: &journal{}, store: &laneStore{pos: map[LaneID]json.RawMessage{}}, out: make(chan gotRec, 1<<16)}
}

func (gt *groupTest) config() GroupConfig {
	return GroupConfig{Config: testConfig(gt.c, "t"), Name: "g", SessionTimeout: 3 * time.Second, RebalanceTimeout: 20 * time.Second}
}

func (gt *groupTest) handler(member string) *fakeHandler {
	return newFakeHandler(member, gt.j, gt.store, gt.out)
}

// join joins the group with h and runs it; the member leaves when the test
// ends. The returned channel gets Run's result.
func (gt *groupTest) join(cfg GroupConfig, h *fakeHandler) (*Group, <-chan error) {
	t := gt.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	g, err := JoinGroup(ctx, cfg, h)
	if err != nil {
		t.Fatalf("JoinGroup: %v", err)
	}
	h.g = g
	close(h.gset)
	runc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runc <- g.Run(context.Background())
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		_ = g.Leave(ctx)
		h.stop(h.held())
		<-done
	})
	return g, runc
}

// records reads n records from the members' lanes.
func (gt *groupTest) records(n int) []gotRec {
	gt.t.Helper()
	var got []gotRec
	timeout := time.After(testTimeout)
	for len(got) < n {
		select {
		case r := <-gt.out:
			got = append(got, r)
		case <-timeout:
			gt.t.Fatalf("got %d records of %d: %v; events %v", len(got), n, got, gt.j.events())
		}
	}
	return got
}

// noErrors fails the test on an error event.
func (gt *groupTest) noErrors() {
	gt.t.Helper()
	for _, e := range gt.j.events() {
		if e.kind == "error" {
			gt.t.Errorf("%s lanes %v: %v", e.member, e.lanes, e.err)
		}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func recs(got []gotRec) []rec {
	out := make([]rec, len(got))
	for i, r := range got {
		out[i] = r.rec
	}
	return out
}

func lanes(ps ...int32) []LaneID {
	ids := make([]LaneID, len(ps))
	for i, p := range ps {
		ids[i] = LaneID{"t", p}
	}
	return ids
}

// TestGroupOneMember: one member gets the 4 partitions; each lane reads
// from the position Assigned returned (offset 2 for t/1), a lane left out
// is not read and has no source, a lane whose position does not fit the
// group fails with ErrInputChanged; CommitLane reaches the group.
func TestGroupOneMember(t *testing.T) {
	gt := newGroupTest(t)
	want := produceN(t, gt.c, "t", 4, 5)
	h := gt.handler("A")
	h.leaveOut = map[LaneID]bool{{"t", 2}: true}
	h.first = func(id LaneID, pos json.RawMessage) json.RawMessage {
		switch id.Partition {
		case 1:
			return EncodeLanePosition(id, "earliest", 2, -1)
		case 3:
			return EncodeLanePosition(id, "earliest", 0, 99) // bounded, in an unbounded group
		}
		return pos
	}
	g, _ := gt.join(gt.config(), h)
	var exp []rec
	for _, r := range want {
		if r.Origin[:4] == "t/0:" || (r.Origin[:4] == "t/1:" && r.Origin >= "t/1:2") {
			exp = append(exp, r)
		}
	}
	sameRecords(t, recs(gt.records(len(exp))), exp)

	ev, ok := gt.j.first("A", "assigned", nil, 0)
	if !ok || !slices.Equal(ev.lanes, lanes(0, 1, 2, 3)) || ev.gen < 1 {
		t.Fatalf("first assignment %+v, want lanes t/0..t/3 in a generation >= 1", ev)
	}
	if gen := g.Generation(); gen != ev.gen || g.MemberID() == "" {
		t.Errorf("Generation %d (Assigned got %d), MemberID %q", gen, ev.gen, g.MemberID())
	}
	if g.Lane(LaneID{"t", 2}) != nil || g.Lane(LaneID{"t", 0}) == nil {
		t.Errorf("Lane(t/2) = %v (left out), Lane(t/0) = %v", g.Lane(LaneID{"t", 2}), g.Lane(LaneID{"t", 0}))
	}
	waitUntil(t, "the error of lane t/3", func() bool { _, ok := gt.j.first("A", "error", &LaneID{"t", 3}, 0); return ok })
	e3, _ := gt.j.first("A", "error", &LaneID{"t", 3}, 0)
	if !errors.Is(e3.err, source.ErrInputChanged) {
		t.Errorf("lane t/3 with a bounded position: %v, want ErrInputChanged", e3.err)
	}

	// New records arrive; none of the lane left out.
	more := []rec{}
	for _, p := range []int32{0, 1, 2} {
		offs := gt.c.MustProduce(t, "t", p, fmt.Sprintf("more-%d", p))
		if p != 2 {
			more = append(more, rec{fmt.Sprintf("t/%d:%d", p, offs[0]), fmt.Sprintf("more-%d", p)})
		}
	}
	sameRecords(t, recs(gt.records(len(more))), more)

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	parts, err := g.Partitions(ctx)
	if err != nil || !slices.Equal(parts, lanes(0, 1, 2, 3)) {
		t.Fatalf("Partitions: %v, %v", parts, err)
	}
	if err := g.CommitLane(ctx, LaneID{"t", 0}, 6); err != nil {
		t.Fatalf("CommitLane: %v", err)
	}
	if err := g.CommitLane(ctx, LaneID{"t", 2}, 1); err == nil {
		t.Error("CommitLane of a lane left out succeeded")
	}
	offs, err := g.adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("t", 0); !ok || o.At != 6 {
		t.Errorf("group offset of t/0: %+v (found %v), want 6", o, ok)
	}
	gt.noErrorsBut(LaneID{"t", 3})
	select {
	case r := <-gt.out:
		t.Errorf("unexpected record %v", r)
	default:
	}
}

// noErrorsBut is noErrors except for the lanes given.
func (gt *groupTest) noErrorsBut(except ...LaneID) {
	gt.t.Helper()
	for _, e := range gt.j.events() {
		if e.kind == "error" && !slices.Equal(e.lanes, except) {
			gt.t.Errorf("%s lanes %v: %v", e.member, e.lanes, e.err)
		}
	}
}

// TestGroupTwoMembersHandoff: a second member takes half the lanes, and
// when it leaves the first takes them back; a lane's Revoked on its owner
// runs before the next owner's Assigned, the group's committed offsets are
// never read, and across the moves every record is read exactly once.
func TestGroupTwoMembersHandoff(t *testing.T) {
	gt := newGroupTest(t)
	want := produceN(t, gt.c, "t", 4, 5)
	ha, hb := gt.handler("A"), gt.handler("B")
	_, runA := gt.join(gt.config(), ha)
	got := gt.records(len(want))

	gb, runB := gt.join(gt.config(), hb)
	waitUntil(t, "two lanes each", func() bool { return len(ha.held()) == 2 && len(hb.held()) == 2 })
	moved := hb.held()
	more := produceN(t, gt.c, "t", 4, 3)
	want = append(want, more...)
	got = append(got, gt.records(len(more))...)
	for _, id := range moved {
		rv, ok := gt.j.first("A", "revoked", &id, 0)
		as, ok2 := gt.j.first("B", "assigned", &id, 0)
		if !ok || !ok2 || rv.seq > as.seq {
			t.Errorf("lane %s: A's Revoked %+v (found %v) must come before B's Assigned %+v (found %v)", id, rv, ok, as, ok2)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// Offset 0 in the group for B's lanes (and no commit when B leaves):
	// were it read, A would read them again from the start.
	hb.noCommit = true
	for _, id := range moved {
		if err := gb.CommitLane(ctx, id, 0); err != nil {
			t.Fatalf("CommitLane(%s): %v", id, err)
		}
	}
	mark := len(gt.j.events())
	if err := gb.Leave(ctx); err != nil {
		t.Fatalf("B's Leave: %v", err)
	}
	if err := <-runB; err != nil {
		t.Fatalf("B's Run after Leave: %v", err)
	}
	waitUntil(t, "A holding the four lanes", func() bool { return len(ha.held()) == 4 })
	for _, id := range moved {
		rv, ok := gt.j.first("B", "revoked", &id, mark)
		as, ok2 := gt.j.first("A", "assigned", &id, mark)
		if !ok || !ok2 || rv.seq > as.seq {
			t.Errorf("lane %s: B's Revoked %+v (found %v) must come before A's Assigned %+v (found %v)", id, rv, ok, as, ok2)
		}
	}
	more = produceN(t, gt.c, "t", 4, 2)
	want = append(want, more...)
	got = append(got, gt.records(len(more))...)
	sameRecords(t, recs(got), want)
	if _, ok := gt.j.first("A", "lost", nil, 0); ok {
		t.Error("A lost lanes")
	}
	gt.noErrors()
	select {
	case err := <-runA:
		t.Fatalf("A's Run returned: %v", err)
	default:
	}
}

// produceTxnMix fills the four partitions of topic "t": plain records
// and an aborted transaction, a committed transaction, nothing, and a
// record, an aborted transaction and one left open. It returns each
// partition's last stable offset.
func produceTxnMix(t *testing.T, c *kafkatest.Cluster) map[LaneID]int64 {
	t.Helper()
	c.MustProduce(t, "t", 0, "a", "b")                 // 0 1
	c.MustProduceTxn(t, "x0", false, "t", 0, "x", "y") // 2 3, abort marker 4
	c.MustProduceTxn(t, "x1", true, "t", 1, "c")       // 0, commit marker 1
	c.MustProduce(t, "t", 3, "d")                      // 0
	txA, _ := c.MustOpenTxn(t, "A", "t", 3, "ABORTED") // 1
	c.MustOpenTxn(t, "B", "t", 3, "e")                 // 2, left open
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := txA.Abort(ctx); err != nil { // marker at 3; LSO 2 (B open)
		t.Fatal(err)
	}
	return map[LaneID]int64{{"t", 0}: 5, {"t", 1}: 2, {"t", 2}: 0, {"t", 3}: 2}
}

// TestLaneBoundedEOF: bounded lanes end at the last stable offset of their
// first start: after an aborted transaction, after a commit marker, at
// once for an empty partition, and, probed, where the records below the
// end are aborted and their abort marker lies past it. io.EOF is sticky
// and records produced later are not read.
func TestLaneBoundedEOF(t *testing.T) {
	gt := newGroupTest(t)
	c := gt.c
	wantEnd := produceTxnMix(t, c)
	cfg := gt.config()
	cfg.Bounded = true
	h := gt.handler("A")
	gt.join(cfg, h)
	waitUntil(t, "io.EOF on the four lanes", func() bool {
		n := 0
		for id := range wantEnd {
			if _, ok := gt.j.first("A", "eof", &id, 0); ok {
				n++
			}
		}
		return n == 4
	})
	sameRecords(t, recs(gt.records(4)), []rec{{"t/0:0", "a"}, {"t/0:1", "b"}, {"t/1:0", "c"}, {"t/3:0", "d"}})
	for id, end := range wantEnd {
		e, _ := gt.j.first("A", "eof", &id, 0)
		lid, next, lend, err := LanePosition(e.pos)
		if err != nil || lid != id || next != end || lend != end {
			t.Errorf("lane %s final position %s: lane %v next %d end %d (%v), want next = end = %d", id, e.pos, lid, next, lend, err, end)
		}
	}
	c.MustProduce(t, "t", 0, "late")
	gt.noErrors()
	select {
	case r := <-gt.out:
		t.Errorf("record after the end: %v", r)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestGroupLost: a member whose heartbeats stop reaching the group loses
// its lanes when its session times out (Lost, no Revoked); the other member
// takes them, and once the first is back the lanes are shared again with
// every record read exactly once.
func TestGroupLost(t *testing.T) {
	gt := newGroupTest(t)
	want := produceN(t, gt.c, "t", 4, 3)
	cfg := gt.config()
	cfg.SessionTimeout = time.Second
	ha, hb := gt.handler("A"), gt.handler("B")
	gt.join(cfg, ha)
	got := gt.records(len(want))
	gb, _ := gt.join(cfg, hb)
	waitUntil(t, "two lanes each", func() bool { return len(ha.held()) == 2 && len(hb.held()) == 2 })
	heldA := ha.held()

	// Cut A off the group: its heartbeats, joins and syncs (every one
	// not from B) get their connection closed, until B holds the four
	// lanes.
	var mu sync.Mutex
	cut := true
	memberB := gb.MemberID()
	cutOff := func(req kmsg.Request) bool {
		var member string
		switch r := req.(type) {
		case *kmsg.HeartbeatRequest:
			member = r.MemberID
		case *kmsg.JoinGroupRequest:
			member = r.MemberID
		case *kmsg.SyncGroupRequest:
			member = r.MemberID
		}
		mu.Lock()
		defer mu.Unlock()
		return cut && member != memberB
	}
	for _, key := range []kmsg.Key{kmsg.Heartbeat, kmsg.JoinGroup, kmsg.SyncGroup} {
		gt.c.ControlKey(key.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
			gt.c.KeepControl()
			if cutOff(req) {
				return nil, errors.New("cut off"), true
			}
			return nil, nil, false
		})
	}
	mark := len(gt.j.events())
	waitUntil(t, "A's Lost and B holding the four lanes", func() bool {
		_, lost := gt.j.first("A", "lost", nil, mark)
		return lost && len(hb.held()) == 4
	})
	lost, _ := gt.j.first("A", "lost", nil, mark)
	if !slices.Equal(lost.lanes, heldA) {
		t.Errorf("A lost %v, want its lanes %v", lost.lanes, heldA)
	}
	if rv, ok := gt.j.first("A", "revoked", nil, mark); ok && len(rv.lanes) > 0 {
		t.Errorf("A's lanes were revoked (%v), want lost", rv.lanes)
	}
	mu.Lock()
	cut = false
	mu.Unlock()
	waitUntil(t, "A back with lanes", func() bool { return len(ha.held()) == 2 && len(hb.held()) == 2 })
	more := produceN(t, gt.c, "t", 4, 3)
	want = append(want, more...)
	got = append(got, gt.records(len(more))...)
	sameRecords(t, recs(got), want)
	gt.noErrors()
}

// TestLaneFull: a lane whose reader does not read holds up neither the
// other lanes nor a rebalance (a second member joining): its partition is
// paused and rewound while it is full, and nothing is lost or read twice.
func TestLaneFull(t *testing.T) {
	gt := newGroupTest(t)
	want := produceN(t, gt.c, "t", 4, 20)
	cfg := gt.config()
	cfg.laneRecords = 2
	cfg.RebalanceTimeout = time.Minute
	ha, hb := gt.handler("A"), gt.handler("B")
	ha.gateLane, ha.gate = LaneID{"t", 0}, make(chan struct{})
	gt.join(cfg, ha)
	got := gt.records(60) // the other three lanes
	gt.join(cfg, hb)
	waitUntil(t, "B's lanes while A's lane t/0 is not read", func() bool { return len(hb.held()) == 2 })
	if e, ok := gt.j.first("A", "lost", nil, 0); ok {
		t.Fatalf("A lost %v: the rebalance waited for it", e.lanes)
	}
	close(ha.gate)
	got = append(got, gt.records(len(want)-len(got))...)
	more := produceN(t, gt.c, "t", 4, 20)
	want = append(want, more...)
	got = append(got, gt.records(len(more))...)
	sameRecords(t, recs(got), want)
	gt.noErrors()
}

// TestLanePosition: lane positions are the position document with one
// partition.
func TestLanePosition(t *testing.T) {
	id := LaneID{"orders", 3}
	if id.String() != "orders/3" {
		t.Fatalf("String %q", id.String())
	}
	for _, end := range []int64{-1, 100} {
		pos := EncodeLanePosition(id, "latest", 42, end)
		got, next, gend, err := LanePosition(pos)
		if err != nil || got != id || next != 42 || gend != end {
			t.Errorf("LanePosition(%s) = %v %d %d %v", pos, got, next, gend, err)
		}
	}
	want := `{"v":1,"start":"earliest","bounded":true,"partitions":[{"topic":"orders","partition":3,"next":5,"end":9}]}`
	if pos := EncodeLanePosition(id, "earliest", 5, 9); string(pos) != want {
		t.Errorf("EncodeLanePosition = %s, want %s", pos, want)
	}
	for _, bad := range []string{"", "null", "garbage",
		`{"v":1,"start":"earliest","bounded":false,"partitions":[{"topic":"t","partition":0,"next":1},{"topic":"t","partition":1,"next":1}]}`,
		`{"v":1,"start":"earliest","bounded":false,"partitions":[{"topic":"t","partition":0,"next":1,"end":3}]}`,
	} {
		if _, _, _, err := LanePosition(json.RawMessage(bad)); !errors.Is(err, source.ErrBadPosition) {
			t.Errorf("LanePosition(%q): %v, want ErrBadPosition", bad, err)
		}
	}
}

// TestGroupConfigErrors: a group refuses selected partitions, a
// monitoring group, no name, no handler, and an unknown topic.
func TestGroupConfigErrors(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Topic{Name: "t", Partitions: 1})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	h := newFakeHandler("A", &journal{}, &laneStore{}, nil)
	base := GroupConfig{Config: testConfig(c, "t"), Name: "g"}
	for _, tc := range []struct {
		cfg   func(*GroupConfig)
		h     Handler
		inErr string
	}{
		{func(g *GroupConfig) { g.Partitions = []int32{0} }, h, "partitions cannot be selected"},
		{func(g *GroupConfig) { g.Group = "dash" }, h, "monitor_group"},
		{func(g *GroupConfig) { g.Name = "" }, h, "no group name"},
		{func(g *GroupConfig) { g.SessionTimeout = -time.Second }, h, "negative"},
		{func(*GroupConfig) {}, nil, "no handler"},
		{func(g *GroupConfig) { g.Topics = []string{"nope"} }, h, "topic nope does not exist"},
	} {
		cfg := base
		tc.cfg(&cfg)
		_, err := JoinGroup(ctx, cfg, tc.h)
		if err == nil || !strings.Contains(err.Error(), tc.inErr) {
			t.Errorf("JoinGroup: %v, want an error containing %q", err, tc.inErr)
		}
	}
}
