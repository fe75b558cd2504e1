package bucketing

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds a small JSON scanner: it walks the members of an object,
// skips the values it does not need without decoding them, and stops at the
// member it looks for. Only what it reads is validated.

// Kinds of JSON values, as the first byte of the value (numbers: '0').
const (
	kindString = '"'
	kindNumber = '0'
	kindTrue   = 't'
	kindFalse  = 'f'
	kindNull   = 'n'
	kindObject = '{'
	kindArray  = '['
)

// jsonValue is a scanned value. For a string, raw is the text between the
// quotes, still escaped; for any other kind it is the literal JSON text.
type jsonValue struct {
	kind byte
	raw  []byte
}

func kindName(k byte) string {
	switch k {
	case kindString:
		return "a string"
	case kindNumber:
		return "a number"
	case kindTrue, kindFalse:
		return "a bool"
	case kindNull:
		return "null"
	case kindObject:
		return "an object"
	case kindArray:
		return "an array"
	}
	return "not a JSON value"
}

// kindAt returns the kind of the value starting at d[i], or 0.
func kindAt(d []byte, i int) byte {
	if i >= len(d) {
		return 0
	}
	switch c := d[i]; c {
	case '"', 't', 'f', 'n', '{', '[':
		return c
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return kindNumber
	}
	return 0
}

// syntaxError is a JSON syntax error at a byte offset of the record.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return "invalid JSON at byte " + strconv.Itoa(e.off) + ": " + e.msg
}

func synErr(d []byte, i int, msg string) error {
	if i >= len(d) {
		return &syntaxError{off: len(d), msg: "unexpected end of record"}
	}
	return &syntaxError{off: i, msg: msg}
}

// fieldPath is a configured field name split into its dotted segments.
type fieldPath struct {
	name string
	segs []string
	err  error // configuration error, returned by every lookup
}

func newFieldPath(name string) fieldPath {
	f := fieldPath{name: name}
	if name == "" {
		f.err = specError("empty field name")
		return f
	}
	f.segs = strings.Split(name, ".")
	for _, s := range f.segs {
		if s == "" {
			f.err = specError("field name " + strconv.Quote(name) + " has an empty segment")
			return f
		}
	}
	return f
}

func (f *fieldPath) fail(reason string, err error) error {
	return &FieldError{Field: f.name, Reason: reason, Err: err}
}

// lookup returns the value of the field f in the JSON object d.
// Errors are *FieldError values (or the configuration error of f).
func (f *fieldPath) lookup(d []byte) (jsonValue, error) {
	if f.err != nil {
		return jsonValue{}, f.err
	}
	i := skipWS(d, 0)
	for n, seg := range f.segs {
		if i >= len(d) || d[i] != '{' {
			if n == 0 {
				return jsonValue{}, f.fail("record is not a JSON object", nil)
			}
			k := kindAt(d, i)
			if k == 0 {
				return jsonValue{}, f.fail("", synErr(d, i, "invalid value"))
			}
			parent := strings.Join(f.segs[:n], ".")
			return jsonValue{}, f.fail(strconv.Quote(parent)+" is "+kindName(k)+", not an object", nil)
		}
		var found bool
		var err error
		i, found, err = findMember(d, i, seg)
		if err != nil {
			return jsonValue{}, f.fail("", err)
		}
		if !found {
			if n == 0 {
				return jsonValue{}, f.fail("missing", nil)
			}
			parent := strings.Join(f.segs[:n], ".")
			return jsonValue{}, f.fail("missing (object "+strconv.Quote(parent)+" has no key "+strconv.Quote(seg)+")", nil)
		}
	}
	v, end, err := scanValue(d, i)
	if err != nil {
		return jsonValue{}, f.fail("", err)
	}
	j := skipWS(d, end)
	if j >= len(d) || (d[j] != ',' && d[j] != '}') {
		return jsonValue{}, f.fail("", synErr(d, j, "expected ',' or '}' after value"))
	}
	return v, nil
}

func skipWS(d []byte, i int) int {
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// findMember scans the object starting at d[i] == '{' for the key seg. If
// found, it returns the offset of the member's value.
func findMember(d []byte, i int, seg string) (int, bool, error) {
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == '}' {
		return 0, false, nil
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return 0, false, synErr(d, i, "expected a string key")
		}
		q, err := stringEnd(d, i)
		if err != nil {
			return 0, false, err
		}
		match := keyMatches(d[i+1:q], seg)
		i = skipWS(d, q+1)
		if i >= len(d) || d[i] != ':' {
			return 0, false, synErr(d, i, "expected ':' after object key")
		}
		i = skipWS(d, i+1)
		if match {
			return i, true, nil
		}
		if i, err = skipValue(d, i); err != nil {
			return 0, false, err
		}
		i = skipWS(d, i)
		if i < len(d) {
			switch d[i] {
			case ',':
				i = skipWS(d, i+1)
				continue
			case '}':
				return 0, false, nil
			}
		}
		return 0, false, synErr(d, i, "expected ',' or '}' in object")
	}
}

// stringEnd returns the offset of the closing quote of the string that
// starts at d[i] == '"'.
func stringEnd(d []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(d[j:], '"')
		if k < 0 {
			return 0, &syntaxError{off: i, msg: "unterminated string"}
		}
		q := j + k
		// The quote is escaped iff an odd number of backslashes precede it.
		n := 0
		for p := q - 1; p > i && d[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q, nil
		}
		j = q + 1
	}
}

