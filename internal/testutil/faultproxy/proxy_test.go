package faultproxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/filesink/filesink/internal/testutil/faultproxy"
	"github.com/filesink/filesink/internal/testutil/miniotest"
)

var minio miniotest.Pool

func TestMain(m *testing.M) { os.Exit(minio.Run(m)) }

// setup returns the shared MinIO, a fresh bucket, a proxy in front of MinIO,
// a client through the proxy and a direct client.
func setup(t *testing.T) (bucket string, p *faultproxy.Proxy, viaProxy, direct *s3.Client) {
	t.Helper()
	srv := minio.Shared(t)
	bucket = srv.NewBucket(t)
	p = faultproxy.NewSeeded(t, srv.Endpoint(), 1)
	return bucket, p, srv.ClientAt(t, p.URL()), srv.Client(t)
}

var noRetry = func(o *s3.Options) { o.Retryer = aws.NopRetryer{} }

// manyRetries retries up to 20 times without the SDK's client-side retry
// quota, which a test that injects many faults on purpose would exhaust
// ("retry quota exceeded").
var manyRetries = func(o *s3.Options) {
	o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = 20
		so.MaxBackoff = 50 * time.Millisecond
		so.RateLimiter = ratelimit.None
	})
}

func ctx() context.Context { return context.Background() }

func putObject(c *s3.Client, bucket, key string, data []byte, optFns ...func(*s3.Options)) error {
	_, err := c.PutObject(ctx(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data),
	}, optFns...)
	return err
}

func getObject(t *testing.T, c *s3.Client, bucket, key string) []byte {
	t.Helper()
	out, err := c.GetObject(ctx(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject %s: %v", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
	return b
}

func wantCount(t *testing.T, what string, got, want int64) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %d, want %d", what, got, want)
	}
}

// TestPassThrough: signed requests (SigV4 for the proxy's host) pass through
// unchanged and MinIO accepts them, including aws-chunked bodies with
// trailing checksums and 100-continue uploads.
func TestPassThrough(t *testing.T) {
	t.Parallel()
	bucket, p, c, direct := setup(t)
	small := []byte("through the proxy")
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16) // > 2 MiB: Expect: 100-continue
	if err := putObject(c, bucket, "small", small); err != nil {
		t.Fatalf("PutObject via proxy: %v", err)
	}
	if err := putObject(c, bucket, "big", big); err != nil {
		t.Fatalf("PutObject (3 MiB) via proxy: %v", err)
	}
	if got := getObject(t, c, bucket, "small"); !bytes.Equal(got, small) {
		t.Fatalf("GetObject via proxy = %q", got)
	}
	if got := getObject(t, direct, bucket, "big"); !bytes.Equal(got, big) {
		t.Fatalf("big object differs (%d bytes)", len(got))
	}
	wantCount(t, "Requests(PutObject)", p.Requests(faultproxy.PutObject), 2)
	wantCount(t, "Requests(GetObject)", p.Requests(faultproxy.GetObject), 1)
	wantCount(t, "TotalInjected", p.TotalInjected(), 0)
}

// TestSlowDownRetried: a 503 SlowDown on PutObject makes the SDK retry, and
// the retry succeeds.
func TestSlowDownRetried(t *testing.T) {
	t.Parallel()
	bucket, p, c, direct := setup(t)
	id := p.FailNext(faultproxy.PutObject, faultproxy.SlowDown, 1)
	data := bytes.Repeat([]byte("x"), 3<<20) // 100-continue: the error comes before the body
	if err := putObject(c, bucket, "k", data); err != nil {
		t.Fatalf("PutObject with one SlowDown: %v", err)
	}
	wantCount(t, "Injected(PutObject)", p.Injected(faultproxy.PutObject), 1)
	wantCount(t, "InjectedAction(PutObject, SlowDown)", p.InjectedAction(faultproxy.PutObject, faultproxy.SlowDown), 1)
	wantCount(t, "Requests(PutObject)", p.Requests(faultproxy.PutObject), 2)
	wantCount(t, "Fired", int64(p.Fired(id)), 1)
	if got := getObject(t, direct, bucket, "k"); !bytes.Equal(got, data) {
		t.Fatalf("object differs")
	}
	t.Logf("\n%s", p.Stats())
}

