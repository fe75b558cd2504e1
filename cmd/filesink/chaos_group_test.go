//go:build unix

package main

// The black-box chaos test of group mode (docs/scale-out.md): three to four
// `filesink run --group` processes share a topic of 12 partitions through a
// Kafka consumer group (a kfakebroker process) and write to one S3 output
// on MinIO, through a fault proxy that logs every object write. Random
// events hit them while they work: kill -9 and restart, SIGSTOP for three
// session timeouts and SIGCONT (a zombie whose partitions moved while it
// slept), a process started (scale up, at most 4) and SIGTERM (scale down:
// a clean handoff, exit 0; the slot is filled again by a later scale up).
// While the events happen the proxy holds every lane HEAD write that marks
// a lane done (its owners wait on it, are revoked, killed or paused like
// any other), so the job cannot finish before the events end. The broker
// answers fetches slowly, so that the lanes read for most of the time the
// events take: parts are open at many lane checkpoints when the events
// hit their writers. If the events made no zombie that the fence stopped, one is
// made: a process's HEAD write is held in the proxy while the process
// sleeps and let go once another process took the lane over. Then the
// held writes are let go, every process must exit 0 on its own (bounded:
// once every lane is finished), and:
//   - every committed input record is in the visible output exactly once,
//     in a part file of its partition, and no record of an aborted
//     transaction;
//   - no visible key was written twice (the proxy's audit log: two
//     successful PutObject or CompleteMultipartUpload of one key), and every
//     visible object is one logged write;
//   - the fence was exercised: a lane HEAD write lost with 412;
//   - a part open at two or more lane checkpoints was crossed by each kind
//     of event (with enough events), and one taken over in progress was
//     published at the length its last checkpoint recorded;
//   - after a further run of the same command, which finds the job
//     finished, no multipart upload and no staging object is left, and
//     `filesink verify` passes.
// The seed of the schedule is logged (FILESINK_CHAOS_SEED replays it), and
// the processes' logs are kept when the test fails.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/internal/testutil/faultproxy"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/internal/testutil/miniotest"
	"github.com/filesink/filesink/internal/testutil/proc"
)

const (
	groupChaosTopic      = "events"
	groupChaosPartitions = 12
	// groupChaosRecords are produced, round robin over the partitions.
	groupChaosRecords = groupChaosPartitions * 20000
	// groupChaosEvents is the number of events of `go test`;
	// FILESINK_GROUP_CHAOS_EVENTS sets another (make chaos).
	groupChaosEvents   = 50
	groupChaosMaxProcs = 4
	groupChaosStart    = 3 // processes at the start
	groupChaosGroup    = "chaos"
	groupChaosSession  = time.Second
	// groupChaosRebalance is the rebalance timeout. kfake waits that long
	// for a member killed in the middle of a JoinGroup, which it still
	// counts as joined, and for the SyncGroup of one killed after it, and it
	// restarts the wait at every change of the members; with 20 s, kill -9
	// every few hundred ms kept the group from completing a rebalance for
	// minutes. 3 s still gives a handoff (one final checkpoint per lane)
	// ample time.
	groupChaosRebalance = 3 * time.Second
	// groupChaosPause is how long a zombie sleeps: three session timeouts,
	// so the group surely gave its partitions to others.
	groupChaosPause = 3 * groupChaosSession
	// Events come every groupChaosGapMin + [0, groupChaosGapRand).
	groupChaosGapMin  = 100 * time.Millisecond
	groupChaosGapRand = 300 * time.Millisecond
	// Every groupChaosQuietEvery events, the events stop for groupChaosQuiet
	// before and after one. Under an event every few hundred ms a process
	// lives about a second and no lane decides a checkpoint, so no part is
	// open across lane checkpoints for an event to cross. In the quiet the
	// group settles and the lanes decide checkpoints with parts open; the
	// event then lands, preferably on a process that owns such a part
	// (spanningOwners), and the quiet after it lets the group move that
	// process's lanes (a zombie's while it sleeps).
	groupChaosQuietEvery = 25
	groupChaosQuiet      = 4 * time.Second
	// groupChaosDrain bounds the wait, after the events, for every process
	// to exit.
	groupChaosDrain = 5 * time.Minute
	// groupChaosLanes is the state prefix of the lanes' HEAD objects,
	// relative to the bucket.
	groupChaosLanes = s3ChaosPrefix + "/_filesink/lanes/"
)

// groupChaosFetchBytes is the processes' partition fetch size and the
// producer's batch size: a fetch reads one batch of a partition.
const groupChaosFetchBytes = 8 << 10

// fetchDelay is how long the broker holds each fetch: long enough that
// the lanes read their partitions over the quiet windows of the events
// (groupChaosQuietEvery), so that parts are open at many lane checkpoints
// when the events land (unslowed, the lanes read everything in the first
// seconds, and the events hit finished lanes). Between the quiet windows
// the lanes barely move. The delay counts on them reading half of each
// window (the rest, the group settles); they read more, and finish
// about halfway through the events.
func (g *groupChaos) fetchDelay() time.Duration {
	const recordBytes = 60 // a record in a batch, about
	quiet := time.Duration(g.nEvents/groupChaosQuietEvery) * 2 * groupChaosQuiet
	fetches := groupChaosRecords / groupChaosPartitions * recordBytes / groupChaosFetchBytes
	return quiet / 2 / time.Duration(fetches)
}

// groupMember is one process of the group, in its slot.
type groupMember struct {
	slot, run int // the slot, and the number of the process among all started
	p         *proc.Process
	log       string    // the file holding its stdout and stderr
	pausedAt  time.Time // when it got SIGSTOP (zero: not paused)
	termed    bool      // it got SIGTERM: it must exit 0
}

func (m *groupMember) String() string {
	return fmt.Sprintf("p%d (run %d, pid %d)", m.slot, m.run, m.p.PID())
}

