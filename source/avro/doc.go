// Package avro decodes record values in the Confluent wire format (a zero
// magic byte, a 4-byte big-endian schema id, the Avro binary body) with
// the schemas of a Schema Registry, into the JSON objects the sinks take,
// and maps an Avro record schema to the schema document of the bulk
// formats (Parquet, Arrow, Iceberg), so that the output is typed from the
// registry.
//
// The registry client is franz-go's pkg/sr; Avro schemas are parsed and
// read with github.com/hamba/avro/v2 (its Reader). The JSON of a value is
// plain JSON (a union's value as itself, not wrapped in its branch name),
// with the logical types written as the bulk converter reads them:
// timestamps as RFC 3339 strings in UTC, dates as "YYYY-MM-DD", decimals
// as decimal strings, bytes and fixed as base64.
//
// A Registry retries the requests the registry does not answer (or answers
// 5xx, 408, 429) with capped backoff until their context is done, so that
// an outage delays records but never turns them into bad records.
package avro
