// Package icebergrest is an Iceberg REST catalog server for tests: an
// httptest server on 127.0.0.1 that speaks the part of the REST catalog
// protocol iceberg-go's REST client (catalog/rest) uses to open a catalog,
// make a namespace and a table, load them and commit to the table:
//
//	GET  /v1/config                                  (its warehouse must be the server's, or none)
//	POST /v1/oauth/tokens                            (client credentials, with Auth)
//	POST /v1/namespaces                              create a namespace
//	GET  /v1/namespaces/{namespace}                  load it (HEAD: does it exist)
//	POST /v1/namespaces/{namespace}/tables           create a table
//	GET  /v1/namespaces/{namespace}/tables/{table}   load it (HEAD: does it exist)
//	POST /v1/namespaces/{namespace}/tables/{table}   commit its requirements and updates
//
// The config answer advertises exactly these endpoints; anything else is
// answered 501. Behind the server is iceberg-go's SQL catalog on SQLite
// (modernc.org/sqlite) in the test's temporary directory, with the
// warehouse beside it, so a commit really applies: the server checks the
// commit's requirements on the table's current metadata (a failed one is
// a 409 CommitFailedException, as a concurrent writer gets) and the SQL
// catalog's CommitTable writes the new metadata file and swaps the
// table's metadata location. Commits are applied one at a time.
//
// Faults, for the commits only: FailAfterApply makes the next n commits
// apply and then answer a 5xx (which iceberg-go's client reports as
// rest.ErrCommitStateUnknown for 500, 502, 503 and 504), or drop the
// connection (DropConnection); Conflict makes the next n commits answer
// 409 without applying them (rest.ErrCommitFailed). Counts says how many
// commits came, were applied, lost their reply, or were refused.
//
//	srv := icebergrest.New(t)
//	cat, err := ice.OpenCatalog(ctx, srv.URL(), srv.Warehouse(), nil) // committer/iceberg
//	...
//	srv.FailAfterApply(1, http.StatusServiceUnavailable)
//	// commit, then:
//	if c := srv.Counts(); c.Applied != 1 || c.Lost != 1 { t.Fatal(c) }
package icebergrest
