package bulk

import (
	"math"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/filesink/filesink/internal/jsonscan"
)

// value checks (b == nil) or appends (b != nil) one value of any type at
// p. In append mode the value must have passed the check mode: errors are
// then not expected.
func (c *converter) value(p *parser, n *node, b array.Builder, depth int) error {
	if depth > jsonscan.MaxDepth {
		return syntaxErr(p, "nesting too deep")
	}
	if p.i >= len(p.b) {
		return syntaxErr(p, "unexpected end of input")
	}
	ch := p.b[p.i]
	if n.kind < kList {
		return c.nestedScalar(p, n, b)
	}
	if ch == 'n' {
		if err := p.lit("null"); err != nil {
			return err
		}
		if !n.nullable {
			return fieldErr(n, "null for a field that is not nullable")
		}
		if b != nil {
			b.AppendNull()
		}
		return nil
	}
	switch n.kind {
	case kList:
		if ch != '[' {
			return badValue(p, n, ch)
		}
		return c.list(p, n, b, depth)
	case kStruct:
		if ch != '{' {
			return badValue(p, n, ch)
		}
		return c.structValue(p, n, b, depth)
	case kMap:
		if ch != '{' {
			return badValue(p, n, ch)
		}
		return c.mapValue(p, n, b, depth)
	}
	return fieldErr(n, "internal: unknown kind")
}

// nestedScalar checks, or appends to b, a scalar inside a list or struct.
func (c *converter) nestedScalar(p *parser, n *node, b array.Builder) error {
	var sl slot
	mark := len(c.scratch)
	if err := c.scalar(p, n, &sl); err != nil {
		return err
	}
	if b != nil {
		if sl.state == slotNull {
			b.AppendNull()
		} else {
			c.appendSlot(b, n, &sl, p.b)
		}
	}
	c.scratch = c.scratch[:mark]
	return nil
}

// list checks, or appends to b, the array at p.i == '['.
func (c *converter) list(p *parser, n *node, b array.Builder, depth int) error {
	var vb array.Builder
	if b != nil {
		lb := b.(*array.ListBuilder)
		lb.Append(true)
		vb = lb.ValueBuilder()
	}
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		if err := c.value(p, n.elem, vb, depth+1); err != nil {
			return err
		}
		if done, err := p.sep(']', "array"); done || err != nil {
			return err
		}
	}
}

// mapValue checks, or appends to b, the object at p.i == '{' as a map:
// every member is an entry, its key the map key. The check mode refuses a
// key twice in the object (a map column's keys are unique).
func (c *converter) mapValue(p *parser, n *node, b array.Builder, depth int) error {
	var kb *array.StringBuilder
	var ib array.Builder
	if b != nil {
		mb := b.(*array.MapBuilder)
		mb.Append(true)
		kb, ib = mb.KeyBuilder().(*array.StringBuilder), mb.ItemBuilder()
	}
	for len(c.keys) <= depth {
		c.keys = append(c.keys, mapKeys{})
	}
	keys := &c.keys[depth]
	keys.reset()
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		k0, k1, esc, err := p.str()
		if err != nil {
			return err
		}
		key := p.b[k0:k1]
		if esc {
			keys.tmp = unescape(keys.tmp[:0], key)
			key = keys.tmp
		}
		if b == nil && keys.add(key) {
			return fieldErr(n, "key %q twice in the map", key)
		}
		if kb != nil {
			kb.BinaryBuilder.Append(key)
		}
		if err := p.colon(); err != nil {
			return err
		}
		p.ws()
		if err := c.value(p, n.elem, ib, depth+1); err != nil {
			return err
		}
		if done, err := p.sep('}', "object"); done || err != nil {
			return err
		}
	}
}

// mapKeys are the keys of a map being checked, to find one twice:
// compared pairwise while there are few, through a set beyond.
type mapKeys struct {
	buf   []byte
	spans [][2]int
	set   map[string]struct{}
	tmp   []byte // an unescaped key
}

func (k *mapKeys) reset() {
	k.buf, k.spans = k.buf[:0], k.spans[:0]
	clear(k.set)
}