// TestErrorBodies: without retries the client sees S3's error codes.
func TestErrorBodies(t *testing.T) {
	t.Parallel()
	bucket, p, c, _ := setup(t)
	for _, tc := range []struct {
		action faultproxy.Action
		code   string
		status int
	}{
		{faultproxy.SlowDown, "SlowDown", 503},
		{faultproxy.InternalError, "InternalError", 500},
		{faultproxy.Conflict, "ConditionalRequestConflict", 409},
	} {
		p.FailNext(faultproxy.PutObject, tc.action, 1)
		err := putObject(c, bucket, "k", []byte("data"), noRetry)
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != tc.code {
			t.Errorf("%v: err = %v, want API error %s", tc.action, err, tc.code)
		}
		var re interface{ HTTPStatusCode() int }
		if !errors.As(err, &re) || re.HTTPStatusCode() != tc.status {
			t.Errorf("%v: err = %v, want HTTP %d", tc.action, err, tc.status)
		}
	}
	// HEAD has no body: the SDK still sees the status.
	p.FailNext(faultproxy.HeadObject, faultproxy.SlowDown, 1)
	_, err := c.HeadObject(ctx(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")}, noRetry)
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != 503 {
		t.Errorf("HeadObject: err = %v, want HTTP 503", err)
	}
}

// TestResetBeforeRetried: a connection reset before forwarding is retried by
// the SDK; without retries the object is not written.
func TestResetBeforeRetried(t *testing.T) {
	t.Parallel()
	bucket, p, c, direct := setup(t)
	p.FailNext(faultproxy.PutObject, faultproxy.ResetBefore, 1)
	if err := putObject(c, bucket, "retried", []byte("r")); err != nil {
		t.Fatalf("PutObject with one reset: %v", err)
	}
	wantCount(t, "Injected(PutObject)", p.Injected(faultproxy.PutObject), 1)

	p.FailNext(faultproxy.PutObject, faultproxy.ResetBefore, 1)
	if err := putObject(c, bucket, "never", []byte("n"), noRetry); err == nil {
		t.Fatalf("PutObject succeeded through a reset without retries")
	}
	_, err := direct.HeadObject(ctx(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("never")})
	var nf *types.NotFound
	if !errors.As(err, &nf) {
		t.Fatalf("object written although the request was never forwarded: HeadObject err = %v", err)
	}
}

// TestConflict: Conflict never forwards the PUT; ConflictAfter forwards it
// and still answers 409, so the object is there.
func TestConflict(t *testing.T) {
	t.Parallel()
	bucket, p, c, direct := setup(t)
	p.FailNext(faultproxy.PutObject, faultproxy.Conflict, 1)
	if err := putObject(c, bucket, "never", []byte("n"), noRetry); err == nil {
		t.Fatal("PutObject succeeded through a Conflict")
	}
	if _, err := direct.HeadObject(ctx(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("never")}); err == nil {
		t.Fatal("object written although Conflict never forwards the request")
	}
	p.FailNext(faultproxy.PutObject, faultproxy.ConflictAfter, 1)
	data := []byte("written, but the client was told it conflicted")
	err := putObject(c, bucket, "k", data, noRetry)
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != 409 {
		t.Fatalf("PutObject through ConflictAfter: err = %v, want HTTP 409", err)
	}
	if got := getObject(t, direct, bucket, "k"); !bytes.Equal(got, data) {
		t.Fatalf("object = %q, want %q", got, data)
	}
	wantCount(t, "InjectedAction(PutObject, Conflict)", p.InjectedAction(faultproxy.PutObject, faultproxy.Conflict), 1)
	wantCount(t, "InjectedAction(PutObject, ConflictAfter)", p.InjectedAction(faultproxy.PutObject, faultproxy.ConflictAfter), 1)
}

// TestResetAfterPutObject: the request reaches MinIO, the client sees a
// reset; the object is there.
func TestResetAfterPutObject(t *testing.T) {
	t.Parallel()
	bucket, p, c, direct := setup(t)
	p.FailNext(faultproxy.PutObject, faultproxy.ResetAfter, 1)
	data := []byte("written, but the client never heard")
	err := putObject(c, bucket, "k", data, noRetry)
	if err == nil {
		t.Fatalf("PutObject succeeded although the reply was cut")
	}
	t.Logf("client saw: %v", err)
	wantCount(t, "InjectedAction(PutObject, ResetAfter)", p.InjectedAction(faultproxy.PutObject, faultproxy.ResetAfter), 1)
	if got := getObject(t, direct, bucket, "k"); !bytes.Equal(got, data) {
		t.Fatalf("object = %q, want %q", got, data)
	}
}

// TestResetAfterComplete: the in-doubt CompleteMultipartUpload. The object
// exists, and a second Complete says NoSuchUpload.
func TestResetAfterComplete(t *testing.T) {
	t.Parallel()
	bucket, p, c, direct := setup(t)
	key := "mpu/object"
	cr, err := c.CreateMultipartUpload(ctx(), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	part1 := bytes.Repeat([]byte("a"), 5<<20)
	part2 := []byte("tail")
	var parts []types.CompletedPart
	for i, data := range [][]byte{part1, part2} {
		n := int32(i + 1)
		up, err := c.UploadPart(ctx(), &s3.UploadPartInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: cr.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(data),
		})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", n, err)
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: up.ETag})
	}
	p.FailNext(faultproxy.CompleteMultipartUpload, faultproxy.ResetAfter, 1)
	complete := &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(bucket), Key: aws.String(key), UploadId: cr.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	if _, err := c.CompleteMultipartUpload(ctx(), complete, noRetry); err == nil {
		t.Fatalf("CompleteMultipartUpload succeeded although the reply was cut")
	}
	wantCount(t, "Injected(CompleteMultipartUpload)", p.Injected(faultproxy.CompleteMultipartUpload), 1)
	if got := getObject(t, direct, bucket, key); len(got) != len(part1)+len(part2) {
		t.Fatalf("completed object has %d bytes, want %d", len(got), len(part1)+len(part2))
	}
	_, err = c.CompleteMultipartUpload(ctx(), complete, noRetry)
	var nsu *types.NoSuchUpload
	var ae smithy.APIError
	if !errors.As(err, &nsu) && !(errors.As(err, &ae) && ae.ErrorCode() == "NoSuchUpload") {
		t.Fatalf("second Complete: err = %v, want NoSuchUpload", err)
	}
	wantCount(t, "Requests(UploadPart)", p.Requests(faultproxy.UploadPart), 2)
	wantCount(t, "Requests(CompleteMultipartUpload)", p.Requests(faultproxy.CompleteMultipartUpload), 2)
}

