package s3

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/recovery"
)

func TestStoreJobID(t *testing.T) {
	srv := requireMinio(t)
	client := srv.Client(t, withRetryer)
	bucket := srv.NewBucket(t)
	ctx := t.Context()
	s, err := NewStore(client, bucket, "out/_filesink")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.JobIDLocation(), "s3://"+bucket+"/out/_filesink/JOB"; got != want {
		t.Errorf("JobIDLocation = %q, want %q", got, want)
	}
	if id, err := s.JobID(ctx); id != "" || err != nil {
		t.Fatalf("empty store: JobID = %q, %v", id, err)
	}
	id, err := recovery.KeepJobID(ctx, s, "", func() (string, error) { return "fs-abcd", nil })
	if err != nil || id != "fs-abcd" {
		t.Fatalf("KeepJobID = %q, %v", id, err)
	}
	out, err := client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &bucket, Key: aws.String("out/_filesink/JOB")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(b) != "fs-abcd\n" {
		t.Errorf("JOB object = %q", b)
	}
	if err := s.SetJobID(ctx, "fs-abcd"); err != nil {
		t.Errorf("SetJobID of the kept id: %v", err)
	}
	var je *recovery.JobIDError
	if err := s.SetJobID(ctx, "other"); !errors.As(err, &je) || je.Kept != "fs-abcd" {
		t.Errorf("SetJobID over another id = %v; want a JobIDError", err)
	}
	if _, err := recovery.KeepJobID(ctx, s, "other", nil); !errors.As(err, &je) || je.Meanwhile || !strings.HasSuffix(je.Location, "/JOB") {
		t.Errorf("KeepJobID with another id = %v; want a JobIDError", err)
	}
	if ids, err := s.List(ctx); err != nil || len(ids) != 0 {
		t.Errorf("the JOB object is listed as a record: %v, %v", ids, err)
	}
}