// add adds key and reports whether it was there already.
func (k *mapKeys) add(key []byte) bool {
	const few = 16
	if len(k.spans) < few {
		for _, s := range k.spans {
			if string(k.buf[s[0]:s[1]]) == string(key) {
				return true
			}
		}
		k.spans = append(k.spans, [2]int{len(k.buf), len(k.buf) + len(key)})
		k.buf = append(k.buf, key...)
		return false
	}
	if k.set == nil {
		k.set = make(map[string]struct{})
	}
	if len(k.set) == 0 {
		for _, s := range k.spans {
			k.set[string(k.buf[s[0]:s[1]])] = struct{}{}
		}
	}
	if _, dup := k.set[string(key)]; dup {
		return true
	}
	k.set[string(key)] = struct{}{}
	return false
}

// structValue checks, or appends to b, the object at p.i == '{'. The
// check mode checks every member; the append mode notes where the members
// are, then appends them in the order of the struct's fields.
func (c *converter) structValue(p *parser, n *node, b array.Builder, depth int) error {
	for len(c.seen) <= depth {
		c.seen = append(c.seen, nil)
		c.spans = append(c.spans, nil)
	}
	nf := len(n.fields)
	if cap(c.seen[depth]) < nf {
		c.seen[depth] = make([]bool, nf)
		c.spans[depth] = make([][2]int, nf)
	}
	seen, spans := c.seen[depth][:nf], c.spans[depth][:nf]
	clear(seen)
	if err := c.structMembers(p, n, b == nil, depth, seen, spans); err != nil {
		return err
	}
	if b == nil {
		for i, f := range n.fields {
			if !seen[i] && !f.nullable {
				return fieldErr(f, "missing required field")
			}
		}
		return nil
	}
	sb := b.(*array.StructBuilder)
	sb.Append(true)
	for i, f := range n.fields {
		fb := sb.FieldBuilder(i)
		if !seen[i] {
			fb.AppendNull()
			continue
		}
		sub := parser{b: p.b, i: spans[i][0]}
		// The children use deeper levels of seen/spans: ours stay.
		if err := c.value(&sub, f, fb, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// structMembers parses the members of the object at p.i == '{' up to its
// '}', marking in seen the fields met. With check, it checks their
// values; else it records their spans.
func (c *converter) structMembers(p *parser, n *node, check bool, depth int, seen []bool, spans [][2]int) error {
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	guess := 0
	for {
		idx, err := c.structKey(p, n, guess, check)
		if err != nil {
			return err
		}
		switch {
		case idx < 0:
			err = p.skip(depth + 1)
		case check:
			guess, seen[idx] = idx+1, true
			err = c.value(p, n.fields[idx], nil, depth+1)
		default:
			guess, seen[idx] = idx+1, true
			spans[idx][0] = p.i
			err = p.skip(depth + 1)
			spans[idx][1] = p.i
		}
		if err != nil {
			return err
		}
		if done, err := p.sep('}', "object"); done || err != nil {
			return err
		}
	}
}

// structKey parses a key of a struct's object and the ':' after it, and
// returns the index of its field in n (-1 for a key not in n, which the
// check phase passes to unknown).
func (c *converter) structKey(p *parser, n *node, guess int, check bool) (int, error) {
	k0, k1, esc, err := p.str()
	if err != nil {
		return 0, err
	}
	key := p.b[k0:k1]
	if esc {
		key = unescape(nil, key)
	}
	idx := n.lookup(key, guess)
	if idx < 0 && check {
		if err := c.unknown(n, p.b, k0, k1, esc); err != nil {
			return 0, err
		}
	}
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != ':' {
		return 0, syntaxErr(p, "expected ':' after key")
	}
	p.i++
	p.ws()
	return idx, nil
}

// appendSlot appends a checked scalar. rec is the buffer the slot's
// non-scratch spans index.
func (c *converter) appendSlot(b array.Builder, n *node, sl *slot, rec []byte) {
	switch n.kind {
	case kInt32:
		b.(*array.Int32Builder).Append(int32(sl.i))
	case kInt64:
		b.(*array.Int64Builder).Append(sl.i)
	case kFloat32:
		b.(*array.Float32Builder).Append(float32(sl.f))
	case kFloat64:
		b.(*array.Float64Builder).Append(sl.f)
	case kBool:
		b.(*array.BooleanBuilder).Append(sl.i != 0)
	case kString, kBinary:
		src := rec
		if sl.inScratch {
			src = c.scratch
		}
		v := src[sl.s0:sl.s1]
		if n.kind == kString {
			b.(*array.StringBuilder).BinaryBuilder.Append(v)
		} else {
			b.(*array.BinaryBuilder).Append(v)
		}
	case kTimestamp:
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(sl.i))
	case kDate:
		b.(*array.Date32Builder).Append(arrow.Date32(sl.i))
	case kDecimal:
		b.(*array.Decimal128Builder).Append(sl.dec)
	}
}

func (p *parser) lit(w string) error {
	var err error
	p.i, err = jsonscan.Literal(p.b, p.i, w)
	return err
}

// str scans the string starting at p.i (which must be '"') and returns
// the span of its contents. esc is true when the contents need unescape
// (escapes, or invalid UTF-8 to replace).
func (p *parser) str() (s, e int, esc bool, err error) {
	s = p.i
	p.i, esc, err = jsonscan.String(p.b, s)
	return s + 1, p.i - 1, esc, err
}

// unescape appends the decoded contents of a JSON string (already
// validated by str) to dst, as encoding/json decodes them: invalid UTF-8
// and lone surrogates become U+FFFD.
func unescape(dst, src []byte) []byte {
	dst, _ = jsonscan.AppendUnquote(dst, src)
	return dst
}

// number scans a JSON number at p.i and returns its span; isInt is true
// when it has no fraction and no exponent.
func (p *parser) number() (s, e int, isInt bool, err error) {
	s = p.i
	p.i, isInt, err = jsonscan.Number(p.b, p.i)
	return s, p.i, isInt, err
}

// skip checks and skips any JSON value (jsonscan's scanner, which also
// validates JSON lines).
func (p *parser) skip(depth int) error {
	var err error
	p.i, err = jsonscan.Skip(p.b, p.i, depth)
	return err
}

// fieldError returns err, an error of the converter's parser, as a
// *FieldError: the *jsonscan.SyntaxError of a token function becomes one
// with the same message ("invalid JSON at byte N: ...").
func fieldError(err error) error {
	if se, ok := err.(*jsonscan.SyntaxError); ok {
		return &FieldError{Problem: se.Error()}
	}
	return err
}

// float64pow10 are the powers of ten a float64 holds exactly.
var float64pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// exactFloat64 converts a JSON number (validated) whose significant
// digits fit in 53 bits and whose decimal exponent is within ±22, the
// common case, without strconv: the digits and the power of ten are then
// exact float64s, and one IEEE multiplication or division rounds their
// product correctly (Clinger's fast path, as strconv.ParseFloat's own).
// ok is false for any other number.
func exactFloat64(b []byte) (float64, bool) {
	neg := b[0] == '-'
	i := 0
	if neg {
		i++
	}
	var mant uint64
	nd := 0  // significant digits in mant
	exp := 0 // value = mant × 10^exp
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if nd == 0 && b[i] == '0' {
			continue
		}
		if nd == 19 {
			return 0, false
		}
		mant = mant*10 + uint64(b[i]-'0')
		nd++
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if nd == 0 && b[i] == '0' {
				exp--
				continue
			}
			if nd == 19 {
				return 0, false
			}
			mant = mant*10 + uint64(b[i]-'0')
			nd++
			exp--
		}
	}
	if i < len(b) {
		exp += exponent(b[i+1:]) // after the 'e' or 'E'
	}
	if mant>>53 != 0 {
		return 0, false
	}
	f := float64(mant)
	if neg {
		f = -f
	}
	switch {
	case mant == 0 || exp == 0:
		return f, true
	case exp > 0 && exp <= 22:
		return f * float64pow10[exp], true
	case exp < 0 && exp >= -22:
		return f / float64pow10[-exp], true
	}
	return 0, false
}

