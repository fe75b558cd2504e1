package mariadbtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/filesink/filesink/internal/testutil/ci"
)

const (
	// EnvDSN names the environment variable with the DSN of the shared
	// server (default DefaultDSN).
	EnvDSN = "FILESINK_MARIADB_DSN"
	// DefaultDSN is the machine's server.
	DefaultDSN = "root@tcp(127.0.0.1:3306)/test"

	pingTimeout = 5 * time.Second
)

// unavailable skips t, or fails it when CI=true.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if ci.Enabled() {
		t.Fatalf("mariadbtest: %s (CI=true: the MariaDB tests must run)", msg)
	}
	t.Skipf("mariadbtest: SKIPPING, MariaDB NOT AVAILABLE: %s (with CI=true this fails)", msg)
}

// Server is a MariaDB server tests may use: the shared one (Shared) or a
// private one (Start). Its methods are safe for concurrent use.
type Server struct {
	cfg  *mysql.Config // DBName is the default database
	priv *private      // nil for the shared server
}

// Shared returns the machine's server (FILESINK_MARIADB_DSN, default
// DefaultDSN) after checking that it answers. When it does not, t is skipped
// with a loud reason, or failed when CI=true.
func Shared(t testing.TB) *Server {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		dsn = DefaultDSN
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("mariadbtest: %s is not a valid DSN: %v", EnvDSN, err)
	}
	s := &Server{cfg: cfg}
	if err := s.ping(); err != nil {
		unavailable(t, "cannot reach the server at %s as %s: %v", cfg.Addr, cfg.User, err)
	}
	return s
}

func (s *Server) ping() error {
	db := sql.OpenDB(mustConnector(s.Config("")))
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	return db.PingContext(ctx)
}

func mustConnector(cfg *mysql.Config) driver.Connector {
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		panic(err) // only with a nil or invalid config, which we never build
	}
	return c
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.cfg.Addr }

// Config returns a copy of the server's connection settings with database db
// ("" for none).
func (s *Server) Config(db string) *mysql.Config {
	c := s.cfg.Clone()
	c.DBName = db
	c.Timeout = 10 * time.Second
	c.Logger = quiet{} // the driver's complaints about connections tests broke on purpose
	return c
}

// DSN returns the DSN of database db on the server.
func (s *Server) DSN(db string) string { return s.Config(db).FormatDSN() }

// Admin opens a plain connection pool to the server without a default
// database, closed when t ends.
func (s *Server) Admin(t testing.TB) *sql.DB {
	t.Helper()
	db := sql.OpenDB(mustConnector(s.Config("")))
	t.Cleanup(func() { db.Close() })
	return db
}

// NewDatabase creates a database with a name unique to this test and drops
// it when t ends. Prepared XA branches still holding locks in it make the
// drop fail after a few seconds (logged, not fatal): tests should leave none.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "fsxa_" + sanitize(t.Name(), 20) + "_" + hex.EncodeToString(rnd[:])
	db := sql.OpenDB(mustConnector(s.Config("")))
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatalf("mariadbtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if s.priv != nil && !s.Running() {
			return // its data dir goes with the test
		}
		db := sql.OpenDB(mustConnector(s.Config("")))
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := db.Conn(ctx)
		if err == nil {
			defer conn.Close()
			_, err = conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 5")
		}
		if err == nil {
			_, err = conn.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
		}
		if err != nil {
			t.Logf("mariadbtest: drop database %s: %v", name, err)
		}
	})
	return name
}

func sanitize(s string, n int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if b.Len() >= n {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Open returns a pool of connections to database db whose connections can
// be crashed or cut (see DB), with innodb_lock_wait_timeout 10 s and the
// driver's log discarded. When t ends every connection it dialed is closed,
// including connections pinned by the code under test.
func (s *Server) Open(t testing.TB, db string) *DB {
	t.Helper()
	d := &DB{conns: map[*faultConn]struct{}{}}
	cfg := s.Config(db)
	// A test that waits for a lock fails in seconds, not after 50.
	cfg.Params = map[string]string{"innodb_lock_wait_timeout": "10"}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.mu.Lock()
		crashed := d.crashed
		d.mu.Unlock()
		if crashed {
			return nil, errors.New("mariadbtest: this DB crashed")
		}
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		fc := &faultConn{Conn: c, db: d}
		d.mu.Lock()
		d.conns[fc] = struct{}{}
		d.mu.Unlock()
		return fc, nil
	}
	d.DB = sql.OpenDB(mustConnector(cfg))
	t.Cleanup(func() {
		d.Crash() // connections pinned by code under test too
		d.DB.Close()
	})
	return d
}

// DB is a connection pool whose network connections the test controls.
// Its methods are safe for concurrent use.
type DB struct {
	*sql.DB

	mu      sync.Mutex
	conns   map[*faultConn]struct{}
	crashed bool
	cut     []byte // CutReply's text, until a statement matches
	cuts    int
}

// Cuts returns how many replies CutReply made the pool lose.
func (d *DB) Cuts() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cuts
}

// Crash closes every network connection of the pool, as the death of the
// process would, and makes every later dial fail: the pool is dead. The
// server rolls back active transactions of these connections and keeps
// their prepared XA branches.
func (d *DB) Crash() {
	d.mu.Lock()
	d.crashed = true
	conns := d.conns
	d.conns = map[*faultConn]struct{}{}
	d.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

// CutReply arms a fault: the next statement whose bytes contain text is sent
// to the server, and once the server's reply arrives, the connection is
// closed and the reply dropped, so the driver sees a broken connection after
// the server executed the statement.
func (d *DB) CutReply(text string) {
	d.mu.Lock()
	d.cut = []byte(text)
	d.mu.Unlock()
}

// Conns returns the number of network connections the pool holds open (as
// far as the dialer knows).
func (d *DB) Conns() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

type faultConn struct {
	net.Conn
	db *DB

	mu        sync.Mutex
	dropReply bool
}

func (c *faultConn) Write(p []byte) (int, error) {
	c.db.mu.Lock()
	if len(c.db.cut) > 0 && bytes.Contains(p, c.db.cut) {
		c.db.cut = nil
		c.mu.Lock()
		c.dropReply = true
		c.mu.Unlock()
	}
	c.db.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *faultConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	drop := c.dropReply
	c.mu.Unlock()
	if !drop {
		return c.Conn.Read(p)
	}
	// Wait for the reply (the statement has run), then lose it.
	_, _ = c.Conn.Read(p)
	c.Close()
	c.db.mu.Lock()
	c.db.cuts++
	c.db.mu.Unlock()
	return 0, io.ErrUnexpectedEOF
}

func (c *faultConn) Close() error {
	c.db.mu.Lock()
	delete(c.db.conns, c)
	c.db.mu.Unlock()
	return c.Conn.Close()
}

type quiet struct{}

func (quiet) Print(...any) {}
