package miniotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/filesink/filesink/internal/testutil/ci"
	"github.com/filesink/filesink/internal/testutil/proc"
)

const (
	// EnvBinary names the environment variable with the path of the MinIO
	// server binary (make test sets it from scripts/minio).
	EnvBinary = "FILESINK_MINIO"

	// Version is the MinIO module version scripts/minio installs.
	Version = "v0.0.0-20260212201848-7aac2a2c5b7c"

	// Root credentials and region of every server started here.
	rootUser     = "filesinktest"
	rootPassword = "filesinktest-secret"
	region       = "us-east-1"

	// StartTimeout bounds the wait for a new server to answer.
	StartTimeout = 60 * time.Second

	stopGrace   = 10 * time.Second // SIGTERM to SIGKILL
	tailBytes   = 64 << 10         // output kept for error messages
	tailShown   = 4 << 10          // output shown in a failure message
	bindRetries = 5                // new ports after "port already in use"
)

// ErrNotInstalled means no MinIO binary was found (see Binary).
var ErrNotInstalled = errors.New("MinIO not installed: run scripts/minio (make test does), or set " + EnvBinary + " to a minio binary")

// Binary returns the path of the MinIO server binary: $FILESINK_MINIO, else
// ${FILESINK_CACHE:-$HOME/.cache/filesink}/bin/minio, else minio on PATH.
// The error wraps ErrNotInstalled when none exists; a FILESINK_MINIO that
// names no executable is a configuration error, not ErrNotInstalled.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	looked := []string{"$" + EnvBinary + " unset"}
	if p := cachePath(); p != "" {
		if executable(p) == nil {
			return p, nil
		}
		looked = append(looked, "no "+p)
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	looked = append(looked, "no minio on PATH")
	return "", fmt.Errorf("%w (%s)", ErrNotInstalled, strings.Join(looked, ", "))
}

func cachePath() string {
	dir := os.Getenv("FILESINK_CACHE")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".cache", "filesink")
	}
	return filepath.Join(dir, "bin", "minio")
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("not an executable file")
	}
	return nil
}

// requireBinary returns the binary or ends the test: Skip by hand, Fatal in
// CI or when FILESINK_MINIO is set but wrong.
func requireBinary(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		missing(t, err)
	}
	return bin
}

func missing(t testing.TB, err error) {
	t.Helper()
	switch {
	case !errors.Is(err, ErrNotInstalled):
		t.Fatalf("miniotest: %v", err)
	case ci.Enabled():
		t.Fatalf("miniotest: %v; CI=true, so S3 tests fail instead of skipping", err)
	default:
		t.Skipf("SKIPPING S3 TEST: %v", err)
	}
}

// Server is one MinIO server process. Its methods are safe for concurrent
// use, but killing or restarting a server that other tests share breaks
// them: only the owner of a server from Start should call Kill, Stop or
// Restart.
type Server struct {
	bin      string
	dataDir  string
	certsDir string
	addr     string // 127.0.0.1:PORT of the S3 API
	console  string // 127.0.0.1:PORT of the console

	seq atomic.Uint64 // bucket names

	mu   sync.Mutex
	proc *proc.Process // nil when stopped
	out  *proc.Tail    // output of the last process started
}

// Start starts a private MinIO server with a data dir under t.TempDir(),
// waits until it serves requests, and stops it when t ends. Without a MinIO
// binary it skips t, or fails it when CI=true.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := requireBinary(t)
	s, err := newServer(bin, t.TempDir())
	if err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// newServer starts a server with its files under dir (which must exist).
