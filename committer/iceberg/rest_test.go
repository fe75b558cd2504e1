package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	ice "github.com/filesink/filesink/committer/iceberg"
	"github.com/filesink/filesink/internal/testutil/icebergrest"
	"github.com/filesink/filesink/internal/testutil/icebergtest"
)

// newRESTEnv is an env whose catalog is a REST catalog server's, opened
// by OpenCatalog with the server's warehouse given as a local directory.
func newRESTEnv(t *testing.T, opts ...icebergrest.Option) (*env, *icebergrest.Server) {
	t.Helper()
	srv := icebergrest.New(t, opts...)
	return envOn(t, openREST(t, srv, srv.URL())), srv
}

// openREST opens the catalog uri of srv as a process of the job would.
func openREST(t *testing.T, srv *icebergrest.Server, uri string) *ice.Catalog {
	t.Helper()
	cat, err := ice.OpenCatalog(t.Context(), uri, strings.TrimPrefix(srv.Warehouse(), "file://"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// scanned reads the table with iceberg-go's scan and returns how often
// each id is there.
func (e *env) scanned() map[int64]int {
	e.t.Helper()
	at, err := e.load().Scan(table.WithSelectedFields("id")).ToArrowTable(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	defer at.Release()
	out := map[int64]int{}
	for _, chunk := range at.Column(0).Data().Chunks() {
		ids := chunk.(*array.Int64)
		for i := range ids.Len() {
			out[ids.Value(i)]++
		}
	}
	return out
}

// once checks the table with iceberg-go's scan and with the independent
// reader: it holds the ids [0, n) once each, in files data files each
// live once, and one snapshot of job1 per element of lanes, whose summary
// records those lanes' checkpoints (in order).
func (e *env) once(n, files int, lanes ...string) *icebergtest.Table {
	e.t.Helper()
	got := e.read(n, len(lanes))
	for i, s := range got.Snapshots {
		if i < len(lanes) && (s.Summary[ice.SummaryJob] != "job1" || s.Summary[ice.SummaryLanes] != lanes[i]) {
			e.t.Errorf("snapshot %d: summary %v, want lanes %s", i, s.Summary, lanes[i])
		}
	}
	paths := map[string]bool{}
	for _, f := range got.Files {
		paths[f.Path] = true
	}
	if len(got.Files) != files || len(paths) != files {
		e.t.Errorf("%d live data files, %d paths; want %d", len(got.Files), len(paths), files)
	}
	scanned := e.scanned()
	for i := range int64(n) {
		if scanned[i] != 1 {
			e.t.Errorf("iceberg-go's scan: id %d %d times", i, scanned[i])
		}
	}
	if len(scanned) != n {
		e.t.Errorf("iceberg-go's scan: %d distinct ids, want %d", len(scanned), n)
	}
	return got
}

// A REST catalog opened by OpenCatalog: the server gets the warehouse,
// EnsureTable makes the table and finds it again, and the committer
// appends each checkpoint once.
func TestRESTCatalog(t *testing.T) {
	e, srv := newRESTEnv(t)
	ctx := t.Context()
	if e.cat.Kind != "rest" || e.cat.Desc != "REST catalog "+srv.URL() {
		t.Errorf("kind %q, desc %q", e.cat.Kind, e.cat.Desc)
	}
	if got := srv.AskedWarehouses(); len(got) == 0 || got[0] != srv.Warehouse() {
		t.Errorf("the server was asked for the warehouses %q, want %s", got, srv.Warehouse())
	}
	again := openREST(t, srv, srv.URL()+"/")
	defer again.Close()
	tbl, err := ice.EnsureTable(ctx, again, ident, testSchema)
	if err != nil || tbl.Location() != e.load().Location() {
		t.Fatalf("the table again: %v", err)
	}
	if err := e.cat.CheckLocation("file:///" + strings.Repeat("w", 1000)); err != nil {
		t.Errorf("a long location: %v", err)
	}
	c := ice.NewTable(e.cat, ident, "job1")
	ck1 := []ice.LaneCommit{{Lane: "events/0", Checkpoint: 1, Files: []iceberg.DataFile{e.file("events/0", 0, 100), e.file("events/0", 100, 50)}}}
	for i, want := range [][]string{{"events/0"}, nil} {
		res, err := c.Commit(ctx, ck1)
		if err != nil || !slices.Equal(res.Appended, want) {
			t.Fatalf("commit %d of checkpoint 1: %+v, %v", i+1, res, err)
		}
	}
	res, err := c.Commit(ctx, []ice.LaneCommit{{Lane: "events/0", Checkpoint: 2, Files: []iceberg.DataFile{e.file("events/0", 150, 10)}}})
	if err != nil || res.Attempts != 1 {
		t.Fatalf("checkpoint 2: %+v, %v", res, err)
	}
	e.once(160, 3, `{"events/0":1}`, `{"events/0":2}`)
	if n := srv.Counts(); n != (icebergrest.Counts{Commits: 2, Applied: 2}) {
		t.Errorf("server counts %+v", n)
	}
}

// The server applies the commit and its reply is lost (a 5xx, which
// iceberg-go reports as an unknown outcome, or a dropped connection):
// Commit returns nil, the table holds the checkpoint once, and committing
// it again adds nothing.
func TestRESTLostReply(t *testing.T) {
	for _, status := range []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, icebergrest.DropConnection} {
		name := fmt.Sprint(status)
		if status == icebergrest.DropConnection {
			name = "dropped"
		}
		t.Run(name, func(t *testing.T) {
			e, srv := newRESTEnv(t)
			ctx := t.Context()
			ck := []ice.LaneCommit{{Lane: "events/1", Checkpoint: 1, Files: []iceberg.DataFile{e.file("events/1", 0, 40), e.file("events/1", 40, 20)}}}
			srv.FailAfterApply(1, status)
			c := ice.NewTable(e.cat, ident, "job1")
			res, err := c.Commit(ctx, ck)
			if err != nil {
				t.Fatal(err)
			}
			if res.Attempts != 1 || len(res.Appended) != 0 || !slices.Equal(res.Recovered, []string{"events/1"}) {
				t.Errorf("result %+v: want one attempt, the lane recovered", res)
			}
			res, err = c.Commit(ctx, ck)
			if err != nil || res.Attempts != 0 || !slices.Equal(res.Skipped, []string{"events/1"}) {
				t.Errorf("the checkpoint again: %+v, %v; want it skipped", res, err)
			}
			if n := srv.Counts(); n != (icebergrest.Counts{Commits: 1, Applied: 1, Lost: 1}) {
				t.Errorf("server counts %+v: want one commit, applied, its reply lost", n)
			}
			e.once(60, 2, `{"events/1":1}`)
		})
	}
}

// A 409 answer (nothing applied) makes Commit load and append again,
// once; conflicts past MaxAttempts fail the commit with nothing applied,
// and a later Commit appends.
func TestRESTConflict(t *testing.T) {
	e, srv := newRESTEnv(t)
	ctx := t.Context()
	c := ice.NewTable(e.cat, ident, "job1")
	c.Backoff = time.Millisecond
	srv.Conflict(1)
	res, err := c.Commit(ctx, []ice.LaneCommit{{Lane: "events/2", Checkpoint: 1, Files: []iceberg.DataFile{e.file("events/2", 0, 30)}}})
	if err != nil || res.Attempts != 2 || !slices.Equal(res.Appended, []string{"events/2"}) || len(res.Recovered) != 0 {
		t.Fatalf("after a conflict: %+v, %v; want two attempts, the lane appended", res, err)
	}
	if n := srv.Counts(); n != (icebergrest.Counts{Commits: 2, Applied: 1, Conflicts: 1}) {
		t.Errorf("server counts %+v", n)
	}
	c.MaxAttempts = 2
	srv.Conflict(2)
	ck2 := []ice.LaneCommit{{Lane: "events/2", Checkpoint: 2, Files: []iceberg.DataFile{e.file("events/2", 30, 30)}}}
	var cerr *ice.CommitError
	if _, err := c.Commit(ctx, ck2); !errors.As(err, &cerr) || !errors.Is(err, table.ErrCommitFailed) {
		t.Fatalf("conflicts past MaxAttempts: %v; want a CommitError wrapping the conflict", err)
	}
	if res, err := c.Commit(ctx, ck2); err != nil || res.Attempts != 1 {
		t.Fatalf("checkpoint 2 after the conflicts: %+v, %v", res, err)
	}
	e.once(60, 2, `{"events/2":1}`, `{"events/2":2}`)
}

// killed is a process's view of its catalog when the process is killed
// right after a commit's reply failed: that commit goes out, nothing
// after it does.
type killed struct {
	*ice.Catalog
	mu   sync.Mutex
	dead bool
}

func (k *killed) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	k.mu.Lock()
	dead := k.dead
	k.mu.Unlock()
	if dead {
		return nil, errors.New("the process was killed")
	}
	tbl, err := k.Catalog.LoadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, k), nil
}

func (k *killed) CommitTable(ctx context.Context, id table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	meta, loc, err := k.Catalog.CommitTable(ctx, id, reqs, ups)
	if err != nil {
		k.mu.Lock()
		k.dead = true
		k.mu.Unlock()
	}
	return meta, loc, err
}

// A process killed after the server applied its commit but answered 503
// leaves the outcome to the next one: the restarted process (a new
// catalog and Table) skips the checkpoint, and its next one appends.
func TestRESTRestartAfterLostReply(t *testing.T) {
	e, srv := newRESTEnv(t)
	ctx := t.Context()
	ck1 := []ice.LaneCommit{{Lane: "events/3", Checkpoint: 1, Files: []iceberg.DataFile{e.file("events/3", 0, 25)}}}
	srv.FailAfterApply(1, http.StatusServiceUnavailable)
	first := &killed{Catalog: openREST(t, srv, srv.URL())}
	defer first.Close()
	if _, err := ice.NewTable(first, ident, "job1").Commit(ctx, ck1); err == nil {
		t.Fatal("the killed process's commit returned nil")
	}
	if n := srv.Counts(); n.Applied != 1 || n.Lost != 1 {
		t.Fatalf("server counts %+v: want the commit applied, its reply lost", n)
	}
	restarted := openREST(t, srv, srv.URL())
	defer restarted.Close()
	c := ice.NewTable(restarted, ident, "job1")
	res, err := c.Commit(ctx, ck1)
	if err != nil || res.Attempts != 0 || !slices.Equal(res.Skipped, []string{"events/3"}) {
		t.Fatalf("the restarted process's commit of checkpoint 1: %+v, %v; want it skipped", res, err)
	}
	if _, err := c.Commit(ctx, []ice.LaneCommit{{Lane: "events/3", Checkpoint: 2, Files: []iceberg.DataFile{e.file("events/3", 25, 25)}}}); err != nil {
		t.Fatal(err)
	}
	if n := srv.Counts(); n != (icebergrest.Counts{Commits: 2, Applied: 2, Lost: 1}) {
		t.Errorf("server counts %+v", n)
	}
	e.once(50, 2, `{"events/3":1}`, `{"events/3":2}`)
}

// Committers at once through a REST catalog: the server's requirement
// checks turn a stale head into a 409, and each checkpoint lands once.
func TestRESTConcurrentCommitters(t *testing.T) {
	e, srv := newRESTEnv(t)
	concurrentCommitters(t, e)
	t.Logf("server counts %+v", srv.Counts())
}

// A REST catalog's credentials (user info, token=, credential=) reach the
// server and nothing else: Desc and errors never show them, and a URI
// with other query parameters or two credentials is refused in one line.
func TestRESTCatalogCredentials(t *testing.T) {
	const token, secret = "tok-s3cret", "cl-s3cret"
	srv := icebergrest.New(t, icebergrest.Auth(token, "filesink", secret))
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	withUser := func(user *url.Userinfo) string { v := *u; v.User = user; return v.String() }
	for _, uri := range []string{
		srv.URL() + "?token=" + token,
		srv.URL() + "/?credential=filesink:" + secret,
		withUser(url.UserPassword("filesink", secret)),
	} {
		cat, err := ice.OpenCatalog(t.Context(), uri, srv.Warehouse(), nil)
		if err != nil {
			t.Errorf("%s: %v", strings.ReplaceAll(uri, "s3cret", "***"), err)
			continue
		}
		if cat.Kind != "rest" || strings.Contains(cat.Desc, "s3cret") || !strings.HasPrefix(cat.Desc, "REST catalog "+srv.URL()) {
			t.Errorf("kind %q, desc %q", cat.Kind, cat.Desc)
		}
		if _, err := ice.EnsureTable(t.Context(), cat, ident, testSchema); err != nil {
			t.Errorf("%s: %v", cat.Desc, err)
		}
		cat.Close()
	}
	for _, c := range []struct{ uri, want string }{
		{srv.URL(), "NotAuthorizedException"},
		{srv.URL() + "?token=wrong-s3cret", "NotAuthorizedException"},
		{withUser(url.UserPassword("filesink", "wrong-s3cret")), "invalid_client"},
		{srv.URL() + "?token=" + token + "&region=eu", `unknown query parameter "region"`},
		{srv.URL() + "?token=" + token + "&credential=filesink:" + secret, "give one credential"},
		{withUser(url.UserPassword("filesink", secret)) + "?token=" + token, "give one credential"},
		{srv.URL() + "?token=" + token + "&token=" + token, `"token" needs one value`},
		{"http://filesink:" + secret + "@127.0.0.1:1/", "REST catalog http://127.0.0.1:1/"},
	} {
		_, err := ice.OpenCatalog(t.Context(), c.uri, srv.Warehouse(), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want one line with %q and no credential", strings.ReplaceAll(c.uri, "s3cret", "***"), err, c.want)
		}
	}
}
