package mysqlxa

import (
	"bytes"

	"github.com/filesink/filesink/internal/jsonscan"
)

// objectFields calls f with each member of b, a JSON object that
// jsonscan.ObjectCheck accepted: the key's raw contents (between its
// quotes, escapes intact: see keyBytes) and the value's text. It does not
// allocate.
func objectFields(b []byte, f func(key, val []byte)) {
	// b is valid: Members meets no error.
	_ = jsonscan.Members(b, jsonscan.SkipSpace(b, 0), func(key, val []byte) bool {
		f(key, val)
		return true
	})
}

// keyBytes decodes a key's raw contents; keys without escapes need no
// decoding (the caller converts without allocating for map lookups).
func keyBytes(raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw
	}
	s, ok := jsonscan.AppendUnquote(nil, raw)
	if !ok {
		return raw
	}
	return s
}
