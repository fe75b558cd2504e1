package s3_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/internal/testutil/faultproxy"
	"github.com/filesink/filesink/internal/testutil/miniotest"
	"github.com/filesink/filesink/recovery"
	"github.com/filesink/filesink/source"
)

// killable is an HTTP transport that a simulated crash cuts: requests in
// flight finish (the store may have executed them), later ones fail.
type killable struct {
	mu     sync.Mutex
	dead   bool
	flight sync.WaitGroup
}

var errCrashed = errors.New("process crashed")

func (k *killable) RoundTrip(r *http.Request) (*http.Response, error) {
	k.mu.Lock()
	if k.dead {
		k.mu.Unlock()
		return nil, errCrashed
	}
	k.flight.Add(1)
	k.mu.Unlock()
	defer k.flight.Done()
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	// Read the body now, so that the request is over when it returns.
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func (k *killable) kill() {
	k.mu.Lock()
	k.dead = true
	k.mu.Unlock()
	k.flight.Wait()
}

// e2e runs the file sink through the commit protocol on MinIO, with the
// checkpoint store on S3, as a sequence of processes that crash or fail and
// recover from the store.
type e2e struct {
	t        *testing.T
	srv      *miniotest.Server
	bucket   string
	endpoint string // MinIO, or a fault proxy in front of it
	n        int    // records
	retryer  func() aws.Retryer
	opts     []filesink.Option // more options of the writer
	backend  *s3sink.Backend
	store    *s3sink.Store
}

func newE2E(t *testing.T, endpoint string, srv *miniotest.Server) *e2e {
	return &e2e{t: t, srv: srv, bucket: srv.NewBucket(t), endpoint: endpoint, n: 20000, retryer: s3sink.NewRetryer}
}

// record i is about 2 KB of JSON in bucket k=i%3.
func (e *e2e) record(i int) []byte {
	pad := strings.Repeat(string(rune('a'+i%26)), 1500+(i*7919)%1000)
	return fmt.Appendf(nil, `{"id":%d,"k":"%d","pad":%q}`, i, i%3, pad)
}

// process is one process: it recovers from the store, writes from the
// recovered position with a checkpoint every 1,500 records, and crashes
// before record crashAt (the writer, coordinator and HTTP connections are
// dropped without Close) or finishes with a final checkpoint. An error
// kills the process the same way and is returned.
func (e *e2e) process(crashAt int) (restoredAt int, err error) {
	ctx := e.t.Context()
	tr := &killable{}
	defer func() {
		if err != nil {
			tr.kill()
		}
	}()
	client := s3api.New(s3api.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(e.endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(e.srv.AccessKey(), e.srv.SecretKey(), ""),
		HTTPClient:  &http.Client{Transport: tr},
		Retryer:     e.retryer(),
	})
	e.backend, err = s3sink.New(client, e.bucket, "out", s3sink.WithPartSize(s3sink.MinPartSize),
		s3sink.WithMaxParts(3), s3sink.WithConcurrency(2), s3sink.WithSpillDir(e.t.TempDir()),
		s3sink.WithRetryer(nil)) // the client's
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = s3sink.MustNewStore(e.t, client, e.bucket, "out/_filesink")
	w, err := filesink.New(e.backend, 0, append([]filesink.Option{filesink.WithAssigner(bucketing.Field("k"))}, e.opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	coord, err := committer.New(e.store, []committer.Participant{w}, committer.WithRetry(8, 50*time.Millisecond),
		// As the CLI runs S3 sinks: the final checkpoint sweeps the staging
		// data that only the records it pruned referenced.
		committer.WithSweepEvery(10))
	if err != nil {
		e.t.Fatal(err)
	}
	last, err := coord.Recover(ctx)
	if err != nil {
		return -1, fmt.Errorf("recover: %w", err)
	}
	pos := 0
	if last != nil {
		if err := json.Unmarshal(last.Source, &pos); err != nil {
			e.t.Fatal(err)
		}
	}
	for i := pos; i < e.n; i++ {
		if i == crashAt {
			tr.kill()
			return pos, nil
		}
		if err := w.Write(ctx, e.record(i), source.Origin{Name: "gen", Num: int64(i)}); err != nil {
			return pos, fmt.Errorf("write %d: %w", i, err)
		}
		if (i+1)%1500 == 0 {
			if _, err := coord.Checkpoint(ctx, fmt.Append(nil, i+1), false); err != nil {
				return pos, fmt.Errorf("checkpoint at %d: %w", i+1, err)
			}
		}
	}
	if _, err := coord.Checkpoint(ctx, fmt.Append(nil, e.n), true); err != nil {
		return pos, fmt.Errorf("final checkpoint: %w", err)
	}
	return pos, w.Close()
}

// verify checks that every record is published exactly once, that no
// upload of the sink is left, and that the file sink's checker passes. It
// returns the number of files.
func (e *e2e) verify() int {
	t, ctx := e.t, e.t.Context()
	client := e.srv.Client(t)
	seen := make([]int, e.n)
	files := 0
	p := s3api.NewListObjectsV2Paginator(client, &s3api.ListObjectsV2Input{Bucket: &e.bucket, Prefix: aws.String("out/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if strings.Contains(key, "/_") || strings.Contains(key, "/.") {
				continue
			}
			files++
			obj, err := client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &e.bucket, Key: &key})
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(obj.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var r struct {
					ID int    `json:"id"`
					K  string `json:"k"`
				}
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("%s: bad line: %v", key, err)
				}
				if r.ID < 0 || r.ID >= e.n || !strings.HasPrefix(key, "out/"+r.K+"/") {
					t.Fatalf("%s: record %d of bucket %s", key, r.ID, r.K)
				}
				seen[r.ID]++
			}
			obj.Body.Close()
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var missing, dup []int
	for id, c := range seen {
		if c == 0 {
			missing = append(missing, id)
		} else if c > 1 {
			dup = append(dup, id)
		}
	}
	if len(missing)+len(dup) > 0 {
		t.Fatalf("%d records missing (first %v), %d duplicated (first %v)", len(missing), head(missing), len(dup), head(dup))
	}
	t.Logf("%d records exactly once in %d files", e.n, files)

	ups, err := e.backend.ListUploads(ctx, "part-0-")
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) != 0 {
		t.Errorf("uploads left: %+v", ups)
	}
	retained, err := recovery.Retained(ctx, e.store)
	if err != nil {
		t.Fatal(err)
	}
	checker := filesink.Checker{Backend: e.backend}
	violations, err := checker.CheckOutput(ctx, retained)
	if err != nil || len(violations) > 0 {
		t.Errorf("CheckOutput = %+v, %v", violations, err)
	}
	for _, c := range retained {
		for _, pt := range c.Participants {
			for _, pc := range pt.Pending {
				if err := checker.CheckCommitted(ctx, pt.Name, pc); err != nil {
					t.Errorf("checkpoint %d: %v", c.ID, err)
				}
			}
		}
	}
	return files
}

// TestFileSinkEndToEnd: 20,000 records (about 40 MB in 3 buckets, 5 MiB
// parts, at most 3 parts per file so that files roll on the part limit),
// two simulated crashes, recovery from the store each time, a final
// checkpoint, then a last start over the finished output that publishes
// nothing and sweeps what the final checkpoint left.
func TestFileSinkEndToEnd(t *testing.T) {
	srv := s3sink.RequireMinioForTest(t)
	e := newE2E(t, srv.Endpoint(), srv)
	for _, step := range []struct{ crashAt, restoredAt int }{
		{7300, 0}, {13400, 6000}, {-1, 12000}, {e.n, e.n},
	} {
		got, err := e.process(step.crashAt)
		if err != nil {
			t.Fatal(err)
		}
		if got != step.restoredAt {
			t.Fatalf("process restored at %d, want %d", got, step.restoredAt)
		}
	}
	if files := e.verify(); files < 6 {
		t.Errorf("%d files: want at least 6 (3 buckets, rolled on the part limit)", files)
	}
}

// TestFileSinkOpenLimit is TestFileSinkEndToEnd with one open part file
// for the 3 buckets: every part is released (persisted: a tail object or a
// part; its spill file closed) and resumed from the store again and again,
// across two crashes and the sweeps every 10 checkpoints, which must keep
// the tail objects a released or resumed part still needs.
func TestFileSinkOpenLimit(t *testing.T) {
	srv := s3sink.RequireMinioForTest(t)
	e := newE2E(t, srv.Endpoint(), srv)
	e.n = 12000
	e.opts = []filesink.Option{filesink.WithMaxOpenParts(1), filesink.WithBufferBudget(1 << 20)}
	for _, step := range []struct{ crashAt, restoredAt int }{
		{5000, 0}, {9700, 4500}, {-1, 9000}, {e.n, e.n},
	} {
		got, err := e.process(step.crashAt)
		if err != nil {
			t.Fatal(err)
		}
		if got != step.restoredAt {
			t.Fatalf("process restored at %d, want %d", got, step.restoredAt)
		}
	}
	e.verify()
}

// TestFileSinkFaults runs the same job through a fault proxy: 503 SlowDown
// and connection resets before and after execution on every kind of
// request, and resets after CompleteMultipartUpload, CreateMultipartUpload
// and conditional PutObject executed (the in-doubt cases). A process that
// fails restarts and recovers; every record must still land exactly once,
// and no upload may be left.
func TestFileSinkFaults(t *testing.T) {
	srv := s3sink.RequireMinioForTest(t)
	p := faultproxy.New(t, srv.Endpoint())
	e := newE2E(t, p.URL(), srv)
	// Few attempts per request, so that some processes fail and recover.
	e.retryer = func() aws.Retryer { return retry.AddWithMaxAttempts(s3sink.NewRetryer(), 4) }
	p.FailNext(faultproxy.UploadPart, faultproxy.InternalError, 4)
	p.FailNext(faultproxy.CompleteMultipartUpload, faultproxy.ResetAfter, 3)
	p.FailNext(faultproxy.CreateMultipartUpload, faultproxy.ResetAfter, 2)
	p.FailNext(faultproxy.PutObject, faultproxy.ResetAfter, 4)
	p.FailNext(faultproxy.UploadPart, faultproxy.ResetBefore, 2)
	p.FailNext(faultproxy.UploadPart, faultproxy.SlowDown, 2)
	p.FailRandomly(0.03, faultproxy.SlowDown)
	p.FailRandomly(0.01, faultproxy.InternalError)
	p.FailRandomly(0.02, faultproxy.ResetBefore)
	p.FailRandomly(0.02, faultproxy.ResetAfter)
	crashes := []int{5000, 11000}
	failures := 0
	for proc := 0; ; proc++ {
		crashAt := -1
		if proc < len(crashes) {
			crashAt = crashes[proc]
		}
		_, err := e.process(crashAt)
		if err == nil && crashAt < 0 {
			break
		}
		if errors.Is(err, committer.ErrDataLoss) || errors.Is(err, committer.ErrAlreadyExists) {
			t.Fatalf("process %d: %v", proc, err)
		}
		if err != nil {
			failures++
			t.Logf("process %d failed (restarting): %v", proc, err)
		}
		if proc > 40 {
			t.Fatalf("no process finished after %d attempts", proc)
		}
	}
	for _, k := range []faultproxy.Kind{faultproxy.CompleteMultipartUpload, faultproxy.CreateMultipartUpload, faultproxy.UploadPart, faultproxy.PutObject} {
		if p.Injected(k) == 0 {
			t.Errorf("no fault injected into %v", k)
		}
	}
	if failures == 0 {
		t.Error("no process failed: the recovery from failures was not exercised")
	}
	t.Log(p.Stats())
	// A last start without faults sweeps the orphans the faults made.
	p.Clear()
	if _, err := e.process(e.n); err != nil {
		t.Fatal(err)
	}
	e.verify()
}

func head(s []int) []int { return s[:min(len(s), 5)] }
