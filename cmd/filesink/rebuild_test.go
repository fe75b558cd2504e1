package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/internal/testutil/faultproxy"
	"github.com/filesink/filesink/internal/testutil/kafkatest"
	"github.com/filesink/filesink/internal/testutil/miniotest"
)

// The staged data a store loses is rebuilt from the source: each test
// stops a job with staged data that its newest checkpoint references (a
// decided part not yet published, parts in progress), takes that data
// away the way a store, a lifecycle rule or an operator would, and runs
// the job again: it must finish with every record once, say in one WARN
// line per part what it rebuilt, count it in filesink_parts_rebuilt_total
// and in the "done" line, and pass verify.

var rebuiltRE = regexp.MustCompile(`level=WARN msg="rebuilt a part from the source: its staged data was lost".* part=(\S+) records=(\S+)`)

// startCLI starts the CLI binary with args, its stderr in the returned
// buffer.
func startCLI(t *testing.T, bin string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &stderr
}

// rerunWatched runs the CLI with args and --metrics-addr, scraping
// filesink_parts_rebuilt_total while it runs; it returns the run's stderr
// and the highest value scraped, and fails the test unless it exits 0.
func rerunWatched(t *testing.T, bin string, args ...string) (string, float64) {
	t.Helper()
	cmd, stderr := startCLI(t, bin, append(args, "--metrics-addr", "127.0.0.1:0", "--progress", "off")...)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var rebuilt float64
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the run after the loss: %v\n%s", err, lastLines(stderr.String(), 20))
			}
			return stderr.String(), rebuilt
		case <-time.After(5 * time.Millisecond):
		}
		if m := metricsAddrRE.FindStringSubmatch(stderr.String()); m != nil {
			if v, err := scrapeErr(m[1]); err == nil {
				rebuilt = max(rebuilt, v["filesink_parts_rebuilt_total"])
			}
		}
	}
}

// checkRebuilt checks what the run after a loss said it rebuilt.
func checkRebuilt(t *testing.T, stderr string, metric float64) {
	t.Helper()
	lines := rebuiltRE.FindAllStringSubmatch(stderr, -1)
	if len(lines) == 0 {
		t.Fatalf("no part was rebuilt:\n%s", lastLines(stderr, 20))
	}
	for _, l := range lines {
		if !strings.Contains(l[2], ":") || !strings.Contains(l[2], "..") {
			t.Errorf("the WARN line does not name the part's input range: %s", l[0])
		}
	}
	if metric < 1 {
		t.Errorf("filesink_parts_rebuilt_total stayed %v while %d part(s) were rebuilt", metric, len(lines))
	}
	if !strings.Contains(stderr, fmt.Sprintf("parts_rebuilt=%d", len(lines))) {
		t.Errorf("the done line does not say parts_rebuilt=%d:\n%s", len(lines), lastLines(stderr, 3))
	}
}

// waitCheckpoint waits until list (the checkpoint records of a state)
// names one, and returns its name.
func waitCheckpoint(t *testing.T, stderr *syncBuffer, list func() []string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if len(list()) > 0 {
			return
		}
	}
	t.Fatalf("no checkpoint within a minute:\n%s", lastLines(stderr.String(), 20))
}

