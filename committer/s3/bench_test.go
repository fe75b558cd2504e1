package s3

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// benchBytes is the size of the part file each benchmark iteration writes.
const benchBytes = 128 << 20

// BenchmarkUpload compares a part writer (spill, per-part CRC-32, 4
// concurrent part uploads, commit) with a raw multipart upload of the same
// bytes with the same part size and concurrency, in each integrity mode,
// against the package's MinIO. b.SetBytes makes `go test -bench` report
// MB/s.
func BenchmarkUpload(b *testing.B) {
	srv := requireMinio(b)
	bucket := srv.NewBucket(b)
	data := pattern(1, benchBytes)
	chunk := 1 << 20
	for _, mode := range []struct {
		name string
		opts []Option
	}{
		{"default", nil},
		{"fast", []Option{WithIntegrity(IntegrityFast)}},
		{"fast-nochecksums", []Option{WithIntegrity(IntegrityFast), WithPartChecksums(false)}},
	} {
		o := defaultOptions()
		for _, opt := range mode.opts {
			opt.apply(&o)
		}
		if err := o.validate(); err != nil {
			b.Fatal(err)
		}
		client := srv.Client(b, withRetryer)
		b.Run("raw/"+mode.name, func(b *testing.B) {
			b.SetBytes(benchBytes)
			for range b.N {
				rawUpload(b, client, &o, bucket, fmt.Sprintf("raw-%s-%s", mode.name, randHex(8)), data)
			}
		})
		b.Run("sink/"+mode.name, func(b *testing.B) {
			be, err := New(client, bucket, "bench-"+mode.name, append([]Option{WithSpillDir(b.TempDir())}, mode.opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchBytes)
			run := randHex(4)
			for i := range b.N {
				w, err := be.Open(b.Context(), fmt.Sprintf("part-0-%s-%d", run, i))
				if err != nil {
					b.Fatal(err)
				}
				for off := 0; off < len(data); off += chunk {
					if _, err := w.Write(data[off : off+chunk]); err != nil {
						b.Fatal(err)
					}
				}
				p, err := w.CloseForCommit(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				if err := be.Commit(b.Context(), p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// rawUpload is a plain multipart upload from memory with o's part size,
// concurrency and integrity mode (and the CRC-32 computed by the SDK).
func rawUpload(b *testing.B, client *s3api.Client, o *options, bucket, key string, data []byte) {
	ctx := b.Context()
	cr, err := client.CreateMultipartUpload(ctx, &s3api.CreateMultipartUploadInput{Bucket: &bucket, Key: &key}, o.apply)
	if err != nil {
		b.Fatal(err)
	}
	n := (len(data) + int(o.partSize) - 1) / int(o.partSize)
	parts := make([]s3types.CompletedPart, n)
	sem := make(chan struct{}, o.concurrency)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			body := data[int64(i)*o.partSize : min(int64(i+1)*o.partSize, int64(len(data)))]
			out, err := client.UploadPart(ctx, &s3api.UploadPartInput{
				Bucket: &bucket, Key: &key, UploadId: cr.UploadId, PartNumber: aws.Int32(int32(i + 1)),
				Body: bytes.NewReader(body),
			}, o.apply)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = err
				return
			}
			parts[i] = s3types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32}
		})
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	if _, err := client.CompleteMultipartUpload(ctx, &s3api.CompleteMultipartUploadInput{
		Bucket: &bucket, Key: &key, UploadId: cr.UploadId, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts},
	}, o.apply); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCheckpoint measures phase 1 of the S3 backend: Persist of 1 and
// 100 open part files, 16 at a time as the file sink runs them, each with
// 256 KiB written since its last Persist (a new tail object each). It
// reports the p50 and p99 latency of a whole checkpoint.
func BenchmarkCheckpoint(b *testing.B) {
	srv := requireMinio(b)
	bucket := srv.NewBucket(b)
	client := srv.Client(b, withRetryer)
	for _, files := range []int{1, 100} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			be, err := New(client, bucket, fmt.Sprintf("ckpt-%d", files), WithSpillDir(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			ws := make([]*writer, files)
			run := randHex(4)
			for i := range ws {
				w, err := be.Open(b.Context(), fmt.Sprintf("part-0-%s-%d", run, i))
				if err != nil {
					b.Fatal(err)
				}
				ws[i] = w.(*writer)
				defer w.Close()
			}
			chunk := pattern(2, 256<<10)
			var lat []time.Duration
			b.ResetTimer()
			for range b.N {
				for _, w := range ws {
					if _, err := w.Write(chunk); err != nil {
						b.Fatal(err)
					}
				}
				start := time.Now()
				if err := parallelDo(b.Context(), files, 16, func(i int) error {
					_, err := ws[i].Persist(b.Context())
					return err
				}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
		})
	}
}

func parallelDo(ctx context.Context, n, k int, f func(int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	sem := make(chan struct{}, k)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f(i)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}
