package s3

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/committer"
)

// TestMetaStore: manifests on MinIO are written once (If-None-Match), an
// identical re-put is accepted and a conflicting one refused; ListFiles
// shows only visible objects.
func TestMetaStore(t *testing.T) {
	h, b := setup(t)
	ctx := t.Context()
	if err := b.PutMeta(ctx, "manifests/1.json", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutMeta(ctx, "manifests/1.json", []byte("one")); err != nil {
		t.Fatalf("identical re-put: %v", err)
	}
	if err := b.PutMeta(ctx, "manifests/1.json", []byte("two")); !errors.Is(err, committer.ErrAlreadyExists) {
		t.Fatalf("conflicting put: %v, want ErrAlreadyExists", err)
	}
	if err := b.PutMeta(ctx, "manifests/0.json", []byte("zero")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.GetMeta(ctx, "manifests/1.json"); err != nil || string(got) != "one" {
		t.Fatalf("GetMeta = %q, %v", got, err)
	}
	if _, err := b.GetMeta(ctx, "manifests/9.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("GetMeta of a missing object: %v", err)
	}
	names, err := b.ListMeta(ctx, "manifests")
	if err != nil || !slices.Equal(names, []string{"manifests/0.json", "manifests/1.json"}) {
		t.Fatalf("ListMeta = %v, %v", names, err)
	}
	for after, want := range map[string][]string{
		"":                 {"manifests/0.json", "manifests/1.json"},
		"manifests/0.json": {"manifests/1.json"},
		"manifests/0~":     {"manifests/1.json"},
		"manifests/1~":     nil,
	} {
		if got, err := b.ListMetaAfter(ctx, "manifests", after); err != nil || !slices.Equal(got, want) {
			t.Errorf("ListMetaAfter(%q) = %v, %v; want %v", after, got, err, want)
		}
	}
	for _, k := range []string{"a/part-1.jsonl", "part-2.jsonl", "_filesink-staging/x", "a/_tmp/y"} {
		key := h.key(k)
		if _, err := h.client.PutObject(ctx, &s3api.PutObjectInput{Bucket: &h.bucket, Key: &key, Body: bytes.NewReader([]byte(k)), ContentLength: aws.Int64(int64(len(k)))}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	if err := b.ListFiles(ctx, func(target string, size int64) error {
		if size != int64(len(target)) {
			t.Errorf("%s: size %d", target, size)
		}
		got = append(got, target)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"a/part-1.jsonl", "part-2.jsonl"}) {
		t.Errorf("ListFiles = %v", got)
	}
	r, err := b.OpenFile(ctx, "part-2.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(r)
	r.Close()
	if string(data) != "part-2.jsonl" {
		t.Errorf("OpenFile read %q", data)
	}
}
