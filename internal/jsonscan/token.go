package jsonscan

import (
	"fmt"
	"unicode/utf8"
)

// The token functions below scan one token of JSON text that starts at
// b[i] and return the index just after it. They validate the token as
// Check does (same offsets and messages in the *SyntaxError they return)
// but not what follows it, so that a caller walking a document (a
// converter that fills columns, a field lookup) can read the tokens it
// needs and skip the others with Skip or SkipLazy. None of them allocates
// unless it returns an error.

// Kind is the kind of a JSON value, named by the first byte of its text
// (KindNumber for a number, whatever its first byte).
type Kind byte

// The kinds of JSON values; KindInvalid is for a byte no value starts with.
const (
	KindInvalid Kind = 0
	KindString  Kind = '"'
	KindNumber  Kind = '0'
	KindTrue    Kind = 't'
	KindFalse   Kind = 'f'
	KindNull    Kind = 'n'
	KindObject  Kind = '{'
	KindArray   Kind = '['
)

// KindOf returns the kind of the value whose text starts with the byte c.
func KindOf(c byte) Kind {
	switch c {
	case '"', 't', 'f', 'n', '{', '[':
		return Kind(c)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return KindNumber
	}
	return KindInvalid
}

// KindAt returns the kind of the value that starts at b[i], KindInvalid
// when i is past the end of b.
func KindAt(b []byte, i int) Kind {
	if i >= len(b) {
		return KindInvalid
	}
	return KindOf(b[i])
}

// String names the kind in messages: "a string", "a number", "a bool",
// "null", "an object", "an array", or "not a JSON value".
func (k Kind) String() string {
	switch k {
	case KindString:
		return "a string"
	case KindNumber:
		return "a number"
	case KindTrue, KindFalse:
		return "a bool"
	case KindNull:
		return "null"
	case KindObject:
		return "an object"
	case KindArray:
		return "an array"
	}
	return "not a JSON value"
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space (len(b) if there is none).
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Literal checks that b holds the literal w ("true", "false" or "null")
// at i and returns the index after it.
func Literal(b []byte, i int, w string) (int, error) {
	if len(b)-i < len(w) || string(b[i:i+len(w)]) != w {
		return i, &SyntaxError{Offset: i, Msg: "invalid literal"}
	}
	return i + len(w), nil
}

// String scans the string that starts at b[i], which must be '"', and
// returns the index after its closing quote: its contents are
// b[i+1:end-1]. esc reports whether the contents must go through Unquote
// to be decoded (they hold an escape or invalid UTF-8); when esc is false
// they are the decoded text as they are. (Check's own string scan, which
// needs no esc, does not stop at bytes of multi-byte UTF-8 sequences:
// String does, to know whether the contents are valid UTF-8.)
func String(b []byte, i int) (end int, esc bool, err error) {
	if i >= len(b) || b[i] != '"' {
		return i, false, &SyntaxError{Offset: i, Msg: "expected a string"}
	}
	s := i + 1
	i = s
	high := false
	for {
		i += IndexSpecial(b[i:], true)
		if i >= len(b) {
			return i, false, &SyntaxError{Offset: i, Msg: "unterminated string"}
		}
		switch c := b[i]; {
		case c == '"':
			if high && !esc && !utf8.Valid(b[s:i]) {
				esc = true
			}
			return i + 1, esc, nil
		case c == '\\':
			esc = true
			n, msg := escapeLen(b, i)
			if msg != "" {
				return i, false, &SyntaxError{Offset: i, Msg: msg}
			}
			i += n
		case c < 0x20:
			return i, false, controlError(i, c)
		default: // a byte of a multi-byte UTF-8 sequence
			high = true
			i++
		}
	}
}

// escapeLen returns the length of the valid escape sequence at b[i] ==
// '\\', or a message saying why it is not one.
func escapeLen(b []byte, i int) (int, string) {
	if i+1 >= len(b) {
		return 0, "unterminated escape"
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, ""
	case 'u':
		if i+6 > len(b) || !hex4(b[i+2:i+6]) {
			return 0, "invalid \\u escape"
		}
		return 6, ""
	}
	return 0, "invalid escape"
}

func controlError(i int, c byte) error {
	return &SyntaxError{Offset: i, Msg: fmt.Sprintf("control character %#02x in string", c)}
}

// Number scans the number that starts at b[i] and returns the index after
// it. isInt reports whether it has neither a fraction nor an exponent.
func Number(b []byte, i int) (end int, isInt bool, err error) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return i, false, &SyntaxError{Offset: i, Msg: "invalid number"}
	}
	isInt = true
	if i < len(b) && b[i] == '.' {
		isInt = false
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return j, false, &SyntaxError{Offset: j, Msg: "invalid number: digits expected after '.'"}
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		isInt = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if j := digits(b, i); j > i {
			i = j
		} else {
			return i, false, &SyntaxError{Offset: i, Msg: "invalid number: digits expected in exponent"}
		}
	}
	return i, isInt, nil
}

// digits returns the index of the first byte at or after i that is not a
// decimal digit.
func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// ShortInt scans, in one pass, an integer of at most 18 digits at b[i]
// (the common case, which cannot overflow int64) and returns its value
// and the index after it. ok is false for anything else: a fraction, an
// exponent, a longer number or invalid text, which Number then scans.
func ShortInt(b []byte, i int) (v int64, end int, ok bool) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	s := i
	var u int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' && i-s < 18 {
		u = u*10 + int64(b[i]-'0')
		i++
	}
	switch {
	case i == s, i-s > 1 && b[s] == '0':
		return 0, 0, false // no digit, or a leading zero: Number says why
	case i < len(b):
		if c := b[i]; c == '.' || c == 'e' || c == 'E' || c >= '0' && c <= '9' {
			return 0, 0, false
		}
	}
	if neg {
		u = -u
	}
	return u, i, true
}