// TestSDKRequestKinds: every kind the proxy names is what the SDK operation
// of that name sends.
func TestSDKRequestKinds(t *testing.T) {
	t.Parallel()
	srv := minio.Shared(t)
	p := faultproxy.New(t, srv.Endpoint())
	c := srv.ClientAt(t, p.URL())
	bucket := srv.NewBucket(t) + "-k"
	b, k := aws.String(bucket), aws.String("dir/key")
	var uploadID, uploadID2 *string
	var etag *string
	steps := []struct {
		kind faultproxy.Kind
		op   func() error
	}{
		{faultproxy.CreateBucket, func() error { _, err := c.CreateBucket(ctx(), &s3.CreateBucketInput{Bucket: b}); return err }},
		{faultproxy.HeadBucket, func() error { _, err := c.HeadBucket(ctx(), &s3.HeadBucketInput{Bucket: b}); return err }},
		{faultproxy.PutObject, func() error { return putObject(c, bucket, "dir/key", []byte("v")) }},
		{faultproxy.HeadObject, func() error { _, err := c.HeadObject(ctx(), &s3.HeadObjectInput{Bucket: b, Key: k}); return err }},
		{faultproxy.GetObject, func() error {
			out, err := c.GetObject(ctx(), &s3.GetObjectInput{Bucket: b, Key: k})
			if err == nil {
				out.Body.Close()
			}
			return err
		}},
		{faultproxy.CopyObject, func() error {
			_, err := c.CopyObject(ctx(), &s3.CopyObjectInput{Bucket: b, Key: aws.String("copy"), CopySource: aws.String(bucket + "/dir/key")})
			return err
		}},
		{faultproxy.ListObjectsV2, func() error { _, err := c.ListObjectsV2(ctx(), &s3.ListObjectsV2Input{Bucket: b}); return err }},
		{faultproxy.CreateMultipartUpload, func() error {
			out, err := c.CreateMultipartUpload(ctx(), &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mpu")})
			if err == nil {
				uploadID = out.UploadId
			}
			return err
		}},
		{faultproxy.CreateMultipartUpload, func() error {
			out, err := c.CreateMultipartUpload(ctx(), &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mpu2")})
			if err == nil {
				uploadID2 = out.UploadId
			}
			return err
		}},
		{faultproxy.UploadPart, func() error {
			out, err := c.UploadPart(ctx(), &s3.UploadPartInput{Bucket: b, Key: aws.String("mpu"), UploadId: uploadID, PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
			if err == nil {
				etag = out.ETag
			}
			return err
		}},
		{faultproxy.ListParts, func() error {
			_, err := c.ListParts(ctx(), &s3.ListPartsInput{Bucket: b, Key: aws.String("mpu"), UploadId: uploadID})
			return err
		}},
		{faultproxy.ListMultipartUploads, func() error {
			_, err := c.ListMultipartUploads(ctx(), &s3.ListMultipartUploadsInput{Bucket: b})
			return err
		}},
		{faultproxy.CompleteMultipartUpload, func() error {
			_, err := c.CompleteMultipartUpload(ctx(), &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("mpu"), UploadId: uploadID,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: etag}}}})
			return err
		}},
		{faultproxy.AbortMultipartUpload, func() error {
			_, err := c.AbortMultipartUpload(ctx(), &s3.AbortMultipartUploadInput{Bucket: b, Key: aws.String("mpu2"), UploadId: uploadID2})
			return err
		}},
		{faultproxy.DeleteObject, func() error { _, err := c.DeleteObject(ctx(), &s3.DeleteObjectInput{Bucket: b, Key: k}); return err }},
		{faultproxy.DeleteObjects, func() error {
			_, err := c.DeleteObjects(ctx(), &s3.DeleteObjectsInput{Bucket: b, Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("copy")}, {Key: aws.String("mpu")}}}})
			return err
		}},
		{faultproxy.Other, func() error { _, err := c.ListBuckets(ctx(), &s3.ListBucketsInput{}); return err }},
		{faultproxy.Other, func() error { _, err := c.DeleteBucket(ctx(), &s3.DeleteBucketInput{Bucket: b}); return err }},
	}
	for i, st := range steps {
		before := counts(p)
		if err := st.op(); err != nil {
			t.Fatalf("step %d (%v): %v", i, st.kind, err)
		}
		after := counts(p)
		for _, kind := range faultproxy.Kinds() {
			want := before[kind]
			if kind == st.kind {
				want++
			}
			if after[kind] != want {
				t.Errorf("step %d (%v): Requests(%v) went %d -> %d", i, st.kind, kind, before[kind], after[kind])
			}
		}
	}
	seen := map[faultproxy.Kind]bool{}
	for _, st := range steps {
		seen[st.kind] = true
	}
	for _, kind := range faultproxy.Kinds() {
		if !seen[kind] {
			t.Errorf("kind %v not exercised", kind)
		}
	}
}