// TestRebuildLocal: the in-progress and pending part files of a local
// output deleted after a kill -9.
func TestRebuildLocal(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	bin := buildCLI(t)
	dir := t.TempDir()
	out, state := filepath.Join(dir, "out"), filepath.Join(dir, "state")
	const count = 2_000_000
	args := []string{"run", "--source", fmt.Sprintf("gen://?count=%d&seed=%d", count, chaosGenSeed), "--sink", out, "--state", state,
		"--checkpoint-interval", "200ms", "--bucket", "field:key", "--compression", "zstd"}
	cmd, stderr := startCLI(t, bin, args...)
	waitCheckpoint(t, stderr, func() []string { m, _ := filepath.Glob(filepath.Join(state, "ckpt-*")); return m })
	cmd.Process.Kill()
	cmd.Wait()
	s := scanOutput(t, out)
	if len(s.hidden) == 0 {
		t.Fatal("no staging file after the kill")
	}
	for _, h := range s.hidden {
		if err := os.Remove(filepath.Join(out, filepath.FromSlash(h))); err != nil {
			t.Fatal(err)
		}
	}
	log, metric := rerunWatched(t, bin, args...)
	checkRebuilt(t, log, metric)
	checkExactlyOnce(t, outputLines(t, out), genLines(t, fmt.Sprintf("gen://?count=%d&seed=%d", count, chaosGenSeed)))
	v := mustRun(t, "verify", "--sink", out, "--state", state, "--deep")
	if !strings.Contains(v.stdout, "NOTE rebuilt:") {
		t.Errorf("verify does not note the rebuilt files:\n%s", v.stdout)
	}
}

// TestRebuildS3: a job whose part uploads cannot complete (the proxy in
// front of MinIO fails every CompleteMultipartUpload) is killed after its
// first checkpoint is decided; then its staged data is lost in one of the
// ways S3 loses it, and the job runs again straight to MinIO.
func TestRebuildS3(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bin := buildCLI(t)
	for _, loss := range []string{"upload-aborted", "tail-gone", "part-missing"} {
		t.Run(loss, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			client := srv.Client(t)
			p := faultproxy.New(t, srv.Endpoint())
			p.FailNext(faultproxy.CompleteMultipartUpload, faultproxy.InternalError, 1<<30)
			sink := "s3://" + bucket + "/out"
			const count = 1_000_000
			args := []string{"run", "--source", fmt.Sprintf("gen://?count=%d&seed=%d", count, chaosGenSeed), "--sink", sink,
				"--checkpoint-interval", "300ms", "--bucket", "field:key", "--part-size", "2MiB", "--s3-path-style"}
			cmd, stderr := startCLI(t, bin, append(args, "--s3-endpoint", p.URL())...)
			// A CompleteMultipartUpload comes only in phase 2: a decided
			// checkpoint holds a part that is not published.
			for deadline := time.Now().Add(time.Minute); p.Injected(faultproxy.CompleteMultipartUpload) == 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no part upload completed within a minute:\n%s", lastLines(stderr.String(), 20))
				}
			}
			cmd.Process.Kill()
			cmd.Wait()
			if n := loseS3Staging(t, srv, client, bucket, loss); n == 0 {
				t.Fatalf("%s: nothing to lose", loss)
			}
			log, metric := rerunWatched(t, bin, append(args, "--s3-endpoint", srv.Endpoint())...)
			checkRebuilt(t, log, metric)
			checkExactlyOnce(t, s3OutputLines(t, client, bucket, "out"), genLines(t, fmt.Sprintf("gen://?count=%d&seed=%d", count, chaosGenSeed)))
			mustRun(t, "verify", "--sink", sink, "--s3-endpoint", srv.Endpoint(), "--s3-path-style")
		})
	}
}

