package icebergrest_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/filesink/filesink/internal/testutil/icebergrest"
)

var ident = table.Identifier{"db", "events"}

// open opens iceberg-go's REST client on srv and makes db.events,
// partitioned by its second column.
func open(t *testing.T, srv *icebergrest.Server, opts ...rest.Option) (*rest.Catalog, *table.Table) {
	t.Helper()
	ctx := t.Context()
	cat, err := rest.NewCatalog(ctx, "test", srv.URL(), append(opts, rest.WithWarehouseLocation(srv.Warehouse()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	if err := cat.CreateNamespace(ctx, table.Identifier{"db"}, nil); err != nil {
		t.Fatal(err)
	}
	// Ids the server renumbers: the spec names the request's field 8.
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 7, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 8, Name: "lane", Type: iceberg.PrimitiveTypes.String},
	)
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{8}, FieldID: 1000, Name: "lane", Transform: iceberg.IdentityTransform{}})
	tbl, err := cat.CreateTable(ctx, ident, schema, catalog.WithPartitionSpec(&spec))
	if err != nil {
		t.Fatal(err)
	}
	return cat, tbl
}

// setProp commits key=value to tbl.
func setProp(t *testing.T, tbl *table.Table, key, value string) error {
	t.Helper()
	txn := tbl.NewTransaction()
	if err := txn.SetProperties(iceberg.Properties{key: value}); err != nil {
		t.Fatal(err)
	}
	_, err := txn.Commit(t.Context())
	return err
}

func load(t *testing.T, cat *rest.Catalog) *table.Table {
	t.Helper()
	tbl, err := cat.LoadTable(t.Context(), ident)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// Namespaces and tables are made, found and loaded; a commit applies if
// its requirements hold, and is refused with a conflict if not.
func TestCatalog(t *testing.T) {
	srv := icebergrest.New(t)
	cat, tbl := open(t, srv)
	ctx := t.Context()
	if got := srv.AskedWarehouses(); !slices.Contains(got, srv.Warehouse()) {
		t.Errorf("config requests named the warehouses %q, not the client's %s", got, srv.Warehouse())
	}
	if !strings.HasPrefix(tbl.Location(), srv.Warehouse()+"/") {
		t.Errorf("table location %s is not under the warehouse %s", tbl.Location(), srv.Warehouse())
	}
	spec := tbl.Spec()
	if f := spec.Field(0); tbl.Schema().Field(1).ID != f.SourceIDs[0] || f.Name != "lane" {
		t.Errorf("spec %v does not partition by lane of schema %v", tbl.Spec(), tbl.Schema())
	}
	for _, c := range []struct {
		id   table.Identifier
		want bool
	}{{ident, true}, {table.Identifier{"db", "other"}, false}} {
		if ok, err := cat.CheckTableExists(ctx, c.id); ok != c.want || err != nil {
			t.Errorf("table %v exists: %v, %v", c.id, ok, err)
		}
	}
	if ok, err := cat.CheckNamespaceExists(ctx, table.Identifier{"nope"}); ok || err != nil {
		t.Errorf("namespace nope exists: %v, %v", ok, err)
	}
	if err := cat.CreateNamespace(ctx, table.Identifier{"db"}, nil); !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		t.Errorf("db again: %v", err)
	}
	if _, err := cat.LoadTable(ctx, table.Identifier{"db", "other"}); !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("loading a missing table: %v", err)
	}
	if err := setProp(t, tbl, "k", "1"); err != nil {
		t.Fatal(err)
	}
	if v := load(t, cat).Properties()["k"]; v != "1" {
		t.Errorf("k=%q after the commit", v)
	}
	// Requirements travel: one the table meets, one it fails.
	noSnapshot := []table.Requirement{table.AssertRefSnapshotID("main", nil), table.AssertCurrentSchemaID(0)}
	if _, _, err := cat.CommitTable(ctx, ident, noSnapshot, []table.Update{table.NewSetPropertiesUpdate(iceberg.Properties{"k": "2"})}); err != nil {
		t.Errorf("a commit whose requirements hold: %v", err)
	}
	_, _, err := cat.CommitTable(ctx, ident, []table.Requirement{table.AssertCurrentSchemaID(5)}, []table.Update{table.NewSetPropertiesUpdate(iceberg.Properties{"k": "3"})})
	if !errors.Is(err, table.ErrCommitFailed) || !strings.Contains(err.Error(), "schema id") {
		t.Errorf("a commit whose requirement fails: %v, want a conflict naming it", err)
	}
	if v := load(t, cat).Properties()["k"]; v != "2" {
		t.Errorf("k=%q, want 2", v)
	}
	if c := srv.Counts(); c != (icebergrest.Counts{Commits: 3, Applied: 2, Rejected: 1}) {
		t.Errorf("counts %+v", c)
	}
}

// FailAfterApply applies the commit and loses its reply, as an unknown
// outcome for the client; Conflict answers 409 and applies nothing.
func TestFaults(t *testing.T) {
	srv := icebergrest.New(t)
	cat, _ := open(t, srv)
	for i, status := range []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusGatewayTimeout, icebergrest.DropConnection} {
		srv.FailAfterApply(1, status)
		v := string(rune('a' + i))
		err := setProp(t, load(t, cat), "k", v)
		if err == nil || errors.Is(err, table.ErrCommitFailed) || (status != icebergrest.DropConnection && !errors.Is(err, rest.ErrCommitStateUnknown)) {
			t.Errorf("status %d: %v; want an unknown outcome", status, err)
		}
		if got := load(t, cat).Properties()["k"]; got != v {
			t.Errorf("status %d: k=%q, want %q applied", status, got, v)
		}
	}
	srv.Conflict(1)
	if err := setProp(t, load(t, cat), "k", "z"); !errors.Is(err, table.ErrCommitFailed) {
		t.Errorf("injected conflict: %v", err)
	}
	if got := load(t, cat).Properties()["k"]; got != "d" {
		t.Errorf("k=%q after the conflict, want d", got)
	}
	if err := setProp(t, load(t, cat), "k", "e"); err != nil {
		t.Fatalf("after the faults: %v", err)
	}
	if c := srv.Counts(); c != (icebergrest.Counts{Commits: 6, Applied: 5, Lost: 4, Conflicts: 1}) {
		t.Errorf("counts %+v", c)
	}
}

// With Auth, a request needs the bearer token, given as is or got from
// the token endpoint for the client's credentials; a warehouse that is
// not the server's is refused.
func TestAuthAndWarehouse(t *testing.T) {
	srv := icebergrest.New(t, icebergrest.Auth("tok", "filesink", "secret"))
	open(t, srv, rest.WithOAuthToken("tok"))
	if _, err := rest.NewCatalog(t.Context(), "test", srv.URL(), rest.WithCredential("filesink:secret")); err != nil {
		t.Errorf("client credentials: %v", err)
	}
	for _, opt := range []rest.Option{rest.WithOAuthToken("wrong"), rest.WithCredential("filesink:wrong"), rest.WithHeaders(nil)} {
		if _, err := rest.NewCatalog(t.Context(), "test", srv.URL(), opt); err == nil {
			t.Error("a client without the right token or credentials was let in")
		}
	}
	if _, err := rest.NewCatalog(t.Context(), "test", srv.URL(), rest.WithOAuthToken("tok"), rest.WithWarehouseLocation("file:///elsewhere")); err == nil || !strings.Contains(err.Error(), "no warehouse") {
		t.Errorf("another warehouse: %v", err)
	}
}