func counts(p *faultproxy.Proxy) map[faultproxy.Kind]int64 {
	m := map[faultproxy.Kind]int64{}
	for _, k := range faultproxy.Kinds() {
		m[k] = p.Requests(k)
	}
	return m
}

// TestRandomRule: a probabilistic rule faults some and not all requests,
// its counts agree with what the client saw, and Times bounds it.
func TestRandomRule(t *testing.T) {
	t.Parallel()
	bucket, p, c, _ := setup(t)
	if err := putObject(c, bucket, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	id := p.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.HeadObject}, Action: faultproxy.InternalError, Prob: 0.5})
	const n = 60
	failed := 0
	for range n {
		if _, err := c.HeadObject(ctx(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")}, noRetry); err != nil {
			failed++
		}
	}
	if failed == 0 || failed == n {
		t.Fatalf("Prob 0.5 failed %d of %d requests (seed %d)", failed, n, p.Seed())
	}
	wantCount(t, "Injected(HeadObject)", p.Injected(faultproxy.HeadObject), int64(failed))
	wantCount(t, "Fired", int64(p.Fired(id)), int64(failed))
	p.Remove(id)
	wantCount(t, "Fired after Remove", int64(p.Fired(id)), int64(failed))

	bounded := p.Add(faultproxy.Rule{Action: faultproxy.InternalError, Prob: 0.9, Times: 3}) // all kinds
	for range 30 {
		_, _ = c.HeadObject(ctx(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")}, noRetry)
	}
	wantCount(t, "Fired(bounded)", int64(p.Fired(bounded)), 3)
	p.Clear()
	if _, err := c.HeadObject(ctx(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")}, noRetry); err != nil {
		t.Fatalf("after Clear: %v", err)
	}
}

// TestMatchAndDelay: Match narrows a rule; Forward with a Delay forwards.
func TestMatchAndDelay(t *testing.T) {
	t.Parallel()
	bucket, p, c, _ := setup(t)
	p.Add(faultproxy.Rule{
		Kinds:  []faultproxy.Kind{faultproxy.PutObject},
		Match:  func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/slow") },
		Action: faultproxy.Forward,
		Delay:  50 * time.Millisecond,
	})
	for _, key := range []string{"fast", "slow"} {
		if err := putObject(c, bucket, key, []byte(key), noRetry); err != nil {
			t.Fatalf("PutObject %s: %v", key, err)
		}
	}
	wantCount(t, "InjectedAction(PutObject, Forward)", p.InjectedAction(faultproxy.PutObject, faultproxy.Forward), 1)
	wantCount(t, "Requests(PutObject)", p.Requests(faultproxy.PutObject), 2)
}

// TestAddFirst: a rule added with AddFirst is tried before the others, and
// a Match may read the body through PeekBody without changing what is
// forwarded.
func TestAddFirst(t *testing.T) {
	t.Parallel()
	bucket, p, c, direct := setup(t)
	later := p.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.PutObject}, Action: faultproxy.Forward})
	first := p.AddFirst(faultproxy.Rule{
		Kinds: []faultproxy.Kind{faultproxy.PutObject}, Action: faultproxy.InternalError,
		Match: func(r *http.Request) bool {
			b, err := faultproxy.PeekBody(r)
			return err == nil && bytes.Contains(b, []byte("refuse me"))
		},
	})
	if err := putObject(c, bucket, "refused", []byte("please refuse me"), noRetry); err == nil {
		t.Fatal("PutObject of a body the first rule matches succeeded; want its 500")
	}
	if err := putObject(c, bucket, "kept", []byte("keep me"), noRetry); err != nil {
		t.Fatalf("PutObject of a body the first rule does not match: %v", err)
	}
	if got := getObject(t, direct, bucket, "kept"); string(got) != "keep me" {
		t.Fatalf("object after PeekBody = %q, want %q", got, "keep me")
	}
	wantCount(t, "Fired(first)", int64(p.Fired(first)), 1)
	wantCount(t, "Fired(later)", int64(p.Fired(later)), 1)
}

