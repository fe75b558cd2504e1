package icebergrest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go
)

// DropConnection, as FailAfterApply's status, closes the connection
// instead of answering.
const DropConnection = 0

// Counts are the commit requests the server has had.
type Counts struct {
	Commits   int // commit requests received, whatever became of them
	Applied   int // commits applied to their table (Lost included)
	Lost      int // applied commits answered by FailAfterApply's fault
	Conflicts int // commits answered 409 by Conflict, not applied
	Rejected  int // commits refused because a requirement failed (409)
}

// Server is a REST catalog server; see the package doc. Its methods are
// safe for concurrent use.
type Server struct {
	t         testing.TB
	srv       *httptest.Server
	db        *sql.DB
	cat       *sqlcat.Catalog
	warehouse string
	auth      authConfig

	mu         sync.Mutex // serializes commits; guards the fields below
	lose       int        // commits left to apply, then answer loseStatus
	loseStatus int
	conflicts  int // commits left to answer 409 without applying
	counts     Counts
	asked      []string // the warehouses config requests named
}

type authConfig struct{ token, clientID, secret string }

// Option configures a Server.
type Option func(*Server)

// Auth makes the server require "Authorization: Bearer token" on every
// request but the token endpoint's, and, if clientID or secret is set,
// grant token at POST /v1/oauth/tokens to the client credentials
// clientID:secret (any other client gets 401 invalid_client).
func Auth(token, clientID, secret string) Option {
	return func(s *Server) { s.auth = authConfig{token: token, clientID: clientID, secret: secret} }
}

// New starts a server whose SQLite catalog and warehouse are in a
// temporary directory of t; it stops when t ends.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	dir := t.TempDir()
	wh := filepath.Join(dir, "warehouse")
	if err := os.MkdirAll(wh, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, warehouse: "file://" + filepath.ToSlash(wh)}
	for _, o := range opts {
		o(s)
	}
	var err error
	s.db, err = sql.Open("sqlite", "file:"+filepath.Join(dir, "catalog.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	s.cat, err = sqlcat.NewCatalog("rest", s.db, sqlcat.SQLite, iceberg.Properties{"warehouse": s.warehouse})
	if err != nil {
		s.db.Close()
		t.Fatalf("icebergrest: the SQL catalog: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/config", s.config)
	mux.HandleFunc("POST /v1/oauth/tokens", s.token)
	mux.HandleFunc("POST /v1/namespaces", s.createNamespace)
	mux.HandleFunc("GET /v1/namespaces/{ns}", s.loadNamespace)
	mux.HandleFunc("POST /v1/namespaces/{ns}/tables", s.createTable)
	mux.HandleFunc("GET /v1/namespaces/{ns}/tables/{table}", s.loadTable)
	mux.HandleFunc("POST /v1/namespaces/{ns}/tables/{table}", s.commit)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotImplemented, "NotImplementedException", "the test server has no "+r.Method+" "+r.URL.Path)
	})
	s.srv = httptest.NewServer(s.authorize(mux))
	t.Cleanup(s.Close)
	return s
}

// URL is the catalog's URI, "http://127.0.0.1:PORT", for OpenCatalog.
func (s *Server) URL() string { return s.srv.URL }

// Warehouse is the location of the server's warehouse, "file:///...":
// tables are made under it.
func (s *Server) Warehouse() string { return s.warehouse }

// Close stops the server, waiting for the requests in flight, and closes
// its catalog. Further calls do nothing.
func (s *Server) Close() {
	s.srv.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db != nil {
		s.cat.Close()
		s.db.Close()
		s.db = nil
	}
}

