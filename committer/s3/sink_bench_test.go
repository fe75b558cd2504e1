package s3_test

// Benchmarks of the file sink on S3 (MinIO), each figure beside its limit
// measured in the same run (see BENCHMARKS.md; no test asserts a
// duration):
//
//   - BenchmarkS3Sink/integrity=M: ~1 KiB JSON lines through the whole sink
//     (filesink.Writer over the S3 backend with 16 MiB parts and 4 part
//     uploads in flight, one bucket, a committer.Coordinator with the S3
//     checkpoint store, a checkpoint every 64 MiB of input and a final one).
//   - BenchmarkS3RawUpload/integrity=M: the same bytes as one plain
//     multipart upload from memory with the same client, part size and
//     concurrency: CreateMultipartUpload, UploadPart x N with 4 in flight,
//     CompleteMultipartUpload.
//   - BenchmarkS3SinkCheckpoint/open=N: the latency of phase 1 and the
//     decide step (Coordinator.Prepare) with N open part files, each holding
//     an in-progress part of 1 to 4.2 MiB, over many checkpoints; reports
//     p50, p99 and max.
//
// M is the client's integrity mode (s3.IntegrityDefault, s3.IntegrityFast);
// the client is s3.NewClient, as the CLI builds it. Run with scripts/bench,
// which prints the ratio sink/raw beside its target. Nothing here asserts a
// duration.
//
// Environment: FILESINK_S3_BENCH_RECORDS (records per op of the throughput
// benchmarks, default 200,000: 205 MB), FILESINK_S3_BENCH_CHECKPOINTS
// (checkpoints per op of BenchmarkS3SinkCheckpoint, default 100).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filesink/filesink/internal/testutil/cputime"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/filesink/filesink/bucketing"
	"github.com/filesink/filesink/committer"
	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/internal/testutil/miniotest"
	"github.com/filesink/filesink/pipeline"
	"github.com/filesink/filesink/source"
)

const (
	s3BenchRecordSize      = 1024     // bytes per line, without the newline
	s3BenchCheckpointBytes = 64 << 20 // input bytes between checkpoints
	s3BenchPartSize        = 16 << 20
	s3BenchConcurrency     = 4
	// BenchmarkS3SinkCheckpoint: bytes in each open part before the first
	// measured checkpoint, and bytes written to each between checkpoints.
	s3BenchFill  = 1 << 20
	s3BenchDelta = 32 << 10
	// s3BenchSweepEvery is the CLI's setting for S3 sinks: phase 2 also
	// sweeps orphaned staging data (tail objects of older checkpoints)
	// every 10 checkpoints and at the final one.
	s3BenchSweepEvery = 10
)

// s3BenchModes are the integrity modes measured, default first, or fast
// first with FILESINK_S3_BENCH_FAST_FIRST=1 (scripts/bench alternates, so
// that no mode always runs first on a fresh server).
func s3BenchModes() []s3sink.Integrity {
	if os.Getenv("FILESINK_S3_BENCH_FAST_FIRST") == "1" {
		return []s3sink.Integrity{s3sink.IntegrityFast, s3sink.IntegrityDefault}
	}
	return []s3sink.Integrity{s3sink.IntegrityDefault, s3sink.IntegrityFast}
}

func s3BenchEnvInt(b testing.TB, name string, def int) int {
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive integer", name, s)
		}
		return n
	}
	return def
}

// s3BenchInput is the input of the throughput benchmarks: the lines, each
// with its newline, back to back.
type s3BenchInput struct {
	data []byte
	ends []int
}

var (
	s3BenchMu    sync.Mutex
	s3BenchCache *s3BenchInput
)