// groupChaos is the test's world: the broker, MinIO behind the proxy, the
// CLI, the input, and the processes.
type groupChaos struct {
	t       *testing.T
	bin     string
	srv     *miniotest.Server
	proxy   *faultproxy.Proxy
	client  *s3api.Client // straight to MinIO
	bucket  string
	sink    string // s3://BUCKET/out
	state   string // s3://BUCKET/out/_filesink
	args    []string
	in      *kafkaInput
	rng     *rand.Rand
	seed    uint64
	nEvents int
	logDir  string
	began   time.Time // when the first process started

	members [groupChaosMaxProcs]*groupMember
	// leaving are the processes handing off after SIGTERM: out of their
	// slots, so that a handoff in progress starves no event.
	leaving  []*groupMember
	runs     int            // processes started
	counts   map[string]int // events by kind
	schedule []string       // what happened, for the log
	heads    *headBodies    // the bodies of lane HEAD writes
	hits     map[int][]hit  // the events that hit each process, by PID
	done     bool           // a process exited 0 on its own: the job is finished
}

// TestChaosGroup: see the comment at the top of the file.
func TestChaosGroup(t *testing.T) {
	g := newGroupChaos(t)
	g.began = time.Now()
	for i := range groupChaosStart {
		g.start(i)
	}
	releaseDone := g.holdDone()
	g.chaos()
	g.forceFence()
	releaseDone()
	g.drain()
	g.finalRun()
	g.checkOutput()
	g.checkWrites()
	g.checkFence()
	g.reportFinalized()
	g.checkSpanningParts()
	g.checkClean()
	t.Logf("%d events %v, %d processes started; proxy:\n%s", g.nEvents, g.counts, g.runs, g.proxy.Stats())
}

// newGroupChaos builds the CLI and the broker, starts the broker, MinIO
// and the proxy, fills the topic, and makes the log directory.
func newGroupChaos(t *testing.T) *groupChaos {
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	g := &groupChaos{t: t, srv: srv, client: srv.Client(t), bucket: srv.NewBucket(t), counts: map[string]int{}, hits: map[int][]hit{}}
	g.seed = chaosSeed(t)
	g.rng = rand.New(rand.NewPCG(g.seed, 7))
	g.nEvents = groupChaosEvents
	if s := os.Getenv("FILESINK_GROUP_CHAOS_EVENTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FILESINK_GROUP_CHAOS_EVENTS=%q: want a positive number of events", s)
		}
		g.nEvents = n
	}
	t.Logf("replay this schedule: FILESINK_CHAOS_SEED=%d FILESINK_GROUP_CHAOS_EVENTS=%d go test -race -run 'TestChaosGroup$' ./cmd/filesink/ (the event gaps are the same; what the processes are doing when an event lands depends on the machine's speed)", g.seed, g.nEvents)
	g.bin = buildCLI(t)
	broker := kafkatest.StartBroker(t, kafkatest.BuildBroker(t), []kafkatest.Topic{{Name: groupChaosTopic, Partitions: groupChaosPartitions}},
		"-group-min-session-timeout", "500ms", "-fetch-delay", g.fetchDelay().String())
	g.in = produceKafkaInput(t, broker.Addr, groupChaosTopic, groupChaosPartitions, groupChaosRecords, true, groupChaosFetchBytes, g.rng)
	g.proxy = faultproxy.New(t, srv.Endpoint())
	g.cutHeadReplies()
	g.captureHeads()
	g.sink = "s3://" + g.bucket + "/" + s3ChaosPrefix
	g.state = g.sink + "/_filesink"
	// Not fetch_max_bytes to slow the lanes down: kfake leaves out the
	// aborted transactions of a partition whose data a fetch's total
	// limit cuts, and read_committed consumers then get aborted records.
	// The partition limit and the broker's fetch delay do it (fetchDelay).
	src := fmt.Sprintf("kafka://%s/%s?fetch_max_partition_bytes=%d", broker.Addr, groupChaosTopic, groupChaosFetchBytes)
	g.args = []string{"run", "--source", src, "--group", groupChaosGroup, "--bounded",
		"--session-timeout", groupChaosSession.String(), "--rebalance-timeout", groupChaosRebalance.String(), "--checkpoint-interval", "200ms",
		"--sink", g.sink, "--s3-endpoint", g.proxy.URL(), "--s3-path-style", "--progress", "off"}
	if os.Getenv("FILESINK_CHAOS_LOG_DIR") != "" {
		g.args = append(g.args, "--log-level", "debug")
	}
	t.Logf("each process: filesink %s", strings.Join(g.args, " "))
	g.makeLogDir()
	return g
}

// cutHeadReplies injects, if FILESINK_GROUP_CHAOS_CUT is a probability,
// that share of cut replies (the write lands, the client sees a reset)
// into the lanes' HEAD writes. By default the proxy injects nothing.
func (g *groupChaos) cutHeadReplies() {
	s := os.Getenv("FILESINK_GROUP_CHAOS_CUT")
	if s == "" {
		return
	}
	prob, err := strconv.ParseFloat(s, 64)
	if err != nil || prob <= 0 || prob >= 1 {
		g.t.Fatalf("FILESINK_GROUP_CHAOS_CUT=%q: want a probability between 0 and 1", s)
	}
	g.proxy.Add(faultproxy.Rule{
		Kinds:  []faultproxy.Kind{faultproxy.PutObject},
		Match:  func(r *http.Request) bool { return isLaneHead(r.URL.Path) },
		Action: faultproxy.ResetAfter, Prob: prob,
	})
	g.t.Logf("cutting the replies of %.3f of the lanes' HEAD writes", prob)
}

// isLaneHead reports whether a request path (/BUCKET/KEY) is a lane's HEAD.
func isLaneHead(p string) bool {
	return strings.Contains(p, "/"+groupChaosLanes) && strings.HasSuffix(p, "/HEAD")
}

