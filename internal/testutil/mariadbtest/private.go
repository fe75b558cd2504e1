package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filesink/filesink/internal/testutil/proc"
	"github.com/go-sql-driver/mysql"
)

// StartTimeout bounds the wait for a private server to answer.
const StartTimeout = 60 * time.Second

const (
	stopGrace   = 20 * time.Second
	bindRetries = 5
)

// private is a mariadbd child process and its files.
type private struct {
	mariadbd string
	dir      string // short temp dir: data, socket, logs
	port     int

	mu   sync.Mutex
	proc *proc.Process
}

// Binaries returns the paths of mariadbd and mariadb-install-db, looked up on
// PATH and then in /usr/sbin and /usr/bin.
func Binaries() (mariadbd, installDB string, err error) {
	find := func(name string) (string, error) {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		for _, d := range []string{"/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"} {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0 {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s not found on PATH or in /usr/sbin, /usr/bin", name)
	}
	if mariadbd, err = find("mariadbd"); err != nil {
		return "", "", err
	}
	if installDB, err = find("mariadb-install-db"); err != nil {
		return "", "", err
	}
	return mariadbd, installDB, nil
}

// Start starts a private mariadbd with a fresh data directory, creates its
// database "test", and stops it (and removes its files) when t ends. Without
// the binaries t is skipped, or failed when CI=true.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, install, err := Binaries()
	if err != nil {
		unavailable(t, "%v", err)
	}
	// A short directory: the socket path must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "mariadbtest-")
	if err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &private{mariadbd: bin, dir: dir}
	args := append([]string{"--no-defaults", "--datadir=" + p.dataDir(), "--user=" + currentUser(),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve",
		"--tmpdir=" + dir}, tuning...) // a private tmpdir: concurrent bootstraps collided in /tmp
	out, err := exec.Command(install, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadbtest: %s %s: %v\n%s", install, strings.Join(args, " "), err, tailOf(out, 4096))
	}
	s := &Server{priv: p}
	err = proc.RetryPortInUse(bindRetries, 0, func() (err error) {
		if p.port, err = freePort(); err != nil {
			return err
		}
		return p.start()
	})
	if err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	t.Cleanup(s.Stop)
	s.cfg = s.rootConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := sql.OpenDB(mustConnector(s.Config("")))
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS test"); err != nil {
		t.Fatalf("mariadbtest: create database test: %v", err)
	}
	s.cfg.DBName = "test"
	return s
}

// tuning keeps a private server small and quick to start.
var tuning = []string{"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M"}

func (s *Server) rootConfig() *mysql.Config {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "tcp"
	c.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.priv.port))
	return c
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if os.Geteuid() == 0 {
		return "root"
	}
	return strconv.Itoa(os.Geteuid())
}

func (p *private) dataDir() string { return filepath.Join(p.dir, "data") }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (p *private) errorLog() string { return filepath.Join(p.dir, "error.log") }

// start runs mariadbd and waits until it accepts connections.
func (p *private) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		return errors.New("mariadbtest: server already running")
	}
	args := append([]string{"--no-defaults",
		"--datadir=" + p.dataDir(),
		"--socket=" + filepath.Join(p.dir, "mysqld.sock"),
		"--pid-file=" + filepath.Join(p.dir, "mysqld.pid"),
		"--log-error=" + p.errorLog(),
		"--tmpdir=" + p.dir,
		"--port=" + strconv.Itoa(p.port),
		"--bind-address=127.0.0.1",
		"--user=" + currentUser(),
		"--skip-name-resolve",
	}, tuning...)
	cmd := exec.Command(p.mariadbd, args...)
	child, err := proc.Start(cmd)
	if err != nil {
		return err
	}
	if err := p.waitReady(child); err != nil {
		child.Kill()
		log, _ := os.ReadFile(p.errorLog())
		msg := fmt.Sprintf("mariadbd on port %d did not start: %v\n--- error log (tail) ---\n%s", p.port, err, tailOf(log, 4096))
		if strings.Contains(string(tailOf(log, 4096)), "Address already in use") {
			return fmt.Errorf("%w: %s", proc.ErrPortInUse, msg)
		}
		return errors.New(msg)
	}
	p.proc = child
	return nil
}

func (p *private) waitReady(child *proc.Process) error {
	c := mysql.NewConfig()
	c.User, c.Net = "root", "tcp"
	c.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
	c.Timeout = time.Second
	db := sql.OpenDB(mustConnector(c))
	defer db.Close()
	deadline := time.Now().Add(StartTimeout)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last = db.PingContext(ctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-child.Done():
			return fmt.Errorf("exited: %v", child.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("not ready after %v (last: %v)", StartTimeout, last)
}

func tailOf(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func (s *Server) mustPrivate() *private {
	if s.priv == nil {
		panic("mariadbtest: only a server from Start may be stopped, killed or restarted")
	}
	return s.priv
}

// Kill9 kills a private server with SIGKILL and waits for it to exit; a
// no-op when it is not running. It panics on the shared server.
func (s *Server) Kill9() {
	p := s.mustPrivate()
	p.mu.Lock()
	child := p.proc
	p.proc = nil
	p.mu.Unlock()
	if child != nil {
		child.Kill()
	}
}

// Stop shuts a private server down (SIGTERM, SIGKILL after 20 s) and waits
// for it; a no-op when it is not running. It panics on the shared server.
func (s *Server) Stop() {
	p := s.mustPrivate()
	p.mu.Lock()
	child := p.proc
	p.proc = nil
	p.mu.Unlock()
	if child != nil {
		child.Stop(stopGrace)
	}
}

// Restart starts a private server again on the same port and data directory
// (after Kill9 or Stop; a running server is killed first) and waits until it
// accepts connections. Pools opened before reconnect on their next use.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill9()
	if err := proc.RetryPortInUse(bindRetries, 200*time.Millisecond, s.priv.start); err != nil {
		t.Fatalf("mariadbtest: restart: %v", err)
	}
}

// Running reports whether a private server is up; the shared server always
// counts as running.
func (s *Server) Running() bool {
	if s.priv == nil {
		return true
	}
	s.priv.mu.Lock()
	defer s.priv.mu.Unlock()
	if s.priv.proc == nil {
		return false
	}
	return !s.priv.proc.Exited()
}
