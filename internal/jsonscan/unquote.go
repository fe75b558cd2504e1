package jsonscan

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Unquote decodes raw, the contents of a JSON string (between its quotes,
// escapes intact), as encoding/json decodes them: escapes are decoded,
// and invalid UTF-8 and lone or reversed surrogate escapes become U+FFFD.
// ok is false when raw holds an invalid escape or a control character
// (contents that String accepted never do). It allocates only when raw
// needs decoding or when the result is not empty.
func Unquote(raw []byte) (s string, ok bool) {
	i, ascii := 0, true
	for ; i < len(raw); i++ {
		c := raw[i]
		if c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if i == len(raw) && (ascii || utf8.Valid(raw)) {
		return string(raw), true
	}
	b, ok := AppendUnquote(make([]byte, 0, len(raw)+8), raw)
	if !ok {
		return "", false
	}
	return string(b), true
}

// AppendUnquote appends the decoded contents raw (as Unquote decodes them)
// to dst and returns the extended slice. ok is false, and the returned
// slice of no use, when raw holds an invalid escape or a control
// character.
func AppendUnquote(dst, raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '\\':
			var n int
			if dst, n = appendEscape(dst, raw, i); n == 0 {
				return dst, false
			}
			i += n
		case c < 0x20:
			return dst, false
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
		}
	}
	return dst, true
}

// appendEscape appends the decoding of the escape at raw[i] == '\\' and
// returns the number of bytes it used: 12 for a surrogate pair, 0 for an
// invalid escape.
func appendEscape(dst, raw []byte, i int) ([]byte, int) {
	if i+1 >= len(raw) {
		return dst, 0
	}
	switch c := raw[i+1]; c {
	case '"', '\\', '/':
		return append(dst, c), 2
	case 'b':
		return append(dst, '\b'), 2
	case 'f':
		return append(dst, '\f'), 2
	case 'n':
		return append(dst, '\n'), 2
	case 'r':
		return append(dst, '\r'), 2
	case 't':
		return append(dst, '\t'), 2
	case 'u':
		r := u4(raw[i:])
		if r < 0 {
			return dst, 0
		}
		if !utf16.IsSurrogate(r) {
			return utf8.AppendRune(dst, r), 6
		}
		if r2 := utf16.DecodeRune(r, u4(raw[i+6:])); r2 != utf8.RuneError {
			return utf8.AppendRune(dst, r2), 12
		}
		return utf8.AppendRune(dst, utf8.RuneError), 6
	}
	return dst, 0
}

// u4 decodes the escape `\uXXXX` at the start of s, or returns -1.
func u4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

func hex4(h []byte) bool {
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
