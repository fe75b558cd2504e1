package jsonscan

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// Lazy scanning reads a few fields of a record that is not otherwise
// validated, as fast as it can find them: it checks the structure it walks
// through (keys, ':' and ',' between members, numbers and literals) but
// finds the end of a string at its first unescaped quote (escapes and
// control characters unchecked: Unquote checks the strings that are
// decoded) and the end of an object or array at its matching bracket
// (only strings and brackets are looked at inside). Valid JSON is read
// exactly as Check and encoding/json read it; invalid JSON may be
// accepted where the lazy scan does not look. Run Check first where the
// whole record must be valid.

// StringEnd returns the index after the closing quote of the string that
// starts at b[i] == '"' (its contents are b[i+1:end-1]), lazily: the
// closing quote is the first one not escaped by an odd run of
// backslashes. An unterminated string is a *SyntaxError at i.
func StringEnd(b []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return i, &SyntaxError{Offset: i, Msg: "unterminated string"}
		}
		q := j + k
		n := 0 // backslashes just before the quote
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

// SkipLazy returns the index after the value that starts at b[i] (white
// space before it is not skipped), lazily (see StringEnd and
// skipContainer); numbers and literals are checked as by Number and
// Literal.
func SkipLazy(b []byte, i int) (int, error) {
	switch KindAt(b, i) {
	case KindString:
		return StringEnd(b, i)
	case KindObject, KindArray:
		return skipContainer(b, i)
	case KindNumber:
		end, _, err := Number(b, i)
		return end, err
	case KindTrue:
		return Literal(b, i, "true")
	case KindFalse:
		return Literal(b, i, "false")
	case KindNull:
		return Literal(b, i, "null")
	}
	return i, &SyntaxError{Offset: i, Msg: "invalid value"}
}

// skipContainer returns the index after the object or array that starts
// at b[i], matching its brackets and skipping the strings inside it (with
// StringEnd) but looking at nothing else. A closing bracket of the wrong
// kind is a *SyntaxError at it ("mismatched"); a missing one, at len(b).
func skipContainer(b []byte, i int) (int, error) {
	var buf [64]byte
	stack := append(buf[:0], closer(b[i]))
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; c {
		case '"':
			q, err := StringEnd(b, j)
			if err != nil {
				return q, err
			}
			j = q - 1
		case '{', '[':
			stack = append(stack, closer(c))
		case '}', ']':
			if stack[len(stack)-1] != c {
				return j, &SyntaxError{Offset: j, Msg: "mismatched " + strconv.QuoteRune(rune(c))}
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return j + 1, nil
			}
		}
	}
	return len(b), &SyntaxError{Offset: len(b), Msg: "unexpected end of input"}
}

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}

// Member finds, lazily, the first member of the object that starts at
// b[i] == '{' whose key decodes to key, and returns the index of its
// value (white space skipped). found is false, with a nil error, when the
// object has no such key; members after the one found are not read.
func Member(b []byte, i int, key string) (val int, found bool, err error) {
	m := members{b: b, i: i + 1}
	for m.next() {
		if keyIs(m.key, key) {
			return m.val, true, nil
		}
		if m.i, err = SkipLazy(b, m.val); err != nil {
			return 0, false, err
		}
	}
	return 0, false, m.err
}

// Members calls yield, in order, with the key (its raw contents, between
// the quotes and with escapes intact: see Unquote) and the value text of
// each member of the object that starts at b[i] == '{', read lazily,
// until yield returns false. It returns the first syntax error met (after
// the calls for the members before it).
func Members(b []byte, i int, yield func(key, val []byte) bool) error {
	m := members{b: b, i: i + 1}
	for m.next() {
		end, err := SkipLazy(b, m.val)
		if err != nil {
			return err
		}
		if !yield(m.key, b[m.val:end]) {
			return nil
		}
		m.i = end
	}
	return m.err
}

// members walks the members of an object lazily: next scans from i (just
// after the '{', or after the previous member's value) to the next
// member's value.
type members struct {
	b     []byte
	i     int
	first bool // a member was read
	key   []byte
	val   int
	err   error
}

// next reads up to the next member's value: its key in m.key, the index
// of its value in m.val. It returns false at the object's end or on a
// syntax error (in m.err).
func (m *members) next() bool {
	b := m.b
	i := SkipSpace(b, m.i)
	if m.first {
		if i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
		} else if i >= len(b) || b[i] != '}' {
			return m.fail(i, "expected ',' or '}' in object")
		} else {
			return false
		}
	} else if i < len(b) && b[i] == '}' {
		return false
	}
	if i >= len(b) || b[i] != '"' {
		return m.fail(i, "expected a string key")
	}
	q, err := StringEnd(b, i)
	if err != nil {
		m.err = err
		return false
	}
	m.key = b[i+1 : q-1]
	i = SkipSpace(b, q)
	if i >= len(b) || b[i] != ':' {
		return m.fail(i, "expected ':' after key")
	}
	m.first, m.val = true, SkipSpace(b, i+1)
	return true
}

func (m *members) fail(i int, msg string) bool {
	m.err = &SyntaxError{Offset: i, Msg: msg}
	return false
}

// keyIs reports whether the raw contents of a key decode to key.
func keyIs(raw []byte, key string) bool {
	plain, ascii := true, true
	for _, c := range raw {
		if c == '\\' || c < 0x20 {
			plain = false
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if plain && (ascii || utf8.Valid(raw)) {
		return string(raw) == key
	}
	s, ok := Unquote(raw)
	return ok && s == key
}