// numberEnd returns the end of the JSON number starting at d[i].
func numberEnd(d []byte, i int) (int, error) {
	j := i
	if j < len(d) && d[j] == '-' {
		j++
	}
	switch {
	case j < len(d) && d[j] == '0':
		j++
	case j < len(d) && '1' <= d[j] && d[j] <= '9':
		j = digits(d, j+1)
	default:
		return 0, synErr(d, j, "invalid number")
	}
	if j < len(d) && d[j] == '.' {
		j++
		if j >= len(d) || !isDigit(d[j]) {
			return 0, synErr(d, j, "invalid number: no digit after '.'")
		}
		j = digits(d, j)
	}
	if j < len(d) && (d[j] == 'e' || d[j] == 'E') {
		j++
		if j < len(d) && (d[j] == '+' || d[j] == '-') {
			j++
		}
		if j >= len(d) || !isDigit(d[j]) {
			return 0, synErr(d, j, "invalid number: no digit in exponent")
		}
		j = digits(d, j)
	}
	return j, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digits(d []byte, j int) int {
	for j < len(d) && isDigit(d[j]) {
		j++
	}
	return j
}

func literalEnd(d []byte, i int, lit string) (int, error) {
	if !bytes.HasPrefix(d[i:], []byte(lit)) {
		return 0, synErr(d, i, "invalid literal")
	}
	return i + len(lit), nil
}

// scanValue scans the value starting at d[i] and returns it and its end.
func scanValue(d []byte, i int) (jsonValue, int, error) {
	k := kindAt(d, i)
	var end int
	var err error
	switch k {
	case kindString:
		var q int
		if q, err = stringEnd(d, i); err != nil {
			return jsonValue{}, 0, err
		}
		return jsonValue{kind: k, raw: d[i+1 : q]}, q + 1, nil
	case kindNumber:
		end, err = numberEnd(d, i)
	case kindTrue:
		end, err = literalEnd(d, i, "true")
	case kindFalse:
		end, err = literalEnd(d, i, "false")
	case kindNull:
		end, err = literalEnd(d, i, "null")
	case kindObject, kindArray:
		end, err = skipContainer(d, i)
	default:
		return jsonValue{}, 0, synErr(d, i, "invalid value")
	}
	if err != nil {
		return jsonValue{}, 0, err
	}
	return jsonValue{kind: k, raw: d[i:end]}, end, nil
}

// skipValue returns the end of the value starting at d[i].
func skipValue(d []byte, i int) (int, error) {
	if i < len(d) {
		switch d[i] {
		case '"':
			q, err := stringEnd(d, i)
			return q + 1, err
		case '{', '[':
			return skipContainer(d, i)
		}
	}
	_, end, err := scanValue(d, i)
	return end, err
}

// skipContainer returns the end of the object or array starting at d[i].
// It matches brackets and skips strings (with their escapes) but does not
// validate what lies between them.
func skipContainer(d []byte, i int) (int, error) {
	var buf [64]byte
	stack := append(buf[:0], closer(d[i]))
	for j := i + 1; j < len(d); j++ {
		switch c := d[j]; c {
		case '"':
			q, err := stringEnd(d, j)
			if err != nil {
				return 0, err
			}
			j = q
		case '{', '[':
			stack = append(stack, closer(c))
		case '}', ']':
			if stack[len(stack)-1] != c {
				return 0, &syntaxError{off: j, msg: "mismatched " + strconv.QuoteRune(rune(c))}
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, synErr(d, len(d), "")
}

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}

// keyMatches reports whether the JSON string content raw decodes to seg.
func keyMatches(raw []byte, seg string) bool {
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
		return string(raw) == seg
	}
	s, ok := unquote(raw)
	return ok && s == seg
}

// unquote decodes the JSON string content raw (between the quotes) as
// encoding/json does: escapes are decoded, invalid UTF-8 and invalid
// surrogates become U+FFFD. It reports false for an invalid escape or a raw
// control character.
func unquote(raw []byte) (string, bool) {
	i, ascii := 0, true
	for i < len(raw) {
		c := raw[i]
		if c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		i++
	}
	if i == len(raw) && (ascii || utf8.Valid(raw)) {
		return string(raw), true
	}
	if !ascii {
		i = 0 // decode from the start to replace invalid UTF-8
	}
	b := make([]byte, 0, len(raw)+8)
	b = append(b, raw[:i]...)
	for i < len(raw) {
		c := raw[i]
		switch {
		case c == '\\':
			if i+1 >= len(raw) {
				return "", false
			}
			switch raw[i+1] {
			case '"', '\\', '/':
				b = append(b, raw[i+1])
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := getu4(raw[i:])
				if r < 0 {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if dec := utf16.DecodeRune(r, getu4(raw[i:])); dec != unicode.ReplacementChar {
						r = dec
						i += 6
					} else {
						r = unicode.ReplacementChar
					}
				}
				b = utf8.AppendRune(b, r)
				continue
			default:
				return "", false
			}
			i += 2
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, raw[i:i+size]...)
			}
			i += size
		}
	}
	return string(b), true
}

// getu4 decodes `\uXXXX` at the start of s, or returns -1.
func getu4(s []byte) rune {
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
