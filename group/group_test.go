package group_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/group"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/internal/testutil/miniotest"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/source/kafka"
)

var minio miniotest.Pool

func TestMain(m *testing.M) { os.Exit(minio.Run(m)) }

const topic = "orders"

// env is one group job: a kfake cluster with the topic, a MinIO bucket
// for the output and the state, and the record of every lane takeover.
type env struct {
	t      testing.TB
	kc     *kafkatest.Cluster // nil when the broker is a process (benchmarks)
	addrs  []string
	client *s3api.Client
	bucket string
	parts  int

	mu       sync.Mutex
	want     map[string]int    // id -> 0, counted by check
	next     map[int32]int     // records produced per partition
	end      map[int32]int64   // offset after the last committed record produced
	offsets  map[int32][]int64 // every committed record's offset
	epochs   map[kafka.LaneID][]uint64
	fenced   atomic.Int64
	produced atomic.Int64
}

func newEnv(t *testing.T, parts int) *env {
	t.Helper()
	kc := kafkatest.Start(t, kafkatest.Topic{Name: topic, Partitions: int32(parts)})
	srv := minio.Shared(t)
	e := &env{t: t, kc: kc, addrs: kc.Addrs(), client: srv.Client(t), bucket: srv.NewBucket(t), parts: parts,
		want: map[string]int{}, next: map[int32]int{}, end: map[int32]int64{}, offsets: map[int32][]int64{}, epochs: map[kafka.LaneID][]uint64{}}
	return e
}

// produce writes n committed records to every partition, and an aborted
// transaction between every batch of them.
func (e *env) produce(ctx context.Context, n int) {
	e.t.Helper()
	for p := range int32(e.parts) {
		e.mu.Lock()
		first := e.next[p]
		e.next[p] += n
		e.mu.Unlock()
		var vals [][]byte
		for i := first; i < first+n; i++ {
			id := fmt.Sprintf("%d-%d", p, i)
			vals = append(vals, fmt.Appendf(nil, `{"id":%q}`, id))
			e.mu.Lock()
			e.want[id] = 0
			e.mu.Unlock()
		}
		offs, err := e.kc.Produce(ctx, topic, p, vals...)
		if err != nil {
			e.t.Fatal(err)
		}
		e.mu.Lock()
		e.offsets[p] = append(e.offsets[p], offs...)
		// An unbounded lane's position passes its last committed record;
		// it passes an aborted transaction's marker only when it reads a
		// record after it.
		e.end[p] = offs[len(offs)-1] + 1
		e.mu.Unlock()
		if _, err := e.kc.ProduceTxn(ctx, fmt.Sprintf("tx-%d", p), false, topic, p, []byte(`{"id":"aborted"}`)); err != nil {
			e.t.Fatal(err)
		}
		e.produced.Add(int64(n))
	}
}

// config is the Config of one process of the job.
func (e *env) config(stop <-chan struct{}, bounded bool) group.Config {
	st, err := s3.NewStore(e.client, e.bucket, "out/_filesink")
	if err != nil {
		e.t.Fatal(err)
	}
	be, err := s3.New(e.client, e.bucket, "out", s3.WithMaxParts(s3.MaxParts-1))
	if err != nil {
		e.t.Fatal(err)
	}
	return group.Config{
		Kafka: kafka.GroupConfig{
			Config:         kafka.Config{Brokers: e.addrs, Topics: []string{topic}, Bounded: bounded},
			Name:           "g",
			SessionTimeout: 6 * time.Second, RebalanceTimeout: 20 * time.Second,
		},
		State: st, Backend: be, Prefix: "part",
		NewSinks: func(_ context.Context, l group.Lane) ([]pipeline.Sink, error) {
			// Parts stay open across the lane's checkpoints: takeovers
			// close them where the decided state records them.
			w, err := filesink.New(be, 0, append(group.SinkOptions(l),
				filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 64 << 10}), filesink.WithBufferBudget(1<<20))...)
			if err != nil {
				return nil, err
			}
			return []pipeline.Sink{w}, nil
		},
		Pipeline: pipeline.Config{CheckpointInterval: 150 * time.Millisecond, TickInterval: 50 * time.Millisecond,
			CommitterOptions: []committer.Option{committer.WithRetain(1)}},
		Stop:   stop,
		Logger: testLogger(),
		Events: &group.Events{
			Assigned: func(id kafka.LaneID, epoch uint64, _ time.Duration) {
				e.mu.Lock()
				e.epochs[id] = append(e.epochs[id], epoch)
				e.mu.Unlock()
			},
			Fenced: func(kafka.LaneID) { e.fenced.Add(1) },
		},
	}
}

