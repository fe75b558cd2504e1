package iceberg_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	ice "github.com/filesink/filesink/committer/iceberg"
	"github.com/filesink/filesink/internal/testutil/mariadbtest"
	"github.com/filesink/filesink/internal/testutil/pgtest"
)

var testSchema = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	iceberg.NestedField{ID: 2, Name: "lane", Type: iceberg.PrimitiveTypes.String, Required: true},
)

// createAndCommit creates db.events in cat, commits one checkpoint to it
// through the committer, and checks the table after reopening with open.
func createAndCommit(t *testing.T, cat *ice.Catalog, reopen func() *ice.Catalog) {
	t.Helper()
	ctx := t.Context()
	if err := cat.CreateNamespace(ctx, table.Identifier{"db"}, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.CreateTable(ctx, ident, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.CheckLocation(tbl.Location()); err != nil {
		t.Fatal(err)
	}
	df := writeFile(t, tbl, "a", 0, 25)
	res, err := ice.NewTable(cat, ident, "job1").Commit(ctx, []ice.LaneCommit{{Lane: "a", Checkpoint: 1, Files: []iceberg.DataFile{df}}})
	if err != nil || len(res.Appended) != 1 {
		t.Fatalf("commit through %s: %+v, %v", cat.Desc, res, err)
	}
	again := reopen()
	defer again.Close()
	got, err := again.LoadTable(ctx, ident)
	if err != nil {
		t.Fatalf("%s after reopening: %v", again.Desc, err)
	}
	if got.Location() != tbl.Location() || got.CurrentSnapshot() == nil {
		t.Errorf("after reopening: location %s (was %s), current snapshot %v", got.Location(), tbl.Location(), got.CurrentSnapshot())
	}
}

// The embedded catalog is SQLite in the warehouse's catalog.db, made on
// first use and found again.
func TestEmbeddedCatalog(t *testing.T) {
	wh := filepath.Join(t.TempDir(), "lake")
	open := func() *ice.Catalog {
		c, err := ice.OpenCatalog(t.Context(), "", wh, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cat := open()
	defer cat.Close()
	if _, err := os.Stat(filepath.Join(wh, ice.EmbeddedCatalogFile)); err != nil {
		t.Fatalf("no catalog file: %v", err)
	}
	if cat.Kind != "sqlite" || !strings.Contains(cat.Desc, "embedded") {
		t.Errorf("kind %q, desc %q", cat.Kind, cat.Desc)
	}
	createAndCommit(t, cat, open)
}

// MariaDB and PostgreSQL catalogs on the machine's servers.
func TestSQLServerCatalogs(t *testing.T) {
	for _, kind := range []string{"mysql", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			var uri string
			if kind == "mysql" {
				srv := mariadbtest.Shared(t)
				uri = "mysql://" + srv.DSN(srv.NewDatabase(t))
			} else {
				uri = pgtest.NewDatabase(t)
			}
			wh := filepath.Join(t.TempDir(), "lake")
			open := func() *ice.Catalog {
				c, err := ice.OpenCatalog(t.Context(), uri, wh, nil)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			cat := open()
			defer cat.Close()
			if cat.Kind != kind {
				t.Errorf("kind %q", cat.Kind)
			}
			createAndCommit(t, cat, open)
			long := "file:///" + strings.Repeat("w", 200)
			err := cat.CheckLocation(long)
			if kind == "mysql" && (err == nil || !strings.Contains(err.Error(), "255")) {
				t.Errorf("a location of %d characters on MySQL: %v; want it refused naming the column's 255", len(long), err)
			}
			if kind == "postgres" && err != nil {
				t.Errorf("PostgreSQL refused a long location: %v", err)
			}
		})
	}
}

// Mistakes get one line, and never a password.
func TestCatalogMistakes(t *testing.T) {
	ctx := t.Context()
	wh := t.TempDir()
	for _, c := range []struct{ uri, wh, want string }{
		{"", "s3://bucket/lake", "needs a local warehouse"},
		{"thrift://hive:9083", wh, "give mysql://DSN"},
		{"mysql://root:s3cret@tcp(127.0.0.1:1)/test", wh, "unreachable"},
		{"postgres://root:s3cret@127.0.0.1:1/test?sslmode=disable", wh, "unreachable"},
		{"", "", "no warehouse"},
		{"", "gs://bucket/x", "give a local directory"},
	} {
		_, err := ice.OpenCatalog(ctx, c.uri, c.wh, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "\n") {
			t.Errorf("catalog %q, warehouse %q: %v; want one line with %q and no password", c.uri, c.wh, err, c.want)
		}
	}
}
