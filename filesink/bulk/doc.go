// Package bulk implements the bulk (columnar) formats of filesink: Parquet
// and Arrow IPC part files, written by a filesink.BulkWriter that buffers a
// row group in memory and writes the footer at Close.
//
// # Schema
//
// Every format has a Schema: from the --schema JSON document
// (ParseSchema), an Arrow schema (SchemaFromArrow) or a Go struct type
// (SchemaFromStruct). Types are int32, int64, float32, float64, bool,
// string, binary, timestamp_{s,ms,us,ns}, date, decimal(P,S), list<T>,
// map<string,T> and struct; fields are nullable unless "nullable": false.
//
// # Input
//
// Add takes one JSON object per record (the CLI's JSON lines) and converts
// it straight into Arrow builders with a hand-written parser (no
// encoding/json, no reflection). Floats are JSON numbers or the strings
// "NaN", "Infinity" and "-Infinity". JSON numbers of timestamps are epoch
// units of the field's unit, RFC 3339 strings are accepted too (finer
// fractions are truncated); dates are day numbers or "YYYY-MM-DD"; decimals are JSON
// numbers or decimal strings, never rounded; binary is base64; a map is a
// JSON object, each member an entry (a key twice makes the record bad). A
// record that does not fit is a *FieldError, which matches
// source.ErrBadRecord and names the field; it leaves nothing behind
// (records are checked whole before anything is appended). A key that names no field of the
// schema (at the top level or in a struct) makes the record bad too,
// unless the format drops such keys (WithUnknownFields(DropUnknown)): then
// the record is added without them, and the format's Dropped counts them.
// Library users can add Arrow record batches with AddArrow, or, through a
// filesink.Writer, with WriteBatch (the writers implement
// filesink.BatchWriter).
//
// Both input paths end in the same place: Arrow record batches, encoded by
// Apache Arrow's pqarrow (Parquet) or ipc (Arrow IPC) writer. The choice of
// pqarrow over xitongsys/parquet-go is measured in bench_test.go.
//
// # Memory and durability
//
// A writer holds at most two row groups in memory: the one being built and
// the one being encoded on a goroutine of its own (see ParquetWriter;
// Buffered counts both, from the allocators its Arrow buffers come from,
// and encoded bytes not yet written). It writes nothing durable by
// itself: the bytes go to the io.Writer the filesink.Writer gives it, and a
// file is only complete after Close returns nil. A crash before that leaves
// a file without a footer, which the Writer never publishes.
//
// # Concurrency
//
// Schemas and formats are immutable and safe for concurrent use; each
// writer is used by one goroutine at a time. A Parquet writer encodes a row
// group ended by Add on a goroutine of its own, but calls its io.Writer
// only on the caller's goroutine, during the caller's calls.
package bulk