// makeLogDir makes the directory of the processes' logs. It is kept, with
// the schedule and the proxy's log of object writes, if the test fails or
// $FILESINK_CHAOS_LOG_DIR is set (it is made there then), and removed
// otherwise. The cleanup also kills the processes still running.
func (g *groupChaos) makeLogDir() {
	t := g.t
	dir, err := os.MkdirTemp(os.Getenv("FILESINK_CHAOS_LOG_DIR"), "filesink-chaos-group-")
	if err != nil {
		t.Fatal(err)
	}
	g.logDir = dir
	t.Cleanup(func() {
		for _, m := range append(g.members[:], g.leaving...) {
			if m != nil {
				_ = m.p.Signal(syscall.SIGCONT)
				m.p.Kill()
			}
		}
		if !t.Failed() && os.Getenv("FILESINK_CHAOS_LOG_DIR") == "" {
			os.RemoveAll(dir)
			return
		}
		var replies strings.Builder
		for _, r := range g.proxy.Replies() {
			replies.WriteString(r.String() + "\n")
		}
		for name, text := range map[string]string{"schedule.txt": strings.Join(g.schedule, "\n") + "\n", "writes.txt": replies.String()} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Errorf("keeping the logs: %v", err)
			}
		}
		t.Logf("the processes' logs, the schedule and the proxy's object writes are kept in %s", dir)
	})
}

// note logs an event and keeps it for the schedule.
func (g *groupChaos) note(format string, args ...any) {
	g.t.Helper()
	s := fmt.Sprintf("%6.2fs ", time.Since(g.began).Seconds()) + fmt.Sprintf(format, args...)
	g.schedule = append(g.schedule, s)
	g.t.Log(s)
}

// start starts a process in slot.
func (g *groupChaos) start(slot int) {
	t := g.t
	t.Helper()
	g.runs++
	name := filepath.Join(g.logDir, fmt.Sprintf("p%d-run%03d.log", slot, g.runs))
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the child has its own descriptor
	cmd := exec.Command(g.bin, g.args...)
	cmd.Stdout, cmd.Stderr = f, f
	// The SDK adds "app/ID" to its User-Agent: the proxy tells the
	// processes apart by it.
	cmd.Env = append(os.Environ(), "AWS_SDK_UA_APP_ID="+groupAppID(g.runs))
	p, err := proc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	g.members[slot] = &groupMember{slot: slot, run: g.runs, p: p, log: name}
}

// groupAppID names the process run n to the proxy.
func groupAppID(n int) string { return fmt.Sprintf("filesink-chaos-run%04d", n) }

// logTail returns the last n lines of a member's log.
func (m *groupMember) logTail(n int) string {
	b, err := os.ReadFile(m.log)
	if err != nil {
		return err.Error()
	}
	return lastLines(string(b), n)
}

// reap clears the slots of the processes that exited, and fails the test
// for those that should not have: a SIGTERMed process must exit 0, any
// other process only when the job is finished.
func (g *groupChaos) reap() {
	t := g.t
	t.Helper()
	var exited []*groupMember
	for i, m := range g.members {
		if m != nil && m.p.Exited() {
			g.members[i] = nil
			exited = append(exited, m)
		}
	}
	g.leaving = slices.DeleteFunc(g.leaving, func(m *groupMember) bool {
		if m.p.Exited() {
			exited = append(exited, m)
			return true
		}
		return false
	})
	for _, m := range exited {
		code := m.p.ExitCode()
		switch {
		case m.termed && code == 0:
			g.note("%v exited 0 after SIGTERM", m)
		case m.termed && m.logTail(1) == "" && strings.Contains(m.p.State(), "terminated"):
			// The signal came before main installed its handler (the
			// process had not logged a line): nothing of the job was
			// started to hand off.
			g.note("%v got SIGTERM before it started, and ended with it", m)
		case m.termed:
			t.Errorf("%v got SIGTERM and ended with %s, want exit 0 (a clean handoff of its partitions); its log ends:\n%s", m, m.p.State(), m.logTail(30))
		case code == 0:
			g.note("%v exited 0 on its own: the job is finished", m)
			g.done = true
			g.checkLanesDone(m)
		default:
			t.Errorf("%v ended on its own with %s; only a process that got SIGKILL may end otherwise than with exit 0%s; its log ends:\n%s",
				m, m.p.State(), g.diagnose(m), m.logTail(30))
		}
	}
}

// uploadGone matches the error of a checkpoint that found the multipart
// upload of one of its part files gone.
var uploadGone = regexp.MustCompile(`multipart upload \S+ of s3://\S+/(part-([^ ]+)\.([0-9]+)-e([0-9]+)-0-\S+) no longer exists`)

// diagnose explains a known failure in a member's log ("" if none).
func (g *groupChaos) diagnose(m *groupMember) string {
	b, err := os.ReadFile(m.log)
	if err != nil {
		return ""
	}
	f := uploadGone.FindSubmatch(b)
	if f == nil {
		return ""
	}
	epoch := "?"
	if lanes, err := g.readLanes(); err == nil {
		for _, l := range lanes {
			if l.head.Topic == string(f[2]) && strconv.Itoa(int(l.head.Partition)) == string(f[3]) {
				epoch = strconv.FormatUint(l.head.Epoch, 10)
			}
		}
	}
	return fmt.Sprintf(". It is group mode's, not the harness's: the process held lane %s/%s at epoch %s; while it was paused or slow, the lane's next owner (its HEAD now has epoch %s) "+
		"swept the older epochs' staging at its takeover, aborting the upload of %s; the process's next checkpoint of that lane then called the upload's loss \"data loss\" and the process exited, "+
		"where the lane should have stopped as fenced (nothing of it is lost: the new owner reads again from the lane's decided checkpoint) and the process gone on",
		f[2], f[3], f[4], epoch, f[1])
}

// live returns the members that run and may get an event: not paused, and
// (unless withTermed) not handing off after a SIGTERM.
func (g *groupChaos) live(withTermed bool) []*groupMember {
	var out []*groupMember
	for _, m := range g.members {
		if m != nil && !m.p.Exited() && m.pausedAt.IsZero() && (withTermed || !m.termed) {
			out = append(out, m)
		}
	}
	if withTermed {
		for _, m := range g.leaving {
			if !m.p.Exited() {
				out = append(out, m)
			}
		}
	}
	return out
}

func (g *groupChaos) paused() []*groupMember {
	var out []*groupMember
	for _, m := range g.members {
		if m != nil && !m.pausedAt.IsZero() {
			out = append(out, m)
		}
	}
	return out
}

func (g *groupChaos) freeSlot() int {
	for i, m := range g.members {
		if m == nil {
			return i
		}
	}
	return -1
}