// s3Keys lists the keys of bucket under prefix.
func s3Keys(t *testing.T, client *s3api.Client, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	pg := s3api.NewListObjectsV2Paginator(client, &s3api.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for pg.HasMorePages() {
		page, err := pg.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// loseS3Staging takes the staging data of bucket away: every multipart
// upload aborted (a lifecycle rule), every tail object deleted, or the
// first part of every upload deleted from MinIO's disk (what MinIO does
// to an upload whose CompleteMultipartUpload the client cut off). It
// returns how many uploads or objects it touched.
func loseS3Staging(t *testing.T, srv *miniotest.Server, client *s3api.Client, bucket, loss string) int {
	t.Helper()
	ctx := t.Context()
	n := 0
	switch loss {
	case "upload-aborted":
		out, err := client.ListMultipartUploads(ctx, &s3api.ListMultipartUploadsInput{Bucket: &bucket})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range out.Uploads {
			if _, err := client.AbortMultipartUpload(ctx, &s3api.AbortMultipartUploadInput{Bucket: &bucket, Key: u.Key, UploadId: u.UploadId}); err != nil {
				t.Fatal(err)
			}
			n++
		}
	case "tail-gone":
		for _, k := range s3Keys(t, client, bucket, "out/") {
			if strings.Contains(k, ".tail-") {
				if _, err := client.DeleteObject(ctx, &s3api.DeleteObjectInput{Bucket: &bucket, Key: &k}); err != nil {
					t.Fatal(err)
				}
				n++
			}
		}
	case "part-missing":
		root := filepath.Join(srv.DataDir(), ".minio.sys", "multipart")
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && (d.Name() == "part.1" || d.Name() == "part.1.meta") {
				n++
				return os.Remove(p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestRebuildGroupLane: a lane of group mode whose decided part cannot be
// published (every CompleteMultipartUpload fails) is left by a killed
// process; its upload is then lost, and the lane's next owner rebuilds the
// part from the partition's recorded offsets.
func TestRebuildGroupLane(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	srv := minio.Shared(t)
	s3ChildEnv(t, srv)
	bin := buildCLI(t)
	for _, loss := range []string{"upload-aborted", "part-missing"} {
		t.Run(loss, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			client := srv.Client(t)
			kc := kafkatest.Start(t, kafkatest.Topic{Name: "orders", Partitions: 2})
			var want []string
			for part := range int32(2) {
				var vals []string
				for i := range 5000 {
					v := fmt.Sprintf(`{"id":"%d-%d","pad":"%s"}`, part, i, strings.Repeat("x", 200))
					vals = append(vals, v)
					want = append(want, v)
				}
				kc.MustProduce(t, "orders", part, vals...)
			}
			p := faultproxy.New(t, srv.Endpoint())
			p.FailNext(faultproxy.CompleteMultipartUpload, faultproxy.InternalError, 1<<30)
			sink := "s3://" + bucket + "/out"
			args := []string{"run", "--source", "kafka://" + kc.Bootstrap() + "/orders", "--group", "g", "--sink", sink, "--bounded",
				"--checkpoint-interval", "200ms", "--session-timeout", "6s", "--s3-path-style"}
			cmd, stderr := startCLI(t, bin, append(args, "--s3-endpoint", p.URL())...)
			for deadline := time.Now().Add(time.Minute); p.Injected(faultproxy.CompleteMultipartUpload) == 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no lane committed within a minute:\n%s", lastLines(stderr.String(), 20))
				}
			}
			cmd.Process.Kill()
			cmd.Wait()
			if n := loseS3Staging(t, srv, client, bucket, loss); n == 0 {
				t.Fatalf("%s: nothing to lose", loss)
			}
			log, metric := rerunWatched(t, bin, append(args, "--s3-endpoint", srv.Endpoint())...)
			if lines := rebuiltRE.FindAllStringSubmatch(log, -1); len(lines) == 0 {
				t.Fatalf("no part was rebuilt:\n%s", lastLines(log, 20))
			} else if !strings.Contains(lines[0][2], "orders/") {
				t.Errorf("the WARN line does not name the partition's offsets: %s", lines[0][0])
			}
			if metric < 1 {
				t.Errorf("filesink_parts_rebuilt_total stayed %v", metric)
			}
			got := map[string]int{}
			for _, l := range s3OutputLines(t, client, bucket, "out") {
				got[l.line]++
			}
			for _, w := range want {
				if got[w] != 1 {
					t.Fatalf("record %.20s is in the output %d times", w, got[w])
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d distinct records in the output, want %d", len(got), len(want))
			}
			mustRun(t, "verify", "--sink", sink, "--s3-endpoint", srv.Endpoint(), "--s3-path-style")
		})
	}
}
