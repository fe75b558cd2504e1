// Package icebergtest reads Apache Iceberg tables for tests with a reader
// that does not use iceberg-go: the Iceberg sink is built on iceberg-go, so
// iceberg-go cannot be the judge of its output.
//
// The reader is scripts/icebergread.mjs, a Node.js program: it parses the
// table's metadata JSON itself (64-bit ids kept exact, as strings), reads
// the current snapshot's manifest list and manifests with the npm package
// avsc (Avro), keeps the entries that are not DELETED as the live data
// files, and reads each of them with DuckDB's read_parquet (npm
// @duckdb/node-api, DuckDB built in; nothing is downloaded at run time).
// scripts/icebergread installs both packages, pinned, into
// ${FILESINK_CACHE:-$HOME/.cache/filesink}/icebergread on first use; this
// package runs it, then the reader, and decodes its JSON into a Table.
//
// The reader refuses delete manifests and delete files (the sink appends
// only) and data files that are not Parquet. What is wrong but readable, it
// reports in Table.Errors, which a test asserts empty: a data file missing
// or unreadable, or whose row count (as DuckDB reads it) or size differs
// from its manifest entry; a manifest whose entries differ from the
// manifest list's counts for it; summary totals of the current snapshot
// that differ from its live files. A path registered twice among the live
// files is in Table.DuplicatePaths, and its rows count twice.
//
// S3 tables (MinIO) are read the same way: WithS3 copies every object under
// the table's prefix into a temporary directory and maps the s3:// prefix
// onto it, so DuckDB needs no httpfs extension (which it would download).
//
// Read returns an error wrapping ErrUnavailable when node or npm is missing
// or the install fails. MustRead, for tests, skips the test then with a
// loud reason when run by hand, and fails it when CI=true: a green CI must
// mean the tables were read.
//
//	meta, err := icebergtest.Latest(tableDir)
//	...
//	tbl := icebergtest.MustRead(t, meta, icebergtest.WithRows())
//	if len(tbl.Errors) > 0 || len(tbl.DuplicatePaths) > 0 { t.Fatal(...) }
package icebergtest