// FailAfterApply makes the next n commits apply and then answer status,
// a 5xx, with a REST error instead of the table's new metadata; with
// DropConnection, the connection is closed instead of answering.
func (s *Server) FailAfterApply(n, status int) {
	if status != DropConnection && (status < 500 || status > 599) {
		s.t.Fatalf("icebergrest: FailAfterApply(%d, %d): give a 5xx status or DropConnection", n, status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose, s.loseStatus = n, status
}

// Conflict makes the next n commits answer 409 Conflict
// (CommitFailedException) without applying them.
func (s *Server) Conflict(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conflicts = n
}

// Counts returns the commit requests the server has had.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// AskedWarehouses returns the warehouse of each config request (a client
// opening the catalog), "" for a request that named none.
func (s *Server) AskedWarehouses() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

// authorize checks the bearer token of every request but the token
// endpoint's, when Auth set one.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.auth.token != "" && r.URL.Path != "/v1/oauth/tokens" && r.Header.Get("Authorization") != "Bearer "+s.auth.token {
			writeError(w, http.StatusUnauthorized, "NotAuthorizedException", "no or a wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) config(w http.ResponseWriter, r *http.Request) {
	wh := r.URL.Query().Get("warehouse")
	s.mu.Lock()
	s.asked = append(s.asked, wh)
	s.mu.Unlock()
	if wh != "" && wh != s.warehouse {
		writeError(w, http.StatusBadRequest, "BadRequestException", fmt.Sprintf("no warehouse %s here (the server's is %s)", wh, s.warehouse))
		return
	}
	// The endpoints served, as iceberg-go's client names them.
	endpoints := []string{
		"POST /v1/{prefix}/namespaces",
		"GET /v1/{prefix}/namespaces/{namespace}",
		"HEAD /v1/{prefix}/namespaces/{namespace}",
		"POST /v1/{prefix}/namespaces/{namespace}/tables",
		"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
		"HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
		"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	}
	writeJSON(w, http.StatusOK, map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}, "endpoints": endpoints})
}

// token is the OAuth2 token endpoint: the client credentials grant.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	if s.auth.clientID == "" && s.auth.secret == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type", "error_description": "this server grants no token"})
		return
	}
	if r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("client_id") != s.auth.clientID || r.PostForm.Get("client_secret") != s.auth.secret {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "unknown client or wrong secret"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": s.auth.token, "token_type": "bearer", "expires_in": 3600,
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})
}

func (s *Server) createNamespace(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Namespace  table.Identifier   `json:"namespace"`
		Properties iceberg.Properties `json:"properties"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestException", err.Error())
		return
	}
	if err := s.cat.CreateNamespace(r.Context(), req.Namespace, req.Properties); err != nil {
		writeCatalogError(w, err)
		return
	}
	if req.Properties == nil {
		req.Properties = iceberg.Properties{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": req.Namespace, "properties": req.Properties})
}

func (s *Server) loadNamespace(w http.ResponseWriter, r *http.Request) {
	ns := namespace(r)
	props, err := s.cat.LoadNamespaceProperties(r.Context(), ns)
	if err != nil {
		writeCatalogError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": ns, "properties": props})
}

// createTable makes a table as iceberg-go's client asks: the request's
// partition spec and sort order name the fields of the request's schema,
// which the SQL catalog binds (table.NewMetadata) to fresh field ids.
func (s *Server) createTable(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name          string                        `json:"name"`
		Schema        *iceberg.Schema               `json:"schema"`
		Location      string                        `json:"location"`
		PartitionSpec *iceberg.UnboundPartitionSpec `json:"partition-spec"`
		WriteOrder    *table.UnboundSortOrder       `json:"write-order"`
		StageCreate   bool                          `json:"stage-create"`
		Properties    iceberg.Properties            `json:"properties"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestException", err.Error())
		return
	}
	if req.StageCreate || req.Schema == nil || req.Name == "" {
		writeError(w, http.StatusBadRequest, "BadRequestException", "the test server makes tables with a name and a schema, not staged")
		return
	}
	opts := []catalog.CreateTableOpt{catalog.WithProperties(req.Properties)}
	if req.Location != "" {
		opts = append(opts, catalog.WithLocation(req.Location))
	}
	if req.PartitionSpec != nil {
		opts = append(opts, catalog.WithPartitionSpec(&req.PartitionSpec.PartitionSpec))
	}
	if req.WriteOrder != nil {
		opts = append(opts, catalog.WithSortOrder(req.WriteOrder.SortOrder))
	}
	tbl, err := s.cat.CreateTable(r.Context(), append(namespace(r), req.Name), req.Schema, opts...)
	if err != nil {
		writeCatalogError(w, err)
		return
	}
	writeTable(w, tbl.Metadata(), tbl.MetadataLocation())
}

