package miniotest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/filesink/filesink/internal/testutil/proc"
)

var minio Pool

func TestMain(m *testing.M) { os.Exit(minio.Run(m)) }

func put(t *testing.T, c *s3.Client, bucket, key string, data []byte) {
	t.Helper()
	_, err := c.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data),
	})
	if err != nil {
		t.Fatalf("PutObject %s/%s: %v", bucket, key, err)
	}
}

func get(t *testing.T, c *s3.Client, bucket, key string) []byte {
	t.Helper()
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("reading %s/%s: %v", bucket, key, err)
	}
	return b
}

func TestSharedPutGet(t *testing.T) {
	t.Parallel()
	srv := minio.Shared(t)
	if srv2 := minio.Shared(t); srv2 != srv {
		t.Fatalf("Shared returned two servers")
	}
	if !strings.HasPrefix(srv.Endpoint(), "http://127.0.0.1:") {
		t.Fatalf("Endpoint() = %q", srv.Endpoint())
	}
	if srv.Region() != "us-east-1" || srv.AccessKey() == "" || srv.SecretKey() == "" {
		t.Fatalf("region %q access key %q", srv.Region(), srv.AccessKey())
	}
	b1, b2 := srv.NewBucket(t), srv.NewBucket(t)
	if b1 == b2 {
		t.Fatalf("NewBucket returned %q twice", b1)
	}
	c := srv.Client(t)
	want := []byte("hello, minio\n")
	put(t, c, b1, "dir/a.txt", want)
	if got := get(t, c, b1, "dir/a.txt"); !bytes.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	// Buckets are separate.
	_, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(b2), Key: aws.String("dir/a.txt")})
	if err == nil {
		t.Fatalf("object visible in the other bucket")
	}
}

func TestSharedParallelBuckets(t *testing.T) {
	for i := range 4 {
		t.Run(string(rune('a'+i)), func(t *testing.T) {
			t.Parallel()
			srv := minio.Shared(t)
			b := srv.NewBucket(t)
			c := srv.Client(t)
			put(t, c, b, "k", []byte(t.Name()))
			if got := get(t, c, b, "k"); string(got) != t.Name() {
				t.Fatalf("got %q", got)
			}
		})
	}
}

func TestStartKillRestart(t *testing.T) {
	t.Parallel()
	srv := Start(t)
	b := srv.NewBucket(t)
	c := srv.Client(t)
	put(t, c, b, "k", []byte("before the crash"))

	srv.Kill()
	if srv.Running() {
		t.Fatalf("Running after Kill")
	}
	_, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("k")},
		func(o *s3.Options) { o.Retryer = aws.NopRetryer{} })
	if err == nil {
		t.Fatalf("HeadObject succeeded against a killed server")
	}

	srv.Restart(t)
	if !srv.Running() {
		t.Fatalf("not Running after Restart")
	}
	if got := get(t, c, b, "k"); string(got) != "before the crash" {
		t.Fatalf("after restart got %q", got)
	}
	srv.Stop()
	srv.Stop() // idempotent
	if srv.Output() == "" {
		t.Errorf("Output() is empty after Stop")
	}
	if srv.Running() {
		t.Fatalf("Running after Stop")
	}
}

func TestBucketName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)
	s := &Server{}
	for _, name := range []string{
		"TestX",
		"TestA/sub_test#01",
		"",
		"---",
		strings.Repeat("VeryLongTestName/", 20),
		"Test/ÜnÏcode/名前",
	} {
		got := s.bucketName(name)
		if !valid.MatchString(got) || strings.Contains(got, "--") {
			t.Errorf("bucketName(%q) = %q: not a valid bucket name", name, got)
		}
	}
	if a, b := s.bucketName("T"), s.bucketName("T"); a == b {
		t.Errorf("bucketName repeats %q", a)
	}
}