// wake sends SIGCONT to the paused processes whose pause is over (all of
// them if all).
func (g *groupChaos) wake(all bool) {
	for _, m := range g.paused() {
		if all || time.Since(m.pausedAt) >= groupChaosPause {
			if err := m.p.Signal(syscall.SIGCONT); err != nil {
				g.t.Errorf("SIGCONT to %v: %v", m, err)
			}
			g.note("%v: SIGCONT after a pause of %v", m, time.Since(m.pausedAt).Round(time.Millisecond))
			m.pausedAt = time.Time{}
		}
	}
}

// holdDone makes the proxy hold every write of a lane's HEAD that marks
// the lane done, until the returned func is called: no lane can finish, so
// the job runs until the events are over. A held write whose process is
// killed, or whose lane is revoked, is dropped (the client gave up); one
// of a paused process goes on when it is let go and loses with 412 if the
// lane moved meanwhile. The rule comes before the others (the reply cuts
// of cutHeadReplies would let a write through).
func (g *groupChaos) holdDone() (release func()) {
	gate := make(chan struct{})
	done := []byte(`"done":true`)
	id := g.proxy.AddFirst(faultproxy.Rule{
		Kinds: []faultproxy.Kind{faultproxy.PutObject}, Action: faultproxy.Forward, Gate: gate,
		Match: func(r *http.Request) bool {
			if !isLaneHead(r.URL.Path) {
				return false
			}
			g.heads.capture(r) // this rule comes first: it would hide the body
			b, err := faultproxy.PeekBody(r)
			return err == nil && bytes.Contains(b, done)
		},
	})
	return sync.OnceFunc(func() {
		g.proxy.Remove(id)
		close(gate)
		g.note("the proxy lets the lanes' HEAD writes that mark them done go (%d held)", g.proxy.Fired(id))
	})
}

// chaos runs the events, one every 100 to 400 ms with a quiet window
// around every groupChaosQuietEvery-th, until there were g.nEvents or the
// job finished (which fails the test: the events must land while it
// runs; holdDone sees to that). The lanes read slowly meanwhile
// (fetchDelay).
func (g *groupChaos) chaos() {
	start := time.Now()
	for i := 0; i < g.nEvents; i++ {
		quiet := i%groupChaosQuietEvery == groupChaosQuietEvery-1
		if quiet {
			g.quiet()
		}
		time.Sleep(groupChaosGapMin + time.Duration(g.rng.Int64N(int64(groupChaosGapRand))))
		g.reap()
		g.wake(false)
		if g.done {
			g.t.Errorf("the job finished after %d of %d events (%v): the events must land while it runs",
				i, g.nEvents, time.Since(start).Round(time.Millisecond))
			return
		}
		if i == g.nEvents/3 && g.lost412() == 0 {
			// A zombie the fence must stop, made while the lanes still
			// have input ahead: a random pause seldom lands on a lane that
			// moves while it sleeps, as the group rebalances at nearly
			// every event. Again after the events if this one failed.
			g.fenceAttempt(1)
		}
		g.event(i)
		if quiet {
			g.quiet()
		}
		if i%10 == 9 {
			_, _, text := g.progress()
			g.note("after %d events: %s", i+1, text)
		}
	}
	_, _, text := g.progress()
	g.note("%d events in %v: %v; %s", g.nEvents, time.Since(start).Round(time.Millisecond), g.counts, text)
}

// quiet lets groupChaosQuiet pass with no event, waking the paused
// processes on time.
func (g *groupChaos) quiet() {
	for end := time.Now().Add(groupChaosQuiet); time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		g.reap()
		g.wake(false)
	}
}

// holdParts makes the proxy hold each upload of a part file's data for d
// (a slow S3), and returns the rule.
func (g *groupChaos) holdParts(d time.Duration) faultproxy.RuleID {
	parts := "/" + g.bucket + "/" + s3ChaosPrefix + "/part-"
	return g.proxy.Add(faultproxy.Rule{
		Kinds:  []faultproxy.Kind{faultproxy.UploadPart},
		Match:  func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, parts) },
		Action: faultproxy.Forward, Delay: d,
	})
}

// progress says how far the lanes' decided checkpoints are: the offsets
// decided and the lanes' end offsets, summed, and as text.
func (g *groupChaos) progress() (next, end int64, text string) {
	lanes, err := g.readLanes()
	if err != nil {
		return 0, 0, err.Error()
	}
	done := 0
	for _, l := range lanes {
		next, end = next+max(l.next, 0), end+max(l.end, 0)
		if l.head.Done {
			done++
		}
	}
	return next, end, fmt.Sprintf("%d lanes with a HEAD, %d done, decided %d of %d offsets", len(lanes), done, next, end)
}

