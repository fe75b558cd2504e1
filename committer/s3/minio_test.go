package s3

// A local MinIO harness for this package's tests, standing in for
// internal/miniotest until that package lands (then switch to it).

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	minioUser     = "filesink-test"
	minioPassword = "filesink-test-secret"
)

type minioServer struct {
	Endpoint string
	cmd      *exec.Cmd
	dir      string
	log      *os.File
}

var shared struct {
	once sync.Once
	srv  *minioServer
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.stop()
	}
	os.Exit(code)
}

// minioBinary finds the pinned MinIO server that scripts/minio installs.
func minioBinary() string {
	if p := os.Getenv("FILESINK_MINIO"); p != "" {
		return p
	}
	cache := os.Getenv("FILESINK_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "filesink")
	}
	return filepath.Join(cache, "bin", "minio")
}

// requireMinio returns the package's shared MinIO server, starting it on
// first use. Without a MinIO binary the test is skipped loudly, or fails
// when CI=true.
func requireMinio(t testing.TB) *minioServer {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = startMinio() })
	if shared.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("MinIO is required with CI=true: %v", shared.err)
		}
		t.Skipf("SKIPPING S3 TEST: no MinIO (%v); run scripts/minio to install it (CI=true makes this a failure)", shared.err)
	}
	return shared.srv
}

func startMinio() (*minioServer, error) {
	bin := minioBinary()
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("MinIO binary: %w", err)
	}
	dir, err := os.MkdirTemp("", "filesink-s3-minio-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	logf, err := os.Create(filepath.Join(dir, "minio.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "server", filepath.Join(dir, "data"), "--address", addr, "--quiet")
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+minioUser, "MINIO_ROOT_PASSWORD="+minioPassword, "MINIO_BROWSER=off")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &minioServer{Endpoint: "http://" + addr, cmd: cmd, dir: dir, log: logf}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.Endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			out, _ := os.ReadFile(filepath.Join(dir, "minio.log"))
			return nil, fmt.Errorf("MinIO at %s not ready after 60 s: %s", addr, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *minioServer) stop() {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
	s.log.Close()
	os.RemoveAll(s.dir)
}

// Client returns a client of the server.
func (s *minioServer) Client() *s3api.Client {
	return s3api.New(s3api.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(minioUser, minioPassword, ""),
		Retryer:      NewRetryer(),
	})
}

var bucketSeq atomic.Int64

// NewBucket creates an empty bucket.
func (s *minioServer) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%d-%s", os.Getpid(), bucketSeq.Add(1), strings.ToLower(randHex(3)))
	if _, err := s.Client().CreateBucket(context.Background(), &s3api.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}