func newServer(bin, dir string) (*Server, error) {
	s := &Server{
		bin:      bin,
		dataDir:  filepath.Join(dir, "data"),
		certsDir: filepath.Join(dir, "certs"), // empty: plain HTTP, ignore ~/.minio/certs
	}
	for _, d := range []string{s.dataDir, s.certsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	err := proc.RetryPortInUse(bindRetries, 0, func() (err error) {
		if s.addr, err = freeAddr(); err != nil {
			return err
		}
		if s.console, err = freeAddr(); err != nil {
			return err
		}
		return s.start()
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// freeAddr returns 127.0.0.1:PORT with a port that was free a moment ago.
// Another process may take it before MinIO binds it; start reports that as
// proc.ErrPortInUse and the caller retries with new ports.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr, nil
}

// start runs the process and waits until it is healthy.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("miniotest: server already running")
	}
	cmd := exec.Command(s.bin, "server", s.dataDir,
		"--address", s.addr,
		"--console-address", s.console,
		"--certs-dir", s.certsDir)
	cmd.Env = append(environ(),
		"MINIO_ROOT_USER="+rootUser,
		"MINIO_ROOT_PASSWORD="+rootPassword,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
	)
	out := &proc.Tail{Max: tailBytes}
	cmd.Stdout, cmd.Stderr = out, out
	p, err := proc.Start(cmd)
	if err != nil {
		return err
	}
	if err := s.waitHealthy(p); err != nil {
		p.Kill()
		msg := fmt.Sprintf("MinIO (%s) on %s did not start: %v\n--- MinIO output (tail) ---\n%s",
			strings.Join(cmd.Args, " "), s.addr, err, out.String(tailShown))
		if strings.Contains(strings.ToLower(out.String(tailBytes)), "already in use") {
			return fmt.Errorf("%w: %s", proc.ErrPortInUse, msg)
		}
		return errors.New(msg)
	}
	s.proc, s.out = p, out
	return nil
}

// environ is the test's environment without MINIO_* variables, so the
// server's configuration is exactly what start sets.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINIO_") {
			env = append(env, kv)
		}
	}
	return env
}

// waitHealthy polls /minio/health/live until it answers 200, then a signed
// ListBuckets until it succeeds (IAM and the object layer are ready).
func (s *Server) waitHealthy(p *proc.Process) error {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	client := s.newClient(s.Endpoint(), func(o *s3.Options) {
		o.Retryer = aws.NopRetryer{}
		o.HTTPClient = hc
	})
	live := false
	var last error
	for {
		if !live {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint()+"/minio/health/live", nil)
			resp, err := hc.Do(req)
			if err == nil {
				resp.Body.Close()
				live = resp.StatusCode == http.StatusOK
				if !live {
					err = fmt.Errorf("GET /minio/health/live: %s", resp.Status)
				}
			}
			last = err
		}
		if live {
			_, err := client.ListBuckets(ctx, &s3.ListBucketsInput{})
			if err == nil {
				return nil
			}
			last = fmt.Errorf("ListBuckets: %w", err)
		}
		select {
		case <-p.Done():
			return fmt.Errorf("exited: %v", p.Err())
		case <-ctx.Done():
			return fmt.Errorf("not healthy after %v (last: %v)", StartTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s) and waits for it
// to exit. It is a no-op on a stopped server. The data dir is kept, so
// Restart brings the same objects back.
func (s *Server) Stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Stop(stopGrace)
	}
}

// Kill kills the server with SIGKILL (a crash) and waits for it to exit.
// Requests fail until Restart. It is a no-op on a stopped server.
func (s *Server) Kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Restart starts the server again on the same address and data dir, after
// killing it (SIGKILL) if it is still running, and waits until it serves
// requests. Clients made before keep working.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	if err := proc.RetryPortInUse(bindRetries, 200*time.Millisecond, s.start); err != nil {
		t.Fatalf("miniotest: restart: %v", err)
	}
}

// Running reports whether the server process is up (started and not
// stopped or killed through this Server).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return false
	}
	return !s.proc.Exited()
}

// PID returns the process id of the running server, or 0 when it is
// stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Output returns the last bytes (up to 64 KiB) the server process, or the
// last one if it is stopped, wrote to stdout and stderr.
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out == nil {
		return ""
	}
	return s.out.String(tailBytes)
}

