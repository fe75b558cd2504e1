package group_test

// Group mode beside one process, measured in the same run:
//
//   - BenchmarkGroupThroughput: the same bounded topic (12 partitions of
//     1 KiB JSON lines, on kfakebroker in a process of its own) into the
//     same MinIO, once by one process in today's mode (pipeline.Run, the
//     Kafka source, one file sink over S3) and once by one process in
//     group mode (group.Run, a lane per partition, one buffer budget for
//     all lanes), alternating; each reports MB/s of record values and CPU
//     s per op, and group/single as ratio-%. The group run counts
//     its S3 requests (in the client) per lane checkpoint, from which
//     req/s-1000p-10s is the rate a fleet running 1,000 active partitions
//     at a 10 s interval would make.
//   - BenchmarkGroupHandoff: three members, records produced all along;
//     each op stops one member (as SIGTERM does) and measures until every
//     lane it held was decided by a checkpoint of its new owner; the
//     member is then started again. Reports p50-ms and p99-ms.
//
// FILESINK_GROUP_BENCH_RECORDS sets the records per partition (default
// 10,000). Nothing here asserts a duration.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/group"
	"github.com/filesink/filesink/internal/testutil/cputime"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/internal/testutil/miniotest"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/source"
	"github.com/filesink/filesink/source/kafka"
)

func benchRecords() int {
	if v, err := strconv.Atoi(os.Getenv("FILESINK_GROUP_BENCH_RECORDS")); err == nil && v > 0 {
		return v
	}
	return 10_000
}