func (s *Server) loadTable(w http.ResponseWriter, r *http.Request) {
	tbl, err := s.cat.LoadTable(r.Context(), append(namespace(r), r.PathValue("table")))
	if err != nil {
		writeCatalogError(w, err)
		return
	}
	writeTable(w, tbl.Metadata(), tbl.MetadataLocation())
}

// commit applies a commit's requirements and updates to an existing
// table, or injects the fault it was told to.
func (s *Server) commit(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Requirements table.Requirements `json:"requirements"`
		Updates      table.Updates      `json:"updates"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestException", err.Error())
		return
	}
	ident := append(namespace(r), r.PathValue("table"))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Commits++
	if s.conflicts > 0 {
		s.conflicts--
		s.counts.Conflicts++
		writeError(w, http.StatusConflict, "CommitFailedException", "injected conflict: the commit was not applied")
		return
	}
	meta, loc, err := s.apply(r.Context(), ident, req.Requirements, req.Updates)
	if err != nil {
		writeCatalogError(w, err)
		return
	}
	s.counts.Applied++
	if s.lose > 0 {
		s.lose--
		s.counts.Lost++
		s.fail(w, s.loseStatus)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"metadata-location": loc, "metadata": meta})
}

// apply checks reqs on the table's current metadata, then commits
// through the SQL catalog. The caller holds s.mu.
func (s *Server) apply(ctx context.Context, ident table.Identifier, reqs table.Requirements, updates table.Updates) (table.Metadata, string, error) {
	cur, err := s.cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, "", err // a commit that creates its table is not supported
	}
	for _, q := range reqs {
		if err := q.Validate(cur.Metadata()); err != nil {
			s.counts.Rejected++
			return nil, "", fmt.Errorf("%w: %v", table.ErrCommitFailed, err)
		}
	}
	meta, loc, err := s.cat.CommitTable(ctx, ident, reqs, updates)
	if errors.Is(err, table.ErrCommitFailed) {
		s.counts.Rejected++
	}
	return meta, loc, err
}

// fail answers an applied commit with status, or drops its connection.
func (s *Server) fail(w http.ResponseWriter, status int) {
	if status != DropConnection {
		writeError(w, status, "ServiceFailureException", "injected fault: the commit was applied")
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("icebergrest: the connection cannot be dropped")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(fmt.Sprintf("icebergrest: dropping the connection: %v", err))
	}
	conn.Close()
}

// namespace is the {ns} of r's path: levels joined by the unit separator
// (iceberg-go's client sends "%1F").
func namespace(r *http.Request) table.Identifier {
	return strings.Split(r.PathValue("ns"), "\x1f")
}

// writeCatalogError answers err, an error of the SQL catalog, as the REST
// catalog protocol does.
func writeCatalogError(w http.ResponseWriter, err error) {
	status, typ := http.StatusInternalServerError, "ServiceFailureException"
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable):
		status, typ = http.StatusNotFound, "NoSuchTableException"
	case errors.Is(err, catalog.ErrNoSuchNamespace):
		status, typ = http.StatusNotFound, "NoSuchNamespaceException"
	case errors.Is(err, catalog.ErrTableAlreadyExists), errors.Is(err, catalog.ErrNamespaceAlreadyExists):
		status, typ = http.StatusConflict, "AlreadyExistsException"
	case errors.Is(err, table.ErrCommitFailed):
		status, typ = http.StatusConflict, "CommitFailedException"
	case errors.Is(err, iceberg.ErrInvalidArgument):
		status, typ = http.StatusBadRequest, "BadRequestException"
	}
	writeError(w, status, typ, err.Error())
}

func writeTable(w http.ResponseWriter, meta table.Metadata, loc string) {
	writeJSON(w, http.StatusOK, map[string]any{"metadata-location": loc, "metadata": meta, "config": map[string]string{}})
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": status}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = fmt.Appendf(nil, `{"error": {"message": %q, "type": "ServiceFailureException", "code": 500}}`, err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
