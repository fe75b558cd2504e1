// Package jsonscan validates JSON text fast, without allocating. It accepts
// exactly what encoding/json.Valid accepts (RFC 8259, one value with optional
// surrounding whitespace; invalid UTF-8 inside strings is accepted, as
// encoding/json does) and is several times faster on string-heavy records.
// Pure functions, safe for concurrent use.
package jsonscan