// benchBroker starts kfakebroker in a process of its own (as a Kafka
// broker is remote: its CPU is not the benchmark's) with the topic, and
// returns its address and a producer client.
func benchBroker(b *testing.B) ([]string, *kgo.Client) {
	bp := kafkatest.StartBroker(b, kafkatest.BuildBroker(b), []kafkatest.Topic{{Name: topic, Partitions: partitions}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(bp.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return []string{bp.Addr}, cl
}

// fillTopic produces n records of about 1 KiB to every partition and
// returns the bytes of their values.
func fillTopic(b *testing.B, cl *kgo.Client, n int) int64 {
	pad := strings.Repeat("x", 1000)
	var total int64
	for p := range int32(partitions) {
		var recs []*kgo.Record
		for i := range n {
			v := fmt.Appendf(nil, `{"id":"%d-%d","pad":"%s"}`, p, i, pad)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: v})
			total += int64(len(v))
		}
		if err := cl.ProduceSync(b.Context(), recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	return total
}

func BenchmarkGroupThroughput(b *testing.B) {
	ctx := b.Context()
	addrs, cl := benchBroker(b)
	bytes := fillTopic(b, cl, benchRecords())
	srv := minio.Shared(b)
	var single, grouped, singleCPU, groupCPU time.Duration
	var reqs, laneCkpts, files int64
	for i := range b.N {
		runs := []func(){
			func() {
				c0, _ := cputime.Process()
				single += runSingle(b, ctx, addrs, srv.Client(b), srv.NewBucket(b))
				c1, _ := cputime.Process()
				singleCPU += c1 - c0
			},
			func() {
				c0, _ := cputime.Process()
				g := runGroup(b, ctx, addrs, srv)
				c1, _ := cputime.Process()
				groupCPU += c1 - c0
				grouped += g.took
				reqs += g.reqs
				laneCkpts += g.laneCkpts
				files += g.files
			},
		}
		if i%2 == 1 {
			slices.Reverse(runs)
		}
		switch os.Getenv("FILESINK_GROUP_BENCH_ONLY") { // profiling one side
		case "group":
			runs = []func(){runs[(i+1)%2]}
		case "single":
			runs = []func(){runs[i%2]}
		}
		for _, run := range runs {
			run()
		}
	}
	mbs := func(d time.Duration) float64 { return float64(bytes) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbs(single), "single-MB/s")
	b.ReportMetric(mbs(grouped), "group-MB/s")
	b.ReportMetric(100*single.Seconds()/grouped.Seconds(), "ratio-%")
	b.ReportMetric(singleCPU.Seconds()/float64(b.N), "single-cpu-s/op")
	b.ReportMetric(groupCPU.Seconds()/float64(b.N), "group-cpu-s/op")
	if laneCkpts > 0 {
		per := float64(reqs) / float64(laneCkpts)
		b.ReportMetric(per, "req/lane-ckpt")
		b.ReportMetric(per*1000/10, "req/s-1000p-10s")
	}
	// Files per lane per hour of running: each lane's last part is closed
	// by the end of the bounded input, not by the rolling policy, and is
	// not counted.
	if h := grouped.Hours(); h > 0 {
		b.ReportMetric(float64(files-int64(partitions)*int64(b.N))/float64(partitions)/h, "files/lane-h")
		b.ReportMetric(float64(files)/float64(partitions)/float64(b.N), "files/lane")
	}
}

// runSingle runs the topic through one process in today's mode and
// returns how long it took.
func runSingle(b *testing.B, ctx context.Context, addrs []string, client *s3api.Client, bucket string) time.Duration {
	st, err := s3.NewStore(client, bucket, "out/_filesink")
	if err != nil {
		b.Fatal(err)
	}
	be, err := s3.New(client, bucket, "out")
	if err != nil {
		b.Fatal(err)
	}
	w, err := filesink.New(be, 0, filesink.WithPrefix("part"))
	if err != nil {
		b.Fatal(err)
	}
	kcfg := kafka.Config{Brokers: addrs, Topics: []string{topic}, Bounded: true}
	start := time.Now()
	res, err := pipeline.Run(ctx, pipeline.Config{
		OpenSource: func(ctx context.Context, pos json.RawMessage) (source.Source, error) {
			return kafka.Open(ctx, kcfg, pos)
		},
		Store: st, Sinks: []pipeline.Sink{w}, CheckpointInterval: benchInterval(),
		CommitterOptions: []committer.Option{committer.WithRetain(1)},
	})
	if err != nil || !res.EndOfInput {
		b.Fatalf("single: %+v, %v", res, err)
	}
	return time.Since(start)
}

// runGroup runs the topic through one process in group mode and returns
// how long until its last lane finished, its S3 requests (counted by the
// client, by operation), its lane checkpoints and the files it published.
func runGroup(b *testing.B, ctx context.Context, addrs []string, srv *miniotest.Server) groupRun {
	var ops sync.Map // operation name -> *atomic.Int64
	count := func(o *s3api.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("count", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				n, _ := ops.LoadOrStore(middleware.GetOperationName(ctx), new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
		})
	}
	e := &env{client: srv.Client(b, count), bucket: srv.NewBucket(b), addrs: addrs, parts: partitions,
		want: map[string]int{}, next: map[int32]int{}, end: map[int32]int64{}, offsets: map[int32][]int64{}, epochs: map[kafka.LaneID][]uint64{}}
	e.t = b
	var mu sync.Mutex
	var first, last time.Time
	cfg := e.config(nil, true)
	cfg.Pipeline.CheckpointInterval = benchInterval()
	// One buffer budget for all lanes, as `filesink run --group` has.
	pool := filesink.NewBudgetPool(filesink.DefaultBufferBudget)
	cfg.NewSinks = func(_ context.Context, l group.Lane) ([]pipeline.Sink, error) {
		w, err := filesink.New(cfg.Backend, 0, append(group.SinkOptions(l), filesink.WithRollingPolicy(benchPolicy()),
			filesink.WithBudgetPool(pool))...)
		if err != nil {
			return nil, err
		}
		return []pipeline.Sink{w}, nil
	}
	cfg.Events.Stopped = func(kafka.LaneID) {
		mu.Lock()
		last = time.Now()
		mu.Unlock()
	}
	cfg.Events.Assigned = func(kafka.LaneID, uint64, time.Duration) {
		mu.Lock()
		if first.IsZero() {
			first = time.Now()
		}
		mu.Unlock()
	}
	start := time.Now()
	res, err := group.Run(ctx, cfg)
	if err != nil || !res.Finished {
		b.Fatalf("group: %+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	var reqs int64
	kinds := map[string]int64{}
	ops.Range(func(k, v any) bool {
		n := v.(*atomic.Int64).Load()
		kinds[k.(string)] = n
		reqs += n
		return true
	})
	files := len(visibleKeys(ctx, b, e.client, e.bucket))
	b.Logf("group run: first takeover after %v, last lane done after %v; %d lane checkpoints, %d files, S3 requests by operation: %v",
		first.Sub(start), last.Sub(start), res.Checkpoints, files, kinds)
	return groupRun{took: last.Sub(start), reqs: reqs, laneCkpts: int64(res.Checkpoints), files: int64(files)}
}

// groupRun is what runGroup measured.
type groupRun struct {
	took            time.Duration
	reqs, laneCkpts int64
	files           int64 // visible part files at the end
}

func BenchmarkGroupHandoff(b *testing.B) {
	ctx := b.Context()
	kc := kafkatest.Start(b, kafkatest.Topic{Name: topic, Partitions: partitions})
	srv := minio.Shared(b)
	e := &env{client: srv.Client(b), bucket: srv.NewBucket(b), kc: kc, addrs: kc.Addrs(), parts: partitions,
		want: map[string]int{}, next: map[int32]int{}, end: map[int32]int64{}, offsets: map[int32][]int64{}, epochs: map[kafka.LaneID][]uint64{}}
	e.t = b
	// Records all along, so that every lane has something to decide.
	pctx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	go func() {
		for pctx.Err() == nil {
			for p := range int32(partitions) {
				_, _ = kc.Produce(pctx, topic, p, []byte(`{"id":"x"}`))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	h := &handoffs{decided: map[kafka.LaneID][]laneEvent{}, owned: map[int]map[kafka.LaneID]bool{}}
	members := make([]*member, 3)
	for i := range members {
		members[i] = h.start(ctx, e, i)
	}
	waitBalanced(b, h, len(members))
	var took []time.Duration
	for i := range b.N {
		k := i % len(members)
		lanes := h.lanesOf(k)
		t0 := time.Now()
		close(members[k].stop)
		<-members[k].done
		if members[k].err != nil {
			b.Fatal(members[k].err)
		}
		h.waitDecided(b, lanes, k, t0)
		took = append(took, time.Since(t0))
		members[k] = h.start(ctx, e, k)
		waitBalanced(b, h, len(members))
	}
	for _, m := range members {
		close(m.stop)
		<-m.done
	}
	slices.Sort(took)
	pct := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
}

type laneEvent struct {
	member int
	at     time.Time
}

// handoffs records which member owns which lane, and when each member
// decided a checkpoint of each lane.
type handoffs struct {
	mu      sync.Mutex
	decided map[kafka.LaneID][]laneEvent
	owned   map[int]map[kafka.LaneID]bool
}

func (h *handoffs) start(ctx context.Context, e *env, k int) *member {
	h.mu.Lock()
	h.owned[k] = map[kafka.LaneID]bool{}
	h.mu.Unlock()
	return e.start(ctx, false, func(cfg *group.Config) {
		cfg.Pipeline.CheckpointInterval = time.Second
		cfg.Events.Assigned = func(id kafka.LaneID, _ uint64, _ time.Duration) {
			h.mu.Lock()
			h.owned[k][id] = true
			h.mu.Unlock()
		}
		cfg.Events.Stopped = func(id kafka.LaneID) {
			h.mu.Lock()
			delete(h.owned[k], id)
			h.mu.Unlock()
		}
		cfg.Events.Committed = func(id kafka.LaneID, _, _ int64) {
			h.mu.Lock()
			h.decided[id] = append(h.decided[id], laneEvent{member: k, at: time.Now()})
			h.mu.Unlock()
		}
	})
}

func (h *handoffs) lanesOf(k int) []kafka.LaneID {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []kafka.LaneID
	for id := range h.owned[k] {
		out = append(out, id)
	}
	return out
}

// waitDecided waits until each lane had a checkpoint committed by a member
// other than k after t0.
func (h *handoffs) waitDecided(b *testing.B, lanes []kafka.LaneID, k int, t0 time.Time) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		h.mu.Lock()
		left := 0
		for _, id := range lanes {
			ok := false
			for _, ev := range h.decided[id] {
				if ev.member != k && ev.at.After(t0) {
					ok = true
				}
			}
			if !ok {
				left++
			}
		}
		h.mu.Unlock()
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d lanes of the stopped member were not committed by another within 2 minutes", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitBalanced waits until every lane is owned and every member owns one.
func waitBalanced(b *testing.B, h *handoffs, n int) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		h.mu.Lock()
		total, empty := 0, 0
		for k := range n {
			total += len(h.owned[k])
			if len(h.owned[k]) == 0 {
				empty++
			}
		}
		h.mu.Unlock()
		if total == partitions && empty == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the group did not settle: %d lanes owned, %d members without a lane", total, empty)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// benchInterval is the checkpoint interval of the throughput runs:
// FILESINK_GROUP_BENCH_INTERVAL, default 10 s (the CLI's).
func benchInterval() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("FILESINK_GROUP_BENCH_INTERVAL")); err == nil && d > 0 {
		return d
	}
	return 10 * time.Second
}

// benchPolicy is the lanes' rolling policy in the benchmarks: parts of
// 64 MiB that stay open across checkpoints, as in one process (set
// FILESINK_GROUP_BENCH_ROLL_ON_CHECKPOINT=1 for a part per lane
// checkpoint, what group mode did before).
func benchPolicy() filesink.RollingPolicy {
	if os.Getenv("FILESINK_GROUP_BENCH_ROLL_ON_CHECKPOINT") == "1" {
		return filesink.OnCheckpointPolicy{}
	}
	return filesink.DefaultPolicy{PartSize: 64 << 20}
}
