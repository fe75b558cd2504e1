package s3

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestFileBodyRange uploads ranges of one file (with bytes before and
// after each range, as a reused spill file has) through withFileBody and
// reads each object back: exactly the range, for a large part-sized range
// (sendfile) and a small one, twice from the same file (each attempt opens
// its own descriptor).
func TestFileBodyRange(t *testing.T) {
	srv := requireMinio(t)
	client := srv.Client(t)
	bucket := srv.NewBucket(t)
	ctx := context.Background()
	f, err := os.CreateTemp(t.TempDir(), "spill")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := make([]byte, 7<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ off, n int64 }{{0, 6 << 20}, {123, 6<<20 + 5}, {5 << 20, 1000}, {5 << 20, 1000}} {
		key := "range"
		body := io.NewSectionReader(f, r.off, r.n)
		_, err := client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &bucket, Key: &key, Body: body, ContentLength: aws.Int64(r.n)},
			withFileBody(f, r.off, r.n))
		if err != nil {
			t.Fatalf("put [%d,+%d): %v", r.off, r.n, err)
		}
		out, err := client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want := data[r.off : r.off+r.n]; !bytes.Equal(got, want) {
			t.Fatalf("object of [%d,+%d): %d bytes, want %d (equal: %v)", r.off, r.n, len(got), len(want), bytes.Equal(got, want))
		}
	}
}