func TestBinaryLookup(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	t.Setenv("FILESINK_CACHE", filepath.Join(dir, "cache"))

	t.Setenv(EnvBinary, "")
	if _, err := Binary(); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("nothing installed: err = %v, want ErrNotInstalled", err)
	}

	t.Setenv(EnvBinary, filepath.Join(dir, "nope"))
	if _, err := Binary(); err == nil || errors.Is(err, ErrNotInstalled) {
		t.Fatalf("FILESINK_MINIO names no file: err = %v, want a configuration error", err)
	}

	cached := filepath.Join(dir, "cache", "bin", "minio")
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cached, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvBinary, "")
	if got, err := Binary(); err != nil || got != cached {
		t.Fatalf("Binary() = %q, %v; want the cache path %q", got, err, cached)
	}

	onPath := filepath.Join(dir, "minio")
	if err := os.WriteFile(onPath, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Remove(cached)
	if got, err := Binary(); err != nil || got != onPath {
		t.Fatalf("Binary() = %q, %v; want PATH's %q", got, err, onPath)
	}

	t.Setenv(EnvBinary, onPath)
	if got, err := Binary(); err != nil || got != onPath {
		t.Fatalf("Binary() = %q, %v; want $%s", got, err, EnvBinary)
	}
}

// fakeTB records Skipf and Fatalf instead of ending the test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Skipf(format string, args ...any)  { f.skipped = format }
func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = format }

func TestMissingSkipsOrFails(t *testing.T) {
	for _, tc := range []struct {
		ci       string
		err      error
		wantSkip bool
	}{
		{"", ErrNotInstalled, true},
		{"false", ErrNotInstalled, true},
		{"0", ErrNotInstalled, true},
		{"true", ErrNotInstalled, false},
		{"1", ErrNotInstalled, false},
		{"yes-please", ErrNotInstalled, false}, // not a boolean: fail, never skip by doubt
		{"", errors.New("FILESINK_MINIO=/x: no such file"), false},
	} {
		t.Setenv("CI", tc.ci)
		f := &fakeTB{TB: t}
		missing(f, tc.err)
		if tc.wantSkip && (f.skipped == "" || f.failed != "") || !tc.wantSkip && (f.failed == "" || f.skipped != "") {
			t.Errorf("CI=%q err=%v: skipped=%q failed=%q", tc.ci, tc.err, f.skipped, f.failed)
		}
	}
}

func TestPoolWithoutBinary(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	t.Setenv("FILESINK_CACHE", dir)
	t.Setenv(EnvBinary, "")
	t.Setenv("CI", "true")
	var p Pool
	defer p.Close()
	f := &fakeTB{TB: t}
	if srv := p.Shared(f); srv != nil || f.failed == "" {
		t.Fatalf("Shared without MinIO in CI: srv=%v failed=%q", srv, f.failed)
	}
}

func TestTail(t *testing.T) {
	tl := &proc.Tail{Max: tailBytes}
	big := bytes.Repeat([]byte("x"), tailBytes)
	tl.Write(big)
	tl.Write([]byte("END"))
	if s := tl.String(tailBytes * 2); len(s) != tailBytes || !strings.HasSuffix(s, "END") {
		t.Fatalf("tail kept %d bytes, suffix %q", len(s), s[len(s)-3:])
	}
	if s := tl.String(3); s != "END" {
		t.Fatalf("String(3) = %q", s)
	}
}

// TestPortInUse: a port taken between freeAddr and MinIO's bind is reported
// as proc.ErrPortInUse, which newServer retries with new ports.
func TestPortInUse(t *testing.T) {
	t.Parallel()
	bin := requireBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	s := &Server{bin: bin, dataDir: filepath.Join(dir, "data"), certsDir: filepath.Join(dir, "certs"), addr: l.Addr().String()}
	if s.console, err = freeAddr(); err != nil {
		t.Fatal(err)
	}
	err = s.start()
	if err == nil {
		s.Kill()
		t.Fatalf("MinIO started on a port in use")
	}
	if !errors.Is(err, proc.ErrPortInUse) {
		t.Fatalf("err = %v, want proc.ErrPortInUse", err)
	}
}
