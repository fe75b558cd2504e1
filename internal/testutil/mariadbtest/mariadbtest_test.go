package mariadbtest_test

import (
	"context"
	"testing"

	"github.com/filesink/filesink/internal/testutil/mariadbtest"
)

func TestSharedCrashAndCut(t *testing.T) {
	srv := mariadbtest.Shared(t)
	dbName := srv.NewDatabase(t)
	db := srv.Open(t, dbName)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (a INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	db.CutReply("INSERT INTO t")
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err == nil {
		t.Fatal("the reply was not cut")
	}
	if db.Cuts() != 1 {
		t.Fatalf("Cuts = %d", db.Cuts())
	}
	var n int
	if err := srv.Admin(t).QueryRowContext(ctx, "SELECT COUNT(*) FROM "+dbName+".t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the statement whose reply was cut did not run: %d rows, %v", n, err)
	}
	db.Crash()
	if err := db.PingContext(ctx); err == nil {
		t.Fatal("a crashed pool still works")
	}
}

func TestPrivateKill9Restart(t *testing.T) {
	srv := mariadbtest.Start(t)
	admin := srv.Admin(t)
	ctx := context.Background()
	for _, q := range []string{"CREATE TABLE test.t (a INT PRIMARY KEY) ENGINE=InnoDB", "INSERT INTO test.t VALUES (1)"} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill9()
	if srv.Running() {
		t.Fatal("running after Kill9")
	}
	if err := admin.PingContext(ctx); err == nil {
		t.Fatal("a killed server answers")
	}
	srv.Restart(t)
	var n int
	if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM test.t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("after restart: %d rows, %v", n, err)
	}
}