// s3BenchLoad generates the records once (source.NewGenerator, one key) and
// keeps them in memory, so that generation is not timed.
func s3BenchLoad(b testing.TB) *s3BenchInput {
	s3BenchMu.Lock()
	defer s3BenchMu.Unlock()
	if s3BenchCache != nil {
		return s3BenchCache
	}
	n := s3BenchEnvInt(b, "FILESINK_S3_BENCH_RECORDS", 200_000)
	g, err := source.NewGenerator(source.GenConfig{Count: int64(n), Seed: 1, Size: s3BenchRecordSize, Keys: 1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	in := &s3BenchInput{data: make([]byte, 0, n*(s3BenchRecordSize+1)), ends: make([]int, 0, n)}
	for {
		rec, err := g.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		in.data = append(append(in.data, rec.Value...), '\n')
		in.ends = append(in.ends, len(in.data))
	}
	s3BenchCache = in
	return in
}

// s3BenchServer returns the package's MinIO and a client for it built by
// s3.NewClient (the CLI's client: the standard AWS chain, here fed by the
// environment, and the package's retryer) in integrity mode m.
func s3BenchServer(b *testing.B, m s3sink.Integrity) (*miniotest.Server, *s3api.Client) {
	srv := s3sink.RequireMinioForTest(b)
	none := filepath.Join(b.TempDir(), "no-aws-config")
	if err := os.WriteFile(none, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": srv.AccessKey(), "AWS_SECRET_ACCESS_KEY": srv.SecretKey(), "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_EC2_METADATA_DISABLED": "true",
	} {
		b.Setenv(k, v)
	}
	client, err := s3sink.NewClient(context.Background(), s3sink.WithEndpoint(srv.Endpoint()), s3sink.WithPathStyle(),
		s3sink.WithRegion(srv.Region()), s3sink.WithIntegrity(m))
	if err != nil {
		b.Fatal(err)
	}
	return srv, client
}

// s3BenchStats are the costs of one op beside its duration.
type s3BenchStats struct {
	ckpt, final time.Duration
}

// s3BenchLoop runs op once per iteration on a fresh prefix, reports MB/s
// (b.SetBytes), CPU seconds per op of this process (cpu-s/op) and of the
// MinIO server (minio-cpu-s/op, from /proc where there is one), and the
// time in the intermediate and final checkpoints; the first op's output is
// checked, and every op's objects are deleted outside the timer.
func s3BenchLoop(b *testing.B, srv *miniotest.Server, client *s3api.Client, bucket string, in *s3BenchInput, op func(prefix string) (s3BenchStats, error)) {
	b.SetBytes(int64(len(in.data)))
	b.ReportAllocs()
	var total s3BenchStats
	var cpu, mcpu time.Duration
	mok := true
	iter := 0
	for b.Loop() {
		b.StopTimer()
		prefix := fmt.Sprintf("op-%d-%d", time.Now().UnixNano(), iter)
		iter++
		cpu0 := s3BenchCPU(b)
		m0, ok0 := procCPU(srv.PID())
		b.StartTimer()
		st, err := op(prefix)
		b.StopTimer()
		cpu += s3BenchCPU(b) - cpu0
		m1, ok1 := procCPU(srv.PID())
		mok = mok && ok0 && ok1
		mcpu += m1 - m0
		if err != nil {
			b.Fatal(err)
		}
		total.ckpt += st.ckpt
		total.final += st.final
		if iter == 1 {
			if err := s3BenchCheckOutput(b.Context(), client, bucket, prefix, int64(len(in.data))); err != nil {
				b.Fatal(err)
			}
		}
		if err := s3BenchDelete(b.Context(), client, bucket, prefix); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n := float64(iter)
	b.ReportMetric(cpu.Seconds()/n, "cpu-s/op")
	if mok {
		b.ReportMetric(mcpu.Seconds()/n, "minio-cpu-s/op")
	}
	b.ReportMetric(total.ckpt.Seconds()/n, "ckpt-s/op")
	b.ReportMetric(total.final.Seconds()/n, "final-s/op")
}

// procCPU is the user+system CPU time of process pid so far, from
// /proc/PID/stat (false where it cannot be read).
func procCPU(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // utime: field 14
	st, err2 := strconv.ParseInt(f[12], 10, 64) // stime: field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks, true
}

func s3BenchCPU(b *testing.B) time.Duration {
	d, err := cputime.Process()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// s3BenchCheckOutput checks that the visible objects under prefix hold
// exactly want bytes and that no upload is left.
func s3BenchCheckOutput(ctx context.Context, client *s3api.Client, bucket, prefix string, want int64) error {
	var got int64
	files := 0
	p := s3api.NewListObjectsV2Paginator(client, &s3api.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			rel := aws.ToString(o.Key)[len(prefix)+1:]
			if rel[0] == '_' || rel[0] == '.' {
				continue
			}
			got += aws.ToInt64(o.Size)
			files++
		}
	}
	if got != want || files == 0 {
		return fmt.Errorf("output under %s: %d bytes in %d objects, want %d bytes", prefix, got, files, want)
	}
	ups, err := client.ListMultipartUploads(ctx, &s3api.ListMultipartUploadsInput{Bucket: &bucket})
	if err != nil {
		return err
	}
	if len(ups.Uploads) > 0 {
		return fmt.Errorf("%d multipart uploads left", len(ups.Uploads))
	}
	return nil
}

// s3BenchDelete deletes every object under prefix, so that the MinIO data
// dir does not fill up over the rounds.
func s3BenchDelete(ctx context.Context, client *s3api.Client, bucket, prefix string) error {
	p := s3api.NewListObjectsV2Paginator(client, &s3api.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		if len(page.Contents) == 0 {
			continue
		}
		ids := make([]s3types.ObjectIdentifier, len(page.Contents))
		for i, o := range page.Contents {
			ids[i] = s3types.ObjectIdentifier{Key: o.Key}
		}
		if _, err := client.DeleteObjects(ctx, &s3api.DeleteObjectsInput{Bucket: &bucket, Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkS3Sink writes the records through the whole sink to MinIO.
// "ckpt-s/op" is the time in the intermediate checkpoints, "final-s/op" in
// the final one.
func BenchmarkS3Sink(b *testing.B) {
	in := s3BenchLoad(b)
	for _, m := range s3BenchModes() {
		b.Run("integrity="+m.String(), func(b *testing.B) {
			srv, client := s3BenchServer(b, m)
			bucket := srv.NewBucket(b)
			spill := b.TempDir()
			s3BenchLoop(b, srv, client, bucket, in, func(prefix string) (s3BenchStats, error) {
				return s3BenchRunSink(b.Context(), client, bucket, prefix, spill, m, in)
			})
		})
	}
}

func s3BenchRunSink(ctx context.Context, client *s3api.Client, bucket, prefix, spill string, m s3sink.Integrity, in *s3BenchInput) (s3BenchStats, error) {
	var st s3BenchStats
	be, err := s3sink.New(client, bucket, prefix, s3sink.WithPartSize(s3BenchPartSize),
		s3sink.WithConcurrency(s3BenchConcurrency), s3sink.WithIntegrity(m), s3sink.WithSpillDir(spill))
	if err != nil {
		return st, err
	}
	defer be.Close()
	store, err := s3sink.NewStore(client, bucket, prefix+"/_filesink", s3sink.WithIntegrity(m))
	if err != nil {
		return st, err
	}
	w, err := filesink.New(be, 0)
	if err != nil {
		return st, err
	}
	defer w.Close()
	coord, err := committer.New(store, []committer.Participant{w}, committer.WithSweepEvery(s3BenchSweepEvery))
	if err != nil {
		return st, err
	}
	if _, err := coord.Recover(ctx); err != nil {
		return st, err
	}
	// Checkpoints run as pipeline.Run runs its interval checkpoints: the
	// barrier (Begin) stops the writes; phase 1's waiting, the decide step
	// and phase 2 run on a goroutine beside the next writes; a checkpoint
	// that falls due (every s3BenchCheckpointBytes of input) while the
	// previous one still runs is taken as soon as that one completes, the
	// writes going on meanwhile. ckpt-s/op is the time the writes stood
	// still for checkpoints.
	var running chan error
	await := func() error {
		if running == nil {
			return nil
		}
		err := <-running
		running = nil
		return err
	}
	checkpoint := func(next int, final bool) error {
		t := time.Now()
		defer func() {
			if final {
				st.final += time.Since(t)
			} else {
				st.ckpt += time.Since(t)
			}
		}()
		if err := await(); err != nil {
			return err
		}
		ph, err := coord.Begin(ctx, json.RawMessage(`{"next":`+strconv.Itoa(next)+`}`), final)
		if err != nil {
			return err
		}
		run := func() error {
			id, err := ph.Decide(ctx)
			if err != nil {
				return err
			}
			return coord.Commit(ctx, id)
		}
		if final {
			return run()
		}
		running = make(chan error, 1)
		go func(ch chan error) { ch <- run() }(running)
		return nil
	}
	defer await()
	since, start := 0, 0
	defer w.EndBatch()
	for i, end := range in.ends {
		if i%pipeline.DefaultBatchSize == 0 { // as pipeline.Run hands records over
			w.EndBatch()
			w.BeginBatch()
		}
		rec := in.data[start : end-1]
		if err := w.Write(ctx, rec, source.Origin{Name: "gen", Num: int64(i)}); err != nil {
			return st, err
		}
		if since += end - start; since >= s3BenchCheckpointBytes {
			busy := false
			if running != nil {
				select {
				case err := <-running:
					running = nil
					if err != nil {
						return st, err
					}
				default:
					busy = true // as pipeline.Run: due, taken once the previous one completes
				}
			}
			if !busy {
				if err := checkpoint(i+1, false); err != nil {
					return st, err
				}
				since = 0
			}
		}
		start = end
	}
	return st, checkpoint(len(in.ends), true)
}

// BenchmarkS3RawUpload uploads the same bytes as one multipart upload from
// memory, with the same client, part size and concurrency. "final-s/op" is
// the time of CompleteMultipartUpload.
func BenchmarkS3RawUpload(b *testing.B) {
	in := s3BenchLoad(b)
	for _, m := range s3BenchModes() {
		b.Run("integrity="+m.String(), func(b *testing.B) {
			srv, client := s3BenchServer(b, m)
			bucket := srv.NewBucket(b)
			s3BenchLoop(b, srv, client, bucket, in, func(prefix string) (s3BenchStats, error) {
				return s3BenchRawUpload(b.Context(), client, bucket, prefix+"/data.jsonl", in.data)
			})
		})
	}
}

func s3BenchRawUpload(ctx context.Context, client *s3api.Client, bucket, key string, data []byte) (s3BenchStats, error) {
	var st s3BenchStats
	cr, err := client.CreateMultipartUpload(ctx, &s3api.CreateMultipartUploadInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return st, err
	}
	n := (len(data) + s3BenchPartSize - 1) / s3BenchPartSize
	parts := make([]s3types.CompletedPart, n)
	errs := make([]error, n)
	sem := make(chan struct{}, s3BenchConcurrency)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			body := data[i*s3BenchPartSize : min((i+1)*s3BenchPartSize, len(data))]
			out, err := client.UploadPart(ctx, &s3api.UploadPartInput{
				Bucket: &bucket, Key: &key, UploadId: cr.UploadId, PartNumber: aws.Int32(int32(i + 1)),
				Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
			})
			if err != nil {
				errs[i] = err
				return
			}
			parts[i] = s3types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.ETag,
				ChecksumCRC32: out.ChecksumCRC32, ChecksumCRC32C: out.ChecksumCRC32C, ChecksumCRC64NVME: out.ChecksumCRC64NVME}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return st, err
		}
	}
	t := time.Now()
	_, err = client.CompleteMultipartUpload(ctx, &s3api.CompleteMultipartUploadInput{
		Bucket: &bucket, Key: &key, UploadId: cr.UploadId, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts},
	})
	st.final = time.Since(t)
	return st, err
}

// BenchmarkS3SinkCheckpoint measures phase 1 and the decide step
// (Coordinator.Prepare: every open part file persisted, then the checkpoint
// record written) with open=N part files in N buckets. Before the measured
// checkpoints, each part holds s3BenchFill bytes (persisted by an unmeasured
// checkpoint); between checkpoints each gets s3BenchDelta more bytes (round
// robin, 32 records). Parts never roll (no size, age or inactivity limit),
// so over 100 checkpoints every in-progress part grows from 1 MiB to
// 4.2 MiB, below the 5 MiB at which Persist uploads it as a part: every
// checkpoint stores each part's new bytes as tail objects. One op is the
// whole series (ns/op is its duration); p50-ms, p99-ms and max-ms are over all measured checkpoints
// of all ops (p99 by nearest rank: with 100 checkpoints, the second
// largest); commit-p50-ms and commit-max-ms are those of phase 2 (no part is
// published; records are pruned, and every 10th checkpoint sweeps, as the
// CLI does for S3 sinks).
func BenchmarkS3SinkCheckpoint(b *testing.B) {
	checkpoints := s3BenchEnvInt(b, "FILESINK_S3_BENCH_CHECKPOINTS", 100)
	for _, open := range []int{1, 100} {
		b.Run("open="+strconv.Itoa(open), func(b *testing.B) {
			srv, client := s3BenchServer(b, s3sink.IntegrityDefault)
			bucket := srv.NewBucket(b)
			spill := b.TempDir()
			var prep, commit []time.Duration
			iter := 0
			for b.Loop() {
				prefix := fmt.Sprintf("ckpt-%d-%d", time.Now().UnixNano(), iter)
				iter++
				p, c, err := s3BenchCheckpoints(b, client, bucket, prefix, spill, open, checkpoints)
				if err != nil {
					b.Fatal(err)
				}
				prep = append(prep, p...)
				commit = append(commit, c...)
				b.StopTimer()
				if err := s3BenchDelete(b.Context(), client, bucket, prefix); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			slices.Sort(prep)
			rank := func(q float64) float64 {
				i := int(math.Ceil(q*float64(len(prep)))) - 1
				return float64(prep[max(i, 0)].Microseconds()) / 1000
			}
			slices.Sort(commit)
			b.ReportMetric(rank(0.50), "p50-ms")
			b.ReportMetric(rank(0.99), "p99-ms")
			b.ReportMetric(rank(1), "max-ms")
			b.ReportMetric(float64(commit[len(commit)/2].Microseconds())/1000, "commit-p50-ms")
			b.ReportMetric(float64(commit[len(commit)-1].Microseconds())/1000, "commit-max-ms")
			b.ReportMetric(float64(len(prep))/float64(iter), "ckpts/op")
		})
	}
}

// s3BenchCheckpoints runs one series (the op: ns/op is the whole series,
// writes and the unmeasured first checkpoint included) and returns the
// duration of each measured Prepare and Commit.
func s3BenchCheckpoints(b *testing.B, client *s3api.Client, bucket, prefix, spill string, open, checkpoints int) (prep, commit []time.Duration, err error) {
	ctx := b.Context()
	be, err := s3sink.New(client, bucket, prefix, s3sink.WithPartSize(s3BenchPartSize),
		s3sink.WithConcurrency(s3BenchConcurrency), s3sink.WithSpillDir(spill))
	if err != nil {
		return nil, nil, err
	}
	store, err := s3sink.NewStore(client, bucket, prefix+"/_filesink")
	if err != nil {
		return nil, nil, err
	}
	w, err := filesink.New(be, 0, filesink.WithAssigner(bucketing.Field("key")),
		filesink.WithRollingPolicy(filesink.DefaultPolicy{}))
	if err != nil {
		return nil, nil, err
	}
	defer w.Close()
	coord, err := committer.New(store, []committer.Participant{w}, committer.WithSweepEvery(s3BenchSweepEvery))
	if err != nil {
		return nil, nil, err
	}
	if _, err := coord.Recover(ctx); err != nil {
		return nil, nil, err
	}
	perFile := s3BenchFill/(s3BenchRecordSize+1) + checkpoints*(s3BenchDelta/(s3BenchRecordSize+1))
	g, err := source.NewGenerator(source.GenConfig{Count: int64(open * perFile), Seed: 2, Size: s3BenchRecordSize, Keys: open}, nil)
	if err != nil {
		return nil, nil, err
	}
	n := 0
	write := func(records int) error {
		for range records {
			rec, err := g.Next(ctx)
			if err != nil {
				return err
			}
			if err := w.Write(ctx, rec.Value, source.Origin{Name: "gen", Num: int64(n)}); err != nil {
				return err
			}
			n++
		}
		return nil
	}
	pos := func() json.RawMessage { return json.RawMessage(`{"next":` + strconv.Itoa(n) + `}`) }
	if err := write(open * (s3BenchFill / (s3BenchRecordSize + 1))); err != nil {
		return nil, nil, err
	}
	if _, err := coord.Checkpoint(ctx, pos(), false); err != nil {
		return nil, nil, err
	}
	if got := w.OpenBuckets(); got != open {
		return nil, nil, fmt.Errorf("%d open buckets, want %d", got, open)
	}
	for range checkpoints {
		if err := write(open * (s3BenchDelta / (s3BenchRecordSize + 1))); err != nil {
			return nil, nil, err
		}
		t := time.Now()
		id, err := coord.Prepare(ctx, pos(), false)
		if err != nil {
			return nil, nil, err
		}
		t1 := time.Now()
		if err := coord.Commit(ctx, id); err != nil {
			return nil, nil, err
		}
		prep = append(prep, t1.Sub(t))
		commit = append(commit, time.Since(t1))
	}
	_, err = coord.Checkpoint(ctx, pos(), true)
	return prep, commit, err
}
