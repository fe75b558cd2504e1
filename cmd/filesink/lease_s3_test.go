package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	s3sink "github.com/filesink/filesink/committer/s3"
)

// TestS3SecondRunRefused: while a run works on an S3 sink and its default
// state (s3://BUCKET/out/_filesink), a second run of the same job is
// refused before it recovers anything (exit 1, one line naming the state
// and the holder's host and pid), read-only commands still work, and the
// first run goes on undisturbed: stopped by SIGTERM, it commits, releases
// its lease, and the output holds every record it read exactly once.
func TestS3SecondRunRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGTERM")
	}
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bin := buildCLI(t)
	client := srv.Client(t)
	bucket := srv.NewBucket(t)
	sink := "s3://" + bucket + "/out"
	state := sink + "/_filesink"
	flags := []string{"--s3-endpoint", srv.Endpoint(), "--s3-path-style"}
	store, err := s3sink.NewStore(client, bucket, "out/_filesink")
	if err != nil {
		t.Fatal(err)
	}

	first := exec.Command(bin, append([]string{"run", "--source", "-", "--sink", sink, "--checkpoint-interval", "100ms", "--progress", "on"}, flags...)...)
	stdin, err := first.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	first.Stderr = &stderr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	waited := false
	t.Cleanup(func() {
		if !waited {
			first.Process.Kill()
			<-exited
		}
	})
	var want []string
	feed := func(from, to int) {
		var b strings.Builder
		for i := from; i < to; i++ {
			l := fmt.Sprintf(`{"id":%d,"v":"lease"}`, i)
			want = append(want, l)
			b.WriteString(l + "\n")
		}
		if _, err := io.WriteString(stdin, b.String()); err != nil {
			t.Fatalf("feed the first run: %v\n%s", err, stderr.String())
		}
	}
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		limit := time.Now().Add(2 * time.Minute)
		for !ok() {
			select {
			case err := <-exited:
				waited = true
				t.Fatalf("the first run exited (%v) while waiting for %s; stderr:\n%s", err, what, lastLines(stderr.String(), 20))
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(limit) {
				t.Fatalf("no %s within 2 minutes; stderr of the first run:\n%s", what, lastLines(stderr.String(), 20))
			}
		}
	}
	progressed := func(n int64) func() bool {
		return func() bool {
			for _, m := range progressRE.FindAllStringSubmatch(stderr.String(), -1) {
				if v, _ := strconv.ParseInt(m[1], 10, 64); v >= n {
					return true
				}
			}
			return false
		}
	}
	feed(0, 1000)
	waitUntil("progress to 1000 records", progressed(1000))
	waitUntil("checkpoint record", func() bool {
		ids, err := store.List(t.Context())
		return err == nil && len(ids) > 0
	})

	// The second run: refused, with the holder named on one line.
	r := cliWith(t, strings.NewReader(""), nil, append([]string{"run", "--source", "-", "--sink", sink}, flags...)...)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	var errLines []string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(l, "filesink: ") {
			errLines = append(errLines, l)
		}
	}
	holder := fmt.Sprintf("host %s, pid %d", host, first.Process.Pid)
	if r.code != 1 || len(errLines) != 1 || !strings.Contains(errLines[0], state+" is in use") || !strings.Contains(errLines[0], holder) {
		t.Fatalf("second run on the same state: want exit 1 and one line naming %s and %q; got %v", state, holder, r)
	}
	t.Logf("refused: %s", errLines[0])
	// Read-only commands take no lease.
	if r := cli(t, append([]string{"state", "--state", state}, flags...)...); r.code != 0 {
		t.Errorf("filesink state while a run holds the lease: %v", r)
	}

	feed(1000, 2000)
	waitUntil("progress to 2000 records", progressed(2000))
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		waited = true
		if err != nil {
			t.Fatalf("the first run after SIGTERM: %v; stderr:\n%s", err, lastLines(stderr.String(), 20))
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the first run did not stop after SIGTERM; stderr:\n%s", lastLines(stderr.String(), 20))
	}
	stdin.Close()

	if r := cli(t, append([]string{"verify", "--deep", "--sink", sink}, flags...)...); r.code != 0 {
		t.Errorf("filesink verify --deep: %v", r)
	}
	checkExactlyOnce(t, s3OutputLines(t, client, bucket, "out"), want)
	out, err := client.GetObject(t.Context(), &s3api.GetObjectInput{Bucket: &bucket, Key: aws.String("out/_filesink/" + s3sink.LeaseFile)})
	if err != nil {
		t.Fatalf("the lease after the run: %v", err)
	}
	var lease struct {
		PID      int  `json:"pid"`
		Released bool `json:"released"`
	}
	err = json.NewDecoder(out.Body).Decode(&lease)
	out.Body.Close()
	if err != nil || lease.PID != first.Process.Pid || !lease.Released {
		t.Errorf("the lease after the first run exited = %+v, %v; want its pid %d, released", lease, err, first.Process.Pid)
	}
}

// s3OutputLines returns the lines of every finished object under prefix.
func s3OutputLines(t *testing.T, client *s3api.Client, bucket, prefix string) []lineAt {
	t.Helper()
	var lines []lineAt
	p := s3api.NewListObjectsV2Paginator(client, &s3api.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if s3HiddenKey(strings.TrimPrefix(key, prefix+"/")) {
				continue
			}
			out, err := client.GetObject(t.Context(), &s3api.GetObjectInput{Bucket: &bucket, Key: &key})
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
				if l != "" {
					lines = append(lines, lineAt{file: key, line: l})
				}
			}
		}
	}
	return lines
}
