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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
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

// TestFileSinkEndToEnd runs the file sink on MinIO through the commit
// protocol with the checkpoint store on S3: 20,000 records (about 40 MB in
// 3 buckets, 5 MiB parts, at most 3 parts per file so that files roll on
// the part limit), a checkpoint every 1,500 records, two simulated crashes
// (the process's writer, coordinator and HTTP connections dropped without
// Close), recovery from the store each time, then a final checkpoint.
// Every record must be published exactly once, no upload of the sink may
// be left, and the output must pass the file sink's checker.
func TestFileSinkEndToEnd(t *testing.T) {
	srv := s3sink.RequireMinioForTest(t)
	bucket := srv.NewBucket(t)
	ctx := t.Context()
	const n = 20000
	record := func(i int) []byte {
		pad := strings.Repeat(string(rune('a'+i%26)), 1500+(i*7919)%1000)
		return fmt.Appendf(nil, `{"id":%d,"k":"%d","pad":%q}`, i, i%3, pad)
	}
	var backend *s3sink.Backend
	var store *s3sink.Store
	// run is one process: it recovers, writes from the recovered position,
	// and either crashes before record crashAt or finishes.
	run := func(crashAt int) (restoredAt int) {
		tr := &killable{}
		client := s3api.New(s3api.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(s3sink.MinioUser, s3sink.MinioPassword, ""),
			HTTPClient:  &http.Client{Transport: tr},
		})
		var err error
		backend, err = s3sink.New(client, bucket, "out", s3sink.WithPartSize(s3sink.MinPartSize),
			s3sink.WithMaxParts(3), s3sink.WithConcurrency(2), s3sink.WithSpillDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		store = s3sink.NewStore(client, bucket, "out/_filesink")
		w, err := filesink.New(backend, 0, filesink.WithAssigner(bucketing.Field("k")))
		if err != nil {
			t.Fatal(err)
		}
		coord, err := committer.New(store, []committer.Participant{w})
		if err != nil {
			t.Fatal(err)
		}
		last, err := coord.Recover(ctx)
		if err != nil {
			t.Fatalf("Recover: %v", err)
		}
		pos := 0
		if last != nil {
			if err := json.Unmarshal(last.Source, &pos); err != nil {
				t.Fatal(err)
			}
		}
		for i := pos; i < n; i++ {
			if i == crashAt {
				tr.kill()
				return pos
			}
			if err := w.Write(ctx, record(i), source.Origin{Name: "gen", Num: int64(i)}); err != nil {
				t.Fatalf("Write %d: %v", i, err)
			}
			if (i+1)%1500 == 0 {
				if _, err := coord.Checkpoint(ctx, fmt.Append(nil, i+1), false); err != nil {
					t.Fatalf("checkpoint at %d: %v", i+1, err)
				}
			}
		}
		if crashAt < 0 {
			if _, err := coord.Checkpoint(ctx, fmt.Append(nil, n), true); err != nil {
				t.Fatalf("final checkpoint: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		return pos
	}
	if got := run(7300); got != 0 {
		t.Fatalf("first run restored at %d", got)
	}
	if got := run(13400); got != 6000 {
		t.Fatalf("second run restored at %d, want 6000", got)
	}
	if got := run(-1); got != 12000 {
		t.Fatalf("third run restored at %d, want 12000", got)
	}
	// A last start over the finished output publishes nothing new and
	// sweeps what the final checkpoint left.
	if got := run(n); got != n {
		t.Fatalf("last run restored at %d, want %d", got, n)
	}

	// Every record exactly once.
	client := s3sink.MinioClientForTest(srv)
	seen := make([]int, n)
	files := 0
	p := s3api.NewListObjectsV2Paginator(client, &s3api.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("out/")})
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
			obj, err := client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &bucket, Key: &key})
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
				if r.ID < 0 || r.ID >= n || !strings.HasPrefix(key, "out/"+r.K+"/") {
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
	if files < 6 {
		t.Errorf("%d files: want at least 6 (3 buckets, rolled on the part limit)", files)
	}
	t.Logf("%d records exactly once in %d files", n, files)

	ups, err := backend.ListUploads(ctx, "part-0-")
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) != 0 {
		t.Errorf("uploads left: %+v", ups)
	}
	retained, err := recovery.Retained(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	checker := filesink.Checker{Backend: backend}
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
}

func head(s []int) []int { return s[:min(len(s), 5)] }
