package s3

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/recovery"
)

func sampleCheckpoint(id uint64) *recovery.Checkpoint {
	return &recovery.Checkpoint{
		ID: id, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Source: json.RawMessage(`{"offset":42}`),
		Participants: []recovery.Participant{{Name: "filesink/0", State: json.RawMessage(`{"parts":[]}`)}},
	}
}

func TestStore(t *testing.T) {
	srv := requireMinio(t)
	client := srv.Client(t, withRetryer)
	bucket := srv.NewBucket(t)
	ctx := t.Context()
	s := MustNewStore(t, client, bucket, "/out/_filesink/")
	if got, want := s.Location(), "s3://"+bucket+"/out/_filesink"; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	if c, err := recovery.Latest(ctx, s); c != nil || err != nil {
		t.Fatalf("empty store: Latest = %v, %v", c, err)
	}
	// A neighbour prefix that shares the name's start is not listed.
	other := MustNewStore(t, client, bucket, "out/_filesink-other")
	if err := other.Put(ctx, sampleCheckpoint(9)); err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 5; id++ {
		if err := s.Put(ctx, sampleCheckpoint(id)); err != nil {
			t.Fatal(err)
		}
	}
	// The same record again (a retried Put whose first reply was lost) is
	// success; another record with the same id is refused, not written.
	if err := s.Put(ctx, sampleCheckpoint(3)); err != nil {
		t.Errorf("Put of an identical record: %v", err)
	}
	c := sampleCheckpoint(3)
	c.Source = json.RawMessage(`{"offset":43}`)
	if err := s.Put(ctx, c); err == nil || !errors.Is(err, fs.ErrExist) {
		t.Errorf("Put over a different record 3: %v; want an error matching fs.ErrExist", err)
	}
	got, err := s.Get(ctx, 3)
	if err != nil || string(got.Source) != `{"offset":42}` {
		t.Fatalf("record 3 = %+v, %v; want the first one", got, err)
	}
	ids, err := s.List(ctx)
	if err != nil || !slices.Equal(ids, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("List = %v, %v", ids, err)
	}
	last, err := recovery.Latest(ctx, s)
	if err != nil || last.ID != 5 || !last.Time.Equal(sampleCheckpoint(5).Time) {
		t.Fatalf("Latest = %+v, %v", last, err)
	}
	if err := recovery.Prune(ctx, s, 3); err != nil {
		t.Fatal(err)
	}
	if ids, _ := s.List(ctx); !slices.Equal(ids, []uint64{3, 4, 5}) {
		t.Fatalf("after Prune(3): %v", ids)
	}
	if err := s.Delete(ctx, 1); err != nil {
		t.Errorf("Delete of a missing record: %v", err)
	}
	if _, err := s.Get(ctx, 1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of a deleted record: %v", err)
	}

	// A corrupt newest record is loud and named.
	key := "out/_filesink/ckpt-00000000000000000005"
	out, err := client.GetObject(ctx, &s3api.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(out.Body)
	out.Body.Close()
	b[len(b)-3] ^= 0xff
	if _, err := client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(b)}); err != nil {
		t.Fatal(err)
	}
	_, err = recovery.Latest(ctx, s)
	if !errors.Is(err, recovery.ErrCorruptCheckpoint) || !strings.Contains(err.Error(), "s3://"+bucket+"/"+key) {
		t.Fatalf("Latest over a corrupt record = %v; want ErrCorruptCheckpoint naming s3://%s/%s", err, bucket, key)
	}
	var ce *recovery.CorruptError
	if !errors.As(err, &ce) || ce.File != "s3://"+bucket+"/"+key {
		t.Errorf("CorruptError.File = %+v", ce)
	}
	// A record under another id's name.
	if err := s.Delete(ctx, 5); err != nil {
		t.Fatal(err)
	}
	good, _ := recovery.Encode(sampleCheckpoint(4))
	if _, err := client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(good)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, 5); !errors.Is(err, recovery.ErrCorruptCheckpoint) {
		t.Errorf("Get of record 4 stored as 5: %v", err)
	}
	// A stray object with the record prefix.
	stray := "out/_filesink/ckpt-junk"
	if _, err := client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &bucket, Key: aws.String(stray), Body: strings.NewReader("")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx); !errors.Is(err, recovery.ErrCorruptCheckpoint) || !strings.Contains(err.Error(), stray) {
		t.Errorf("List with a stray object: %v", err)
	}
}

func TestStoreInvalid(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client *s3api.Client
		bucket string
		prefix string
		opts   []Option
	}{
		{"nil client", nil, "b", "p", nil},
		{"no bucket", s3api.New(s3api.Options{}), "", "p", nil},
		{"empty prefix component", s3api.New(s3api.Options{}), "b", "a//b", nil},
		{"invalid option", s3api.New(s3api.Options{}), "b", "p", []Option{WithConcurrency(0)}},
	} {
		if s, err := NewStore(tc.client, tc.bucket, tc.prefix, tc.opts...); err == nil {
			t.Errorf("NewStore (%s) of an invalid store %s succeeded", tc.name, s.Location())
		}
	}
}
