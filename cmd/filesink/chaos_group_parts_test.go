//go:build unix

package main

// Parts across lane checkpoints in the group chaos test: which parts were
// open at two or more decided lane checkpoints, and what ended their
// writer's hold of the lane. The lane HEAD writes go through the proxy:
// their bodies are kept by ETag, and the decided ones (an OK reply in the
// proxy's audit log) give, checkpoint after checkpoint, the parts each
// owner had in progress and their recorded lengths. The events are placed
// in the same order by the audit log's Seq at the moment they happen.

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/internal/testutil/faultproxy"
)

// headBodies keeps the bodies of lane HEAD writes by their MD5 (the ETag
// MinIO answers a PutObject with). Safe for concurrent use.
type headBodies struct {
	mu     sync.Mutex
	byETag map[string][]byte
}

// capture is a proxy rule's Match: it keeps the body of a lane HEAD write
// and never fires.
func (h *headBodies) capture(r *http.Request) bool {
	if !strings.Contains(r.URL.Path, "/"+groupChaosLanes) || !strings.HasSuffix(r.URL.Path, "/"+s3sink.LaneHeadFile) {
		return false
	}
	b, err := faultproxy.PeekBody(r)
	if err != nil {
		return false
	}
	sum := md5.Sum(b)
	h.mu.Lock()
	h.byETag[hex.EncodeToString(sum[:])] = b
	h.mu.Unlock()
	return false
}

func (h *headBodies) get(etag string) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byETag[strings.Trim(etag, `"`)]
}

// captureHeads adds the proxy rule that keeps the lane HEAD bodies, ahead
// of every rule (one that fired first would hide a body from it).
func (g *groupChaos) captureHeads() {
	g.heads = &headBodies{byETag: map[string][]byte{}}
	g.proxy.AddFirst(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.PutObject}, Match: g.heads.capture})
}

// hit is an event that hit a process: its kind, and the audit log's Seq
// when it happened.
type hit struct {
	kind string
	seq  int64
}

// hitProcess notes that an event of kind hit process m.
func (g *groupChaos) hitProcess(m *groupMember, kind string) {
	g.hits[m.p.PID()] = append(g.hits[m.p.PID()], hit{kind, g.proxy.Seq()})
}

// openPart is a part file that decided lane checkpoints recorded in
// progress.
type openPart struct {
	lane     string
	epoch    uint64
	pid      int   // of the owner that wrote it
	seen     int   // decided checkpoints that recorded it in progress
	lastSeq  int64 // the last of them
	length   int64 // the length it recorded
	closedBy int64 // Seq of a later decided checkpoint of the same owner epoch (0: none)
	current  bool  // the lane's newest decided checkpoint recorded it in progress
}

// laneParts reads the decided lane HEAD writes and returns the parts they
// recorded in progress, by target, and the number of decided writes whose
// body the proxy did not keep.
func (g *groupChaos) laneParts() (parts map[string]*openPart, missing int) {
	parts = map[string]*openPart{}
	lastOfEpoch := map[string]int64{} // lane/epoch -> Seq of its last decided HEAD
	lastOfLane := map[string]int64{}  // lane -> Seq of its last decided HEAD
	for _, r := range g.proxy.Replies() {
		if r.Kind != faultproxy.PutObject || !r.OK() || !strings.HasPrefix(r.Key, groupChaosLanes) || !strings.HasSuffix(r.Key, "/"+s3sink.LaneHeadFile) {
			continue
		}
		h, ok := decodeLaneHead(g.heads.get(r.ETag))
		if !ok {
			missing++
			continue
		}
		lane := strings.TrimSuffix(strings.TrimPrefix(r.Key, groupChaosLanes), "/"+s3sink.LaneHeadFile)
		lastOfEpoch[epochKey(lane, h.Epoch)] = r.Seq
		lastOfLane[lane] = r.Seq
		if h.Checkpoint == nil {
			continue
		}
		for _, p := range h.Checkpoint.Participants {
			var st struct {
				Parts []struct {
					Part struct {
						Target string `json:"target"`
						Length int64  `json:"length"`
					} `json:"part"`
				} `json:"parts"`
			}
			if json.Unmarshal(p.State, &st) != nil {
				continue
			}
			for _, e := range st.Parts {
				op := parts[e.Part.Target]
				if op == nil {
					op = &openPart{lane: lane, epoch: h.Epoch, pid: h.Owner.PID}
					parts[e.Part.Target] = op
				}
				op.seen++
				op.lastSeq, op.length = r.Seq, e.Part.Length
			}
		}
	}
	for _, op := range parts {
		if last := lastOfEpoch[epochKey(op.lane, op.epoch)]; last > op.lastSeq {
			op.closedBy = last
		}
		op.current = op.lastSeq == lastOfLane[op.lane]
	}
	return parts, missing
}

