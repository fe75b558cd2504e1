package miniotest

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// Pool is one MinIO server shared by the tests of a package, started on
// first use and stopped by Close. The test package owns it (one variable,
// zero value ready) and calls Run or Close from TestMain:
//
//	var minio miniotest.Pool
//
//	func TestMain(m *testing.M) { os.Exit(minio.Run(m)) }
//
// Tests share the server, so they must use their own buckets (NewBucket) and
// must not Kill, Stop or Restart it; use Start for that.
type Pool struct {
	once sync.Once
	srv  *Server
	dir  string
	err  error

	mu     sync.Mutex
	closed bool
}

// Shared returns the pool's server, starting it on the first call. Without
// a MinIO binary it skips t, or fails it when CI=true; if the server could
// not start it fails t (every later call fails the same way).
func (p *Pool) Shared(t testing.TB) *Server {
	t.Helper()
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		t.Fatalf("miniotest: Pool.Shared after Close")
	}
	p.once.Do(p.start)
	if p.err != nil {
		missing(t, p.err)
	}
	return p.srv
}

func (p *Pool) start() {
	bin, err := Binary()
	if err != nil {
		p.err = err
		return
	}
	// Not t.TempDir(): the server outlives the test that starts it.
	p.dir, err = os.MkdirTemp("", "miniotest-")
	if err != nil {
		p.err = err
		return
	}
	p.srv, p.err = newServer(bin, p.dir)
	if p.err != nil {
		// Not ErrNotInstalled: the binary exists but did not start.
		p.err = fmt.Errorf("shared MinIO server: %w", p.err)
	}
}

// Close stops the server, if one was started, and removes its data dir.
// Later calls to Shared fail.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.once.Do(func() {}) // no start after Close
	if p.srv != nil {
		p.srv.Stop()
	}
	if p.dir != "" {
		os.RemoveAll(p.dir)
	}
}

// Run runs the tests and then closes the pool, returning m.Run's code:
// func TestMain(m *testing.M) { os.Exit(pool.Run(m)) }.
func (p *Pool) Run(m *testing.M) int {
	defer p.Close()
	return m.Run()
}
