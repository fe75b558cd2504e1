package jsonscan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxDepth bounds nesting, like encoding/json.
const MaxDepth = 10000

// SyntaxError reports where validation failed.
type SyntaxError struct {
	Offset int
	Msg    string
	cause  error // a sentinel the error matches (ErrInvalidUTF8), or nil
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

// Unwrap returns ErrInvalidUTF8 for invalid UTF-8, else nil.
func (e *SyntaxError) Unwrap() error { return e.cause }

// ErrInvalidUTF8 is matched (errors.Is) by the *SyntaxError of
// CheckLineUTF8 for a string holding bytes that are not UTF-8.
var ErrInvalidUTF8 = errors.New("invalid UTF-8")

// Valid reports whether b is one valid JSON value.
func Valid(b []byte) bool { return Check(b) == nil }

// Check returns nil if b is one valid JSON value, or a *SyntaxError.
func Check(b []byte) error {
	_, err := scan(b, false)
	return err
}

// scan checks b and reports whether its white space holds a newline;
// with strict, it also rejects invalid UTF-8 in strings.
func scan(b []byte, strict bool) (newline bool, err error) {
	s := scanner{b: b, utf8: strict}
	s.ws()
	if err := s.value(0); err != nil {
		return false, err
	}
	s.ws()
	if s.i != len(s.b) {
		return false, s.fail("data after the top-level value")
	}
	return s.nl, nil
}

// Skip checks the one JSON value that starts at b[i] (white space before
// it is not skipped) and returns the index just after it, or a
// *SyntaxError whose Offset is where it went wrong. depth is how deep the
// value is nested already (MaxDepth bounds the total).
func Skip(b []byte, i, depth int) (int, error) {
	s := scanner{b: b, i: i}
	if err := s.value(depth); err != nil {
		return s.i, err
	}
	return s.i, nil
}

// ErrNewline is the error of CheckLine for a valid value that holds a
// newline (in white space: strings cannot hold a raw one).
var ErrNewline = errors.New("record contains a newline")

// CheckLine is Check that also rejects a newline anywhere in b, so that b
// is one line of JSON lines; one pass over b.
func CheckLine(b []byte) error {
	newline, err := scan(b, false)
	if err == nil && newline {
		return ErrNewline
	}
	return err
}

// CheckLineUTF8 is CheckLine that also rejects a string holding bytes that
// are not UTF-8 (RFC 8259 section 8.1: JSON exchanged between systems is
// UTF-8; Python's json and DuckDB refuse such text), with a *SyntaxError
// whose Offset is the first invalid byte and that matches ErrInvalidUTF8.
// UTF-8 outside strings cannot occur in valid JSON. One pass over b: the
// check costs nothing in ASCII strings, which the string scan skips as
// fast as CheckLine's.
func CheckLineUTF8(b []byte) error {
	newline, err := scan(b, true)
	if err == nil && newline {
		return ErrNewline
	}
	return err
}

// ObjectCheck is Check that also requires the value to be an object.
func ObjectCheck(b []byte) error {
	s := scanner{b: b}
	s.ws()
	if s.i >= len(b) || b[s.i] != '{' {
		if err := Check(b); err != nil {
			return err
		}
		return &SyntaxError{Offset: s.i, Msg: "not a JSON object"}
	}
	return Check(b)
}

type scanner struct {
	b    []byte
	i    int
	nl   bool // a newline was seen (only white space can hold one)
	utf8 bool // reject invalid UTF-8 in strings
}

func (s *scanner) fail(msg string) error { return &SyntaxError{Offset: s.i, Msg: msg} }

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\n':
			s.nl = true
			s.i++
		case ' ', '\t', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) error {
	if s.i >= len(s.b) {
		return s.fail("unexpected end of input")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		return s.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	default:
		return s.fail(fmt.Sprintf("unexpected character %q", c))
	}
}

func (s *scanner) lit(w string) error {
	var err error
	s.i, err = Literal(s.b, s.i, w)
	return err
}

func (s *scanner) object(depth int) error {
	if depth > MaxDepth {
		return s.fail("nesting too deep")
	}
	s.i++ // {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.fail("expected a string key")
		}
		if err := s.str(); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.fail("expected ':' after key")
		}
		s.i++
		s.ws()
		if err := s.value(depth); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("unexpected end of input in object")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			return nil
		default:
			return s.fail("expected ',' or '}' in object")
		}
	}
}