// Endpoint returns the S3 endpoint URL, "http://127.0.0.1:PORT".
func (s *Server) Endpoint() string { return "http://" + s.addr }

// Addr returns the S3 endpoint's "127.0.0.1:PORT".
func (s *Server) Addr() string { return s.addr }

// AccessKey returns the root access key.
func (s *Server) AccessKey() string { return rootUser }

// SecretKey returns the root secret key.
func (s *Server) SecretKey() string { return rootPassword }

// Region returns the server's region, "us-east-1".
func (s *Server) Region() string { return region }

// DataDir returns the server's data directory.
func (s *Server) DataDir() string { return s.dataDir }

// Client returns an S3 client for the server: static root credentials,
// BaseEndpoint = Endpoint(), path-style addressing, region us-east-1, and
// the SDK's default retryer and checksum settings. No shared AWS config or
// AWS_* environment is read. optFns adjust the options (e.g. a Retryer).
func (s *Server) Client(t testing.TB, optFns ...func(*s3.Options)) *s3.Client {
	return s.ClientAt(t, s.Endpoint(), optFns...)
}

// ClientAt is Client with another endpoint, such as a faultproxy in front of
// this server: the client signs for the host it talks to, and the proxy
// passes the Host header through unchanged.
func (s *Server) ClientAt(t testing.TB, endpoint string, optFns ...func(*s3.Options)) *s3.Client {
	return s.newClient(endpoint, optFns...)
}

func (s *Server) newClient(endpoint string, optFns ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider(rootUser, rootPassword, ""),
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		// MinIO returns no checksum for objects uploaded without one; the
		// SDK would log a warning on every such GetObject.
		DisableLogOutputChecksumValidationSkipped: true,
	}, optFns...)
}

// NewBucket creates a bucket with a unique name derived from t.Name() and
// returns the name. Buckets are not removed: the server's data dir is
// temporary.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := s.bucketName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.newClient(s.Endpoint()).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("miniotest: creating bucket %s: %v", name, err)
	}
	return name
}

// bucketName makes a valid S3 bucket name (3-63 characters of a-z, 0-9 and
// '-', starting and ending with a letter or digit) from a test name, a
// sequence number and a random suffix.
func (s *Server) bucketName(testName string) string {
	var b strings.Builder
	dash := true // no leading '-'
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 30 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return fmt.Sprintf("t-%s%d-%s", b.String(), s.seq.Add(1), hex.EncodeToString(rnd[:]))
}

// Leftovers lists what a clean output must not hold: every incomplete
// multipart upload of bucket ("the multipart upload ID of KEY") and every
// object under stagingPrefix ("the staging object KEY"), sorted. It fails
// the test if a listing fails.
func Leftovers(t testing.TB, c *s3.Client, bucket, stagingPrefix string) []string {
	t.Helper()
	ctx := t.Context()
	var left []string
	up := s3.NewListMultipartUploadsPaginator(c, &s3.ListMultipartUploadsInput{Bucket: &bucket})
	for up.HasMorePages() {
		page, err := up.NextPage(ctx)
		if err != nil {
			t.Fatalf("miniotest: listing the uploads of %s: %v", bucket, err)
		}
		for _, u := range page.Uploads {
			left = append(left, fmt.Sprintf("the multipart upload %s of %s", aws.ToString(u.UploadId), aws.ToString(u.Key)))
		}
	}
	sp := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &stagingPrefix})
	for sp.HasMorePages() {
		page, err := sp.NextPage(ctx)
		if err != nil {
			t.Fatalf("miniotest: listing s3://%s/%s: %v", bucket, stagingPrefix, err)
		}
		for _, o := range page.Contents {
			left = append(left, "the staging object "+aws.ToString(o.Key))
		}
	}
	slices.Sort(left)
	return left
}