// testLogger logs to stderr with FILESINK_TEST_LOG=1 (debugging), else
// nowhere.
func testLogger() *slog.Logger {
	if os.Getenv("FILESINK_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// member is one process of the job, run in a goroutine.
type member struct {
	stop chan struct{}
	done chan struct{}
	res  group.Result
	err  error
}

func (e *env) start(ctx context.Context, bounded bool, mod func(*group.Config)) *member {
	m := &member{stop: make(chan struct{}), done: make(chan struct{})}
	cfg := e.config(m.stop, bounded)
	if mod != nil {
		mod(&cfg)
	}
	go func() {
		defer close(m.done)
		m.res, m.err = group.Run(ctx, cfg)
	}()
	return m
}

func (m *member) halt(t *testing.T) {
	t.Helper()
	close(m.stop)
	<-m.done
	if m.err != nil {
		t.Fatalf("member: %v", m.err)
	}
}

// check reads every visible file of the output and asserts that every
// produced record is there exactly once, that no aborted record is, and
// that every lane's owner epochs only grew.
func (e *env) check(ctx context.Context) {
	e.t.Helper()
	got := map[string]int{}
	files := 0
	for _, key := range visibleKeys(ctx, e.t, e.client, e.bucket) {
		if !strings.Contains(key, "/part-"+topic+".") {
			e.t.Errorf("visible object %s is not a lane's part file", key)
		}
		files++
		e.readIDs(ctx, key, got)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	missing, dup := 0, 0
	for id := range e.want {
		switch got[id] {
		case 0:
			missing++
			if missing <= 5 {
				e.t.Errorf("record %s is missing", id)
			}
		case 1:
		default:
			dup++
			if dup <= 5 {
				e.t.Errorf("record %s is in the output %d times", id, got[id])
			}
		}
	}
	for id := range got {
		if _, ok := e.want[id]; !ok {
			e.t.Errorf("record %s was never produced (an aborted transaction's?)", id)
		}
	}
	if missing+dup > 0 {
		e.t.Fatalf("%d of %d records missing, %d duplicated, in %d files", missing, len(e.want), dup, files)
	}
	e.checkManifests(ctx)
	for id, eps := range e.epochs {
		if !slices.IsSorted(eps) || len(slices.Compact(slices.Clone(eps))) != len(eps) {
			e.t.Errorf("lane %s: owner epochs %v do not strictly increase", id, eps)
		}
	}
	e.t.Logf("%d records exactly once in %d files; takeovers per lane: %v", len(e.want), files, e.epochs)
}

// visibleKeys lists the visible objects of the output "out/" in bucket:
// everything but the metadata and staging under _filesink.
func visibleKeys(ctx context.Context, t testing.TB, client *s3api.Client, bucket string) []string {
	t.Helper()
	var keys []string
	p := s3api.NewListObjectsV2Paginator(client, &s3api.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("out/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			if key := aws.ToString(o.Key); !strings.Contains(key, "/_filesink") {
				keys = append(keys, key)
			}
		}
	}
	return keys
}

// checkManifests reads the output's commit manifests: the offsets their
// source ranges list, per partition, must be exactly the committed
// records' offsets, each in one file only (disjoint and without gaps).
// The caller holds e.mu.
func (e *env) checkManifests(ctx context.Context) {
	e.t.Helper()
	be, err := s3.New(e.client, e.bucket, "out")
	if err != nil {
		e.t.Fatal(err)
	}
	ms, err := filesink.ReadManifests(ctx, be)
	if err != nil {
		e.t.Fatal(err)
	}
	seen := map[string]map[int64]string{}
	for _, m := range ms {
		for _, f := range m.Files {
			for _, r := range f.Sources {
				if r.Coarse {
					e.t.Fatalf("manifest %d of %s: coarse range of %s", m.Checkpoint, m.Writer, r.Input)
				}
				runs := r.Runs
				if len(runs) == 0 {
					runs = [][2]int64{{r.First, r.Last}}
				}
				if seen[r.Input] == nil {
					seen[r.Input] = map[int64]string{}
				}
				for _, run := range runs {
					for o := run[0]; o <= run[1]; o++ {
						if prev, ok := seen[r.Input][o]; ok {
							e.t.Errorf("%s offset %d is in %s and in %s", r.Input, o, prev, f.Path)
						}
						seen[r.Input][o] = f.Path
					}
				}
			}
		}
	}
	for p, offs := range e.offsets {
		in := fmt.Sprintf("%s/%d", topic, p)
		for _, o := range offs {
			if _, ok := seen[in][o]; !ok {
				e.t.Errorf("%s offset %d is in no manifest", in, o)
			}
		}
		if len(seen[in]) != len(offs) {
			e.t.Errorf("%s: the manifests list %d offsets, %d committed records were produced", in, len(seen[in]), len(offs))
		}
	}
}

func (e *env) readIDs(ctx context.Context, key string, got map[string]int) {
	out, err := e.client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &e.bucket, Key: &key})
	if err != nil {
		e.t.Fatal(err)
	}
	defer out.Body.Close()
	sc := bufio.NewScanner(out.Body)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, `"id":"`)
		if i < 0 {
			e.t.Fatalf("%s: line without an id: %q", key, line)
		}
		id := line[i+6:]
		id = id[:strings.IndexByte(id, '"')]
		got[id]++
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		e.t.Fatal(err)
	}
}

// waitCommitted waits until every lane's state records the end of what
// was produced.
func (e *env) waitCommitted(ctx context.Context) {
	e.t.Helper()
	st, err := s3.NewStore(e.client, e.bucket, "out/_filesink")
	if err != nil {
		e.t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		heads, err := s3.ListLanes(ctx, st)
		if err != nil {
			e.t.Fatal(err)
		}
		behind := e.parts - len(heads)
		var why []string
		for _, h := range heads {
			if h.Checkpoint == nil {
				behind++
				why = append(why, fmt.Sprintf("%s/%d: no checkpoint", h.Topic, h.Partition))
				continue
			}
			_, next, _, err := kafka.LanePosition(h.Checkpoint.Source)
			if err != nil {
				e.t.Fatal(err)
			}
			e.mu.Lock()
			end := e.end[h.Partition]
			e.mu.Unlock()
			if next < end {
				behind++
				why = append(why, fmt.Sprintf("%s/%d: epoch %d checkpoint %d next %d end %d", h.Topic, h.Partition, h.Epoch, h.Checkpoint.ID, next, end))
			}
		}
		if behind == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d lanes did not commit everything within 2 minutes: %v", behind, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