func (s *scanner) array(depth int) error {
	if depth > MaxDepth {
		return s.fail("nesting too deep")
	}
	s.i++ // [
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		if err := s.value(depth); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("unexpected end of input in array")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			return nil
		default:
			return s.fail("expected ',' or ']' in array")
		}
	}
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// specialBits has the high bit of a byte set, for 8 bytes at once, where
// one is '"', '\\' or a control character (< 0x20), and possibly in later
// bytes (a borrow), never in earlier ones: the SWAR tests "has zero byte"
// and "has byte less than n".
func specialBits(x uint64) uint64 {
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return (q-ones)&^q | (bs-ones)&^bs | (x-ones*0x20)&^x
}

func (s *scanner) str() error {
	s.i++ // opening quote
	b := s.b
	for {
		i := s.i + IndexSpecial(b[s.i:], s.utf8)
		s.i = i
		if i >= len(b) {
			return s.fail("unterminated string")
		}
		switch c := b[i]; {
		case c == '"':
			s.i++
			return nil
		case c == '\\':
			n, msg := escapeLen(b, i)
			if msg != "" {
				return s.fail(msg)
			}
			s.i += n
		case c >= utf8.RuneSelf: // only with s.utf8
			if err := s.multibyte(); err != nil {
				return err
			}
		default:
			return controlError(i, c)
		}
	}
}

// multibyte checks the rest of a string from its first non-ASCII byte at
// s.i, up to the next byte that is '"', '\\' or a control character, and
// moves there. Stopping at every non-ASCII character instead would cost
// a call per character in text that is mostly not ASCII.
func (s *scanner) multibyte() error {
	b := s.b
	j := s.i + IndexSpecial(b[s.i:], false)
	if bad := invalidUTF8(b[s.i:j]); bad >= 0 {
		return &SyntaxError{Offset: s.i + bad, Msg: "invalid UTF-8 in a string", cause: ErrInvalidUTF8}
	}
	s.i = j
	return nil
}

// invalidUTF8 returns the index of the first byte of p that is not part
// of a valid UTF-8 sequence (as utf8.Valid judges), or -1. With AVX2 it
// checks 32 bytes per step (utf8Blocks), and the rest from the start of
// the sequence the blocks cut.
func invalidUTF8(p []byte) int {
	ok, k := utf8Blocks(p)
	if !ok {
		return invalidUTF8Scalar(p) // where
	}
	start := k
	for i := 1; i <= utf8.UTFMax-1 && i <= k; i++ {
		if c := p[k-i]; c < utf8.RuneSelf {
			break
		} else if c >= 0xC0 {
			start = k - i
			break
		}
	}
	if bad := invalidUTF8Scalar(p[start:]); bad >= 0 {
		return start + bad
	}
	return -1
}

// invalidUTF8Scalar is invalidUTF8 without vector instructions. Unlike
// utf8.Valid it goes back to 8 ASCII bytes per step after each multi-byte
// character, which makes it several times faster on text that mixes them.
func invalidUTF8Scalar(p []byte) int {
	n := len(p)
	for i := 0; i < n; {
		for i+8 <= n && binary.LittleEndian.Uint64(p[i:])&highs == 0 {
			i += 8
		}
		if i >= n {
			break
		}
		c := p[i]
		switch {
		case c < utf8.RuneSelf:
			i++
		case c < 0xC2:
			return i // a continuation byte, or an overlong 2-byte lead
		case c < 0xE0:
			if i+1 >= n || p[i+1]&0xC0 != 0x80 {
				return i
			}
			i += 2
		case c < 0xF0:
			lo, hi := byte(0x80), byte(0xBF)
			if c == 0xE0 {
				lo = 0xA0 // overlong
			} else if c == 0xED {
				hi = 0x9F // UTF-16 surrogates
			}
			if i+2 >= n || p[i+1] < lo || p[i+1] > hi || p[i+2]&0xC0 != 0x80 {
				return i
			}
			i += 3
		case c < 0xF5:
			lo, hi := byte(0x80), byte(0xBF)
			if c == 0xF0 {
				lo = 0x90 // overlong
			} else if c == 0xF4 {
				hi = 0x8F // above U+10FFFF
			}
			if i+3 >= n || p[i+1] < lo || p[i+1] > hi || p[i+2]&0xC0 != 0x80 || p[i+3]&0xC0 != 0x80 {
				return i
			}
			i += 4
		default:
			return i
		}
	}
	return -1
}

func (s *scanner) number() error {
	var err error
	s.i, _, err = Number(s.b, s.i)
	return err
}