// exponent returns the exponent of a number whose text after its 'e' or
// 'E' is b (an optional sign, then digits; already validated). Its
// magnitude saturates at 100000, beyond any exponent that a float64 fast
// path or a decimal of 38 digits can use.
func exponent(b []byte) int {
	neg := len(b) > 0 && b[0] == '-'
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		b = b[1:]
	}
	e := 0
	for _, c := range b {
		if e < 100000 {
			e = e*10 + int(c-'0')
		}
	}
	if neg {
		return -e
	}
	return e
}

// shortInt scans, in one pass, a JSON integer of at most 18 digits at
// p.i (the common case, which cannot overflow int64). ok is false, and
// p.i unchanged, for anything else (fractions, exponents, longer or
// invalid numbers), which number and parseInt then handle.
func (p *parser) shortInt() (v int64, ok bool) {
	v, end, ok := jsonscan.ShortInt(p.b, p.i)
	if ok {
		p.i = end
	}
	return v, ok
}

// parseInt parses a JSON integer (already validated); ok is false on
// int64 overflow.
func parseInt(b []byte) (int64, bool) {
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// parseDecimal converts a JSON number (validated) to the unscaled
// decimal128 of decimal(prec,scale). A non-empty problem says why not:
// more fractional digits than scale (no rounding), or more digits than
// prec.
func parseDecimal(b []byte, prec, scale int32) (decimal128.Num, string) {
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	var digits [80]byte
	nd := 0
	exp := 0 // value = digits × 10^exp
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if nd == 0 && b[i] == '0' {
			continue
		}
		if nd == len(digits) {
			return decimal128.Num{}, "overflows " + decName(prec, scale)
		}
		digits[nd] = b[i]
		nd++
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			exp--
			if nd == 0 && b[i] == '0' {
				continue
			}
			if nd == len(digits) {
				return decimal128.Num{}, "has too many digits for " + decName(prec, scale)
			}
			digits[nd] = b[i]
			nd++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		exp += exponent(b[i+1:])
	}
	if nd == 0 {
		return decimal128.Num{}, ""
	}
	// unscaled = digits × 10^(exp+scale)
	shift := exp + int(scale)
	for shift < 0 {
		if digits[nd-1] != '0' {
			return decimal128.Num{}, "has more than " + strconv.Itoa(int(scale)) + " fractional digits for " + decName(prec, scale)
		}
		nd--
		shift++
	}
	if nd+shift > int(prec) {
		return decimal128.Num{}, "overflows " + decName(prec, scale)
	}
	ten := decimal128.FromU64(10)
	var v decimal128.Num
	for _, d := range digits[:nd] {
		v = v.Mul(ten).Add(decimal128.FromU64(uint64(d - '0')))
	}
	for ; shift > 0; shift-- {
		v = v.Mul(ten)
	}
	if neg {
		v = v.Negate()
	}
	return v, ""
}