// spanningOwners returns the members of ms whose lane's newest decided
// checkpoint recorded a part in progress that an earlier one had recorded
// too: an event that hits one of them crosses a part open across lane
// checkpoints.
func (g *groupChaos) spanningOwners(ms []*groupMember) []*groupMember {
	parts, _ := g.laneParts()
	pids := map[int]bool{}
	for _, op := range parts {
		if op.seen >= 2 && op.current {
			pids[op.pid] = true
		}
	}
	var out []*groupMember
	for _, m := range ms {
		if pids[m.p.PID()] {
			out = append(out, m)
		}
	}
	return out
}

// decodeLaneHead decodes the body of a lane HEAD write: the head's JSON
// in a frame with its CRC.
func decodeLaneHead(body []byte) (h s3sink.LaneHead, ok bool) {
	var frame struct {
		Head json.RawMessage `json:"head"`
	}
	if body == nil || json.Unmarshal(body, &frame) != nil || json.Unmarshal(frame.Head, &h) != nil {
		return h, false
	}
	return h, true
}

func epochKey(lane string, epoch uint64) string { return lane + "@" + strconv.FormatUint(epoch, 10) }

// checkSpanningParts finds the visible parts that were open at two or more
// decided checkpoints of their lane and tells, by the event that ended
// their writer's hold of the lane, how they were closed:
//   - kill9, zombie: no later checkpoint of the writer's epoch; the next
//     owner closed the part at the length the last one recorded (the
//     object has exactly that length: no byte the writer wrote after it,
//     as a zombie goes on writing, is in it);
//   - scale-down: the writer's own final checkpoint after SIGTERM closed it;
//   - policy: the writer closed it otherwise (the rolling policy, the end
//     of the lane).
//
// With at least groupChaosSpanEvents events, each of kill9, zombie and
// scale-down must have closed one.
func (g *groupChaos) checkSpanningParts() {
	objs := g.visibleObjects()
	by := map[string]int{}
	var short []string
	parts, missing := g.laneParts()
	if missing > 0 {
		g.note("lane HEAD writes whose body the proxy did not keep: %d", missing)
	}
	for target, op := range parts {
		size, visible := objs[target]
		if op.seen < 2 || !visible {
			continue
		}
		kind := g.spanEnd(op)
		by[kind]++
		if (kind == "kill9" || kind == "zombie") && size != op.length {
			short = append(short, target)
		}
	}
	g.note("parts open at 2 or more decided lane checkpoints, by what closed them: %v", by)
	if len(short) > 0 {
		slices.Sort(short)
		g.t.Errorf("%d part(s) taken over in progress whose published length is not the length the last checkpoint recorded, e.g. %s", len(short), short[0])
	}
	if g.nEvents < groupChaosSpanEvents {
		return
	}
	for _, kind := range []string{"kill9", "zombie", "scale-down"} {
		if g.counts[kind] > 0 && by[kind] == 0 {
			g.t.Errorf("%d %s event(s), but none of them crossed a part open at two or more lane checkpoints", g.counts[kind], kind)
		}
	}
}

// groupChaosSpanEvents is the number of events from which the test requires
// every kind of event to have crossed a part open across checkpoints: with
// fewer, a kind can happen only a few times, each while its process held
// no such part.
const groupChaosSpanEvents = 200

// spanEnd returns what ended the hold of op's writer on op's lane: the
// first event that hit the writer after the last checkpoint that recorded
// op in progress, if no later checkpoint of the writer's epoch closed op,
// or if it was a SIGTERM before the checkpoint that closed op (the
// handoff's); else "policy".
func (g *groupChaos) spanEnd(op *openPart) string {
	for _, h := range g.hits[op.pid] {
		if h.seq < op.lastSeq {
			continue
		}
		if op.closedBy == 0 || (h.kind == "scale-down" && h.seq < op.closedBy) {
			return h.kind
		}
		break
	}
	return "policy"
}
