package s3_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/committer"
	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/source"
)

// TestPublishOnRoll: with filesink.WithPublishOnRoll (at-least-once), a
// part that rolls is completed at once, before the checkpoint that covers
// it; that checkpoint's commit of the same part then finds it published
// (NoSuchUpload, the object with the recorded length and ETag) and
// succeeds, and no upload is left.
func TestPublishOnRoll(t *testing.T) {
	srv := s3sink.RequireMinioForTest(t)
	ctx := t.Context()
	client := s3api.New(s3api.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint()), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey(), srv.SecretKey(), ""),
	})
	bucket := srv.NewBucket(t)
	be, err := s3sink.New(client, bucket, "out", s3sink.WithPartSize(s3sink.MinPartSize), s3sink.WithSpillDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	w, err := filesink.New(be, 0, filesink.WithPublishOnRoll(),
		filesink.WithRollingPolicy(filesink.DefaultPolicy{PartSize: 6 << 20}))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	pad := make([]byte, 1000)
	for i := range pad {
		pad[i] = 'x'
	}
	for i := range 8000 { // 8 MB: one part rolls at 6 MiB
		rec := fmt.Appendf(nil, `{"i":%d,"pad":"%s"}`, i, pad)
		if err := w.Write(ctx, rec, source.Origin{Name: "t", Num: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := committer.PrepareNow(ctx, w, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Committables) != 1 {
		t.Fatalf("%d committables, want the 1 rolled part", len(snap.Committables))
	}
	var e struct {
		Part json.RawMessage `json:"part"`
	}
	if err := json.Unmarshal(snap.Committables[0], &e); err != nil {
		t.Fatal(err)
	}
	target, _, err := be.Describe(e.Part)
	if err != nil {
		t.Fatal(err)
	}
	key := "out/" + target
	head, err := client.HeadObject(ctx, &s3api.HeadObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		t.Fatalf("the rolled part %s is not visible before its checkpoint: %v", key, err)
	}
	if err := w.Commit(ctx, snap.Committables[0]); err != nil {
		t.Fatalf("the checkpoint's commit of a part published on roll: %v", err)
	}
	after, err := client.HeadObject(ctx, &s3api.HeadObjectInput{Bucket: &bucket, Key: &key})
	if err != nil || aws.ToString(after.ETag) != aws.ToString(head.ETag) {
		t.Fatalf("the object changed or vanished at the commit: %v", err)
	}
	ups, err := be.ListUploads(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range ups {
		if u.Key == key {
			t.Errorf("an upload of %s is left: %+v", key, u)
		}
	}
}