func decName(prec, scale int32) string {
	return "decimal(" + strconv.Itoa(int(prec)) + "," + strconv.Itoa(int(scale)) + ")"
}

// parseDate parses "YYYY-MM-DD" into days since 1970-01-01.
func parseDate(b []byte) (int64, bool) {
	if len(b) != 10 || b[4] != '-' || b[7] != '-' {
		return 0, false
	}
	num := func(x []byte) (int, bool) {
		v := 0
		for _, c := range x {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	y, ok1 := num(b[:4])
	m, ok2 := num(b[5:7])
	d, ok3 := num(b[8:])
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 {
		return 0, false
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if t.Day() != d { // e.g. 02-30
		return 0, false
	}
	return t.Unix() / 86400, true
}

// timeIn converts t to epoch units; ok is false when it does not fit.
func timeIn(t time.Time, u arrow.TimeUnit) (int64, bool) {
	switch u {
	case arrow.Second:
		return t.Unix(), true
	case arrow.Millisecond:
		s := t.Unix()
		if s > math.MaxInt64/1000 || s < math.MinInt64/1000 {
			return 0, false
		}
		return t.UnixMilli(), true
	case arrow.Microsecond:
		s := t.Unix()
		if s > math.MaxInt64/1000000 || s < math.MinInt64/1000000 {
			return 0, false
		}
		return t.UnixMicro(), true
	default:
		if t.Year() < 1678 || t.Year() > 2261 {
			return 0, false
		}
		return t.UnixNano(), true
	}
}

func unitName(u arrow.TimeUnit) string {
	return [...]string{"seconds", "milliseconds", "microseconds", "nanoseconds"}[u]
}

// sep reads what follows an element or member of the array or object
// (what) that close ends: a comma, then more (done false), or close
// (done true).
func (p *parser) sep(close byte, what string) (done bool, err error) {
	p.ws()
	if p.i >= len(p.b) {
		return false, syntaxErr(p, "unexpected end of input in "+what)
	}
	switch p.b[p.i] {
	case ',':
		p.i++
		p.ws()
		return false, nil
	case close:
		p.i++
		return true, nil
	}
	return false, syntaxErr(p, "expected ',' or '"+string(close)+"' in "+what)
}