// event draws one event among those possible now and makes it happen.
func (g *groupChaos) event(i int) {
	live, busy := g.live(true), g.live(false)
	possible := map[string]bool{
		"kill9":      len(live) > 0,
		"zombie":     len(busy) >= 2 && len(g.paused()) == 0,
		"scale-up":   g.freeSlot() >= 0,
		"scale-down": len(busy) >= 2,
	}
	up := 25
	if len(live) < groupChaosStart {
		up = 75 // back to 3 or 4 processes soon
	}
	weights := []struct {
		kind string
		w    int
	}{{"kill9", 25}, {"zombie", 25}, {"scale-up", up}, {"scale-down", 25}}
	total := 0
	for _, w := range weights {
		if possible[w.kind] {
			total += w.w
		}
	}
	if total == 0 {
		g.note("event %d: nothing possible (every process paused?)", i)
		return
	}
	r := g.rng.IntN(total)
	kind := ""
	for _, w := range weights {
		if possible[w.kind] {
			if r -= w.w; r < 0 {
				kind = w.kind
				break
			}
		}
	}
	g.counts[kind]++
	switch kind {
	case "kill9":
		// Mostly a process at work, preferably one that owns a part open
		// across lane checkpoints; one in five draws also takes those
		// handing off after SIGTERM (kill -9 in the middle of a handoff),
		// the others are left to exit 0.
		cand := busy
		if len(cand) == 0 || g.rng.IntN(5) == 0 {
			cand = live
		} else if owners := g.spanningOwners(busy); len(owners) > 0 {
			cand = owners
		}
		m := cand[g.rng.IntN(len(cand))]
		g.hitProcess(m, kind)
		m.p.Kill()
		if m.termed {
			// Its slot went to the next process when it got SIGTERM.
			g.leaving = slices.DeleteFunc(g.leaving, func(x *groupMember) bool { return x == m })
			g.note("event %d: kill -9 %v (handing off after SIGTERM)", i, m)
			break
		}
		g.members[m.slot] = nil
		g.note("event %d: kill -9 %v; restarted", i, m)
		g.start(m.slot)
	case "zombie":
		// An owner of a part open across lane checkpoints if there is
		// one, else an owner of lanes: its lanes move while it sleeps.
		// (Any process would do for the fence; one that owns such a part
		// makes the takeover close a part a zombie may still write.)
		cand := busy
		if owners := g.spanningOwners(busy); len(owners) > 0 {
			cand = owners
		} else if owners := g.owners(busy); len(owners) > 0 {
			cand = owners
		}
		m := cand[g.rng.IntN(len(cand))]
		g.hitProcess(m, kind)
		g.pause(m)
		g.note("event %d: SIGSTOP %v for %v (it owns %d unfinished lane(s))", i, m, groupChaosPause, g.owned(m))
	case "scale-up":
		slot := g.freeSlot()
		g.start(slot)
		g.note("event %d: scale up: started %v", i, g.members[slot])
	case "scale-down":
		m := busy[g.rng.IntN(len(busy))]
		g.hitProcess(m, kind)
		if err := m.p.Signal(syscall.SIGTERM); err != nil {
			g.t.Errorf("SIGTERM to %v: %v", m, err)
		}
		m.termed = true
		g.members[m.slot] = nil
		g.leaving = append(g.leaving, m)
		g.note("event %d: scale down: SIGTERM %v", i, m)
	}
}

func (g *groupChaos) pause(m *groupMember) {
	if err := m.p.Signal(syscall.SIGSTOP); err != nil {
		g.t.Errorf("SIGSTOP to %v: %v", m, err)
	}
	m.pausedAt = time.Now()
}

// owned returns how many unfinished lanes' HEADs name m as their owner.
func (g *groupChaos) owned(m *groupMember) int {
	lanes, err := g.readLanes()
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range lanes {
		if !l.head.Done && l.head.Owner.PID == m.p.PID() {
			n++
		}
	}
	return n
}

// owners returns the members of ms that own an unfinished lane.
func (g *groupChaos) owners(ms []*groupMember) []*groupMember {
	var out []*groupMember
	for _, m := range ms {
		if g.owned(m) > 0 {
			out = append(out, m)
		}
	}
	return out
}

// lost412 counts the lane HEAD writes that lost with 412.
func (g *groupChaos) lost412() int {
	return g.proxy.CountReplies(faultproxy.PutObject, http.StatusPreconditionFailed, groupChaosLanes)
}

// forceFence makes a zombie that the fence must stop, when the events made
// none (no lane HEAD write lost with 412): while nearly every event changes
// the group's members, the group rebalances most of the time, and a paused
// process seldom owns a lane that moves while it sleeps. Up to three
// times: a process is started whose first lane HEAD write (the takeover of
// a lane the group gives it) is held in the proxy, and paused once it
// sent it; when another process has taken that lane over, the held write
// is let go (a paused process's late write) and must lose with 412; the
// process sleeps groupChaosPause at least, and wakes.
func (g *groupChaos) forceFence() {
	for attempt := 1; attempt <= 3 && g.lost412() == 0 && !g.done; attempt++ {
		g.fenceAttempt(attempt)
	}
}

func (g *groupChaos) fenceAttempt(attempt int) {
	g.wake(true)
	// A process at work, to take the zombie's lane over, and a free slot
	// for the zombie: a process that got SIGTERM frees its slot within a
	// rebalance timeout; else one of two or more at work is killed.
	slot := -1
	for deadline := time.Now().Add(time.Minute); slot < 0; time.Sleep(50 * time.Millisecond) {
		g.reap()
		if g.done || time.Now().After(deadline) {
			g.note("forced zombie %d: no free slot within a minute (job finished: %v)", attempt, g.done)
			return
		}
		if len(g.live(false)) == 0 && g.freeSlot() >= 0 {
			s := g.freeSlot()
			g.start(s)
			g.note("forced zombie %d: started %v, to take the lanes over from the zombie", attempt, g.members[s])
			continue
		}
		if busy := g.live(false); len(busy) > 0 {
			if slot = g.freeSlot(); slot < 0 && len(busy) >= 2 && len(g.live(true)) == len(busy) {
				m := busy[0]
				m.p.Kill()
				g.members[m.slot] = nil
				g.note("forced zombie %d: kill -9 %v for a free slot", attempt, m)
				slot = m.slot
			}
		}
	}
	// The zombie is a process started now: its first lane HEAD write is
	// the takeover of a lane the group gives it (in the assign callback),
	// held in the proxy while the process sleeps.
	heads := "/" + g.bucket + "/" + groupChaosLanes
	ua := "app/" + groupAppID(g.runs+1)
	var mu sync.Mutex
	held := "" // the path of the held write
	gate := make(chan struct{})
	// First: before holdDone's rule, which would hold a write that marks
	// a lane done until the end.
	rule := g.proxy.AddFirst(faultproxy.Rule{
		Kinds: []faultproxy.Kind{faultproxy.PutObject}, Times: 1, Action: faultproxy.Forward, Gate: gate,
		Match: func(r *http.Request) bool {
			ok := strings.HasPrefix(r.URL.Path, heads) && slices.Contains(strings.Fields(r.Header.Get("User-Agent")), ua)
			mu.Lock()
			defer mu.Unlock()
			if ok && held == "" {
				held = r.URL.Path
			}
			return ok
		},
	})
	release := sync.OnceFunc(func() { close(gate) })
	defer g.proxy.Remove(rule)
	defer release()
	g.start(slot)
	m := g.members[slot]
	g.note("forced zombie %d: started %v; the proxy holds its first lane HEAD write", attempt, m)
	for deadline := time.Now().Add(30 * time.Second); g.proxy.Fired(rule) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) || m.p.Exited() {
			g.note("forced zombie %d: %v wrote no lane HEAD within 30s (exited: %v)", attempt, m, m.p.Exited())
			return
		}
	}
	g.pause(m)
	g.counts["zombie"]++
	mu.Lock()
	lane := strings.TrimSuffix(strings.TrimPrefix(held, heads), "/HEAD")
	mu.Unlock()
	epoch := g.laneEpoch(lane)
	g.note("forced zombie %d (no lane HEAD write had lost with 412 yet): SIGSTOP %v while the proxy holds its write of lane %s's HEAD (at epoch %d)",
		attempt, m, lane, epoch)
	moved := false
	for deadline := time.Now().Add(30 * time.Second); !moved && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		moved = g.laneEpoch(lane) > epoch
	}
	before := g.lost412()
	release()
	for deadline := time.Now().Add(5 * time.Second); g.lost412() == before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(max(0, groupChaosPause-time.Since(m.pausedAt)))
	g.wake(true)
	g.note("forced zombie %d: lane %s taken over by another process while the writer slept: %v; the held write let go; %d lane HEAD write(s) lost with 412 so far",
		attempt, lane, moved, g.lost412())
}

