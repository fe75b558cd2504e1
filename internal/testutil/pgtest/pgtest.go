// Package pgtest gives tests a database of their own on the machine's
// PostgreSQL server.
//
// FILESINK_POSTGRES_DSN names the server (a libpq URL; default
// DefaultDSN). A test that cannot reach it is skipped with a loud reason
// when run by hand, and fails when CI=true: a green CI must mean the
// PostgreSQL tests ran.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/filesink/filesink/internal/testutil/ci"
)

const (
	// EnvDSN names the environment variable with the server's URL.
	EnvDSN = "FILESINK_POSTGRES_DSN"
	// DefaultDSN is the machine's server (trust authentication).
	DefaultDSN = "postgres://root@127.0.0.1:5432/test?sslmode=disable"
)

// NewDatabase creates a database with a name unique to t on the server and
// drops it when t ends. It returns the database's URL. When the server
// does not answer, t is skipped with a loud reason, or failed when
// CI=true.
func NewDatabase(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvDSN)
	if base == "" {
		base = DefaultDSN
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: %s is not a URL: %v", EnvDSN, err)
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		if ci.Enabled() {
			t.Fatalf("pgtest: cannot reach PostgreSQL at %s: %v (CI=true: the PostgreSQL tests must run)", u.Redacted(), err)
		}
		t.Skipf("pgtest: SKIPPING, PostgreSQL NOT AVAILABLE at %s: %v (with CI=true this fails)", u.Redacted(), err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "fs_" + sanitize(t.Name()) + "_" + hex.EncodeToString(rnd[:])
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			t.Logf("pgtest: drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// sanitize keeps the letters and digits of a test's name, lower case, at
// most 20 of them.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if b.Len() == 20 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}
