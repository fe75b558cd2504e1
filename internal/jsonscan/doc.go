// Package jsonscan validates JSON text fast, without allocating. It accepts
// exactly what encoding/json.Valid accepts (RFC 8259, one value with optional
// surrounding whitespace; invalid UTF-8 inside strings is accepted, as
// encoding/json does) and is several times faster on string-heavy records.
// Inside strings it looks for the next byte that needs attention
// (IndexSpecial) 32 bytes per instruction with AVX2 on amd64 (index_amd64.s),
// 8 bytes per step in portable Go elsewhere or with the purego build tag.
// Pure functions, safe for concurrent use.
package jsonscan
