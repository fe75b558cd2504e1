package mysqlxa

import (
	"bytes"
	"encoding/json"
)

// objectFields calls f with each member of b, a JSON object that
// jsonscan.ObjectCheck accepted: the key as it appears (quoted, escapes
// intact) and the value's text. It does not allocate.
func objectFields(b []byte, f func(key, val []byte)) {
	i := skipWS(b, 0) + 1 // past '{'
	for {
		i = skipWS(b, i)
		switch b[i] {
		case '}':
			return
		case ',':
			i = skipWS(b, i+1)
		}
		kEnd := stringEnd(b, i)
		key := b[i:kEnd]
		i = skipWS(b, skipWS(b, kEnd)+1) // past ':'
		vEnd := valueEnd(b, i)
		f(key, b[i:vEnd])
		i = vEnd
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string starting at b[i] == '"'.
func stringEnd(b []byte, i int) int {
	for j := i + 1; ; j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
}

// valueEnd returns the index after the value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// keyString decodes a quoted key; keys without escapes need no decoding
// (the caller converts without allocating for map lookups).
func keyBytes(quoted []byte) []byte {
	in := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		return in
	}
	var s string
	if json.Unmarshal(quoted, &s) != nil {
		return in
	}
	return []byte(s)
}