// laneEpoch returns the owner epoch in the HEAD of lane ("topic/partition"),
// 0 if it cannot be read.
func (g *groupChaos) laneEpoch(lane string) uint64 {
	lanes, err := g.readLanes()
	if err != nil {
		return 0
	}
	for _, l := range lanes {
		if fmt.Sprintf("%s/%d", l.head.Topic, l.head.Partition) == lane {
			return l.head.Epoch
		}
	}
	return 0
}

// drain wakes every paused process and waits, up to groupChaosDrain, for
// every process to exit 0 on its own: bounded, they all do once every lane
// is finished. A process that ends otherwise fails the test and is
// restarted, so that the job can finish; when no process is left before
// the job is finished (all were stopped by SIGTERM), one is started.
func (g *groupChaos) drain() {
	t := g.t
	g.wake(true)
	deadline := time.Now().Add(groupChaosDrain)
	restarts := 0
	// No outside help: a partition the group leaves unassigned, or a
	// lane a process stopped running while the group still assigns it,
	// must be healed by the processes themselves (group/heal.go).
	for {
		g.reap()
		empty := g.freeSlot() >= 0 && len(g.live(true)) == 0 && len(g.paused()) == 0
		switch {
		case empty && g.done:
			g.note("every process exited")
			return
		case empty:
			if restarts++; restarts > 10 {
				t.Fatalf("the job did not finish after %d restarts of a process once the events were over; lanes:\n%s", restarts-1, g.lanesText())
			}
			g.start(0)
			g.note("no process left, the job is not finished: started %v", g.members[0])
		case time.Now().After(deadline):
			g.failDrain()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// failDrain fails the test: the processes did not all exit in time.
func (g *groupChaos) failDrain() {
	var tails []string
	for _, m := range g.live(true) {
		tails = append(tails, fmt.Sprintf("--- %v, its log ends:\n%s", m, m.logTail(15)))
	}
	g.t.Fatalf("%d process(es) still running %v after the events (bounded: every process must exit 0 once every lane is finished); lanes:\n%s\n%s",
		len(g.live(true)), groupChaosDrain, g.lanesText(), strings.Join(tails, "\n"))
}

// cliDirect runs a short CLI command against MinIO directly (not through
// the proxy, whose log is for the processes' writes).
func (g *groupChaos) cliDirect(args ...string) (string, error) {
	cmd := exec.Command(g.bin, append(args, "--s3-endpoint", g.srv.Endpoint(), "--s3-path-style")...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// lanesText is the output of `filesink state` on the job's state, and the
// lanes' HEADs as the test reads them.
func (g *groupChaos) lanesText() string {
	out, err := g.cliDirect("state", "--state", g.state)
	text := fmt.Sprintf("$ filesink state --state %s\n%s", g.state, out)
	if err != nil {
		text += fmt.Sprintf("(%v)\n", err)
	}
	lanes, err := g.readLanes()
	if err != nil {
		return text + err.Error()
	}
	return text + "the lanes' HEADs: " + g.laneSummary(lanes)
}

// finalRun runs the same command once more: it must find every lane
// finished and exit 0.
func (g *groupChaos) finalRun() {
	t := g.t
	g.start(0)
	m := g.members[0]
	select {
	case <-m.p.Done():
	case <-time.After(time.Minute):
		t.Fatalf("a further run of the same command after the job finished did not exit within a minute; its log ends:\n%s\nlanes:\n%s", m.logTail(20), g.lanesText())
	}
	g.members[0] = nil
	if m.p.ExitCode() != 0 {
		t.Fatalf("a further run of the same command after the job finished: %s, want exit 0; its log ends:\n%s", m.p.State(), m.logTail(20))
	}
	g.note("a further run of the same command exited 0")
}

// visibleObjects lists the output's visible objects (key relative to the
// output prefix -> size).
func (g *groupChaos) visibleObjects() map[string]int64 {
	t := g.t
	objs := map[string]int64{}
	p := s3api.NewListObjectsV2Paginator(g.client, &s3api.ListObjectsV2Input{Bucket: &g.bucket, Prefix: aws.String(s3ChaosPrefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			rel := strings.TrimPrefix(aws.ToString(o.Key), s3ChaosPrefix+"/")
			if !s3HiddenKey(rel) {
				objs[rel] = aws.ToInt64(o.Size)
			}
		}
	}
	return objs
}

// groupPartName is the name of a part file of a lane:
// part-TOPIC.PARTITION-eEPOCH-0-RUNID-N.jsonl.
var groupPartName = regexp.MustCompile(`^part-` + groupChaosTopic + `\.([0-9]+)-e([0-9]+)-0-(.+)-([0-9]+)\.jsonl$`)

// checkOutput checks that the visible output holds every committed input
// record exactly once, each in a part file of its own partition, and no
// record of an aborted transaction.
func (g *groupChaos) checkOutput() {
	t := g.t
	objs := g.visibleObjects()
	owner := map[int64]string{}
	dups := map[int64][]string{}
	var bad []string
	for rel := range objs {
		m := groupPartName.FindStringSubmatch(path.Base(rel))
		if m == nil || path.Dir(rel) != "." {
			bad = append(bad, fmt.Sprintf("%s is not a lane's part file name (part-%s.P-eE-0-RUNID-N.jsonl at the top of the output)", rel, groupChaosTopic))
			continue
		}
		part, _ := strconv.Atoi(m[1])
		for n, l := range g.objectLines(rel) {
			id, err := recordID(l)
			rec, ok := g.in.byID[id]
			switch {
			case err != nil || !ok:
				bad = append(bad, fmt.Sprintf("%s line %d is not an input record (%v): %.100q", rel, n+1, err, l))
				continue
			case !rec.committed:
				bad = append(bad, fmt.Sprintf("record %d (partition %d offset %d) of an aborted transaction is in %s", id, rec.partition, rec.offset, rel))
			case int(rec.partition) != part:
				bad = append(bad, fmt.Sprintf("record %d of partition %d is in %s, a part file of partition %d", id, rec.partition, rel, part))
			}
			if prev, ok := owner[id]; ok {
				dups[id] = append(dups[id], prev, rel)
				continue
			}
			owner[id] = rel
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		t.Errorf("%d wrong line(s) or object(s) in the output, e.g.:\n%s", len(bad), strings.Join(bad[:min(10, len(bad))], "\n"))
	}
	if len(dups) > 0 {
		t.Errorf("%d committed record(s) are in the output more than once, e.g. %v", len(dups), firstDups(dups))
	}
	var missing []string
	for id, rec := range g.in.byID {
		if _, ok := owner[id]; rec.committed && !ok {
			missing = append(missing, fmt.Sprintf("%d (partition %d offset %d)", id, rec.partition, rec.offset))
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("%d of %d committed record(s) are missing from the output, e.g. %s", len(missing), g.in.committed, strings.Join(missing[:min(10, len(missing))], ", "))
	}
	g.note("output: %d objects, %d distinct records (want %d committed, %d aborted left out)", len(objs), len(owner), g.in.committed, g.in.aborted)
}

// objectLines returns the lines of a visible object.
func (g *groupChaos) objectLines(rel string) []string {
	t := g.t
	key := s3ChaosPrefix + "/" + rel
	out, err := g.client.GetObject(t.Context(), &s3api.GetObjectInput{Bucket: &g.bucket, Key: &key})
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	defer out.Body.Close()
	var lines []string
	sc := bufio.NewScanner(out.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil && err != io.EOF {
		t.Fatalf("reading %s: %v", key, err)
	}
	return lines
}

// checkWrites checks the proxy's audit log against the output: no visible
// key was written twice, every visible object is one logged write, and
// every logged write is still there.
func (g *groupChaos) checkWrites() {
	t := g.t
	hidden := func(_, key string) bool {
		rel, ok := strings.CutPrefix(key, s3ChaosPrefix+"/")
		return !ok || s3HiddenKey(rel)
	}
	byKey := map[string][]faultproxy.Reply{}
	for _, w := range g.proxy.Writes(hidden) {
		byKey[w.Key] = append(byKey[w.Key], w)
	}
	var twice, gone, unlogged []string
	for key, ws := range byKey {
		if len(ws) > 1 {
			var s []string
			for _, w := range ws {
				s = append(s, w.String())
			}
			twice = append(twice, key+": "+strings.Join(s, "; "))
		}
	}
	objs := g.visibleObjects()
	for key := range byKey {
		if _, ok := objs[strings.TrimPrefix(key, s3ChaosPrefix+"/")]; !ok {
			gone = append(gone, key)
		}
	}
	for rel := range objs {
		if _, ok := byKey[s3ChaosPrefix+"/"+rel]; !ok {
			unlogged = append(unlogged, rel)
		}
	}
	for _, x := range []struct {
		what string
		l    []string
	}{
		{"visible key(s) written twice (two successful PutObject or CompleteMultipartUpload through the proxy)", twice},
		{"visible key(s) written and then gone from the output (a published file deleted)", gone},
		{"visible object(s) that no logged write made (written around the proxy?)", unlogged},
	} {
		if len(x.l) > 0 {
			slices.Sort(x.l)
			t.Errorf("%d %s, e.g.:\n%s", len(x.l), x.what, strings.Join(x.l[:min(5, len(x.l))], "\n"))
		}
	}
}

// checkFence checks that a lane HEAD write lost with 412 when a process
// was paused: the zombie's, or a takeover's that raced another.
func (g *groupChaos) checkFence() {
	n := g.lost412()
	g.note("lane HEAD writes: %d lost with 412; the processes logged %d takeover(s) and %d fenced lane(s)",
		n, g.logCount(`msg="lane taken over"`), g.logCount(`msg="lane fenced`))
	if g.counts["zombie"] > 0 && n == 0 {
		g.t.Errorf("%d process(es) were paused for %v (3 session timeouts) while the others ran, but no write of a lane HEAD (%s*/HEAD) got 412: the fence was never exercised",
			g.counts["zombie"], groupChaosPause, groupChaosLanes)
	}
}

// reportFinalized reports how many takeovers found parts in progress,
// open across lane checkpoints, and closed them where the decided state
// recorded them (the exactly-once checks cover them). It is not a
// requirement: as the group rebalances at nearly every event, most lanes
// are handed off cleanly (their parts closed), and a kill lands on a
// process whose lanes decided a checkpoint with data only some of the
// time; TestZombieTakeoverMidPart (package group) makes that case every
// time.
func (g *groupChaos) reportFinalized() {
	g.note("parts in progress at a takeover, closed where the lane state recorded them: %d", g.logCount(`msg="in-progress part taken over`))
}

// logCount counts the lines of every process's log that contain s.
func (g *groupChaos) logCount(s string) int {
	names, _ := filepath.Glob(filepath.Join(g.logDir, "p*-run*.log"))
	n := 0
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			g.t.Errorf("reading %s: %v", name, err)
			continue
		}
		n += strings.Count(string(b), s)
	}
	return n
}

// checkClean checks, after the further run, that no multipart upload and
// no staging object is left, and that `filesink verify` passes.
func (g *groupChaos) checkClean() {
	t := g.t
	left := miniotest.Leftovers(t, g.client, g.bucket, s3ChaosPrefix+"/"+s3sink.StagingDir+"/")
	if len(left) > 0 {
		var lines []string
		for _, l := range left[:min(6, len(left))] {
			lines = append(lines, "  "+l+g.stagingDiagnosis(l))
		}
		t.Errorf("%d incomplete upload(s) and staging object(s) left after every lane finished and a further run of the same command found the job finished (nothing swept them):\n%s",
			len(left), strings.Join(lines, "\n"))
	}
	if out, err := g.cliDirect("verify", "--sink", g.sink); err != nil {
		t.Errorf("filesink verify --sink %s: %v\n%s", g.sink, err, lastLines(out, 20))
	}
}

// stagingPart finds the lane and owner epoch in the name of a part file or
// of its staging object.
var stagingPart = regexp.MustCompile(`part-([^/ ]+)\.([0-9]+)-e([0-9]+)-0-`)

// stagingDiagnosis says, for a leftover upload or staging object, where
// its lane is now, which process owned the lane at the epoch that wrote it
// and the last thing that process logged about it.
func (g *groupChaos) stagingDiagnosis(what string) string {
	f := stagingPart.FindStringSubmatch(what)
	if f == nil {
		return ""
	}
	lane, epoch := f[1]+"/"+f[2], f[3]
	head := "has no HEAD"
	if lanes, err := g.readLanes(); err == nil {
		for _, l := range lanes {
			if fmt.Sprintf("%s/%d", l.head.Topic, l.head.Partition) == lane {
				head = fmt.Sprintf("HEAD is at epoch %d, done=%v", l.head.Epoch, l.head.Done)
			}
		}
	}
	owner := "no process log says which process owned it"
	names, _ := filepath.Glob(filepath.Join(g.logDir, "p*-run*.log"))
	slices.Sort(names)
	tag := fmt.Sprintf(" lane=%s epoch=%s", lane, epoch)
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil || !strings.Contains(string(b), `msg="lane taken over"`+tag) {
			continue
		}
		last := "nothing after taking it over"
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, tag) && !strings.Contains(l, "level=DEBUG") {
				_, msg, _ := strings.Cut(l, " msg=")
				last = strings.SplitN(msg, " err=", 2)[0]
			}
		}
		exit := ""
		if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); strings.HasPrefix(lines[len(lines)-1], "filesink:") {
			exit = "; the process then ended with: " + lines[len(lines)-1][:min(200, len(lines[len(lines)-1]))]
		}
		owner = fmt.Sprintf("%s owned it at that epoch; the last it logged about it: %s%s", filepath.Base(name), last, exit)
		break
	}
	return fmt.Sprintf(" (lane %s, written at owner epoch %s: %s. The lane's %s; a finished lane's later takeovers (\"lane finished earlier: nothing to read\") do not sweep older epochs, "+
		"so staging an older owner wrote after the last takeover's sweep stays)", lane, epoch, owner, head)
}

// checkLanesDone checks, when a process exited 0 on its own, that every
// lane of the topic is finished.
func (g *groupChaos) checkLanesDone(m *groupMember) {
	lanes := g.lanes()
	done := 0
	for _, l := range lanes {
		if l.head.Done {
			done++
		}
	}
	if done != groupChaosPartitions {
		g.t.Errorf("%v exited 0 on its own, but only %d of %d lanes are done (bounded: a process exits 0 only once every lane is finished); lanes:\n%s",
			m, done, groupChaosPartitions, g.laneSummary(lanes))
	}
}

// groupLane is a lane's HEAD with its position.
type groupLane struct {
	head      *s3sink.LaneHead
	next, end int64 // -1 if the head has no position
}

// lanes reads the lanes' HEADs, straight from MinIO.
func (g *groupChaos) lanes() []groupLane {
	lanes, err := g.readLanes()
	if err != nil {
		g.t.Fatal(err)
	}
	return lanes
}

func (g *groupChaos) readLanes() ([]groupLane, error) {
	ctx := g.t.Context()
	store, err := s3sink.NewStore(g.client, g.bucket, s3ChaosPrefix+"/_filesink")
	if err != nil {
		return nil, err
	}
	heads, err := s3sink.ListLanes(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("reading the lanes' HEADs: %w", err)
	}
	out := make([]groupLane, 0, len(heads))
	for _, h := range heads {
		l := groupLane{head: h, next: -1, end: -1}
		if h.Checkpoint != nil {
			var pos struct {
				Partitions []struct {
					Next int64  `json:"next"`
					End  *int64 `json:"end"`
				} `json:"partitions"`
			}
			if err := json.Unmarshal(h.Checkpoint.Source, &pos); err != nil || len(pos.Partitions) != 1 {
				return nil, fmt.Errorf("lane %s/%d: position %s: want one partition (%v)", h.Topic, h.Partition, h.Checkpoint.Source, err)
			}
			l.next = pos.Partitions[0].Next
			if pos.Partitions[0].End != nil {
				l.end = *pos.Partitions[0].End
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// laneSummary describes the lanes, one a line.
func (g *groupChaos) laneSummary(lanes []groupLane) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d lanes have a HEAD\n", len(lanes), groupChaosPartitions)
	for _, l := range lanes {
		h := l.head
		ck := "no checkpoint"
		if h.Checkpoint != nil {
			ck = fmt.Sprintf("checkpoint %d, next %d of end %d", h.Checkpoint.ID, l.next, l.end)
		}
		fmt.Fprintf(&b, "  %s/%d: epoch %d seq %d, owner pid %d generation %d, released=%v done=%v, %s, updated %s\n",
			h.Topic, h.Partition, h.Epoch, h.Seq, h.Owner.PID, h.Owner.Generation, h.Released, h.Done, ck, h.Updated.Format(time.RFC3339Nano))
	}
	return b.String()
}