// TestConcurrentRules: rules change while requests are in flight (run with
// -race); with retries every write lands.
func TestConcurrentRules(t *testing.T) {
	t.Parallel()
	bucket, p, c, direct := setup(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			id := p.FailRandomly(0.3, faultproxy.SlowDown, faultproxy.PutObject)
			time.Sleep(time.Millisecond)
			p.Remove(id)
			p.FailNext(faultproxy.PutObject, faultproxy.ResetBefore, 1)
			time.Sleep(time.Millisecond)
			p.Clear()
			_ = p.Stats()
			time.Sleep(2 * time.Millisecond) // no faults for a while
		}
	}()
	var writers sync.WaitGroup
	errs := make(chan error, 40)
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range 10 {
				key := fmt.Sprintf("w%d/%d", w, i)
				if err := putObject(c, bucket, key, []byte(key), manyRetries); err != nil {
					errs <- fmt.Errorf("%s: %w", key, err)
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	out, err := direct.ListObjectsV2(ctx(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Contents) != 40 {
		t.Fatalf("%d objects, want 40", len(out.Contents))
	}
	t.Logf("faults injected: %d\n%s", p.TotalInjected(), p.Stats())
}

// TestGate: a gated request waits, unforwarded, until the gate is closed;
// then it lands.
func TestGate(t *testing.T) {
	t.Parallel()
	bucket, p, c, direct := setup(t)
	gate := make(chan struct{})
	id := p.Add(faultproxy.Rule{Kinds: []faultproxy.Kind{faultproxy.PutObject}, Action: faultproxy.Forward, Gate: gate, Times: 1})
	done := make(chan error, 1)
	go func() { done <- putObject(c, bucket, "held", []byte("late"), noRetry) }()
	for p.Fired(id) == 0 {
		time.Sleep(time.Millisecond)
	}
	_, err := direct.HeadObject(ctx(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("held")})
	var nf *types.NotFound
	if !errors.As(err, &nf) {
		t.Fatalf("a held PutObject reached MinIO: HeadObject err = %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("a held PutObject returned before its gate opened: %v", err)
	default:
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatalf("PutObject after the gate opened: %v", err)
	}
	if got := getObject(t, direct, bucket, "held"); string(got) != "late" {
		t.Fatalf("object = %q", got)
	}
	// Times: 1: the next one passes.
	if err := putObject(c, bucket, "free", []byte("f"), noRetry); err != nil {
		t.Fatal(err)
	}
}
