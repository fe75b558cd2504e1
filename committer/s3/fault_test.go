package s3_test

// Fault injection end to end: the file sink (filesink.New over the S3
// backend), the commit protocol (committer.Coordinator) and the S3
// checkpoint store, all talking to MinIO through internal/testutil/faultproxy, which
// fails chosen requests. Each scenario writes faultRecords records with a
// checkpoint every faultEvery records and then checks that every record was
// published exactly once, that no multipart upload of the sink is left after
// the final checkpoint, that the sink's checker agrees, and that the proxy
// really injected the faults the scenario is about (a scenario whose faults
// never fired fails).
//
// The SDK retryer of this package is bounded (DefaultMaxAttempts attempts,
// backoff up to DefaultMaxBackoff). The scenarios use NewRetryer with more
// attempts and a short backoff (retry.AddWithMaxAttempts and
// AddWithMaxBackoffDelay keep its classification of what is transient): with
// a 10% fault rate per request, 30 attempts make giving up impossible in
// practice, and the short backoff keeps the test fast.

import (
	"bufio"
	"bytes"
	"context"
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

const (
	faultRecords = 20000 // records per scenario, about 1 KB each
	faultEvery   = 1000  // records between checkpoints
	faultPrefix  = "out"
	// faultAttempts and faultBackoff configure the SDK retryer of the
	// scenarios (see the file comment).
	faultAttempts = 30
	faultBackoff  = 50 * time.Millisecond
	// faultMaxFailures bounds the processes of a scenario that fail on
	// their own (not a planned crash) before the scenario gives up.
	faultMaxFailures = 10
)

// faultCoreKinds are the kinds of request one scenario run with a crash
// makes: writing (Open: HEAD, marker PUT, Create; parts; tails and records
// PUT; Complete; marker DELETE; record DELETE) and recovering (record LIST
// and GET, ListParts and tail GET on resume, staging LIST, ListMultipartUploads,
// DeleteObjects and AbortMultipartUpload in the sweep).
var faultCoreKinds = []faultproxy.Kind{
	faultproxy.PutObject, faultproxy.UploadPart, faultproxy.CreateMultipartUpload,
	faultproxy.CompleteMultipartUpload, faultproxy.AbortMultipartUpload, faultproxy.ListParts,
	faultproxy.ListMultipartUploads, faultproxy.GetObject, faultproxy.HeadObject,
	faultproxy.DeleteObject, faultproxy.ListObjectsV2, faultproxy.DeleteObjects,
}

// faultRecord is record i: about 1 KB of JSON in bucket k = i%2.
func faultRecord(i int) []byte {
	pad := strings.Repeat(string(rune('a'+i%26)), 900+(i*7919)%200)
	return fmt.Appendf(nil, `{"id":%d,"k":"%d","pad":%q}`, i, i%2, pad)
}

// errFaultCrashed is what every request of a crashed process gets. It is a
// canceled error for the SDK, so it is not retried: a dead process sends
// nothing more.
type faultCrashedError struct{}

func (faultCrashedError) Error() string       { return "process crashed" }
func (faultCrashedError) CanceledError() bool { return true }

// faultTransport is the HTTP transport of one simulated process. kill cuts
// it: requests in flight finish (the store may have executed them), later
// ones fail. With crashOnLostComplete, a CompleteMultipartUpload whose reply
// is lost (the connection failed after the request was sent) kills the
// process at once: the commit happened, the process never learns it.
type faultTransport struct {
	base                *http.Transport
	crashOnLostComplete bool

	mu     sync.Mutex
	dead   bool
	lost   []string // request paths of the Completes whose reply was lost
	flight sync.WaitGroup
}

func newFaultTransport() *faultTransport {
	base := http.DefaultTransport.(*http.Transport).Clone()
	return &faultTransport{base: base}
}

func (f *faultTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	if f.dead {
		f.mu.Unlock()
		return nil, faultCrashedError{}
	}
	f.flight.Add(1)
	f.mu.Unlock()
	defer f.flight.Done()
	kind := faultproxy.Classify(r)
	resp, err := f.base.RoundTrip(r)
	if err == nil {
		// Read the body now, so that the request is over when it returns.
		var body []byte
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	if err != nil && kind == faultproxy.CompleteMultipartUpload && f.crashOnLostComplete {
		f.mu.Lock()
		f.dead = true
		f.lost = append(f.lost, r.URL.Path)
		f.mu.Unlock()
		return nil, faultCrashedError{}
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (f *faultTransport) kill() {
	f.mu.Lock()
	f.dead = true
	f.mu.Unlock()
	f.flight.Wait()
	f.base.CloseIdleConnections()
}

func (f *faultTransport) lostCompletes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.lost...)
}

// faultJob is one scenario: a bucket on the shared MinIO, a proxy in front
// of it, and a sequence of simulated processes.
type faultJob struct {
	t       *testing.T
	srv     *miniotest.Server
	proxy   *faultproxy.Proxy
	bucket  string
	retryer aws.Retryer
	// crashAt is the record before which the first process that gets
	// there crashes (-1: no planned crash).
	crashAt int
	// beforeRecover runs after the planned crash, before the next process.
	beforeRecover func()
	// crashOnLostComplete: see faultTransport.
	crashOnLostComplete bool
	// onLostComplete runs after a process crashed on a lost Complete reply,
	// with the object key.
	onLostComplete func(key string)

	processes, failures, lostCrashes int
	checkpoints                      int             // Checkpoint calls
	backend                          *s3sink.Backend // of the last process
	store                            *s3sink.Store
}

func newFaultJob(t *testing.T) *faultJob {
	srv := s3sink.RequireMinioForTest(t)
	j := &faultJob{
		t: t, srv: srv, proxy: faultproxy.New(t, srv.Endpoint()), bucket: srv.NewBucket(t), crashAt: -1,
		retryer: retry.AddWithMaxBackoffDelay(retry.AddWithMaxAttempts(s3sink.NewRetryer(), faultAttempts), faultBackoff),
	}
	t.Logf("proxy seed %d (repeat with %s=%d)", j.proxy.Seed(), faultproxy.EnvSeed, j.proxy.Seed())
	return j
}

// processResult is how one simulated process ended.
type processResult struct {
	restoredAt int      // -1 if the process ended in its recovery
	crashed    bool     // planned crash
	lost       []string // Completes whose reply was lost (crashOnLostComplete)
	err        error
}

// process runs one process: recover from the store, write from the
// restored position with a checkpoint every faultEvery records, and either
// crash before record crashAt or take the final checkpoint. An error kills
// the process (its transport is cut) and is returned.
func (j *faultJob) process(crashAt int) (res processResult) {
	t := j.t
	ctx := t.Context()
	tr := newFaultTransport()
	tr.crashOnLostComplete = j.crashOnLostComplete
	defer func() {
		if res.err != nil || res.crashed {
			tr.kill()
		}
		res.lost = tr.lostCompletes()
	}()
	client := j.srv.ClientAt(t, j.proxy.URL(), func(o *s3api.Options) {
		o.HTTPClient = &http.Client{Transport: tr}
		o.Retryer = j.retryer
	})
	var err error
	j.backend, err = s3sink.New(client, j.bucket, faultPrefix, s3sink.WithPartSize(s3sink.MinPartSize),
		s3sink.WithMaxParts(2), s3sink.WithConcurrency(2), s3sink.WithSpillDir(t.TempDir()),
		s3sink.WithRetryer(j.retryer))
	if err != nil {
		t.Fatal(err)
	}
	j.store = s3sink.MustNewStore(t, client, j.bucket, faultPrefix+"/_filesink", s3sink.WithRetryer(j.retryer))
	w, err := filesink.New(j.backend, 0, filesink.WithAssigner(bucketing.Field("k")))
	if err != nil {
		t.Fatal(err)
	}
	coord, err := committer.New(j.store, []committer.Participant{w}, committer.WithRetry(8, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	res.restoredAt = -1 // until Recover returns
	last, err := coord.Recover(ctx)
	if err != nil {
		res.err = fmt.Errorf("recover: %w", err)
		return res
	}
	res.restoredAt = 0
	if last != nil {
		if err := json.Unmarshal(last.Source, &res.restoredAt); err != nil {
			t.Fatal(err)
		}
	}
	for i := res.restoredAt; i < faultRecords; i++ {
		if i == crashAt {
			res.crashed = true
			return res
		}
		if err := w.Write(ctx, faultRecord(i), source.Origin{Name: "gen", Num: int64(i)}); err != nil {
			res.err = fmt.Errorf("write %d: %w", i, err)
			return res
		}
		if (i+1)%faultEvery == 0 && i+1 < faultRecords {
			j.checkpoints++
			if _, err := coord.Checkpoint(ctx, fmt.Append(nil, i+1), false); err != nil {
				res.err = fmt.Errorf("checkpoint at %d: %w", i+1, err)
				return res
			}
		}
	}
	j.checkpoints++
	if _, err := coord.Checkpoint(ctx, fmt.Append(nil, faultRecords), true); err != nil {
		res.err = fmt.Errorf("final checkpoint: %w", err)
		return res
	}
	res.err = w.Close()
	tr.kill()
	return res
}

// where describes where a process ended up, for logs.
func (r processResult) where() string {
	if r.restoredAt < 0 {
		return "during its recovery"
	}
	return fmt.Sprintf("restored at %d", r.restoredAt)
}

// run runs processes until one takes the final checkpoint. A process that
// fails with ErrDataLoss or ErrAlreadyExists fails the test; other failures
// restart (at most faultMaxFailures times).
func (j *faultJob) run() {
	t := j.t
	start := time.Now()
	crashAt := j.crashAt
	for {
		j.processes++
		res := j.process(crashAt)
		switch {
		case errors.Is(res.err, committer.ErrDataLoss) || errors.Is(res.err, committer.ErrAlreadyExists):
			t.Fatalf("process %d (%s): %v\n%s", j.processes, res.where(), res.err, j.proxy.Stats())
		case len(res.lost) > 0:
			j.lostCrashes++
			t.Logf("process %d (%s) crashed after the reply of CompleteMultipartUpload %v was lost", j.processes, res.where(), res.lost)
			for _, p := range res.lost {
				if j.onLostComplete != nil {
					j.onLostComplete(strings.TrimPrefix(p, "/"+j.bucket+"/"))
				}
			}
			continue
		case res.crashed:
			t.Logf("process %d (%s) crashed before record %d", j.processes, res.where(), crashAt)
			crashAt = -1
			if j.beforeRecover != nil {
				j.beforeRecover()
			}
			continue
		case res.err != nil:
			j.failures++
			t.Logf("process %d (%s) failed (restarting): %v", j.processes, res.where(), res.err)
			if j.failures > faultMaxFailures {
				t.Fatalf("%d processes failed; the retries do not absorb the faults\n%s", j.failures, j.proxy.Stats())
			}
			continue
		}
		t.Logf("process %d (%s) took the final checkpoint; %d processes, %d failed, %v",
			j.processes, res.where(), j.processes, j.failures, time.Since(start).Round(time.Millisecond))
		return
	}
}

// client returns a client straight to MinIO, without faults.
func (j *faultJob) client() *s3api.Client { return j.srv.Client(j.t) }

// verify checks, without faults, that every record is published exactly
// once in the right bucket and that no multipart upload of the sink is left
// after the final checkpoint. Then one more process starts over the finished
// output: it must publish nothing, and after its recovery sweep the sink's
// checker (recovery.Verify) must pass on the retained checkpoints.
func (j *faultJob) verify() {
	t, ctx := j.t, j.t.Context()
	j.proxy.Clear()
	client := j.client()
	before := j.checkOutput()

	// No incomplete upload of the sink: MinIO lists every upload of a bucket
	// when asked without a prefix.
	var left []string
	up := s3api.NewListMultipartUploadsPaginator(client, &s3api.ListMultipartUploadsInput{Bucket: &j.bucket})
	for up.HasMorePages() {
		page, err := up.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range page.Uploads {
			left = append(left, aws.ToString(u.Key)+" "+aws.ToString(u.UploadId))
		}
	}
	if len(left) > 0 {
		t.Errorf("%d incomplete multipart upload(s) left after the final checkpoint: %v", len(left), left)
	}
	// The same through the backend (markers and per-key listing).
	be, err := s3sink.New(client, j.bucket, faultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if ups, err := be.ListUploads(ctx, ""); err != nil || len(ups) > 0 {
		t.Errorf("ListUploads after the final checkpoint = %+v, %v; want none", ups, err)
	}

	// A further process restores at the end and publishes nothing new.
	res := j.process(-1)
	if res.err != nil || res.restoredAt != faultRecords {
		t.Fatalf("a further process over the finished job: restored at %d: %v", res.restoredAt, res.err)
	}
	after := j.listFinished()
	if len(after) != len(before) {
		t.Errorf("a further process changed the output: %d objects before, %d after", len(before), len(after))
	}
	for k, etag := range before {
		if after[k] != etag {
			t.Errorf("a further process changed %s (ETag %s -> %q)", k, etag, after[k])
		}
	}
	store := s3sink.MustNewStore(t, client, j.bucket, faultPrefix+"/_filesink")
	retained, err := recovery.Retained(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(retained) == 0 || string(retained[len(retained)-1].Source) != fmt.Sprint(faultRecords) {
		t.Errorf("the newest checkpoint record does not cover all %d records", faultRecords)
	}
	vs, err := recovery.Verify(ctx, store, filesink.Checker{Backend: be})
	if err != nil || len(vs) > 0 {
		t.Errorf("recovery.Verify = %v, %v", vs, err)
	}
}

// listFinished returns the finished objects under the prefix (key -> ETag).
func (j *faultJob) listFinished() map[string]string {
	t, ctx := j.t, j.t.Context()
	m := map[string]string{}
	p := s3api.NewListObjectsV2Paginator(j.client(), &s3api.ListObjectsV2Input{Bucket: &j.bucket, Prefix: aws.String(faultPrefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if !faultHidden(strings.TrimPrefix(key, faultPrefix+"/")) {
				m[key] = aws.ToString(o.ETag)
			}
		}
	}
	return m
}

// checkOutput checks that the finished objects hold every record exactly
// once, each in its bucket and unchanged, and returns them (key -> ETag).
func (j *faultJob) checkOutput() map[string]string {
	t, ctx := j.t, j.t.Context()
	client := j.client()
	seen := make([]int, faultRecords)
	objs := j.listFinished()
	for key := range objs {
		obj, err := client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &j.bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(obj.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r struct {
				ID *int   `json:"id"`
				K  string `json:"k"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.ID == nil {
				t.Fatalf("%s: bad line (%v): %.100q", key, err, sc.Bytes())
			}
			if *r.ID < 0 || *r.ID >= faultRecords || !strings.HasPrefix(key, faultPrefix+"/"+r.K+"/") || !bytes.Equal(sc.Bytes(), faultRecord(*r.ID)) {
				t.Fatalf("%s: record %d of bucket %s is not the one written", key, *r.ID, r.K)
			}
			seen[*r.ID]++
		}
		obj.Body.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
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
		t.Errorf("%d records missing (first %v), %d duplicated (first %v)", len(missing), missing[:min(5, len(missing))], len(dup), dup[:min(5, len(dup))])
	} else {
		t.Logf("%d records exactly once in %d files", faultRecords, len(objs))
	}
	return objs
}

// faultHidden reports whether rel (a key relative to the prefix) has a path
// component starting with '_' or '.': not finished output.
func faultHidden(rel string) bool {
	for _, c := range strings.Split(rel, "/") {
		if c == "" || c[0] == '_' || c[0] == '.' {
			return true
		}
	}
	return false
}

// requireInjected fails the test unless the proxy answered at least one
// request of each kind with action.
func (j *faultJob) requireInjected(action faultproxy.Action, kinds ...faultproxy.Kind) {
	j.t.Helper()
	for _, k := range kinds {
		if n := j.proxy.Requests(k); n == 0 {
			j.t.Errorf("the job sent no %v request: the scenario did not exercise it", k)
			continue
		}
		if j.proxy.InjectedAction(k, action) == 0 {
			j.t.Errorf("no %v was injected into %v (%d requests): the fault never fired", action, k, j.proxy.Requests(k))
		}
	}
}

// plantOrphan leaves, as a crashed run would, an upload of this sink's
// subtask 0 that no checkpoint references (marker and multipart upload),
// written straight to MinIO: the next recovery's sweep must abort it.
func (j *faultJob) plantOrphan() {
	t := j.t
	be, err := s3sink.New(j.client(), j.bucket, faultPrefix, s3sink.WithPartSize(s3sink.MinPartSize), s3sink.WithSpillDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	pw, err := be.Open(t.Context(), "1/part-0-0dead0ff-0.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Write(faultRecord(1)); err != nil {
		t.Fatal(err)
	}
	pw.Close()
}

// everyKind is every kind of request the proxy tells apart.
func everyKind() []faultproxy.Kind { return faultproxy.Kinds() }

// TestFaultsSlowDownEveryKind: 503 SlowDown on 10% of all requests, and on
// the first request of every kind, through a run with a crash, recovery
// (with an orphaned upload for the sweep to abort) and a final checkpoint.
func TestFaultsSlowDownEveryKind(t *testing.T) {
	j := newFaultJob(t)
	for _, k := range everyKind() {
		j.proxy.FailNext(k, faultproxy.SlowDown, 1)
	}
	j.proxy.FailRandomly(0.10, faultproxy.SlowDown)
	j.crashAt = faultRecords*3/5 + faultEvery/2
	j.beforeRecover = j.plantOrphan
	j.run()
	t.Log(j.proxy.Stats())
	j.requireInjected(faultproxy.SlowDown, faultCoreKinds...)
	j.verify()
	if j.failures > 0 {
		t.Errorf("%d processes failed: the retryer should absorb 503 SlowDown", j.failures)
	}
}

// TestFaultsResetBeforeEveryKind: the connection is reset before the
// request reaches MinIO on 10% of all requests and on the first request of
// every kind.
func TestFaultsResetBeforeEveryKind(t *testing.T) {
	j := newFaultJob(t)
	for _, k := range everyKind() {
		j.proxy.FailNext(k, faultproxy.ResetBefore, 1)
	}
	j.proxy.FailRandomly(0.10, faultproxy.ResetBefore)
	j.crashAt = faultRecords*3/5 + faultEvery/2
	j.beforeRecover = j.plantOrphan
	j.run()
	t.Log(j.proxy.Stats())
	j.requireInjected(faultproxy.ResetBefore, faultCoreKinds...)
	j.verify()
	if j.failures > 0 {
		t.Errorf("%d processes failed: the retryer should absorb connection resets", j.failures)
	}
}

// TestFaultsLostCompleteReply: CompleteMultipartUpload is executed by MinIO
// and the connection is reset before the reply (the first three, then 30%
// of them): the SDK retries, the retry finds the upload gone or the object
// there, and the verified re-commit must accept the object as committed.
func TestFaultsLostCompleteReply(t *testing.T) {
	j := newFaultJob(t)
	j.proxy.FailNext(faultproxy.CompleteMultipartUpload, faultproxy.ResetAfter, 3)
	j.proxy.FailRandomly(0.3, faultproxy.ResetAfter, faultproxy.CompleteMultipartUpload)
	j.crashAt = faultRecords*3/5 + faultEvery/2
	j.run()
	t.Log(j.proxy.Stats())
	j.requireInjected(faultproxy.ResetAfter, faultproxy.CompleteMultipartUpload)
	if n := j.proxy.InjectedAction(faultproxy.CompleteMultipartUpload, faultproxy.ResetAfter); n < 3 {
		t.Errorf("%d lost Complete replies, want at least 3", n)
	}
	j.verify()
	if j.failures > 0 {
		t.Errorf("%d processes failed: a lost Complete reply must be resolved by the verified re-commit within the process", j.failures)
	}
}

// isCheckpointPut matches the PUT of a checkpoint record (the conditional
// write of the decide step).
func isCheckpointPut(r *http.Request) bool {
	return strings.Contains(r.URL.Path, "/"+faultPrefix+"/_filesink/ckpt-")
}

// TestFaultsLostCheckpointPutReply: the conditional PutObject of a
// checkpoint record is executed by MinIO and its reply is lost (the first
// three, then 40% of them). The retry gets 412 Precondition Failed; the
// store must read the record back, find its own bytes and report success:
// the decide step must neither fail nor write the record twice.
func TestFaultsLostCheckpointPutReply(t *testing.T) {
	j := newFaultJob(t)
	var mu sync.Mutex
	puts := 0
	// The first rule only counts the record PUTs (it never fires).
	j.proxy.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.PutObject}, Match: func(r *http.Request) bool {
		if isCheckpointPut(r) {
			mu.Lock()
			puts++
			mu.Unlock()
		}
		return false
	}})
	first := j.proxy.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.PutObject}, Match: isCheckpointPut, Action: faultproxy.ResetAfter, Times: 3})
	more := j.proxy.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.PutObject}, Match: isCheckpointPut, Action: faultproxy.ResetAfter, Prob: 0.4})
	j.crashAt = faultRecords*3/5 + faultEvery/2
	j.run()
	t.Log(j.proxy.Stats())
	lost := j.proxy.Fired(first) + j.proxy.Fired(more)
	mu.Lock()
	t.Logf("checkpoints: %d, checkpoint record PUTs: %d, replies lost: %d; processes: %d, failed: %d", j.checkpoints, puts, lost, j.processes, j.failures)
	if j.failures == 0 && puts != j.checkpoints+lost {
		// Each lost reply costs exactly one more PUT: the SDK's retry,
		// answered 412 and resolved by reading the record back.
		t.Errorf("%d checkpoint record PUTs for %d checkpoints and %d lost replies, want %d", puts, j.checkpoints, lost, j.checkpoints+lost)
	}
	mu.Unlock()
	if j.proxy.Fired(first) != 3 {
		t.Errorf("the reply of %d checkpoint record PUTs was lost by the first rule, want 3", j.proxy.Fired(first))
	}
	if j.failures > 0 {
		t.Errorf("%d processes failed: a checkpoint record whose PUT reply was lost must be recognised as written (the decide step succeeds)", j.failures)
	}
	j.verify()
	// Every retained record decodes with its id: none was replaced or
	// written twice under another id.
	ctx := t.Context()
	store := s3sink.MustNewStore(t, j.client(), j.bucket, faultPrefix+"/_filesink")
	ids, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := store.Get(ctx, id); err != nil {
			t.Errorf("checkpoint %d: %v", id, err)
		}
	}
}

// TestFaultsLostCompleteReplyThenCrash: like TestFaultsLostCompleteReply,
// but the process dies right after the reply was lost, before any retry (the
// upload is completed, the process never learns it). A new process recovers
// from the store; its re-commit finds the upload gone and the object there
// and must accept it (verified re-commit), without publishing it again.
func TestFaultsLostCompleteReplyThenCrash(t *testing.T) {
	j := newFaultJob(t)
	j.crashOnLostComplete = true
	const lostN = 2
	// The reply is lost for the first Complete of lostN different part
	// files (not for the re-commit of the recovering process, which finds
	// the upload gone).
	var mu sync.Mutex
	faulted := map[string]bool{}
	firstOfKey := func(r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if faulted[r.URL.Path] {
			return false
		}
		faulted[r.URL.Path] = true
		return true
	}
	j.proxy.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.CompleteMultipartUpload}, Match: firstOfKey, Action: faultproxy.ResetAfter, Times: lostN})
	etags := map[string]string{}
	j.onLostComplete = func(key string) {
		// The commit happened: the object is there and the upload is gone.
		ctx := t.Context()
		h, err := j.client().HeadObject(ctx, &s3api.HeadObjectInput{Bucket: &j.bucket, Key: &key})
		if err != nil {
			t.Errorf("%s: the Complete whose reply was lost did not publish the object: %v", key, err)
			return
		}
		etags[key] = aws.ToString(h.ETag)
		out, err := j.client().ListMultipartUploads(ctx, &s3api.ListMultipartUploadsInput{Bucket: &j.bucket, Prefix: &key})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range out.Uploads {
			if aws.ToString(u.Key) == key {
				t.Errorf("%s: an upload is still in progress after its Complete executed: %s", key, aws.ToString(u.UploadId))
			}
		}
	}
	j.run()
	t.Log(j.proxy.Stats())
	j.requireInjected(faultproxy.ResetAfter, faultproxy.CompleteMultipartUpload)
	if j.lostCrashes != lostN {
		t.Errorf("%d processes crashed after a lost Complete reply, want %d", j.lostCrashes, lostN)
	}
	j.verify()
	for key, etag := range etags {
		h, err := j.client().HeadObject(t.Context(), &s3api.HeadObjectInput{Bucket: &j.bucket, Key: &key})
		if err != nil {
			t.Errorf("%s: %v", key, err)
		} else if aws.ToString(h.ETag) != etag {
			t.Errorf("%s: ETag changed from %s to %s after recovery (published again?)", key, etag, aws.ToString(h.ETag))
		}
	}
	if j.failures > 0 {
		t.Errorf("%d processes failed on their own", j.failures)
	}
}

// TestFaultsCommitCanceledMidway cancels the context of Backend.Commit while
// its CompleteMultipartUpload is being executed by MinIO (the client then
// closes the connection, and the proxy the one to MinIO), as a second
// SIGTERM, a shutdown or a caller's deadline does; then commits again with a
// live context, as the recovering process would. The part file must be
// published with its bytes: a canceled commit may be repeated, never lose
// data. (MinIO's CompleteMultipartUpload deletes the parts' metadata before
// it renames them into the object and stops when the client disconnects, so
// a Complete cut short leaves an upload without parts; the backend must not
// let a canceled context cut its Complete short.)
func TestFaultsCommitCanceledMidway(t *testing.T) {
	srv := s3sink.RequireMinioForTest(t)
	p := faultproxy.New(t, srv.Endpoint())
	bucket := srv.NewBucket(t)
	retryer := retry.AddWithMaxBackoffDelay(retry.AddWithMaxAttempts(s3sink.NewRetryer(), faultAttempts), faultBackoff)
	client := srv.ClientAt(t, p.URL(), func(o *s3api.Options) { o.Retryer = retryer })
	be, err := s3sink.New(client, bucket, faultPrefix, s3sink.WithPartSize(s3sink.MinPartSize), s3sink.WithSpillDir(t.TempDir()), s3sink.WithRetryer(retryer))
	if err != nil {
		t.Fatal(err)
	}
	// cancelNext, when set, is called (after its delay) once the proxy has
	// received a CompleteMultipartUpload.
	var mu sync.Mutex
	var cancelNext func()
	p.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.CompleteMultipartUpload}, Match: func(*http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if cancelNext != nil {
			cancelNext()
			cancelNext = nil
		}
		return false
	}})
	data := bytes.Repeat([]byte("0123456789abcdef"), (6<<20)/16) // 6 MiB: two parts
	const rounds = 24
	lost, canceled := 0, 0
	for i := range rounds {
		target := fmt.Sprintf("0/part-0-c0ffee00-%d.jsonl", i)
		pw, err := be.Open(t.Context(), target)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pw.Write(data); err != nil {
			t.Fatal(err)
		}
		pending, err := pw.CloseForCommit(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		delay := time.Duration(i%8) * 500 * time.Microsecond
		mu.Lock()
		cancelNext = func() { time.AfterFunc(delay, cancel) }
		mu.Unlock()
		err = be.Commit(ctx, pending)
		if ctx.Err() != nil {
			canceled++ // the context was canceled before the commit returned
		}
		cancel()
		if err != nil {
			t.Logf("round %d: commit with a context canceled %v after the Complete reached the proxy: %v", i, delay, err)
		}
		// The recovering process commits the same pending again.
		if err := be.Commit(t.Context(), pending); err != nil {
			lost++
			t.Errorf("round %d (cancel %v after the Complete reached the proxy): the commit was canceled, and committing again fails: %v", i, delay, err)
			continue
		}
		key := faultPrefix + "/" + target
		out, err := srv.Client(t).GetObject(t.Context(), &s3api.GetObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("round %d: %s holds %d bytes (%v), want the %d written", i, key, len(got), err, len(data))
		}
	}
	t.Logf("%d rounds, %d commits whose context was canceled before they returned, %d part files lost", rounds, canceled, lost)
	if canceled == 0 {
		t.Errorf("no context was canceled during a commit: the test did not exercise the case")
	}
}
