// Package jsonscan is the one JSON tokenizer of the module. It validates
// JSON text fast, without allocating (Check, Valid, CheckLine,
// ObjectCheck, Skip): it accepts exactly what encoding/json.Valid accepts
// (RFC 8259, one value with optional surrounding whitespace; invalid UTF-8
// inside strings is accepted, as encoding/json does) and is several times
// faster on string-heavy records. CheckLineUTF8, the check of the JSON
// lines format, also rejects invalid UTF-8 in strings, as Python's json and
// DuckDB do when they read the text. Inside strings it looks for the next byte
// that needs attention (IndexSpecial) 32 bytes per instruction with AVX2 on
// amd64 (index_amd64.s), 8 bytes per step in portable Go elsewhere or with
// the purego build tag.
//
// For the readers that walk a document themselves (the Arrow converter of
// filesink/bulk) it scans one token at a time with the validator's rules:
// SkipSpace, String, Number, ShortInt, Literal, KindOf; Unquote and
// AppendUnquote decode a string's contents exactly as encoding/json does.
// For readers that need a few fields of a record that is not otherwise
// validated (bucketing, the MySQL committer) it reads lazily: Member finds
// a key of an object, Members walks all of them, SkipLazy skips a value
// matching brackets only. All errors are *SyntaxError values with the byte
// offset where the text went wrong.
//
// Pure functions, safe for concurrent use.
package jsonscan
